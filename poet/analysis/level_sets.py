"""A run's agents on one of its family's named level sets (`poet score RUN --levels NAME`,
`run.score_levels(NAME)`), as dcd's `eval.py` scores a student: every level of the set over
its episodes, each episode on a course of its own (the family's `level_sets`), the mean
return and the solved rate (return over 230) with bootstrap 95% intervals over the episodes.

Which agents: by default every active agent of the run's newest checkpoint (its final
agents), and per level the one with the best mean return there (`pick="best"`), as POET's
papers score a population by its best agent; dcd's curricula train one agent, so for them
this is that agent. Picking the best of several on the same episodes it is scored on favours
a population: `pick="all"` gives every agent's row instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from envs import EnvParams
from poet.config import ConfigError, load_config
from poet.parts import read_parts

SOLVED_RETURN = 230.0  # dcd's eval.py: an episode whose return is over 230 is solved
RESAMPLES = 10_000  # bootstrap resamples of a level's episodes (numpy default_rng(0))
COLUMNS = [
    "level",
    "pair_id",
    "agents",
    "episodes",
    "mean_return",
    "mean_return_lo",
    "mean_return_hi",
    "solved_rate",
    "solved_rate_lo",
    "solved_rate_hi",
]


def family_of(run: Any):
    """The run's env family, as its config builds it."""
    return read_parts(load_config(run.path / "config.yaml"), policy=False).family


def level_set(family: Any, name: str) -> dict[str, list[EnvParams]]:
    """The family's level set `name`: level name -> the params of each episode."""
    hook = getattr(family, "level_sets", None)
    if not callable(hook):
        raise ConfigError(f"--levels: env family {family.name!r} has no named level sets (`level_sets`)")
    sets = hook()
    if name not in sets:
        raise ConfigError(f"--levels: no level set {name!r} in family {family.name!r}; it has {', '.join(sets)}")
    return sets[name]


def published(family: Any, name: str) -> dict[str, dict[str, dict[str, float]]]:
    """The numbers the set's authors published for it, by curriculum and level (the family's
    `published_results`), or none."""
    hook = getattr(family, "published_results", None)
    return hook(name) if callable(hook) else {}


def interval(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of `values` (one per episode)."""
    if len(values) < 2:
        return (float(values.mean()), float(values.mean())) if len(values) else (float("nan"),) * 2
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(RESAMPLES, len(values)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def summarise(level: str, pair_id: str, agents: int, returns: np.ndarray) -> dict[str, Any]:
    """One row of the table: a level's episodes' returns of one agent."""
    solved = (returns > SOLVED_RETURN).astype(np.float64)
    (mean_lo, mean_hi), (solved_lo, solved_hi) = interval(returns), interval(solved)
    return dict(
        zip(
            COLUMNS,
            [level, pair_id, agents, len(returns), float(returns.mean()), mean_lo, mean_hi]
            + [float(solved.mean()), solved_lo, solved_hi],
        )
    )


def score_levels(
    run: Any,
    name: str,
    agents: Sequence[Any] | None = None,
    episodes: int | None = None,
    pick: Literal["best", "all"] = "best",
    backend: str = "inprocess",
    workers: int | None = None,
) -> pd.DataFrame:
    """The run's agents on the family's level set `name` (the module docstring): a row per
    level (`pick="best"`) or per level and agent (`"all"`), with the columns `COLUMNS`.
    `episodes` takes the first so many of each level's (default: all, dcd's 100)."""
    from poet.analysis import agents as scoring

    if pick not in ("best", "all"):
        raise ConfigError(f"pick: 'best' or 'all', got {pick!r}")
    levels = level_set(family_of(run), name)
    if episodes is not None and episodes < 1:
        raise ConfigError(f"--episodes: must be >= 1, got {episodes}")
    chosen = list(agents) if agents is not None else [a for a in scoring.kept_agents(run) if a.active]
    per_level = {level: eps[:episodes] if episodes else eps for level, eps in levels.items()}
    envs = [env for eps in per_level.values() for env in eps]
    long = scoring.score(run, chosen, envs, backend, workers)
    returns = long["score"].to_numpy(dtype=np.float64).reshape(len(chosen), len(envs))
    rows, start = [], 0
    for level, eps in per_level.items():
        mine = returns[:, start : start + len(eps)]
        start += len(eps)
        picked = [int(np.argmax(mine.mean(axis=1)))] if pick == "best" else range(len(chosen))
        rows += [summarise(level, chosen[i].pair_id, len(chosen), mine[i]) for i in picked]
    return pd.DataFrame(rows, columns=COLUMNS)


def table_markdown(scores: pd.DataFrame, beside: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """The scores as a markdown table, each published curriculum's solved rate and return
    beside ours ("n/a" where it published none for a level)."""
    head = ["level", "agent", "mean return [95% CI]", "solved [95% CI]"]
    head += [f"{c}: solved / return (published)" for c in beside]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in scores.itertuples():
        cells = [
            r.level,
            f"{r.pair_id} (best of {r.agents})" if r.agents > 1 else r.pair_id,
            f"{r.mean_return:.1f} [{r.mean_return_lo:.1f}, {r.mean_return_hi:.1f}]",
            f"{r.solved_rate:.2f} [{r.solved_rate_lo:.2f}, {r.solved_rate_hi:.2f}]",
        ]
        for numbers in beside.values():
            got = numbers.get(r.level)
            cells.append("n/a" if got is None else f"{got['solved_rate']:.3f} / {got['test_returns']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figure(scores: pd.DataFrame, beside: Mapping[str, Mapping[str, Mapping[str, float]]], title: str):
    """Solved rate per level with its interval, and each published curriculum's as a marker."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(6, 1.2 * len(scores)), 3.8), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(scores))
    rate = scores["solved_rate"].to_numpy()
    err = np.vstack([rate - scores["solved_rate_lo"].to_numpy(), scores["solved_rate_hi"].to_numpy() - rate])
    ax.bar(x, rate, yerr=err, color="C0", alpha=0.8, capsize=3, label="this run (95% CI)")
    for k, (curriculum, numbers) in enumerate(beside.items()):
        ys = [numbers.get(level, {}).get("solved_rate", np.nan) for level in scores["level"]]
        ax.scatter(x, ys, marker="_^v"[k % 3], s=120, color=f"C{k + 1}", zorder=3, label=f"{curriculum} (published)")
    ax.set_xticks(x, scores["level"], rotation=30, ha="right")
    ax.set(ylim=(0, 1.05), ylabel=f"solved rate (return > {SOLVED_RETURN:g})", title=title)
    ax.legend(fontsize="small")
    return fig


def write_scores(
    run: Any, name: str, episodes: int | None = None, pick: Literal["best", "all"] = "best", out: str | None = None
) -> tuple[str, list[Path]]:
    """`score_levels`, written as `score-NAME.json` (every row, the published numbers beside,
    how it was scored) and `score-NAME.png` in `out` (default: the run's `analysis/`); the
    markdown table and the two paths."""
    family = family_of(run)
    scores = score_levels(run, name, episodes=episodes, pick=pick)
    beside = published(family, name)
    folder = Path(out) if out is not None else run.path / "analysis"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "run_dir": str(run.path),
        "levels": name,
        "family": family.name,
        "pick": pick,
        "solved_return": SOLVED_RETURN,
        "max_steps": int(run.config.get("evaluation", {}).get("max_steps", 0)),
        "rows": scores.to_dict(orient="records"),
        "published": beside,
    }
    paths = [folder / f"score-{name}.json", folder / f"score-{name}.png"]
    paths[0].write_text(json.dumps(data, indent=1) + "\n")
    figure(scores, beside, f"{run.path.name} on {name}").savefig(paths[1], dpi=100)
    return table_markdown(scores, beside), paths
