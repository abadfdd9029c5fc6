"""Robust PLR (Jiang et al. 2021) and ACCEL (Parker-Holder et al. 2022): one agent, a buffer
of levels scored by regret, replay by rank and staleness (`level_buffer.LevelBuffer`).

Each iteration is one of dcd's cycles, on a batch of `num_levels` levels (dcd's
`num_processes`, 16 in its BipedalWalker configs: one level per parallel env):
- replay (decided as `LevelBuffer.replay_decision`): `num_levels` levels drawn from the
  buffer (each draw updates staleness), one trainer step on the batch (`TrainTask.levels`),
  each level's score updated; ACCEL then edits: the 4 levels with the lowest mean return
  minus value loss (dcd's `base_levels: easy`), each `num_levels // 4` times (fewer than 4
  levels: the highest, `num_levels` times, as dcd), `edits` edits per child
  (`family.edit`: dcd's `mutate_level`; families without one take `edits` POET mutations),
  and the children, scored on one rollout, are offered to the buffer;
- otherwise, explore: `num_levels` new levels are scored (no training: the "robust" in
  robust PLR) and offered to the buffer. Robust PLR draws them over the family's range
  (`family.sample`); ACCEL draws easy ones (`family.sample_easy`: dcd's "Easy" BipedalWalker
  ranges on the terrain families; the family's start where there is none) and lets edits
  make them harder.

Defaults are dcd's BipedalWalker configs (`bipedal_robust_plr.json`, `bipedal_accel.json`):
buffer 1000, 16 levels per cycle, min fill 0.5, replay probability 0.5 (robust PLR) / 0.9
(ACCEL), rank prioritisation at temperature 0.1, staleness coefficient 0.5, 3 edits per
child, and the "proportionate" replay schedule.

Scores (`score`): dcd scores BipedalWalker levels by positive value loss, which needs a
trainer with a value function: `auto` uses it when the trainer offers `regret(tasks,
evaluator)` (PPO). A level's score is then dcd's: the positive value loss of each episode
that ended on it in the cycle's rollout (`ppo.level_scores`), the last one kept; a level
with no finished episode keeps its score, and a new one does not enter the buffer.
Otherwise (ES) it is MaxMC from returns, a rule of ours: the highest return ever seen on
the level (the agent's, and for ES its perturbations') minus the agent's current return;
a level seen once scores 0, and ACCEL edits the levels with the lowest returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from envs import EnvFamily, EnvParams
from poet.config import ConfigError, out_of_range
from poet.context import RunContext
from poet.curricula import dcd
from poet.curricula.base import PhaseTimer
from poet.curricula.common import (
    course_seed_for,
    initial_params,
    record_level,
    start_pair,
    start_params,
    train_on_levels,
)
from poet.curricula.dr import needs_random_levels
from poet.curricula.level_buffer import LevelBuffer
from poet.trainers import TrainTask

KEY = "level_buffer"


def maxmc(max_return: float, current_return: float) -> float:
    """MaxMC regret from returns: the best return seen on a level minus the agent's now."""
    return float(max_return) - float(current_return)


@dataclass
class PLROptions:
    """Robust PLR's options (defaults: dcd's `bipedal_robust_plr.json`)."""

    buffer_size: int = 1000  # most levels the buffer holds (dcd's level_replay_seed_buffer_size)
    # a cycle replays with probability min(fill, replay_prob) once the buffer is min_fill full,
    # else explores new levels (the "proportionate" schedule; dcd's level_replay_prob)
    replay_prob: float = 0.5
    min_fill: float = 0.5  # of the buffer, filled before the first replay
    # temperature of the rank prioritisation: a level's weight is 1 / rank^(1 / temperature)
    # (dcd's level_replay_temperature, its arguments.py default)
    temperature: float = 0.1
    # share of staleness in the replay distribution, (1 - c) P_score + c P_staleness (dcd's staleness_coef)
    staleness_coef: float = 0.5
    num_levels: int = dcd.NUM_PROCESSES  # levels per cycle, replayed or new (dcd's num_processes)
    # a level's score: "positive_value_loss" (dcd's level_replay_strategy; needs a trainer with
    # a value function, PPO), "maxmc" (from returns), or "auto": the first when the trainer can
    score: Literal["auto", "positive_value_loss", "maxmc"] = "auto"
    # which level a new one may replace in a full buffer: the least likely to be replayed, or
    # the lowest-scored (dcd's level_replay_seed_buffer_priority)
    buffer_priority: Literal["replay_support", "score"] = "replay_support"

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(self, ("buffer_size", "num_levels"), lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ("replay_prob", "min_fill", "staleness_coef"), lambda v: 0 <= v <= 1, "in [0, 1]"),
            *out_of_range(self, ["temperature"], lambda v: v > 0, "> 0"),
        ]


@dataclass
class ACCELOptions(PLROptions):
    """ACCEL's options (defaults: dcd's `bipedal_accel.json`)."""

    # a cycle replays (and edits) with probability min(fill, replay_prob) once the buffer is
    # min_fill full, else explores new levels (dcd's level_replay_prob in bipedal_accel.json)
    replay_prob: float = 0.9
    edits: int = 3  # edits per child of a replayed level (dcd's num_edits)

    def check(self) -> list[tuple[str, str]]:
        return [*super().check(), *out_of_range(self, ["edits"], lambda v: v >= 1, ">= 1")]


class RobustPLR:
    """Robust prioritized level replay: train only on replayed levels."""

    name = "robust_plr"
    trains_on_levels = True  # a cycle's batch of levels is one trainer step (`TrainTask.levels`)
    Options = PLROptions
    defaults: ClassVar[dict] = dcd.DEFAULTS  # PPO and the policy as dcd's BipedalWalker configs

    def __init__(self, options: PLROptions | None = None):
        self.options = options if options is not None else self.Options()

    @property
    def edits(self) -> int:
        """Edits per child of a replayed level (robust PLR never edits)."""
        return getattr(self.options, "edits", 0)

    def report_traits(self) -> dict:
        """What this curriculum's runs record, for the report (`poet.curricula.base`)."""
        o = self.options
        return {"kind": "level_buffer", "buffer_size": o.buffer_size, "min_fill": o.min_fill, "edits": self.edits > 0}

    def progress_fields(self, ctx: RunContext) -> dict[str, object] | None:
        """What the progress bar shows after an iteration: while the buffer fills, how many
        levels it holds of the number the first replay needs (`min_fill`); then its size,
        the replays so far (one trainer step each) and the agent's score after the last."""
        data = ctx.state.curriculum_data.get(KEY)
        if data is None or not ctx.state.population.active:
            return None
        held, capacity = len(data["levels"]), int(data["capacity"])
        needed = LevelBuffer.levels_to_replay(capacity, self.options.min_fill)
        scores = ctx.state.population.active[0].scores  # one per trainer step: every step is a replay
        if held < needed and not scores:
            return {"levels": f"{held}/{needed} before first replay"}
        return {
            "buffer": f"{held}/{capacity}",
            "replays": len(scores),
            "replay_score": f"{scores[-1]:.0f}" if scores else "none yet",
        }

    def uses_value_loss(self, ctx: RunContext) -> bool:
        """Whether levels are scored by positive value loss (else MaxMC)."""
        has = callable(getattr(ctx.trainer, "regret", None))
        if self.options.score == "positive_value_loss" and not has:
            raise ConfigError(
                f"curriculum_options.score: positive_value_loss needs a trainer with a value function "
                f"(regret(tasks, evaluator)); trainer {ctx.trainer.name!r} has none"
            )
        return self.options.score == "positive_value_loss" or (self.options.score == "auto" and has)

    def check(self, family: EnvFamily) -> str | None:
        """Why this curriculum cannot run on `family` (None: it can)."""
        return needs_random_levels(self.name, family)

    # -- levels
    def new_level(self, ctx: RunContext, rng: np.random.Generator) -> EnvParams:
        """A new level for the buffer: over the family's whole range."""
        return ctx.family.sample(rng)

    def start(self, ctx: RunContext) -> None:
        self.uses_value_loss(ctx)  # a score the trainer cannot give fails before any rollout
        rng = ctx.seeds.rng("plr.start")
        start_pair(ctx, self.new_level(ctx, rng).with_course_seed(course_seed_for(ctx, rng)))
        buffer = LevelBuffer(
            self.options.buffer_size,
            self.options.temperature,
            self.options.staleness_coef,
            self.options.buffer_priority,
        )
        ctx.state.curriculum_data[KEY] = buffer.to_data()

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        buffer = LevelBuffer.from_data(ctx.state.curriculum_data[KEY])
        rng = ctx.seeds.rng("plr.cycle", iteration)
        n = self.options.num_levels
        if buffer.replay_decision(rng, self.options.replay_prob, self.options.min_fill):
            indices = [buffer.sample_replay(rng) for _ in range(n)]
            with phase("train"):
                ranking = self._replay(ctx, buffer, indices, iteration)
            if self.edits > 0:
                with phase("edit"):
                    self._edit(ctx, buffer, [indices[i] for i in edit_bases(ranking)], iteration, rng)
        else:
            with phase("explore"):
                levels = []
                for _ in range(n):
                    level = self.new_level(ctx, rng)
                    levels.append(level.with_course_seed(course_seed_for(ctx, rng)))
                self._offer(ctx, buffer, levels, [None] * n, iteration, "explored")
        ctx.state.curriculum_data[KEY] = buffer.to_data()

    def _replay(self, ctx: RunContext, buffer: LevelBuffer, indices: list[int], iteration: int) -> list[float]:
        """Train on the drawn levels and update their scores; returns what ACCEL ranks them by
        to pick the levels it edits (mean return minus value loss, or the return for MaxMC)."""
        agent = ctx.state.population.active[0]
        levels = [EnvParams.from_json(buffer.levels[i]["env"]) for i in indices]
        step, returns = train_on_levels(ctx, iteration, levels)
        if len(step.levels) != len(levels):  # a trainer that reports nothing per level
            step.levels = [{} for _ in levels]
        if self.uses_value_loss(ctx):
            for index, level in zip(indices, step.levels):
                for score in level["scores"]:
                    buffer.update(index, score)
            ranking = [m["mean_return"] - m["value_loss"] for m in step.levels]
        else:
            for index, ret, level in zip(indices, returns, step.levels):
                entry = buffer.levels[index]
                seen = [ret] + ([entry["max_return"]] if entry["max_return"] is not None else [])
                if "return_max" in level:  # the best ES perturbation's return on this level
                    seen.append(level["return_max"])
                entry["max_return"] = max(seen)
                buffer.update(index, maxmc(entry["max_return"], ret))
            ranking = returns
        for index, env in zip(indices, levels):
            ctx.records.event(
                iteration, "replayed", agent.pair_id, env.id, f"score {buffer.scores[index]:.4f}, slot {index}"
            )
        return ranking

    def _edit(
        self, ctx: RunContext, buffer: LevelBuffer, bases: list[int], iteration: int, rng: np.random.Generator
    ) -> None:
        """Children of the buffer's levels at `bases`, one each, offered to the buffer."""
        edit = getattr(ctx.family, "edit", None)
        parents = [EnvParams.from_json(buffer.levels[i]["env"]) for i in bases]
        children = []
        for parent in parents:
            child = parent.with_course_seed(None)
            if callable(edit):
                child = edit(child, rng, self.edits)
            else:
                for _ in range(self.edits):
                    child = ctx.family.mutate(child, rng)
            children.append(child.with_course_seed(course_seed_for(ctx, rng)))
        self._offer(ctx, buffer, children, [p.id for p in parents], iteration, "edited")

    def _offer(
        self,
        ctx: RunContext,
        buffer: LevelBuffer,
        levels: list[EnvParams],
        parents: list[str | None],
        iteration: int,
        kind: str,
    ) -> None:
        """Score new levels in one wave and offer them to the buffer."""
        agent = ctx.state.population.active[0]
        stamps = [buffer.propose() for _ in levels]
        if self.uses_value_loss(ctx):
            task = TrainTask(
                key=agent.pair_id,
                theta=agent.theta,
                env=levels[0],
                state=agent.state,
                seed=ctx.seeds.integer(f"plr.{kind}", iteration),
                levels=list(levels),
            )
            scored = ctx.trainer.regret([task], ctx.evaluator)[0]
            agent.state = scored.state  # dcd's return statistics move in scoring rollouts too
            scores = [m["scores"] for m in scored.levels]
            returns: list[float | None] = [None] * len(levels)
        else:  # MaxMC: the return is all that is known of a new level, so its regret is 0
            returns = [
                float(r)
                for r in ctx.scorer.score(
                    [(agent.theta, level) for level in levels], tags=[f"{agent.pair_id} {kind} level" for _ in levels]
                )
            ]
            scores = [[maxmc(r, r)] for r in returns]
        for level, parent, stamp, ret, level_scores in zip(levels, parents, stamps, returns, scores):
            record_level(ctx, level, agent.pair_id, parent, iteration)
            slot = buffer.offer({"env": level.to_json(), "max_return": ret}, level_scores, stamp)
            score = round(float(level_scores[-1]), 4) if level_scores else None  # None: no finished episode
            ctx.records.event(iteration, kind, agent.pair_id, level.id, {"score": score, "slot": slot})


def edit_bases(ranking: list[float]) -> list[int]:
    """Which of a replayed batch's levels ACCEL edits, as dcd's `base_levels: easy` picks them:
    with 4 or more levels, the 4 lowest by `ranking` (numpy's default argsort order for ties),
    the 4 repeated to fill the batch (`len // 4` times); with fewer, the highest, once per level."""
    n = len(ranking)
    if n >= 4:
        return [int(i) for i in np.argsort(np.asarray(ranking, dtype=np.float64))[:4]] * (n // 4)
    return [int(np.argmax(ranking))] * n


class ACCEL(RobustPLR):
    """ACCEL: robust PLR whose replayed levels are edited into new ones."""

    name = "accel"
    Options = ACCELOptions

    def check(self, family: EnvFamily) -> str | None:
        """ACCEL's new levels are easy random ones or the family's start: any family will do."""
        return None

    def new_level(self, ctx: RunContext, rng: np.random.Generator) -> EnvParams:
        """A random easy level (`family.sample_easy`, dcd's "Easy" BipedalWalker levels), else the
        family's start (`env.start` or its initial params); edits make them harder."""
        easy = getattr(ctx.family, "sample_easy", None)
        if callable(easy):
            return easy(rng)
        start = ctx.cfg.env.start
        return start_params(ctx.family, start) if start is not None else initial_params(ctx.family, rng)
