"""RunContext: the parts of a run that the phases (train, reproduce, transfer) share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from envs import EnvFamily
from poet.config import RunConfig
from poet.evaluation import Evaluator
from poet.policies import PolicySpec
from poet.population import Population
from poet.records import RecordWriter
from poet.scoring import Scorer
from poet.seeding import Seeds
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
    population: Population
    records: RecordWriter
    log: Callable[[str], None] = print
    solved: dict[str, int] = field(default_factory=dict)  # env id -> iteration first solved by its pair
    # the reference code's ANNECS counter: admissions whose best archived agent passed the MC
    annecs_reference: int = 0

    def mark_solved(self, pair_id: str, env_id: str, score: float, iteration: int, how: str) -> None:
        """Record the first time an env's pair reaches the solved threshold."""
        if score >= self.cfg.solved_threshold and env_id not in self.solved:
            self.solved[env_id] = iteration
            self.records.write("events", {"iteration": iteration, "kind": "solved", "pair_id": pair_id,
                                          "env_id": env_id, "detail": f"{how} score {score:.1f}"})
