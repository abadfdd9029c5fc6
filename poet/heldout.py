"""Held-out evaluation: every `evaluation.test_every` iterations, the active agents on the
family's fixed test levels (`family.test_levels()`: for the terrain families flat, pits,
stumps, rough and combined), one wave, into the `heldout` table. The same levels for every
curriculum, so runs of different curricula compare on them.

With `evaluation.course: fixed` each level is pinned to course seed TEST_COURSE_SEED + its
position, the same in every run; scores go through the run's scorer (cached per agent and
level; the episode seeds are a function of the level only).
"""

from __future__ import annotations

from envs import EnvFamily, EnvParams
from poet.context import RunContext

TEST_COURSE_SEED = 1_000_000


def check(family: EnvFamily) -> str | None:
    """Why `family` cannot be evaluated on held-out levels (None: it can)."""
    if not callable(getattr(family, "test_levels", None)):
        return (
            f"env family {family.name!r} has no test_levels() to evaluate on; "
            "--set evaluation.test_every=0 runs without held-out levels"
        )
    return None


def test_levels(ctx: RunContext) -> list[tuple[str, EnvParams]]:
    """(name, params) of the run's held-out levels, course seeds set as the config says."""
    fixed = ctx.cfg.evaluation.course == "fixed"
    return [
        (name, params.with_course_seed(TEST_COURSE_SEED + i if fixed else None))
        for i, (name, params) in enumerate(ctx.family.test_levels().items())
    ]


def due(ctx: RunContext, iteration: int) -> bool:
    """Whether the held-out evaluation runs after `iteration`."""
    every = ctx.cfg.evaluation.test_every
    return every > 0 and (iteration + 1) % every == 0


def evaluate(ctx: RunContext, iteration: int) -> None:
    """Score every active agent on every held-out level (one wave) and record the scores."""
    agents, levels = list(ctx.state.population.active), test_levels(ctx)
    jobs = [(agent, name, level) for agent in agents for name, level in levels]
    scores = ctx.scorer.score(
        [(agent.theta, level) for agent, _, level in jobs],
        tags=[f"{agent.pair_id} held-out {name}" for agent, name, _ in jobs],
    )
    for (agent, name, level), score in zip(jobs, scores):
        ctx.records.write(
            "heldout",
            {
                "iteration": iteration,
                "pair_id": agent.pair_id,
                "level": name,
                "env_id": level.id,
                "score": float(score),
            },
        )
