"""Running a later wave's requests early, in the wave at hand: fewer, bigger waves.

With `evaluation.self_score: after_step`, each iteration has two waves: the trainer's
(ES perturbations of theta_t) and the score of the updated agents (theta_t+1). The next
iteration's trainer wave evaluates perturbations of that same theta_t+1, so it can run in
the score wave: `AheadEvaluator.evaluate_along(requests, ahead)` evaluates both in one
wave and keeps the results of `ahead`; a later `evaluate` answers every request that is
identical to a kept one (same weights, env, seed, perturbation, episodes, step cap and
tag) from them, until `drop_ahead()` says the wave they were for is done. Results depend
only on their request, so no number changes; the env steps of kept results that nothing
asked for (a pair transferred to or retired in between) are taken off `env_steps`, so the
run's throughput counts only steps it used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from poet.evaluation.protocol import EvalRequest, EvalResult, Evaluator, PolicyRef
from poet.evaluation.rollout import simulated_steps


class AheadEvaluator:
    """An Evaluator that can run requests ahead of the wave that will ask for them."""

    def __init__(self, inner: Evaluator):
        self.inner = inner
        self._kept: dict[EvalRequest, EvalResult] = {}
        self.wasted_steps = 0  # env steps of results run ahead that nothing asked for
        self.reused = 0  # requests answered from results run ahead

    # -- what the pool and the runner read and set pass through
    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not yet set (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def should_stop(self) -> Callable[[], bool] | None:
        return getattr(self.inner, "should_stop", None)

    @should_stop.setter
    def should_stop(self, check: Callable[[], bool] | None) -> None:
        self.inner.should_stop = check

    @property
    def env_steps(self) -> int:
        return int(getattr(self.inner, "env_steps", 0)) - self.wasted_steps

    def put(self, weights: np.ndarray) -> PolicyRef:
        return self.inner.put(weights)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        self.inner.release(refs)

    def run_jobs(self, jobs):
        return self.inner.run_jobs(jobs)

    def close(self) -> None:
        self.drop_ahead()
        self.inner.close()

    # -- waves
    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        """One result per request: kept ones where identical requests ran ahead, the rest in one wave."""
        results: list[EvalResult | None] = (
            [self._kept.pop(r, None) for r in requests] if self._kept else [None] * len(requests)
        )
        todo = [i for i, r in enumerate(results) if r is None]
        self.reused += len(requests) - len(todo)
        if todo:
            for i, r in zip(todo, self.inner.evaluate([requests[i] for i in todo])):
                results[i] = r
        return results  # type: ignore[return-value]

    def evaluate_along(self, requests: Sequence[EvalRequest], ahead: Sequence[EvalRequest]) -> list[EvalResult]:
        """`requests`' results, with `ahead` run in the same wave and kept for a later `evaluate`."""
        self.drop_ahead()
        asked = set(requests)
        ahead = [r for r in dict.fromkeys(ahead) if r not in asked]
        results = self.evaluate(list(requests) + ahead)
        self._kept = dict(zip(ahead, results[len(requests) :]))
        return results[: len(requests)]

    def drop_ahead(self) -> None:
        """Forget the results run ahead that were not asked for (the wave they were for is done)."""
        if self._kept:
            self.wasted_steps += simulated_steps(list(self._kept), list(self._kept.values()))
            self._kept = {}
