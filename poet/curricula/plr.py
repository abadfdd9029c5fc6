"""Robust PLR (Jiang et al. 2021) and ACCEL (Parker-Holder et al. 2022): one agent, a buffer
of levels scored by regret, replay by rank and staleness (`level_buffer.LevelBuffer`).

Each iteration is one of dcd's cycles:
- replay (decided as `LevelBuffer.replay_decision`): a level drawn from the buffer, one
  trainer step on it, its score updated; ACCEL then edits it (`edits` family mutations)
  and offers the child, scored by an evaluation, to the buffer;
- otherwise, explore: `new_levels` new levels are evaluated (no training: the "robust" in
  robust PLR) and offered to the buffer. Robust PLR draws them over the family's range
  (`family.sample`); ACCEL draws easy ones (`family.sample_easy`: dcd's "Easy" BipedalWalker
  ranges on the terrain families; the family's start where there is none) and lets edits
  make them harder.

Defaults are dcd's BipedalWalker configs (`bipedal_robust_plr.json`, `bipedal_accel.json`):
buffer 1000, min fill 0.5, replay probability 0.5 (robust PLR) / 0.9 (ACCEL), rank
prioritisation at temperature 0.1, staleness coefficient 0.5, 3 edits per child, and the
"proportionate" replay schedule.

Regret (`score`): dcd scores BipedalWalker levels by positive value loss (the mean GAE
advantage clipped at 0), which needs a trainer with a value function: `auto` uses it when
the trainer offers `regret(tasks, evaluator)` (PPO; a replayed level's score is then the
loss of the rollouts it was trained on, reported in the step's metrics). Otherwise (ES)
it is MaxMC from returns: the highest return ever seen on the level (the agent's, and for
ES its perturbations') minus the agent's current return; a level seen once scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from envs import EnvFamily, EnvParams
from poet.config import ConfigError, out_of_range
from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import course_seed_for, initial_params, record_level, start_pair, start_params, train_pairs
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

    buffer_size: int = 1000
    replay_prob: float = 0.5
    min_fill: float = 0.5  # of the buffer, filled before the first replay
    temperature: float = 0.1
    staleness_coef: float = 0.5
    new_levels: int = 16  # evaluated on an explore cycle
    score: Literal["auto", "positive_value_loss", "maxmc"] = "auto"
    buffer_priority: Literal["replay_support", "score"] = "replay_support"  # dcd's level_replay_seed_buffer_priority

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(self, ("buffer_size", "new_levels"), lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ("replay_prob", "min_fill", "staleness_coef"), lambda v: 0 <= v <= 1, "in [0, 1]"),
            *out_of_range(self, ["temperature"], lambda v: v > 0, "> 0"),
        ]


@dataclass
class ACCELOptions(PLROptions):
    """ACCEL's options (defaults: dcd's `bipedal_accel.json`)."""

    replay_prob: float = 0.9
    edits: int = 3  # family mutations per child of a replayed level

    def check(self) -> list[tuple[str, str]]:
        return [*super().check(), *out_of_range(self, ["edits"], lambda v: v >= 1, ">= 1")]


class RobustPLR:
    """Robust prioritized level replay: train only on replayed levels."""

    name = "robust_plr"
    Options = PLROptions

    def __init__(self, options: PLROptions | None = None):
        self.options = options if options is not None else self.Options()

    @property
    def edits(self) -> int:
        """Family mutations per child of a replayed level (robust PLR never edits)."""
        return getattr(self.options, "edits", 0)

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
        if buffer.replay_decision(rng, self.options.replay_prob, self.options.min_fill):
            index = buffer.sample_replay(rng)
            with phase("train"):
                self._replay(ctx, buffer, index, iteration)
            if self.edits > 0:
                with phase("edit"):
                    self._edit(ctx, buffer, index, iteration, rng)
        else:
            with phase("explore"):
                levels = []
                for _ in range(self.options.new_levels):
                    level = self.new_level(ctx, rng)
                    levels.append(level.with_course_seed(course_seed_for(ctx, rng)))
                self._offer(ctx, buffer, levels, [None] * len(levels), iteration, "explored")
        ctx.state.curriculum_data[KEY] = buffer.to_data()

    def _replay(self, ctx: RunContext, buffer: LevelBuffer, index: int, iteration: int) -> None:
        agent = ctx.state.population.active[0]
        entry = buffer.levels[index]
        agent.env = EnvParams.from_json(entry["env"])
        step = train_pairs(ctx, iteration)[0]
        if self.uses_value_loss(ctx):
            regret = float(step.metrics.get("positive_value_loss", 0.0))
        else:
            score = agent.scores[-1]
            seen = [score] + ([entry["max_return"]] if entry["max_return"] is not None else [])
            if "es_return_max" in step.metrics:  # the best ES perturbation's return on this level
                seen.append(float(step.metrics["es_return_max"]))
            entry["max_return"] = max(seen)
            regret = maxmc(entry["max_return"], score)
        buffer.update(index, regret)
        ctx.records.event(iteration, "replayed", agent.pair_id, agent.env.id, f"regret {regret:.4f}")

    def _edit(self, ctx: RunContext, buffer: LevelBuffer, index: int, iteration: int, rng: np.random.Generator) -> None:
        parent = EnvParams.from_json(buffer.levels[index]["env"])
        child = parent.with_course_seed(None)
        for _ in range(self.edits):
            child = ctx.family.mutate(child, rng)
        child = child.with_course_seed(course_seed_for(ctx, rng))
        self._offer(ctx, buffer, [child], [parent.id], iteration, "edited")

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
            tasks = [
                TrainTask(
                    key=agent.pair_id,
                    theta=agent.theta,
                    env=level,
                    state=agent.state,
                    seed=ctx.seeds.integer(f"plr.{kind}", iteration, i),
                )
                for i, level in enumerate(levels)
            ]
            regrets, returns = ctx.trainer.regret(tasks, ctx.evaluator), [None] * len(levels)
        else:  # MaxMC: the return is all that is known of a new level, so its regret is 0
            returns = [
                float(r)
                for r in ctx.scorer.score(
                    [(agent.theta, level) for level in levels], tags=[f"{agent.pair_id} {kind} level" for _ in levels]
                )
            ]
            regrets = [maxmc(r, r) for r in returns]
        for level, parent, stamp, ret, regret in zip(levels, parents, stamps, returns, regrets):
            record_level(ctx, level, agent.pair_id, parent, iteration)
            slot = buffer.insert({"env": level.to_json(), "max_return": ret}, regret, stamp)
            kept = "not kept" if slot is None else f"buffer slot {slot}"
            ctx.records.event(iteration, kind, agent.pair_id, level.id, f"regret {regret:.4f}, {kept}")


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
