"""A direct-path curriculum: one agent, env params moved from the start to a target in equal
stages (the baseline POET's paper compares with: can a hand-made path reach what POET
reaches?).

`curriculum_options: {target: {...the family's values...}, stages: 10}` (or a whole
EnvParams dict as target, to end on its course): the run starts on
`env.start` (or the family's initial params) and trains stage k of `stages` during the
k-th equal share of the run's iterations, on `family.interpolate(start, target, k / (stages - 1))`;
the last stage is the target itself. Each stage is a row of the `envs` table whose parent is
the stage before.

Two options go beyond the paper's control, each off by default:
- `env_steps: N`: the shares are of N env steps instead (stage k from the iteration after the
  run's env steps reach k * N / stages), for a run budgeted in env steps, whose length in
  iterations is not known in advance;
- `restart_trainer: true`: the trainer's state (ES's Adam moments and noise schedule) starts
  afresh at each new stage, as POET's pairs restart it when a transfer is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs import EnvFamily, EnvParams
from poet.config import out_of_range
from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import course_seed_for, initial_params, record_level, start_pair, start_params, train_pairs


@dataclass
class PathOptions:
    """The target env's values (or a whole EnvParams dict) and the number of stages."""

    # the env the last stage trains on: the family's values (e.g. {roughness: 4.0, pit_gap: [],
    # stump_height: []}) or a whole EnvParams dict, to end on its course
    target: dict[str, Any] | None = None
    stages: int = 10  # equal shares of the run, each on one env from the start to the target (both included)
    env_steps: int | None = None  # the shares are of this many env steps; unset: of the run's iterations
    restart_trainer: bool = False  # a fresh trainer state at each new stage (POET's restart at a transfer)

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        problems = out_of_range(self, ["stages"], lambda v: v >= 2, ">= 2")
        if self.env_steps is not None:
            problems += out_of_range(self, ["env_steps"], lambda v: v >= 1, ">= 1")
        if not self.target:
            problems.insert(
                0, ("target", "give the target env's values, e.g. {roughness: 4.0, pit_gap: [], stump_height: []}")
            )
        return problems


class DirectPath:
    """Train one agent along equal stages from the start env to a target env."""

    name = "path"
    Options = PathOptions

    def report_traits(self) -> dict:
        """What this curriculum's runs record, for the report (`poet.curricula.base`)."""
        return {"kind": "single"}

    def __init__(self, options: PathOptions):
        self.target, self.stages = dict(options.target or {}), options.stages
        self.env_steps, self.restart_trainer = options.env_steps, options.restart_trainer

    def check(self, family: EnvFamily) -> str | None:
        """Why this curriculum cannot run on `family` (None: it can)."""
        if not callable(getattr(family, "interpolate", None)):
            return f"path needs env family {family.name!r} to interpolate(start, target, t)"
        try:
            family.validate(start_params(family, self.target))
        except (ValueError, TypeError, KeyError) as exc:
            return f"path: target: {exc}"
        return None

    def _start(self, ctx: RunContext) -> EnvParams:
        start = ctx.cfg.env.start
        return (
            start_params(ctx.family, start)
            if start is not None
            else initial_params(ctx.family, ctx.seeds.rng("env.initial"))
        )

    def stage_of(self, ctx: RunContext, iteration: int) -> int:
        """The stage `iteration` trains on: equal shares of the run's iterations, or of
        `env_steps` (by the env steps of the iterations before it)."""
        if self.env_steps is not None:
            return min(self.stages - 1, ctx.state.env_steps * self.stages // self.env_steps)
        total = ctx.stop_at if ctx.stop_at else ctx.cfg.iterations
        return min(self.stages - 1, iteration * self.stages // max(1, total))

    def level(self, ctx: RunContext, stage: int) -> EnvParams:
        """The env of `stage` (0: the start, stages - 1: the target), on its own course."""
        target = start_params(ctx.family, self.target)
        env = ctx.family.interpolate(self._start(ctx), target, stage / (self.stages - 1))
        seed = course_seed_for(ctx, ctx.seeds.rng("path.course", stage))
        if stage == self.stages - 1 and target.course_seed is not None and seed is not None:
            seed = target.course_seed  # a target given with its course ends on that course
        return env.with_course_seed(seed)

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx, self.level(ctx, 0))

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        agent = ctx.state.population.active[0]
        env = self.level(ctx, self.stage_of(ctx, iteration))
        if env != agent.env:
            parent, agent.env = agent.env.id, env
            record_level(ctx, env, agent.pair_id, parent, iteration)
            if self.restart_trainer:
                agent.state = ctx.trainer.reset_state(agent.state, agent.theta)
        with phase("train"):
            train_pairs(ctx, iteration)
