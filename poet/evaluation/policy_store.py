"""Content-addressed policy weights held by an evaluator (in memory or in Ray's object store)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from poet.evaluation.protocol import PolicyRef
from poet.policies import PolicySpec

Handle = TypeVar("Handle")


def weights_key(weights: np.ndarray) -> str:
    """Content address of a weights vector (same weights, same key)."""
    w = np.ascontiguousarray(weights, dtype=np.float32)
    return hashlib.sha256(w.tobytes()).hexdigest()[:20]


class PolicyStore(Generic[Handle]):
    """key -> handle of stored weights; `store` turns a checked float32 array into a handle."""

    def __init__(self, spec: PolicySpec, store: Callable[[np.ndarray], Handle]):
        self.spec, self._store = spec, store
        self.handles: dict[str, Handle] = {}

    def put(self, weights: np.ndarray) -> PolicyRef:
        """Store weights once per distinct content; returns their reference."""
        w = np.ascontiguousarray(weights, dtype=np.float32)
        if w.shape != (self.spec.num_params,):
            raise ValueError(f"policy weights must have shape ({self.spec.num_params},), got {w.shape}")
        key = weights_key(w)
        if key not in self.handles:
            self.handles[key] = self._store(w)
        return PolicyRef(key)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        """Forget weights no longer needed."""
        for ref in refs:
            self.handles.pop(ref.key, None)

    def get(self, key: str) -> Any:
        """The handle of a key, with a clear error for unknown or released weights."""
        try:
            return self.handles[key]
        except KeyError:
            raise KeyError(f"policy {key} was never put into this evaluator (or was released)") from None

    def clear(self) -> None:
        """Forget everything."""
        self.handles.clear()


def frozen_copy(w: np.ndarray) -> np.ndarray:
    """A read-only private copy (the in-process store's handle)."""
    out = w.copy()
    out.setflags(write=False)
    return out
