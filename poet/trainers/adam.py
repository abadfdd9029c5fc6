"""Adam as POET's ES uses it (Uber's es_distributed optimizer), on plain-data state."""
from __future__ import annotations

from typing import Any

import numpy as np


def adam_state(dim: int) -> dict[str, Any]:
    """Zero moments, step 0."""
    return {"t": 0, "m": np.zeros(dim, dtype=np.float32), "v": np.zeros(dim, dtype=np.float32)}


def adam_step(theta: np.ndarray, grad: np.ndarray, state: dict[str, Any], lr: float,
              beta1: float, beta2: float, eps: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Minimise along `grad`; returns new theta and new state (inputs untouched)."""
    t = int(state["t"]) + 1
    g = grad.astype(np.float32)
    m = (beta1 * state["m"] + (1 - beta1) * g).astype(np.float32)
    v = (beta2 * state["v"] + (1 - beta2) * g * g).astype(np.float32)
    a = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    new_theta = (theta - (a * m / (np.sqrt(v) + eps))).astype(np.float32)
    return new_theta, {"t": t, "m": m, "v": v}
