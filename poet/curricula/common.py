"""Helpers every curriculum shares: the first pair, the family's first env, and one trainer
step of every active pair with its score (the reference's `ind_es_step`)."""

from __future__ import annotations

import inspect

import numpy as np

from envs import EnvFamily, EnvParams
from poet.context import RunContext
from poet.pair import Pair
from poet.policies import init_flat
from poet.trainers import TrainStep, TrainTask


def start_params(family: EnvFamily, values: dict) -> EnvParams:
    """The params `env.start` names: the family's values, or a whole EnvParams dict
    ({family, values, course_seed}, as the records' params_json) to start on a given course."""
    if "values" in values and "family" in values:
        return EnvParams.from_dict(dict(values))
    return EnvParams.create(family.name, dict(values))


def start_pair(ctx: RunContext, env: EnvParams | None = None) -> Pair:
    """The first pair, with a fresh agent: on `env`, else on `env.start`, else on the
    family's initial env."""
    if env is None:
        start = ctx.cfg.env.start
        env = (
            start_params(ctx.family, start)
            if start is not None
            else initial_params(ctx.family, ctx.seeds.rng("env.initial"))
        )
        seed = course_seed_for(ctx, ctx.seeds.rng("env.course", 0))
        # a start given with its course keeps it (unless every episode is to get a new course)
        env = env.with_course_seed(seed if env.course_seed is None or seed is None else env.course_seed)
    ctx.family.validate(env)
    theta = init_flat(ctx.spec, ctx.seeds.rng("policy.init"), ctx.cfg.policy.init)
    pop = ctx.state.population
    index = pop.new_index()
    pair = Pair(
        pair_id=f"p{index}",
        index=index,
        env=env,
        theta=theta,
        state=ctx.trainer.init_state(theta),
        parent_env_id=None,
        created_iteration=0,
    )
    pop.add(pair)
    record_env(ctx, pair)
    ctx.records.event(0, "admitted", pair.pair_id, env.id, {"initial": True})
    ctx.records.flush()
    return pair


def initial_params(family: EnvFamily, rng: np.random.Generator) -> EnvParams:
    """The family's first env; families whose start is random (`initial(rng)`) draw it from `rng`."""
    try:
        takes_rng = len(inspect.signature(family.initial).parameters) >= 1
    except (TypeError, ValueError):
        takes_rng = False
    return family.initial(rng) if takes_rng else family.initial()


def population_fields(ctx: RunContext, solved: str) -> dict[str, object]:
    """What the progress bar shows of a population: active pairs, the best of their last
    scores, and the envs solved besides the first, under the name `solved`."""
    pop = ctx.state.population
    best = max((p.scores[-1] for p in pop.active if p.scores), default=float("nan"))
    return {"active": len(pop.active), "best": f"{best:.0f}", solved: ctx.state.annecs()}


def train_pairs(ctx: RunContext, iteration: int) -> list[TrainStep]:
    """One trainer step for every active pair (one wave), and each pair's score.

    With `evaluation.self_score: after_step` (the reference's `ind_es_step`) the updated
    agents are scored in a second wave; with `before_step` the trainer scores the starting
    agents in its own wave.
    """
    pairs = list(ctx.state.population.active)
    steps = ctx.trainer.step([_task(ctx, p, iteration) for p in pairs], ctx.evaluator)
    if _scored_after(ctx):
        scores = ctx.scorer.score(
            [(s.theta, p.env) for p, s in zip(pairs, steps)], tags=[f"{p.pair_id} (score)" for p in pairs]
        )
    else:
        scores = [float("nan") if s.score is None else s.score for s in steps]
    for pair, step, score in zip(pairs, steps, map(float, scores)):
        _commit(ctx, iteration, pair, step, score)
        ctx.mark_solved(pair.pair_id, pair.env.id, score, iteration, "training")
    return steps


def train_on_levels(ctx: RunContext, iteration: int, levels: list[EnvParams]) -> tuple[TrainStep, list[float]]:
    """One trainer step of the one active pair on a batch of levels (robust PLR's and ACCEL's
    cycle), and the agent's return on each level, taken as `train_pairs` takes a score (after
    the step by default). The iterations row holds the mean over the levels, how many there
    were and their ids; each level counts as solved on its own return."""
    pair = ctx.state.population.active[0]
    pair.env = levels[0]
    step = ctx.trainer.step([_task(ctx, pair, iteration, levels)], ctx.evaluator)[0]
    if _scored_after(ctx):
        jobs = [(step.theta, env) for env in levels]
        returns = [float(r) for r in ctx.scorer.score(jobs, tags=[f"{pair.pair_id} (score)"] * len(levels))]
    else:
        returns = [float(m.get("return", float("nan"))) for m in step.levels]
    batch = {"levels": len(levels), "level_ids": " ".join(env.id for env in levels)}
    _commit(ctx, iteration, pair, step, float(np.mean(returns)), batch)
    for env, ret in zip(levels, returns):
        ctx.mark_solved(pair.pair_id, env.id, ret, iteration, "training")
    return step, returns


def _scored_after(ctx: RunContext) -> bool:
    """Whether a trained agent is scored after its step (else the trainer scores it before)."""
    return ctx.cfg.evaluation.self_score == "after_step"


def _task(ctx: RunContext, pair: Pair, iteration: int, levels: list[EnvParams] | None = None) -> TrainTask:
    """The pair's trainer step of this iteration (on a batch of `levels`, if given)."""
    return TrainTask(
        key=pair.pair_id,
        theta=pair.theta,
        env=pair.env,
        state=pair.state,
        seed=ctx.seeds.integer("train", iteration, pair.index),
        eval_episodes=0 if _scored_after(ctx) else ctx.cfg.evaluation.eval_episodes,
        levels=list(levels or []),
    )


def _commit(
    ctx: RunContext, iteration: int, pair: Pair, step: TrainStep, score: float, row: dict | None = None
) -> None:
    """A pair's step taken: its iterations row (with `row`'s extra columns), score, weights and state."""
    ctx.records.write(
        "iterations",
        {
            "iteration": iteration,
            "pair_id": pair.pair_id,
            "env_id": pair.env.id,
            "score": score,
            **(row or {}),
            **step.metrics,
        },
    )
    pair.scores.append(score)
    pair.theta, pair.state = step.theta, step.state


def course_seed_for(ctx: RunContext, rng: np.random.Generator) -> int | None:
    """A new env's course seed (`evaluation.course: fixed`), or None (a new course every episode)."""
    return int(rng.integers(0, 2**31 - 1)) if ctx.cfg.evaluation.course == "fixed" else None


def record_env(ctx: RunContext, pair: Pair) -> None:
    """The envs-table row of a pair's env."""
    record_level(ctx, pair.env, pair.pair_id, pair.parent_env_id, pair.created_iteration)


def record_level(ctx: RunContext, env: EnvParams, pair_id: str, parent_env_id: str | None, iteration: int) -> None:
    """One row of the envs table: an env (level), who trains on it, where it came from, when."""
    row = {
        "env_id": env.id,
        "family": env.family,
        "pair_id": pair_id,
        "parent_env_id": parent_env_id,
        "created_iteration": iteration,
        "course_seed": env.course_seed,
    }
    row.update(ctx.family.flat(env))
    if hasattr(ctx.family, "difficulty"):  # the POET paper's class, where the family defines one
        row["difficulty"] = int(ctx.family.difficulty(env))
    row["params_json"] = env.to_json()
    ctx.records.write("envs", row)
