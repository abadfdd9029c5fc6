"""The Trainer contract: advance many pairs' agents in their own envs, owning plain-data state.

A trainer is built as `TrainerClass(options, context)`. `options` is an instance of the
class's `Options` dataclass, validated from the trainer's config section: `trainer.es` or
`trainer.ppo` for a registered trainer, `trainer.options` for a `package.module:Class` one. State is a dict of
numbers and numpy arrays so checkpoints can hold it without pickling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs import EnvParams
from poet.errors import EvaluationFailed
from poet.evaluation import EvalResult, Evaluator, NoiseTable
from poet.policies import PolicySpec


@dataclass(frozen=True)
class ErrorPolicy:
    """What a failed evaluation does: stop the run (default) or score as a failure."""

    on_error: str = "stop"
    failure_score: float = -100.0

    def scores(self, results: Sequence[EvalResult]) -> np.ndarray:
        """Mean return per result; a failed one raises or gets the failure score."""
        out = np.empty(len(results), dtype=np.float64)
        for i, r in enumerate(results):
            if r.ok:
                out[i] = r.mean
            elif self.on_error == "stop":
                raise EvaluationFailed(r.error.describe() + " (set evaluation.on_error=score_as_failure to go on)")
            else:
                out[i] = self.failure_score
        return out


@dataclass(frozen=True)
class TrainerContext:
    """What a trainer gets from the run: the policy architecture, noise table, episode cap, error policy."""

    spec: PolicySpec
    max_steps: int
    errors: ErrorPolicy = field(default_factory=ErrorPolicy)
    noise: NoiseTable | None = None


@dataclass
class TrainTask:
    """One pair's training step: start from `theta` on `env` with trainer `state`.

    `levels`, when given, is a batch of levels to train on instead of `env` alone (robust
    PLR's and ACCEL's cycle, dcd's one level per parallel env): the trainer spreads its
    rollouts over them and reports each level's metrics in `TrainStep.levels`.
    """

    key: str  # who (pair id), for error messages
    theta: np.ndarray
    env: EnvParams
    state: dict[str, Any]
    seed: int  # all randomness of this step comes from it
    eval_episodes: int = 0  # > 0: also score the starting theta with this many episodes
    levels: list[EnvParams] = field(default_factory=list)


@dataclass
class TrainStep:
    """The outcome of one task."""

    theta: np.ndarray
    state: dict[str, Any]
    score: float | None  # mean return of the starting theta (None if not asked); over the levels of a batch
    metrics: dict[str, float]
    levels: list[dict[str, Any]] = field(default_factory=list)  # per level of the task's batch


@runtime_checkable
class Trainer(Protocol):
    """Advances agents. The orchestrator knows nothing more about training than this."""

    name: str

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        """Fresh state for a new agent."""
        ...

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        """State after an accepted transfer (POET resets the optimizer and schedules)."""
        ...

    def step(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        """One training step for every task, all submitted to the evaluator together."""
        ...

    # Optional: `trains_on_levels = True` when `step` spreads its rollouts over a task's
    # `levels` (robust PLR, ACCEL and DR give a batch each iteration and refuse a trainer
    # without it, rather than let it train on the first level alone).
    # Optional: `check_policy(options, spec) -> [(option, problem)]`, a static method: the
    # options that cannot train this policy (`PolicySpec`: its kind), each a ConfigError
    # naming the trainer's option before the run starts.
    # Optional: `propose(tasks, evaluator, plain=False) -> list[np.ndarray]`, one step from
    # each task's theta and state that commits nothing (transfer and child-admission
    # candidates); `plain` asks for a plain gradient step from a fresh state. Trainers
    # without it get `step` with its new state thrown away (see `propose` below).


def propose(
    trainer: Trainer, tasks: Sequence[TrainTask], evaluator: Evaluator, plain: bool = False
) -> list[np.ndarray]:
    """The thetas of one uncommitted step per task: `trainer.propose` if it has one, else `step`."""
    if not tasks:
        return []
    own = getattr(trainer, "propose", None)
    if callable(own):
        return list(own(tasks, evaluator, plain=plain))
    return [s.theta for s in trainer.step(tasks, evaluator)]
