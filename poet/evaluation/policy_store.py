"""Content-addressed policy weights held by an evaluator."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from poet.evaluation.protocol import PolicyRef
from poet.policies import PolicySpec


def weights_key(weights: np.ndarray) -> str:
    """Content address of a weights vector (same weights, same key)."""
    w = np.ascontiguousarray(weights, dtype=np.float32)
    return hashlib.sha256(w.tobytes()).hexdigest()[:20]


class PolicyStore:
    """key -> a read-only float32 copy of weights put into an evaluator."""

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        self.weights: dict[str, np.ndarray] = {}

    def put(self, weights: np.ndarray) -> PolicyRef:
        """Store weights once per distinct content; returns their reference."""
        w = np.ascontiguousarray(weights, dtype=np.float32)
        if w.shape != (self.spec.num_params,):
            raise ValueError(f"policy weights must have shape ({self.spec.num_params},), got {w.shape}")
        key = weights_key(w)
        if key not in self.weights:
            copy = w.copy()  # private: the caller may change its array afterwards
            copy.setflags(write=False)
            self.weights[key] = copy
        return PolicyRef(key)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        """Forget weights no longer needed."""
        for ref in refs:
            self.weights.pop(ref.key, None)

    def get(self, key: str) -> np.ndarray:
        """The weights of a key, with a clear error for unknown or released weights."""
        try:
            return self.weights[key]
        except KeyError:
            raise KeyError(f"policy {key} was never put into this evaluator (or was released)") from None

    def stack(self, keys: Sequence[str]) -> np.ndarray:
        """The weights of `keys` as the rows of one array, in order."""
        return np.stack([self.get(key) for key in keys])

    def clear(self) -> None:
        """Forget everything."""
        self.weights.clear()
