"""Direct training: one agent on one env for the whole run (the baseline every curriculum
is compared with). The env is `env.start` if the config gives one, else the family's
initial env; each iteration is one trainer step and the agent's score, as in POET."""

from __future__ import annotations

from poet.context import RunContext
from poet.curricula.base import PhaseTimer
from poet.curricula.common import start_pair, train_pairs


class DirectCurriculum:
    """Train one agent on one fixed env."""

    name = "direct"

    def report_traits(self) -> dict:
        """What this curriculum's runs record, for the report (`poet.curricula.base`)."""
        return {"kind": "single"}

    def start(self, ctx: RunContext) -> None:
        start_pair(ctx)

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        with phase("train"):
            train_pairs(ctx, iteration)
