"""A run's agents scored on any env or level sample, in this process or on the Ray pool.

    run = load_run("runs/demo")
    agent = run.agent(pair="p3")                       # or env=..., iteration=...
    run.score([agent], ["p5", family.sample(rng)])     # env ids, pair ids or EnvParams
    matrix = run.cross_eval()                          # every kept agent on every env

Agents come from the run's checkpoints (the only place weights are kept). A score is what
the run itself computes for the same agent and env: the mean return over the run's
`evaluation.eval_episodes` episodes with the run's episode cap, its episode seed a function
of the run's seed and the env only (`poet.scoring.Scorer`). Nothing here imports code named
by the run's config (`read_parts`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from envs import EnvFamily, EnvParams
from poet.config import ConfigError, load_config
from poet.evaluation.policy_store import weights_key
from poet.parts import read_parts
from poet.runtime import checkpoint
from poet.scoring import ScoreCache, Scorer
from poet.seeding import Seeds
from poet.trainers.base import ErrorPolicy

if TYPE_CHECKING:
    from poet.analysis.load import Run

Backend = Literal["inprocess", "ray"]
CACHE_DIR = "analysis"  # cross-evaluation results kept in the run directory
# A cross-evaluation bigger than this many env steps (at most) is refused unless asked for.
MAX_ENV_STEPS = 200_000_000
# The fractions of worst levels a robustness curve averages over (CVaR's alpha).
ALPHAS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class Agent:
    """One agent of a run: a pair's weights as a checkpoint kept them."""

    pair_id: str
    env_id: str  # the env of its pair
    iteration: int  # the checkpoint's: the agent after iterations 0 .. iteration - 1
    theta: np.ndarray = field(repr=False, compare=False)
    active: bool = True  # False: its pair was archived by then

    @property
    def agent_id(self) -> str:
        """Content id of the weights (the same agent in two checkpoints has one id)."""
        return weights_key(self.theta)


def checkpoint_iterations(run: Run) -> list[int]:
    """The iterations of the run's kept checkpoints, oldest first."""
    return [int(p.name.removeprefix(checkpoint.PREFIX)) for p in checkpoint.checkpoints(run.path)]


def kept_agents(run: Run, iteration: int | None = None) -> list[Agent]:
    """Every pair's agent (active and archived, by creation) in the newest checkpoint at or
    before `iteration` (None: the newest)."""
    kept = checkpoint_iterations(run)
    chosen = [i for i in kept if iteration is None or i <= iteration]
    if not chosen:
        have = ", ".join(map(str, kept)) or "none"
        raise ConfigError(
            f"iteration: no checkpoint of {str(run.path)!r} at or before {iteration} (kept checkpoints: {have}; "
            "weights are saved only in checkpoints, checkpoint.every and checkpoint.keep say which)"
        )
    path = checkpoint.checkpoints(run.path)[kept.index(chosen[-1])]
    try:
        state = checkpoint.load(path).state
    except checkpoint.CheckpointError as exc:
        raise ConfigError(str(exc)) from None
    active = {p.pair_id for p in state.population.active}
    pairs = sorted([*state.population.active, *state.population.archive], key=lambda p: p.index)
    return [Agent(p.pair_id, p.env.id, state.iteration, p.theta, p.pair_id in active) for p in pairs]


def agent(run: Run, pair: str | None = None, env: str | None = None, iteration: int | None = None) -> Agent:
    """The agent of pair `pair`, or of the pair whose env is `env`, in the newest checkpoint at
    or before `iteration`."""
    if (pair is None) == (env is None):
        raise ConfigError("agent: give pair=<pair id> or env=<env id>, one of them")
    found = kept_agents(run, iteration)
    for a in found:
        if a.pair_id == pair or a.env_id == env:
            return a
    what, value = ("pair", pair) if pair is not None else ("env", env)
    known = ", ".join(f"{a.pair_id} ({a.env_id})" for a in found[:20])
    raise ConfigError(f"agent: no {what} {value!r} in the checkpoint of iteration {found[0].iteration}; it has {known}")


def resolve_envs(run: Run, envs: Sequence[str | EnvParams]) -> list[EnvParams]:
    """Params of each env: an env id or a pair id of the run, or EnvParams (a level sample)."""
    table = run.envs
    out = []
    for env in envs:
        if isinstance(env, EnvParams):
            out.append(env)
            continue
        rows = table[(table["env_id"] == env) | (table["pair_id"] == env)]
        if not len(rows):
            raise ConfigError(f"envs: {env!r} is neither an env id nor a pair id of {str(run.path)!r}")
        out.append(EnvParams.from_json(rows["params_json"].iloc[0]))
    return out


@contextmanager
def scorer(run: Run, backend: Backend = "inprocess", workers: int | None = None) -> Iterator[Scorer]:
    """The run's own scoring (episodes, cap, seeds, error policy) on a fresh evaluator."""
    from poet.runtime.runner import make_evaluator

    if backend not in ("inprocess", "ray"):
        raise ConfigError(f"backend: 'inprocess' or 'ray', got {backend!r}")
    cfg = load_config(run.path / "config.yaml")
    cfg = replace(
        cfg,
        evaluation=replace(cfg.evaluation, backend=backend),
        ray=replace(cfg.ray, workers=workers if workers is not None else cfg.ray.workers),
    )
    parts = read_parts(cfg)
    evaluator = make_evaluator(parts, None)
    try:
        ev = cfg.evaluation
        errors = ErrorPolicy(ev.on_error, ev.failure_score)
        yield Scorer(evaluator, Seeds(cfg.seed), ev.eval_episodes, ev.max_steps, errors, ScoreCache())
    finally:
        close = getattr(evaluator, "close", None)
        if callable(close):
            close()


def score(
    run: Run,
    agents: Sequence[Agent],
    envs: Sequence[str | EnvParams],
    backend: Backend = "inprocess",
    workers: int | None = None,
) -> pd.DataFrame:
    """Every agent on every env, in one batched wave: a row per (agent, env) with columns
    pair_id, agent_iteration, agent_id, env_id, score."""
    params = resolve_envs(run, envs)
    jobs = [(a.theta, env) for a in agents for env in params]
    with scorer(run, backend, workers) as s:
        scores = s.score(jobs) if jobs else np.zeros(0)
    rows = [(a.pair_id, a.iteration, a.agent_id, env.id) for a in agents for env in params]
    out = pd.DataFrame(rows, columns=["pair_id", "agent_iteration", "agent_id", "env_id"])
    out["score"] = scores
    return out


def cost_line(run: Run, n_agents: int, params: Sequence[EnvParams]) -> tuple[int, str]:
    """The most env steps a cross-evaluation can take, and a line saying so with the time it
    would take at this run's own rate."""
    ev = run.config.get("evaluation", {})
    episodes, cap = int(ev.get("eval_episodes", 1)), int(ev.get("max_steps", 1))
    rows = sum(1 if env.course_seed is not None else episodes for env in params)
    steps = n_agents * rows * cap
    line = f"cross_eval: {n_agents} agents x {len(params)} envs, at most {steps:,} env steps"
    rate = run.throughput().loc["all", "steps_per_second"] if len(run.phases) else float("nan")
    if np.isfinite(rate) and rate > 0:
        line += f" (at most {steps / rate:,.1f} s at this run's {rate:,.0f} env steps/s)"
    return steps, line


def cross_eval(
    run: Run,
    agents: Sequence[Agent] | None = None,
    envs: Sequence[str | EnvParams] | None = None,
    backend: Backend = "inprocess",
    workers: int | None = None,
    max_env_steps: int = MAX_ENV_STEPS,
    cache: bool = True,
) -> pd.DataFrame:
    """Agents x envs scores (index: pair ids; columns: env ids), by default every agent of the
    newest checkpoint on every env the run made, in creation order.

    Says on stderr what it will cost before it starts, and refuses a call that may take more
    than `max_env_steps`. The result is kept in the run directory (`analysis/`, one file per
    question, written whole or not at all), so asking again costs nothing.
    """
    chosen = list(agents) if agents is not None else kept_agents(run)
    ids = list(envs) if envs is not None else list(run.envs["env_id"])
    params = resolve_envs(run, ids)
    names = [env.id for env in params]
    cfg = run.config
    key = hashlib.sha256(
        json.dumps(
            [
                [a.agent_id for a in chosen],
                names,
                cfg.get("seed"),
                cfg.get("evaluation", {}).get("eval_episodes"),
                cfg.get("evaluation", {}).get("max_steps"),
            ]
        ).encode()
    ).hexdigest()[:16]
    path = run.path / CACHE_DIR / f"cross_eval-{key}.json"
    if cache and path.is_file():
        scores = np.array(json.loads(path.read_text())["scores"], dtype=np.float64)
    else:
        steps, line = cost_line(run, len(chosen), params)
        if steps > max_env_steps:
            raise ConfigError(f"{line}: more than max_env_steps={max_env_steps:,}; raise it to run this")
        print(line, file=sys.stderr)
        long = score(run, chosen, params, backend, workers)
        scores = long["score"].to_numpy().reshape(len(chosen), len(params))
        if cache:
            _write_whole(path, {"agents": [a.agent_id for a in chosen], "envs": names, "scores": scores.tolist()})
    return pd.DataFrame(
        scores, index=pd.Index([a.pair_id for a in chosen], name="pair_id"), columns=pd.Index(names, name="env_id")
    )


def _write_whole(path: Path, data: dict) -> None:
    """Write a file whole or not at all; a run directory one cannot write keeps no copy."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        path.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        print(f"cross_eval: result not kept in {str(path.parent)!r} ({exc.strerror})", file=sys.stderr)


def class_levels(
    family: EnvFamily, klass: int, n: int = 100, seed: int = 0, max_draws: int = 1_000_000
) -> list[EnvParams]:
    """`n` levels of the paper's difficulty class `klass` (0 easy .. 3 extremely challenging):
    the family's `sample` drawn from `seed` until `n` fall in the class, each pinned to a course
    of its own. The same arguments give the same levels, whatever the run, so runs of several
    curricula are scored on one sample."""
    if not callable(getattr(family, "sample", None)) or not callable(getattr(family, "difficulty", None)):
        raise ConfigError(f"levels: env family {family.name!r} has no sample() and difficulty() to draw classes from")
    rng = np.random.default_rng([seed, klass])
    levels: list[EnvParams] = []
    for _ in range(max_draws):
        level = family.sample(rng)
        if family.difficulty(level) == klass:
            levels.append(level.with_course_seed(int(rng.integers(2**31))))
            if len(levels) == n:
                return levels
    raise ConfigError(f"levels: {len(levels)} of {n} levels of class {klass} in {max_draws:,} draws of {family.name!r}")


def cvar(scores: np.ndarray, alphas: Sequence[float] = ALPHAS) -> np.ndarray:
    """Mean of the worst ceil(alpha * n) scores, for each alpha (CVaR at level alpha)."""
    ordered = np.sort(np.asarray(scores, dtype=np.float64))
    return np.array([ordered[: max(1, int(np.ceil(a * len(ordered) - 1e-9)))].mean() for a in alphas])


def robustness(
    run: Run,
    levels: int | Sequence[EnvParams],
    alphas: Sequence[float] = ALPHAS,
    agents: Sequence[Agent] | None = None,
    n: int = 100,
    seed: int = 0,
    backend: Backend = "inprocess",
    workers: int | None = None,
) -> pd.DataFrame:
    """Robustness curves: each agent's mean score over its worst alpha share of `levels` (a
    paper class, drawn by `class_levels(n, seed)`, or level params), a row per (agent, alpha)
    with pair_id, alpha, cvar, levels (how many), class (<NA> for given levels)."""
    chosen = list(agents) if agents is not None else kept_agents(run)
    klass = levels if isinstance(levels, int) else None
    if klass is not None:
        family = read_parts(load_config(run.path / "config.yaml"), policy=False).family
        levels = class_levels(family, klass, n, seed)
    long = score(run, chosen, list(levels), backend, workers)
    rows = []
    for a in chosen:
        scores = long.loc[long["pair_id"] == a.pair_id, "score"].to_numpy()
        rows += [(a.pair_id, alpha, value) for alpha, value in zip(alphas, cvar(scores, alphas))]
    out = pd.DataFrame(rows, columns=["pair_id", "alpha", "cvar"])
    out["levels"] = len(levels)
    out["class"] = pd.Series([klass] * len(out), dtype="Int64")
    return out
