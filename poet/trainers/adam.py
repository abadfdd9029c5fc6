"""Adam as POET's ES uses it (uber-research/poet `optimizers.py`), on plain-data state."""

from __future__ import annotations

from typing import Any

import numpy as np


def adam_state(dim: int) -> dict[str, Any]:
    """Zero moments, step 0."""
    return {"t": 0, "m": np.zeros(dim, dtype=np.float32), "v": np.zeros(dim, dtype=np.float32)}


def _moments(grad: np.ndarray, state: dict[str, Any], beta1: float, beta2: float) -> tuple[np.ndarray, np.ndarray]:
    g = grad.astype(np.float32)
    m = (beta1 * state["m"] + (1 - beta1) * g).astype(np.float32)
    v = (beta2 * state["v"] + (1 - beta2) * g * g).astype(np.float32)
    return m, v


def adam_step(
    theta: np.ndarray, grad: np.ndarray, state: dict[str, Any], lr: float, beta1: float, beta2: float, eps: float
) -> tuple[np.ndarray, dict[str, Any]]:
    """Minimise along `grad`; returns new theta and new state (inputs untouched).

    The reference's `Adam.update`: t is incremented first, then
    a = lr * sqrt(1 - beta2^t) / (1 - beta1^t) and theta - a * m / (sqrt(v) + eps).
    """
    t = int(state["t"]) + 1
    m, v = _moments(grad, state, beta1, beta2)
    a = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
    new_theta = (theta - (a * m / (np.sqrt(v) + eps))).astype(np.float32)
    return new_theta, {"t": t, "m": m, "v": v}


def adam_propose(
    theta: np.ndarray, grad: np.ndarray, state: dict[str, Any], lr: float, beta1: float, beta2: float, eps: float
) -> np.ndarray:
    """The reference's `Adam.propose`: the step Adam would take, committing nothing.

    Unlike `adam_step`, the bias correction uses the state's current t (not t + 1), as the
    reference does; with t = 0 it is undefined, so a fresh state cannot propose.
    """
    t = int(state["t"])
    if t < 1:
        raise ValueError("Adam cannot propose from a fresh state (t = 0); take a plain gradient step instead")
    m, v = _moments(grad, state, beta1, beta2)
    a = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
    return (theta - (a * m / (np.sqrt(v) + eps))).astype(np.float32)
