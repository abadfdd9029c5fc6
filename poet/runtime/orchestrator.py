"""The schedule of a run, and nothing else: iterations of the selected curriculum.

Each iteration the curriculum runs its phases (`poet.curricula`); the orchestrator times
and records them (the `phases` table), forgets the scores of agents that no longer exist,
flushes the records, advances `state.iteration` and calls `on_iteration` (progress,
checkpoints).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from poet import heldout
from poet.context import RunContext
from poet.curricula import Curriculum


class Orchestrator:
    """Runs a curriculum over a RunContext."""

    def __init__(
        self, ctx: RunContext, curriculum: Curriculum, on_iteration: Callable[[Orchestrator], None] | None = None
    ):
        self.ctx = ctx
        self.curriculum = curriculum
        self.on_iteration = on_iteration
        self.last_steps_per_second = float("nan")  # env steps per second of the last iteration

    @property
    def iteration(self) -> int:
        """The next iteration to run."""
        return self.ctx.state.iteration

    def start(self) -> None:
        """The curriculum's first envs and agents."""
        self.curriculum.start(self.ctx)

    @contextmanager
    def _phase(self, name: str, totals: list[float]) -> Iterator[None]:
        """Time a phase and count its env steps into the `phases` table (and `totals`: seconds, steps)."""
        steps0, t0 = self.ctx.evaluator.env_steps, time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        steps = self.ctx.evaluator.env_steps - steps0
        totals[0] += seconds
        totals[1] += steps
        self.ctx.records.write(
            "phases", {"iteration": self.iteration, "phase": name, "seconds": seconds, "env_steps": int(steps)}
        )

    def run_iteration(self) -> None:
        """Run the next iteration of the schedule."""
        ctx = self.ctx
        totals = [0.0, 0.0]
        self.curriculum.run_iteration(ctx, self.iteration, lambda name: self._phase(name, totals))
        if heldout.due(ctx, self.iteration):
            with self._phase("heldout", totals):
                heldout.evaluate(ctx, self.iteration)
        self.last_steps_per_second = totals[1] / totals[0] if totals[0] > 0 else float("nan")
        self._forget_stale_scores()
        ctx.records.flush()
        ctx.state.env_steps += int(totals[1])
        ctx.state.iteration += 1
        if self.on_iteration is not None:
            self.on_iteration(self)

    def run(self, iterations: int) -> None:
        """Run until `iterations` iterations are done."""
        self.ctx.stop_at = iterations
        if not self.ctx.state.population.active:
            self.start()
        while self.iteration < iterations:
            self.run_iteration()

    def _forget_stale_scores(self) -> None:
        # Scores of agents that trained on are never asked again; keep only living agents'.
        living = {p.agent_id for p in self.ctx.state.population.all_pairs}
        self.ctx.state.scores.keep_agents(living)

    def annecs(self) -> int:
        """Accumulated number of novel environments created and solved (envs admitted by reproduction)."""
        return self.ctx.state.annecs()
