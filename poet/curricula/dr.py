"""Domain randomisation: one agent, a new random level every iteration.

The level of iteration t is `family.sample` from the stream ("dr.level", t), so it is the
same whatever the workers or a resume in between; with `evaluation.course: fixed` it gets
its own course seed. Every level is a row of the `envs` table (no parent, the agent's
pair id, the iteration); the `iterations` table has the agent's score on the level it
trained on, taken as POET takes it (after the step by default).
"""

from __future__ import annotations

from envs import EnvFamily, EnvParams
from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import course_seed_for, record_level, start_pair, train_pairs


def needs_random_levels(curriculum: str, family: EnvFamily) -> str | None:
    """Why `curriculum`, which draws random levels, cannot run on `family` (None: it can)."""
    if not callable(getattr(family, "sample", None)):
        return f"{curriculum} needs random levels: env family {family.name!r} has no sample(rng)"
    return None


class DomainRandomization:
    """Train one agent on levels drawn uniformly over the family's range."""

    name = "dr"

    def check(self, family: EnvFamily) -> str | None:
        """Why this curriculum cannot run on `family` (None: it can)."""
        return needs_random_levels(self.name, family)

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx, self.level(ctx, 0))

    def level(self, ctx: RunContext, iteration: int) -> EnvParams:
        """The random level of `iteration`."""
        env = ctx.family.sample(ctx.seeds.rng("dr.level", iteration))
        return env.with_course_seed(course_seed_for(ctx, ctx.seeds.rng("dr.course", iteration)))

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        agent = ctx.state.population.active[0]
        if iteration > 0:  # iteration 0 trains on the level the agent started on
            agent.env = self.level(ctx, iteration)
            record_level(ctx, agent.env, agent.pair_id, None, iteration)
        with phase("train"):
            train_pairs(ctx, iteration)
