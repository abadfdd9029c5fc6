"""RunContext: the services a run's phases share (config, family, trainer, evaluator, seeds,
scorer, records) and the run's state (`poet.state.RunState`), kept apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from envs import EnvFamily
from poet.config import RunConfig
from poet.evaluation import Evaluator
from poet.policies import PolicySpec
from poet.records import RecordWriter
from poet.scoring import Scorer
from poet.seeding import Seeds
from poet.state import RunState
from poet.trainers import Trainer


@dataclass
class RunContext:
    """Everything a phase needs; the orchestrator owns it."""

    cfg: RunConfig
    family: EnvFamily
    spec: PolicySpec
    trainer: Trainer
    evaluator: Evaluator
    seeds: Seeds
    scorer: Scorer
    records: RecordWriter
    log: Callable[[str], None] = print
    state: RunState = field(default_factory=RunState)
    stop_at: int | None = None  # the iteration count the run goes to (None: open-ended)

    def __post_init__(self) -> None:
        self.restore(self.state)

    def restore(self, state: RunState) -> None:
        """Continue from `state` (a checkpoint's): the scorer answers from its score cache."""
        self.state = state
        if hasattr(self.scorer, "cache"):
            self.scorer.cache = state.scores

    def mark_solved(self, pair_id: str, env_id: str, score: float, iteration: int, how: str) -> None:
        """Record the first time an env's pair reaches the solved threshold."""
        if score >= self.cfg.solved_threshold and env_id not in self.state.solved:
            self.state.solved[env_id] = iteration
            self.records.event(iteration, "solved", pair_id, env_id, f"{how} score {score:.1f}")
