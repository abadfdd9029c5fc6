"""Domain randomisation: one agent, new random levels every iteration.

Each iteration draws `num_levels` levels with `family.sample` (16 by default: dcd's
`bipedal_dr.json`, one new level per each of its 16 parallel envs every cycle) and takes
one trainer step on them together (`TrainTask.levels`); `num_levels: 1` trains on one level
an iteration. The levels of iteration t come from the streams ("dr.level", t) and
("dr.course", t), so they are the same whatever the workers or a resume in between; with
`evaluation.course: fixed` each gets its own course seed. Every level is a row of the `envs`
table (no parent, the agent's pair id, the iteration); the `iterations` table has the
agent's mean score on the levels it trained on, taken as POET takes it (after the step by
default), with their number and ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from envs import EnvFamily, EnvParams
from poet.config import out_of_range
from poet.context import RunContext
from poet.curricula import dcd
from poet.curricula.base import PhaseTimer
from poet.curricula.common import course_seed_for, record_level, start_pair, train_on_levels


def needs_random_levels(curriculum: str, family: EnvFamily) -> str | None:
    """Why `curriculum`, which draws random levels, cannot run on `family` (None: it can)."""
    if not callable(getattr(family, "sample", None)):
        return f"{curriculum} needs random levels: env family {family.name!r} has no sample(rng)"
    return None


@dataclass
class DROptions:
    """Domain randomisation's options (default: dcd's `bipedal_dr.json`)."""

    num_levels: int = dcd.NUM_PROCESSES  # new levels per iteration, trained on together (dcd's num_processes)

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return out_of_range(self, ["num_levels"], lambda v: v >= 1, ">= 1")


class DomainRandomization:
    """Train one agent on levels drawn uniformly over the family's range."""

    name = "dr"
    Options = DROptions
    defaults: ClassVar[dict] = dcd.DEFAULTS

    def __init__(self, options: DROptions | None = None):
        self.options = options if options is not None else self.Options()

    def report_traits(self) -> dict:
        """What this curriculum's runs record, for the report (`poet.curricula.base`)."""
        return {"kind": "single"}

    @property
    def trains_on_levels(self) -> bool:
        """Whether the trainer gets a batch of levels (`TrainTask.levels`) each iteration."""
        return self.options.num_levels > 1

    def check(self, family: EnvFamily) -> str | None:
        """Why this curriculum cannot run on `family` (None: it can)."""
        return needs_random_levels(self.name, family)

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx, self.levels(ctx, 0)[0])

    def levels(self, ctx: RunContext, iteration: int) -> list[EnvParams]:
        """The random levels of `iteration`."""
        rng, course_rng = ctx.seeds.rng("dr.level", iteration), ctx.seeds.rng("dr.course", iteration)
        return [
            ctx.family.sample(rng).with_course_seed(course_seed_for(ctx, course_rng))
            for _ in range(self.options.num_levels)
        ]

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        agent = ctx.state.population.active[0]
        levels = self.levels(ctx, iteration)
        # iteration 0's first level is the one the agent started on, already recorded
        for level in levels[1:] if iteration == 0 else levels:
            record_level(ctx, level, agent.pair_id, None, iteration)
        with phase("train"):
            train_on_levels(ctx, iteration, levels)
