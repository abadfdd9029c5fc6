"""The Evaluator contract: a batch of requests in, one result per request out, in order.

Besides rollouts, an evaluator runs jobs (`poet.evaluation.jobs`): whole training loops
that trainers such as PPO hand to the same pool.

A result depends only on its request: never on the worker, the chunking or the order
of the batch. Policies travel by reference (`PolicyRef`), registered once with `put`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from envs import EnvParams

if TYPE_CHECKING:
    from poet.evaluation.jobs import Job, JobResult


@dataclass(frozen=True)
class PolicyRef:
    """Reference to policy weights held by an evaluator (content-addressed key)."""

    key: str


@dataclass(frozen=True)
class Perturbation:
    """ES perturbation of a policy: theta + sign * sigma * noise[offset : offset + dim]."""

    offset: int
    sigma: float
    sign: int


@dataclass(frozen=True)
class EvalRequest:
    """Evaluate one policy on one env for some episodes. `tag` says who asked (for errors)."""

    policy: PolicyRef
    env: EnvParams
    episodes: int
    seed: int
    max_steps: int
    perturbation: Perturbation | None = None
    tag: str = ""

    @property
    def rows(self) -> int:
        """Episodes that must actually run: one on an env pinned to a course (all are equal), else `episodes`."""
        return 1 if self.env.course_seed is not None else self.episodes


@dataclass(frozen=True)
class EvalError:
    """What went wrong in a request, with enough to reproduce it."""

    message: str
    env_json: str
    tag: str
    seed: int

    def describe(self) -> str:
        """One line for the user."""
        who = f" for {self.tag}" if self.tag else ""
        return f"evaluation failed{who} on env {self.env_json} (seed {self.seed}): {self.message}"


@dataclass(frozen=True)
class EvalResult:
    """Per-episode returns and lengths of a request, or its error."""

    returns: np.ndarray
    lengths: np.ndarray
    error: EvalError | None = None

    @property
    def ok(self) -> bool:
        """True when the request evaluated without error."""
        return self.error is None

    @property
    def mean(self) -> float:
        """Mean episodic return (NaN on error)."""
        if not self.ok or not len(self.returns):
            return float("nan")
        # one episode (most requests): the value itself, as np.mean gives it, without its cost
        return float(self.returns[0]) if len(self.returns) == 1 else float(np.mean(self.returns))

    @property
    def steps(self) -> int:
        """Env steps taken."""
        return int(np.sum(self.lengths))


@runtime_checkable
class Evaluator(Protocol):
    """Scores policies on envs in batches.

    Besides its methods an evaluator holds two attributes: `env_steps`, the env steps it has
    simulated so far (the run's `phases` table counts each phase's from it), and `should_stop`,
    a callable the run sets (None until then) that the evaluator polls while a wave runs: when
    it returns True, the wave is abandoned with `poet.errors.WaveInterrupted` within a fraction
    of a second.
    """

    env_steps: int
    should_stop: Callable[[], bool] | None

    def put(self, weights: np.ndarray) -> PolicyRef:
        """Register weights once; returns the reference requests carry."""
        ...

    def release(self, refs: Sequence[PolicyRef]) -> None:
        """Forget weights no longer needed."""
        ...

    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        """One result per request, in order."""
        ...

    def run_jobs(self, jobs: Sequence[Job]) -> list[JobResult]:
        """Whole units of work (a trainer's training loop per pair), one result per job, in order."""
        ...

    def close(self) -> None:
        """Free workers and memory."""
        ...
