"""Transfer tournaments: every other active agent tried on each pair's env, directly and fine-tuned.

Both modes follow the reference code (uber-research/poet `poet_algo.py` `transfer`,
`es.py` `update_dicts_after_transfer` and `pick_proposal`):

* a fine-tuned candidate is one uncommitted trainer step from the source's theta on the
  target's env with the TARGET's trainer state (for ES: the target's sigma, and an Adam
  step with the target's moments and step size, `Adam.propose`);
* POET (`original_poet` branch): every source is tried directly and fine-tuned; the best
  of all candidates replaces the incumbent if it scores higher than the incumbent's
  current score;
* Enhanced POET: the bar is the highest of the target's last 5 scores; a source's direct
  score only decides whether it gets a fine-tuned proposal (direct score > bar), and only
  proposals that beat the bar (and the incumbent) may replace it.

Ties go to the first candidate in source order, directs before proposals (the
reference's strict `>`). An accepted transfer resets the target's trainer state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from poet.context import RunContext
from poet.pair import Pair
from poet.trainers import TrainTask, propose

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
        return f"iter {self.iteration:>5} transfer: {self.attempts} attempts, {len(self.accepted)} accepted" + (
            f": {acc}" if acc else ""
        )


def transfer_bar(scores: list[float], incumbent: float, enhanced: bool) -> float:
    """The score a replacement must beat: Enhanced POET's max of the last 5 scores, POET's incumbent score."""
    if enhanced and scores:
        return max(scores[-ENHANCED_HISTORY:])
    return incumbent


def pick(candidates: list[Candidate], bar: float, incumbent: float) -> Candidate | None:
    """The first best candidate if it beats both the bar and the incumbent's score, else None."""
    best = max(candidates, key=lambda c: c.score, default=None)  # max keeps the first of equals
    if best is not None and best.score > bar and best.score > incumbent:
        return best
    return None


def fine_tune(ctx: RunContext, candidates: list[Candidate], iteration: int) -> list[Candidate]:
    """One uncommitted trainer step of each candidate's agent on the target env, from the target's state."""
    tasks = [
        TrainTask(
            key=f"transfer {c.source.pair_id}->{c.target.pair_id}",
            theta=c.theta,
            env=c.target.env,
            state=c.target.state,
            seed=ctx.seeds.integer("transfer.fine_tune", iteration, c.target.index, c.source.index),
        )
        for c in candidates
    ]
    thetas = propose(ctx.trainer, tasks, ctx.evaluator)
    return [Candidate(c.source, c.target, "fine_tune", theta) for c, theta in zip(candidates, thetas)]


def _score(ctx: RunContext, candidates: list[Candidate], what: str) -> None:
    scores = ctx.scorer.score(
        [(c.theta, c.target.env) for c in candidates],
        tags=[f"{what} {c.source.pair_id}->{c.target.pair_id}" for c in candidates],
    )
    for c, s in zip(candidates, scores):
        c.score = float(s)


def transfer(ctx: RunContext, iteration: int, enhanced: bool = False) -> TransferSummary:
    """One transfer phase over all active pairs; `enhanced`: Enhanced POET's rules."""
    targets = list(ctx.state.population.active)
    summary = TransferSummary(iteration)
    incumbents = ctx.scorer.score([(t.theta, t.env) for t in targets], tags=[f"{t.pair_id} incumbent" for t in targets])
    incumbent_of = {t.pair_id: float(s) for t, s in zip(targets, incumbents)}
    bar_of = {t.pair_id: transfer_bar(t.scores, incumbent_of[t.pair_id], enhanced) for t in targets}
    direct = [Candidate(s, t, "direct", s.theta) for t in targets for s in targets if s is not t]
    _score(ctx, direct, "transfer")
    tuned: list[Candidate] = []
    if ctx.cfg.transfer.fine_tune:
        to_tune = [c for c in direct if not enhanced or c.score > bar_of[c.target.pair_id]]
        tuned = fine_tune(ctx, to_tune, iteration)
        _score(ctx, tuned, "fine-tuned")
    # Enhanced POET lets only proposals replace (without fine-tuning, directs stand in for them).
    contenders = tuned if enhanced and ctx.cfg.transfer.fine_tune else direct + tuned
    summary.attempts = len(direct) + len(tuned)
    for target in targets:
        bar, incumbent = bar_of[target.pair_id], incumbent_of[target.pair_id]
        best = pick([c for c in contenders if c.target is target], bar, incumbent)
        for c in (c for c in direct + tuned if c.target is target):
            ctx.records.write(
                "transfers",
                {
                    "iteration": iteration,
                    "source_pair_id": c.source.pair_id,
                    "target_pair_id": target.pair_id,
                    "kind": c.kind,
                    "score": c.score,
                    "incumbent_score": incumbent,
                    "bar": float(bar),
                    "accepted": c is best,
                },
            )
        if best is not None:
            apply_transfer(ctx, best, iteration)
            summary.accepted.append(best)
    ctx.records.event(iteration, "transfer", detail=summary.line())
    return summary


def apply_transfer(ctx: RunContext, c: Candidate, iteration: int) -> None:
    """Replace the target's agent and reset its trainer state."""
    target = c.target
    target.theta = c.theta.copy()
    target.state = ctx.trainer.reset_state(target.state, target.theta)
    ctx.records.event(
        iteration,
        "transfer_accepted",
        target.pair_id,
        target.env.id,
        f"{c.kind} from {c.source.pair_id}, score {c.score:.2f}",
    )
    ctx.mark_solved(target.pair_id, target.env.id, c.score, iteration, f"transfer ({c.kind} from {c.source.pair_id})")
