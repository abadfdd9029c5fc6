"""A curriculum of your own, in one file: one agent climbs a ladder of ever harder envs.

    poet run experiments/quickstart.yaml --set curriculum=experiments.ladder_curriculum:LadderCurriculum \
        --set 'curriculum_options={rungs: 4, threshold: 200}'

The ladder starts at `env.start` (or the family's initial env); rung k+1 is `edits` family
mutations of rung k, drawn from the run's own random streams. The agent trains on its
rung until its score reaches `threshold`, then climbs. Everything it has to remember (the
rung it is on) lives in `ctx.state.curriculum_data`, which checkpoints save, so a killed
run resumes exactly. See poet/curricula/base.py for the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass

from poet.config import out_of_range
from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import course_seed_for, record_level, start_pair, train_pairs


@dataclass
class LadderOptions:
    """The options `curriculum_options` sets, checked before any work."""

    rungs: int = 4  # rungs above the start
    threshold: float = 200.0  # the score that climbs a rung
    edits: int = 2  # family mutations from one rung to the next

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return out_of_range(self, ("rungs", "edits"), lambda v: v >= 1, ">= 1")


class LadderCurriculum:
    """Train one agent rung by rung up a fixed chain of mutated envs."""

    name = "ladder"
    Options = LadderOptions

    def __init__(self, options: LadderOptions):
        self.rungs, self.threshold, self.edits = options.rungs, options.threshold, options.edits

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx)
        ctx.state.curriculum_data["rung"] = 0

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        agent = ctx.state.population.active[0]
        with phase("train"):
            train_pairs(ctx, iteration)
        rung = int(ctx.state.curriculum_data["rung"])
        if agent.scores[-1] >= self.threshold and rung < self.rungs:
            rung += 1
            rng = ctx.seeds.rng("ladder", rung)
            env = agent.env.with_course_seed(None)
            for _ in range(self.edits):
                env = ctx.family.mutate(env, rng)
            parent, agent.env = agent.env.id, env.with_course_seed(course_seed_for(ctx, rng))
            record_level(ctx, agent.env, agent.pair_id, parent, iteration)
            ctx.records.event(iteration, "climbed", agent.pair_id, agent.env.id, f"rung {rung} of {self.rungs}")
            ctx.state.curriculum_data["rung"] = rung
