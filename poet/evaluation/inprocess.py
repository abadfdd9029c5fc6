"""The in-process Evaluator: rollouts and jobs in the calling process (tests, debugging, small runs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from envs import EnvCache, EnvFamily
from poet.errors import WaveInterrupted
from poet.evaluation.jobs import Job, JobResult, job_steps, run_job
from poet.evaluation.noise import NoiseTable
from poet.evaluation.policy_store import PolicyStore
from poet.evaluation.protocol import EvalRequest, EvalResult, PolicyRef
from poet.evaluation.requests import RolloutTally
from poet.evaluation.rollout import run_requests
from poet.policies import PolicySpec


class InProcessEvaluator:
    """Evaluator that runs every batch in this process."""

    def __init__(self, family: EnvFamily, spec: PolicySpec, noise: NoiseTable | None = None, batch_rows: int = 4096):
        self.family, self.spec, self.noise, self.batch_rows = family, spec, noise, int(batch_rows)
        self.policies = PolicyStore(spec)
        self.env_cache = EnvCache(family)  # used gymnasium envs, for the next batches
        self.env_steps = 0
        self.should_stop: Callable[[], bool] | None = None  # polled while rollouts step (stop requests)

    def put(self, weights: np.ndarray) -> PolicyRef:
        return self.policies.put(weights)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        self.policies.release(refs)

    def _lookup(self, ref: PolicyRef) -> np.ndarray:
        return self.policies.get(ref.key)

    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        tally = RolloutTally()
        results = run_requests(
            self.family,
            self.spec,
            requests,
            self._lookup,
            self.noise,
            self.batch_rows,
            self.should_stop,
            self.env_cache,
            tally,
        )
        self.env_steps += tally.steps
        return results

    def run_jobs(self, jobs: Sequence[Job]) -> list[JobResult]:
        results = []
        for job in jobs:
            if self.should_stop is not None and self.should_stop():
                raise WaveInterrupted("stop requested between jobs")
            results.append(run_job(self, job))
        self.env_steps += job_steps(results)
        return results

    def close(self) -> None:
        self.policies.clear()
        self.env_cache.close()
