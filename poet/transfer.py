"""Transfer tournaments: every other active agent tried on each pair's env, directly and fine-tuned.

POET: the best of all direct and fine-tuned candidates replaces the incumbent if it
scores higher than the incumbent does now. Enhanced POET: the bar is the highest of the
target's last 5 scores; only candidates whose direct score passes it are fine-tuned,
and a candidate must pass it to replace the incumbent.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from poet.context import RunContext
from poet.pair import Pair
from poet.trainers import TrainTask

ENHANCED_HISTORY = 5  # Enhanced POET's threshold: max of the target's last 5 scores


@dataclass
class Candidate:
    """One transfer attempt of a source agent into a target env."""

    source: Pair
    target: Pair
    kind: str  # "direct" or "fine_tune"
    theta: np.ndarray
    score: float = float("nan")


@dataclass
class TransferSummary:
    """What one transfer phase did."""

    iteration: int
    attempts: int = 0
    accepted: list[Candidate] = field(default_factory=list)

    def line(self) -> str:
        """One line for the user."""
        acc = ", ".join(f"{c.source.pair_id}->{c.target.pair_id} ({c.kind} {c.score:.1f})" for c in self.accepted)
        return f"iter {self.iteration:>5} transfer: {self.attempts} attempts, {len(self.accepted)} accepted" + (f": {acc}" if acc else "")


def _bars(ctx: RunContext, targets: list[Pair]) -> np.ndarray:
    """The score each target's replacement must beat."""
    if ctx.cfg.mode == "enhanced":
        return np.array([max(t.recent_scores(ENHANCED_HISTORY)) if t.scores else -np.inf for t in targets])
    return ctx.scorer.score([(t.theta, t.env) for t in targets], tags=[f"{t.pair_id} incumbent" for t in targets])


def fine_tune(ctx: RunContext, candidates: list[Candidate], iteration: int) -> list[Candidate]:
    """One trainer step of each candidate's agent on the target env, from a fresh trainer state."""
    tasks = [
        TrainTask(key=f"transfer {c.source.pair_id}->{c.target.pair_id}", theta=c.theta, env=c.target.env,
                  state=ctx.trainer.init_state(c.theta),
                  seed=ctx.seeds.integer("transfer.fine_tune", iteration, c.target.index, c.source.index))
        for c in candidates
    ]
    steps = ctx.trainer.step(tasks, ctx.evaluator) if tasks else []
    return [Candidate(c.source, c.target, "fine_tune", s.theta) for c, s in zip(candidates, steps)]


def transfer(ctx: RunContext, iteration: int) -> TransferSummary:
    """One transfer phase over all active pairs."""
    enhanced = ctx.cfg.mode == "enhanced"
    targets = list(ctx.population.active)
    summary = TransferSummary(iteration)
    bars = _bars(ctx, targets)
    direct = [Candidate(s, t, "direct", s.theta) for t in targets for s in targets if s is not t]
    scores = ctx.scorer.score([(c.theta, c.target.env) for c in direct],
                              tags=[f"transfer {c.source.pair_id}->{c.target.pair_id}" for c in direct])
    for c, s in zip(direct, scores):
        c.score = float(s)
    bar_of = {t.pair_id: b for t, b in zip(targets, bars)}
    tuned: list[Candidate] = []
    if ctx.cfg.transfer.fine_tune:
        to_tune = [c for c in direct if not enhanced or c.score > bar_of[c.target.pair_id]]
        tuned = fine_tune(ctx, to_tune, iteration)
        tuned_scores = ctx.scorer.score([(c.theta, c.target.env) for c in tuned],
                                        tags=[f"fine-tuned {c.source.pair_id}->{c.target.pair_id}" for c in tuned])
        for c, s in zip(tuned, tuned_scores):
            c.score = float(s)
    candidates = direct + tuned
    summary.attempts = len(candidates)
    for target in targets:
        mine = [c for c in candidates if c.target is target]
        bar = bar_of[target.pair_id]
        best = max(mine, key=lambda c: c.score, default=None)  # first of equals: deterministic
        accept = best is not None and best.score > bar
        for c in mine:
            ctx.records.write("transfers", {
                "iteration": iteration, "source_pair_id": c.source.pair_id, "target_pair_id": target.pair_id,
                "kind": c.kind, "score": c.score, "incumbent_score": float(bar), "accepted": bool(accept and c is best),
            })
        if accept:
            apply_transfer(ctx, best, iteration)
            summary.accepted.append(best)
    ctx.records.write("events", {"iteration": iteration, "kind": "transfer", "pair_id": None, "env_id": None,
                                 "detail": summary.line()})
    return summary


def apply_transfer(ctx: RunContext, c: Candidate, iteration: int) -> None:
    """Replace the target's agent and reset its trainer state."""
    target = c.target
    target.theta = c.theta.copy()
    target.state = ctx.trainer.reset_state(target.state, target.theta)
    ctx.records.write("events", {"iteration": iteration, "kind": "transfer_accepted", "pair_id": target.pair_id,
                                 "env_id": target.env.id,
                                 "detail": f"{c.kind} from {c.source.pair_id}, score {c.score:.2f}"})
    ctx.mark_solved(target.pair_id, target.env.id, c.score, iteration, f"transfer ({c.kind} from {c.source.pair_id})")
