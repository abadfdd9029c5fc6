"""The in-process Evaluator: rollouts in the calling process (tests, debugging, small runs)."""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from envs import EnvFamily
from poet.evaluation.noise import NoiseTable
from poet.evaluation.protocol import EvalRequest, EvalResult, PolicyRef
from poet.evaluation.rollout import run_requests
from poet.policies import PolicySpec


def weights_key(weights: np.ndarray) -> str:
    """Content address of a weights vector (same weights, same key)."""
    w = np.ascontiguousarray(weights, dtype=np.float32)
    return hashlib.sha256(w.tobytes()).hexdigest()[:20]


class InProcessEvaluator:
    """Evaluator that runs every batch in this process."""

    def __init__(self, family: EnvFamily, spec: PolicySpec, noise: NoiseTable | None = None, batch_rows: int = 4096):
        self.family, self.spec, self.noise, self.batch_rows = family, spec, noise, int(batch_rows)
        self._weights: dict[str, np.ndarray] = {}
        self.env_steps = 0

    def put(self, weights: np.ndarray) -> PolicyRef:
        w = np.ascontiguousarray(weights, dtype=np.float32)
        if w.shape != (self.spec.num_params,):
            raise ValueError(f"policy weights must have shape ({self.spec.num_params},), got {w.shape}")
        key = weights_key(w)
        if key not in self._weights:
            w = w.copy()
            w.setflags(write=False)
            self._weights[key] = w
        return PolicyRef(key)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        for ref in refs:
            self._weights.pop(ref.key, None)

    def _lookup(self, ref: PolicyRef) -> np.ndarray:
        try:
            return self._weights[ref.key]
        except KeyError:
            raise KeyError(f"policy {ref.key} was never put into this evaluator (or was released)") from None

    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        results = run_requests(self.family, self.spec, requests, self._lookup, self.noise, self.batch_rows)
        self.env_steps += sum(r.steps for r in results)
        return results

    def close(self) -> None:
        self._weights.clear()
