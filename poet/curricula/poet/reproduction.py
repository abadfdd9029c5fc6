"""POET's reproduction step: eligibility, child proposal, minimal criterion, novelty, admission, capacity.

Both modes follow the reference code (uber-research/poet `poet_algo.py`
`adjust_envs_niches`, `get_child_list`; POET from its `original_poet` branch):

1. parents: active pairs whose agent scores at least the threshold on their own env;
2. `max_children` mutations of random parents; each child gets its own course seed
   (`evaluation.course: fixed`); POET skips a child whose params equal an active env's;
3. minimal criterion: the parent's agent must score within [mc_lower, mc_upper];
4. novelty of the passing children: kNN over hand-designed features of every env ever
   admitted (POET) or over PATA-EC vectors of every active and archived env (Enhanced);
5. in novelty order (most novel first) until `max_admitted`: the best of every active
   agent on the child, directly and after one plain ES step (`evaluate_transfer`), must
   pass the MC again; the child is admitted with that agent. Enhanced POET also counts
   the reference code's ANNECS: +1 when the best archived agent passes the MC directly;
6. the oldest active pairs beyond capacity move to the archive.

Each evaluation stage is one batch to the evaluator through the cached Scorer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from envs import EnvParams
from poet.context import RunContext
from poet.curricula.common import course_seed_for, record_env
from poet.curricula.poet.novelty import knn_novelty, pata_ec
from poet.pair import Pair
from poet.trainers import TrainTask, propose


@dataclass
class Child:
    """A proposed child env with what was learned about it."""

    parent: Pair
    env: EnvParams
    mc_score: float = float("nan")
    novelty: float = float("nan")
    passed_mc: bool = False
    transfer_score: float = float("nan")  # the best active agent's score (second MC check)
    archive_score: float = float("nan")  # the best archived agent's direct score (reference ANNECS)
    admitted_as: str | None = None


@dataclass
class ReproduceSummary:
    """What one reproduction phase did, for the one-line report."""

    iteration: int
    eligible: list[str] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)

    def line(self, active: int, archived: int) -> str:
        """One line for the user."""
        passed = sum(c.passed_mc for c in self.children)
        admitted = ", ".join(self.admitted) or "none"
        return (
            f"iter {self.iteration:>5} reproduce: {len(self.eligible)} eligible, {len(self.children)} children, "
            f"{passed} passed MC, admitted {admitted}; active {active}, archived {archived}"
        )


def eligible_parents(pairs: list[Pair], scores: np.ndarray, threshold: float) -> list[Pair]:
    """Pairs whose agent scores at least the reproduction threshold on their own env."""
    return [p for p, s in zip(pairs, scores) if s >= threshold]


def propose_children(ctx: RunContext, parents: list[Pair], iteration: int, enhanced: bool = False) -> list[Child]:
    """Up to max_children mutations of random eligible parents, each with its own course seed.

    POET (the reference's `pass_dedup`) skips a child whose params equal an active env's;
    Enhanced POET names every child afresh and skips none. A child whose id (params and
    course seed) is already taken is always skipped.
    """
    rng = ctx.seeds.rng("reproduction.children", iteration)
    active_params = {p.env.with_course_seed(None) for p in ctx.state.population.active}
    taken = ctx.state.population.env_ids()
    children: list[Child] = []
    for _ in range(ctx.cfg.reproduction.max_children):
        parent = parents[int(rng.integers(len(parents)))]
        env = ctx.family.mutate(parent.env, rng)
        env = env.with_course_seed(course_seed_for(ctx, rng))
        if not enhanced and env.with_course_seed(None) in active_params:
            continue
        if env.id in taken:
            continue
        taken.add(env.id)
        children.append(Child(parent=parent, env=env))
    return children


def passes_mc(score: float, lower: float, upper: float) -> bool:
    """POET's minimal criterion: neither too hard nor too easy for the tested agent."""
    return lower <= score <= upper


def minimal_criterion(ctx: RunContext, children: list[Child]) -> list[Child]:
    """Score each child with its parent's agent; returns those that pass the MC."""
    rp = ctx.cfg.reproduction
    scores = ctx.scorer.score(
        [(c.parent.theta, c.env) for c in children], tags=[f"MC of child of {c.parent.pair_id}" for c in children]
    )
    for c, s in zip(children, scores):
        c.mc_score = float(s)
        c.passed_mc = bool(passes_mc(s, rp.mc_lower, rp.mc_upper))
    return [c for c in children if c.passed_mc]


def hand_designed_novelty(ctx: RunContext, children: list[Child]) -> None:
    """POET: kNN novelty of feature vectors against every env ever admitted."""
    archive = np.stack([ctx.family.features(e) for e in ctx.state.population.admitted_envs])
    for c in children:
        c.novelty = knn_novelty(ctx.family.features(c.env), archive, ctx.cfg.reproduction.novelty_k)


def pata_ec_novelty(ctx: RunContext, children: list[Child]) -> None:
    """Enhanced POET: kNN novelty of PATA-EC vectors against every active and archived env.

    Every env's PATA-EC ranks the scores of all agents, archived and active, in creation
    order (the reference's archived-then-active order: the archive holds the oldest).
    """
    rp = ctx.cfg.reproduction
    agents = ctx.state.population.all_pairs
    envs = ctx.state.population.admitted_envs + [c.env for c in children]
    jobs = [(a.theta, env) for env in envs for a in agents]
    scores = ctx.scorer.score(jobs, tags=[f"PATA-EC of {a.pair_id}" for _ in envs for a in agents])
    scores = scores.reshape(len(envs), len(agents))
    chars = np.stack([pata_ec(row, rp.mc_lower, rp.mc_upper, rp.pata_ec_ties) for row in scores])
    n_admitted = len(envs) - len(children)
    for j, c in enumerate(children):
        c.novelty = knn_novelty(chars[n_admitted + j], chars[:n_admitted], rp.novelty_k)


def best_transfer(ctx: RunContext, child: Child, iteration: int) -> tuple[float, np.ndarray, str]:
    """The reference's `evaluate_transfer` over the active agents: (best score, its theta, its source).

    Each active agent is scored on the child directly and after one plain ES step from a
    fresh trainer state (`propose_with_adam=False`); the first best wins (direct before
    fine-tuned, in creation order).
    """
    sources = list(ctx.state.population.active)
    direct = ctx.scorer.score(
        [(s.theta, child.env) for s in sources], tags=[f"{s.pair_id} on child {child.env.id}" for s in sources]
    )
    tasks = [
        TrainTask(
            key=f"{s.pair_id} fine-tuned on child {child.env.id}",
            theta=s.theta,
            env=child.env,
            state=ctx.trainer.init_state(s.theta),
            seed=ctx.seeds.integer("reproduction.fine_tune", iteration, s.index, int(child.env.id[:8], 16)),
        )
        for s in sources
    ]
    tuned = propose(ctx.trainer, tasks, ctx.evaluator, plain=True)
    tuned_scores = ctx.scorer.score(
        [(theta, child.env) for theta in tuned],
        tags=[f"{s.pair_id} fine-tuned on child {child.env.id}" for s in sources],
    )
    best: tuple[float, np.ndarray, str] | None = None
    for s, d, theta, t in zip(sources, direct, tuned, tuned_scores):
        for score, th, how in ((float(d), s.theta, s.pair_id), (float(t), theta, f"{s.pair_id} fine-tuned")):
            if best is None or score > best[0]:
                best = (score, th, how)
    assert best is not None  # the population is never empty
    return best


def best_archived_score(ctx: RunContext, child: Child) -> float:
    """The best direct score of an archived agent on the child (-inf with an empty archive)."""
    archive = ctx.state.population.archive
    if not archive:
        return float("-inf")
    scores = ctx.scorer.score(
        [(a.theta, child.env) for a in archive], tags=[f"archived {a.pair_id} on child {child.env.id}" for a in archive]
    )
    return float(np.max(scores))


def admit(
    ctx: RunContext,
    child: Child,
    theta: np.ndarray,
    iteration: int,
    source: str,
    counts_for_annecs_reference: bool = False,
) -> Pair:
    """Create the pair for an admitted child and record it."""
    pop = ctx.state.population
    index = pop.new_index()
    pair = Pair(
        pair_id=f"p{index}",
        index=index,
        env=child.env,
        theta=theta.copy(),
        state=ctx.trainer.init_state(theta),
        parent_env_id=child.parent.env.id,
        created_iteration=iteration,
    )
    pop.add(pair)
    child.admitted_as = pair.pair_id
    record_env(ctx, pair)
    ctx.records.event(
        iteration,
        "admitted",
        pair.pair_id,
        pair.env.id,
        {
            "parent_pair_id": child.parent.pair_id,
            "agent_from": source,
            "mc_score": child.mc_score,
            "novelty": child.novelty,
            "transfer_score": child.transfer_score,
            "archive_score": child.archive_score,
            "annecs_reference": counts_for_annecs_reference,
        },
    )
    return pair


def consider(ctx: RunContext, child: Child, iteration: int, enhanced: bool = False) -> Pair | None:
    """Admit `child` if its agent passes the MC (`reproduction.child_agent`); None when rejected."""
    rp = ctx.cfg.reproduction
    if enhanced:
        child.archive_score = best_archived_score(ctx, child)
    if rp.child_agent == "parent":
        child.transfer_score = child.mc_score
        theta, source = child.parent.theta, child.parent.pair_id
    else:
        child.transfer_score, theta, source = best_transfer(ctx, child, iteration)
        if not passes_mc(child.transfer_score, rp.mc_lower, rp.mc_upper):
            return None
    counted = enhanced and passes_mc(child.archive_score, rp.mc_lower, rp.mc_upper)
    if counted:
        ctx.state.annecs_reference += 1
    return admit(ctx, child, theta, iteration, source, counted)


def reproduce(ctx: RunContext, iteration: int, enhanced: bool = False) -> ReproduceSummary:
    """One reproduction phase (POET's `adjust_envs_niches`); `enhanced`: Enhanced POET's rules."""
    rp, pop = ctx.cfg.reproduction, ctx.state.population
    summary = ReproduceSummary(iteration)
    active = list(pop.active)
    scores = ctx.scorer.score([(p.theta, p.env) for p in active], tags=[f"{p.pair_id} eligibility" for p in active])
    parents = eligible_parents(active, scores, rp.threshold)
    summary.eligible = [p.pair_id for p in parents]
    if parents:
        summary.children = propose_children(ctx, parents, iteration, enhanced)
        passing = minimal_criterion(ctx, summary.children)
        if passing:
            if enhanced:
                pata_ec_novelty(ctx, passing)
            else:
                hand_designed_novelty(ctx, passing)
            # Most novel first; ties keep proposal order (stable sort), as the reference's sorted().
            for child in sorted(passing, key=lambda c: -c.novelty):
                if len(summary.admitted) >= rp.max_admitted:
                    break
                pair = consider(ctx, child, iteration, enhanced)
                if pair is not None:
                    summary.admitted.append(pair.pair_id)
    for child in summary.children:
        ctx.records.event(
            iteration,
            "child",
            child.parent.pair_id,
            child.env.id,
            {
                "mc_score": child.mc_score,
                "passed_mc": child.passed_mc,
                "novelty": child.novelty,
                "transfer_score": child.transfer_score,
                "archive_score": child.archive_score,
                "admitted_as": child.admitted_as,
                "params": child.env.values,
            },
        )
    for pair in pop.retire_over_capacity(rp.capacity, iteration):
        summary.retired.append(pair.pair_id)
        ctx.records.event(iteration, "retired", pair.pair_id, pair.env.id)
    ctx.records.event(iteration, "reproduce", detail=summary.line(len(pop.active), len(pop.archive)))
    return summary
