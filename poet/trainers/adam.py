"""Adam as POET's ES uses it (uber-research/poet `optimizers.py`), on plain-data state."""

from __future__ import annotations

from typing import Any

import numba
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


def adam_step_into(
    theta: np.ndarray, grad: np.ndarray, scale: float, state: dict[str, Any], lr: float, beta1: float, beta2: float,
    eps: float,
) -> None:  # fmt: skip
    """`adam_step` on `grad` (float32) times `scale` (in float64, as a clipped float64
    gradient is scaled), in place: `theta` and the state's moments are overwritten, `t`
    counts on. The same numbers as `adam_step` to the last bit, in one compiled pass."""
    t = int(state["t"]) + 1
    a = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
    m, v = (np.require(state[k], np.float32, ["C", "W"]) for k in ("m", "v"))  # as `_moments` returns them
    _adam_into(theta, grad, float(scale), m, v, beta1, beta2, float(a), eps)
    state.update(t=t, m=m, v=v)


@numba.njit(cache=True)
def _adam_into(theta, grad, scale, m, v, beta1, beta2, a, eps):  # fmt: skip
    # numpy's rules in `_moments` and `adam_step`: the moments in float32 (the betas and eps
    # are Python floats, which numpy casts to the arrays' float32), the step in float64 (`a`
    # is a numpy float64), rounded to float32 once
    b1, c1 = np.float32(beta1), np.float32(1 - beta1)
    b2, c2 = np.float32(beta2), np.float32(1 - beta2)
    e = np.float32(eps)
    for i in range(theta.size):
        g = np.float32(np.float64(grad[i]) * scale)
        m[i] = b1 * m[i] + c1 * g
        v[i] = b2 * v[i] + c2 * g * g
        theta[i] = np.float32(np.float64(theta[i]) - a * np.float64(m[i]) / np.float64(np.sqrt(v[i]) + e))
