"""POET's reproduction step: eligibility, child proposal, minimal criterion, novelty, admission, capacity.

Each evaluation stage (eligibility, minimal criterion, PATA-EC) is one batch to the
evaluator through the cached Scorer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from envs import EnvParams
from poet.context import RunContext
from poet.novelty import knn_novelty, pata_ec
from poet.pair import Pair
from poet.records import json_text


@dataclass
class Child:
    """A proposed child env with what was learned about it."""

    parent: Pair
    env: EnvParams
    mc_score: float = float("nan")
    novelty: float = float("nan")
    passed_mc: bool = False
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
        return (f"iter {self.iteration:>5} reproduce: {len(self.eligible)} eligible, {len(self.children)} children, "
                f"{passed} passed MC, admitted {admitted}; active {active}, archived {archived}")


def eligible_parents(pairs: list[Pair], scores: np.ndarray, threshold: float) -> list[Pair]:
    """Pairs whose agent scores at least the reproduction threshold on their own env."""
    return [p for p, s in zip(pairs, scores) if s >= threshold]


def propose_children(ctx: RunContext, parents: list[Pair], iteration: int) -> list[Child]:
    """Up to max_children mutations of random eligible parents, skipping envs already seen."""
    rng = ctx.seeds.rng("reproduction.children", iteration)
    known = ctx.population.env_ids()
    children: list[Child] = []
    for _ in range(ctx.cfg.reproduction.max_children):
        parent = parents[int(rng.integers(len(parents)))]
        env = ctx.family.mutate(parent.env, rng)
        if env.id in known:
            continue
        known.add(env.id)
        children.append(Child(parent=parent, env=env))
    return children


def passes_mc(score: float, lower: float, upper: float) -> bool:
    """POET's minimal criterion: neither too hard nor too easy for the tested agent."""
    return lower <= score <= upper


def minimal_criterion(ctx: RunContext, children: list[Child]) -> list[Child]:
    """Score each child with its parent's agent; returns those that pass the MC."""
    rp = ctx.cfg.reproduction
    scores = ctx.scorer.score([(c.parent.theta, c.env) for c in children],
                              tags=[f"MC of child of {c.parent.pair_id}" for c in children])
    for c, s in zip(children, scores):
        c.mc_score = float(s)
        c.passed_mc = bool(passes_mc(s, rp.mc_lower, rp.mc_upper))
    return [c for c in children if c.passed_mc]


def hand_designed_novelty(ctx: RunContext, children: list[Child]) -> None:
    """POET: kNN novelty of feature vectors against every env ever admitted."""
    archive = np.stack([ctx.family.features(e) for e in ctx.population.admitted_envs])
    for c in children:
        c.novelty = knn_novelty(ctx.family.features(c.env), archive, ctx.cfg.reproduction.novelty_k)


def pata_ec_novelty(ctx: RunContext, children: list[Child]) -> np.ndarray:
    """Enhanced POET: kNN novelty of PATA-EC vectors; returns the active agents' scores on each child."""
    rp = ctx.cfg.reproduction
    agents = ctx.population.all_pairs  # active and archived agents
    envs = ctx.population.admitted_envs + [c.env for c in children]
    jobs = [(a.theta, env) for env in envs for a in agents]
    scores = ctx.scorer.score(jobs, tags=[f"PATA-EC of {a.pair_id}" for _ in envs for a in agents])
    scores = scores.reshape(len(envs), len(agents))
    chars = np.stack([pata_ec(row, rp.mc_lower, rp.mc_upper) for row in scores])
    n_admitted = len(envs) - len(children)
    for j, c in enumerate(children):
        c.novelty = knn_novelty(chars[n_admitted + j], chars[:n_admitted], rp.novelty_k)
    active_cols = [i for i, a in enumerate(agents) if a.retired_iteration is None]
    return scores[n_admitted:][:, active_cols]


def admit(ctx: RunContext, child: Child, theta: np.ndarray, iteration: int, source: str) -> Pair:
    """Create the pair for an admitted child and record it."""
    pop = ctx.population
    index = pop.new_index()
    pair = Pair(pair_id=f"p{index}", index=index, env=child.env, theta=theta.copy(),
                state=ctx.trainer.init_state(theta), parent_env_id=child.parent.env.id, created_iteration=iteration)
    pop.add(pair)
    child.admitted_as = pair.pair_id
    record_env(ctx, pair)
    ctx.records.write("events", {"iteration": iteration, "kind": "admitted", "pair_id": pair.pair_id,
                                 "env_id": pair.env.id,
                                 "detail": json_text({"parent_pair_id": child.parent.pair_id, "agent_from": source,
                                                       "mc_score": child.mc_score, "novelty": child.novelty})})
    return pair


def record_env(ctx: RunContext, pair: Pair) -> None:
    """One row of the envs table."""
    row = {"env_id": pair.env.id, "family": pair.env.family, "pair_id": pair.pair_id,
           "parent_env_id": pair.parent_env_id, "created_iteration": pair.created_iteration}
    row.update(ctx.family.flat(pair.env))
    row["params_json"] = pair.env.to_json()
    ctx.records.write("envs", row)


def reproduce(ctx: RunContext, iteration: int) -> ReproduceSummary:
    """One reproduction phase (POET's `adjust_envs_niches`)."""
    rp, pop = ctx.cfg.reproduction, ctx.population
    summary = ReproduceSummary(iteration)
    active = list(pop.active)
    scores = ctx.scorer.score([(p.theta, p.env) for p in active], tags=[f"{p.pair_id} eligibility" for p in active])
    parents = eligible_parents(active, scores, rp.threshold)
    summary.eligible = [p.pair_id for p in parents]
    if parents:
        summary.children = propose_children(ctx, parents, iteration)
        passing = minimal_criterion(ctx, summary.children)
        if passing:
            if ctx.cfg.mode == "enhanced":
                child_scores = pata_ec_novelty(ctx, passing)
            else:
                hand_designed_novelty(ctx, passing)
            # Most novel first; ties keep proposal order (stable sort) for determinism.
            order = sorted(range(len(passing)), key=lambda j: -passing[j].novelty)
            for j in order[:rp.max_admitted]:
                child = passing[j]
                if ctx.cfg.mode == "enhanced":
                    best = int(np.argmax(child_scores[j]))  # the best active agent on the child
                    theta, source = active[best].theta, active[best].pair_id
                else:
                    theta, source = child.parent.theta, child.parent.pair_id
                summary.admitted.append(admit(ctx, child, theta, iteration, source).pair_id)
    for child in summary.children:
        ctx.records.write("events", {"iteration": iteration, "kind": "child", "pair_id": child.parent.pair_id,
                                     "env_id": child.env.id,
                                     "detail": json_text({"mc_score": child.mc_score, "passed_mc": child.passed_mc,
                                                           "novelty": child.novelty,
                                                           "admitted_as": child.admitted_as,
                                                           "params": child.env.values})})
    for pair in pop.retire_over_capacity(rp.capacity, iteration):
        summary.retired.append(pair.pair_id)
        ctx.records.write("events", {"iteration": iteration, "kind": "retired", "pair_id": pair.pair_id,
                                     "env_id": pair.env.id, "detail": ""})
    ctx.records.write("events", {"iteration": iteration, "kind": "reproduce", "pair_id": None, "env_id": None,
                                 "detail": summary.line(len(pop.active), len(pop.archive))})
    return summary
