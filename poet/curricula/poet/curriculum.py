"""POET and Enhanced POET as curricula (the reference's `optimize` loop).

Each iteration: reproduce (every `reproduction.every` iterations, not at 0), one trainer
step of every active pair and its score, transfer (every `transfer.every` iterations when
there are at least two pairs). The two differ only in the rules `enhanced` selects in
reproduction.py and transfer.py (child duplicates, novelty, transfer bar, ANNECS counter).
"""

from __future__ import annotations

from typing import ClassVar

from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import population_fields, start_pair, train_pairs
from poet.curricula.poet.reproduction import reproduce
from poet.curricula.poet.transfer import transfer
from poet.state import RunState


class PoetCurriculum:
    """POET (Wang et al. 2019), as uber-research/poet's `original_poet` branch runs it."""

    name = "poet"
    enhanced = False
    # What a config that leaves them unset runs with: `original_poet`'s run_poet_local.sh and
    # master.py (every other setting's built-in default is already the reference's; a
    # curriculum that names no default of its own takes these).
    defaults: ClassVar[dict] = {
        "trainer": {"name": "es"},  # poet_distributed/es.py
        # niches/box2d/env.py: 40-40 tanh; --init=random: model.py get_random_model_params
        "policy": {"hidden": [40, 40], "init": "reference"},
        # BipedalWalker's score scale, where the env family declares none of its own: the paper's
        # solved threshold, --repro_threshold=200, --mc_lower=25, --mc_upper=340
        "solved_threshold": 230.0,
        "reproduction": {
            "every": 200,  # --adjust_interval=8 x --steps_before_transfer=25 (poet_algo.py optimize)
            "capacity": 25,  # --max_num_envs=25
            "threshold": 200.0,
            "mc_lower": 25.0,
            "mc_upper": 340.0,
        },
    }

    def report_traits(self) -> dict:
        """What this curriculum's runs record, for the report (`poet.curricula.base`)."""
        return {"kind": "population", "annecs_reference": self.enhanced}

    def progress_fields(self, ctx: RunContext) -> dict[str, object]:
        """What the progress bar shows after an iteration: active pairs, the best score, ANNECS."""
        return population_fields(ctx, "annecs")

    def outcome(self, state: RunState) -> str:
        """How the run ended, for its closing line."""
        pop = state.population
        reference = (
            f" ({state.annecs_reference} as the reference code counts: admitted envs the best archived "
            "agent passed the MC on)"
            if self.enhanced
            else ""
        )
        return f"{len(pop.active)} active pairs, {len(pop.archive)} archived, ANNECS {state.annecs()}{reference}"

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx)

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        pop = ctx.state.population
        if iteration > 0 and iteration % ctx.cfg.reproduction.every == 0:
            with phase("reproduce"):
                summary = reproduce(ctx, iteration, self.enhanced)
            ctx.log(summary.line(len(pop.active), len(pop.archive)))
        transfer_now = len(pop.active) > 1 and iteration % ctx.cfg.transfer.every == 0
        with phase("train"):
            train_pairs(ctx, iteration)
        if transfer_now:
            with phase("transfer"):
                line = transfer(ctx, iteration, self.enhanced).line()
            ctx.log(line)


class EnhancedPoetCurriculum(PoetCurriculum):
    """Enhanced POET (Wang et al. 2020), as uber-research/poet's `master` runs it."""

    name = "enhanced_poet"
    enhanced = True
    # `master`'s run_poet_local.sh; the rest as POET's
    defaults: ClassVar[dict] = {
        "reproduction": {
            "every": 150,  # --adjust_interval=6 x --steps_before_transfer=25
            "capacity": 40,  # --max_num_envs=40
        }
    }
