"""RunState: everything a run changes as it goes, apart from the services that act on it.

Checkpoints save and load a RunState whole (`poet.runtime.checkpoint`), so every curriculum gets
exact resume for the state it keeps here. Services (evaluator, trainer, records, seeds)
live in `RunContext` and are rebuilt on resume; randomness needs no saving, since every
draw comes from the root seed and the (phase, iteration, pair) it is for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from poet.population import Population
from poet.scoring import ScoreCache


@dataclass
class RunState:
    """The run's mutable state."""

    population: Population = field(default_factory=Population)
    solved: dict[str, int] = field(default_factory=dict)  # env id -> iteration first solved by its pair
    # the reference code's ANNECS counter: admissions whose best archived agent passed the MC
    annecs_reference: int = 0
    scores: ScoreCache = field(default_factory=ScoreCache)  # (agent, env) -> score, of living agents
    iteration: int = 0  # the next iteration to run
    # env steps of the iterations done, every phase (the `phases` table's sum): a curriculum
    # can schedule by it, as `path` does for a run budgeted in env steps
    env_steps: int = 0
    # a curriculum's own state as plain data (numbers, strings, lists, dicts, numpy arrays),
    # saved and loaded with the rest
    curriculum_data: dict[str, Any] = field(default_factory=dict)

    def annecs(self) -> int:
        """ANNECS: solved envs other than the ones the run started from (envs admitted by reproduction)."""
        initial = {p.env.id for p in self.population.all_pairs if p.parent_env_id is None}
        return sum(1 for env_id in self.solved if env_id not in initial)
