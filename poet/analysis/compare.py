"""Several runs side by side: `poet compare RUN_DIR RUN_DIR... [--out DIR]`.

Every figure is a function of a list of loaded runs (`poet.analysis.load_run`, the only way
runs are read here) returning a matplotlib `Figure`; `FIGURES` lists them by name, and
`write_comparison` writes them as PNGs with an `index.html`, as `poet report` does for one
run. Each run keeps one colour in every figure and is labelled by its directory's name and
its curriculum.

Runs of different curricula compare on the family's held-out levels (`evaluation.test_every`),
against the env steps each has spent training (the `phases` table, held-out evaluation not
counted). A run without held-out records is still drawn where it can be (its training
score) and the figures say so; runs whose held-out levels differ (other families) compare
on the levels whose names they share.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from poet.analysis import Run, load_run
from poet.analysis.report import _note, _threshold, curriculum_of, figure_png, html_head
from poet.config import ConfigError

MIN_RUNS = 2  # one run is what `poet report` is for
HELDOUT_PHASE = "heldout"  # measurement, not training: left out of a run's env-step budget
STEPS_LABEL = "env steps spent training (held-out evaluation not counted)"
NO_HELDOUT = "no held-out records"


# ---------------------------------------------------------------- reading


def load_runs(run_dirs: Sequence[str | Path]) -> list[Run]:
    """The runs to compare, loaded; a ConfigError (one line) for fewer than MIN_RUNS, a directory
    given twice or one that is not a run."""
    if len(run_dirs) < MIN_RUNS:
        raise ConfigError(
            f"poet compare needs at least {MIN_RUNS} run directories, got {len(run_dirs)} "
            f"(for one run: poet report DIR)"
        )
    seen: dict[Path, str] = {}
    for run_dir in run_dirs:
        key = Path(run_dir).resolve()
        if key in seen:
            raise ConfigError(f"run directory {str(run_dir)!r} is given twice (also as {seen[key]!r})")
        seen[key] = str(run_dir)
    return [load_run(run_dir) for run_dir in run_dirs]


def run_labels(runs: Sequence[Run]) -> list[str]:
    """'<directory name> (<curriculum>)' per run; the parent folder joins the name where two names clash."""
    names = [run.path.resolve().name for run in runs]
    if len(set(names)) < len(names):
        names = [f"{run.path.resolve().parent.name}/{run.path.resolve().name}" for run in runs]
    return [f"{name} ({curriculum_of(run.config)})" for name, run in zip(names, runs)]


def run_colors(runs: Sequence[Run]) -> list[str]:
    """One colour per run, the same in every figure."""
    palette = [f"C{i}" for i in range(10)]
    return [palette[i % len(palette)] for i in range(len(runs))]


def training_steps(run: Run) -> pd.Series:
    """Env steps spent training by the end of each iteration (cumulative over the `phases` table,
    the held-out phase left out); empty when the run has no phases recorded."""
    ph = run.phases
    if not len(ph):
        return pd.Series(dtype=float, name="env_steps")
    ph = ph[ph["phase"] != HELDOUT_PHASE]
    per_iteration = ph.groupby("iteration")["env_steps"].sum().astype(float).sort_index()
    if not len(per_iteration):
        return pd.Series(dtype=float, name="env_steps")
    # an iteration without a phase row (a curriculum that skipped every phase) spent nothing
    index = pd.RangeIndex(int(per_iteration.index.min()), int(per_iteration.index.max()) + 1, name="iteration")
    return per_iteration.reindex(index, fill_value=0.0).cumsum().rename("env_steps")


def _steps_at(run: Run, iterations: Sequence[int]) -> np.ndarray:
    """Cumulative training env steps at the end of each of `iterations` (NaN where unknown)."""
    steps = training_steps(run)
    return np.array([steps.get(int(i), np.nan) for i in iterations], dtype=float)


def best_heldout(run: Run) -> pd.DataFrame:
    """Per held-out evaluation and level: the best and the mean active agent's score, how many
    agents were scored, and the training env steps by then (columns iteration, level, best,
    mean, agents, env_steps)."""
    ho = run.heldout
    if not len(ho):
        return pd.DataFrame(columns=["iteration", "level", "best", "mean", "agents", "env_steps"])
    ho = ho.assign(score=ho["score"].astype(float))
    out = (
        ho.groupby(["iteration", "level"], sort=False)["score"]
        .agg(["max", "mean", "size"])
        .rename(columns={"max": "best", "size": "agents"})
        .reset_index()
    )
    out["env_steps"] = _steps_at(run, out["iteration"])
    return out


def heldout_levels(run: Run) -> list[str]:
    """The run's held-out level names in the order it evaluated them."""
    return [str(level) for level in dict.fromkeys(run.heldout["level"])] if len(run.heldout) else []


def _levels(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """Every held-out level name of any run (first-seen order) and those of every run that has held-out records."""
    per_run = [heldout_levels(run) for run in runs]
    every = list(dict.fromkeys(level for levels in per_run for level in levels))
    with_records = [set(levels) for levels in per_run if levels]
    common = [level for level in every if with_records and all(level in s for s in with_records)]
    return every, common


def notes(runs: Sequence[Run]) -> list[str]:
    """What a reader must know before comparing these runs: runs without held-out records or
    phases, other families, levels not in every run, a level that is another env in another run."""
    labels = run_labels(runs)
    out = []
    missing = [label for label, run in zip(labels, runs) if not len(run.heldout)]
    if missing:
        out.append(
            f"{NO_HELDOUT} in {', '.join(missing)} (evaluation.test_every is 0 or was never due): "
            "drawn in the training-score figure only"
        )
    no_phases = [label for label, run in zip(labels, runs) if not len(training_steps(run))]
    if no_phases:
        out.append(f"no phases recorded in {', '.join(no_phases)}: not placed on the env-step axis")
    families = {label: str((run.config.get("env") or {}).get("family", "?")) for label, run in zip(labels, runs)}
    if len(set(families.values())) > 1:
        out.append("different env families (" + ", ".join(f"{k}: {v}" for k, v in families.items()) + ")")
    every, common = _levels(runs)
    if set(every) != set(common):
        out.append(
            f"held-out levels not in every run: {', '.join(lv for lv in every if lv not in common)}; "
            f"runs compare on the levels they share ({', '.join(common) or 'none'})"
        )
    for level in common:
        ids = {
            str(i)
            for run in runs
            if len(run.heldout)
            for i in run.heldout.loc[run.heldout["level"] == level, "env_id"].dropna().unique()
        }
        if len(ids) > 1:
            out.append(
                f"held-out level {level!r} is not the same env in every run "
                "(other env.options or evaluation.course): its scores compare loosely"
            )
    thresholds = {_threshold(run) for run in runs}
    if len(thresholds) > 1:
        out.append("different solved thresholds: " + ", ".join(f"{t:g}" for t in sorted(thresholds)))
    return out


# ---------------------------------------------------------------- figures


def _threshold_lines(ax: Axes, runs: Sequence[Run]) -> None:
    """A dashed line at each distinct solved threshold of the runs."""
    for value in sorted({_threshold(run) for run in runs}):
        ax.axhline(value, color="k", ls="--", lw=1, label=f"solved ({value:g})")


def steps_text(steps: float) -> str:
    """An env-step count in three digits: 950, 24.9k, 1.37M."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(steps) >= scale:
            return f"{steps / scale:.3g}{unit}"
    return f"{steps:.0f}"


STEPS_FORMAT = FuncFormatter(lambda value, _: steps_text(value))
# minor ticks of a log axis: 2 and 5 times a power of ten labelled, the rest left bare
MINOR_STEPS_FORMAT = FuncFormatter(
    lambda value, _: (
        steps_text(value) if value > 0 and round(value / 10 ** math.floor(math.log10(value))) in (2, 5) else ""
    )
)
LOG_RATIO = 4.0  # runs whose budgets differ more than this many times share a log env-step axis


def _log_steps(runs: Sequence[Run]) -> bool:
    """Whether the env-step axis of these runs is logarithmic: their budgets differ over LOG_RATIO
    times (one run of a tenth of another's steps would be squeezed into a corner)."""
    budgets = [float(steps.iloc[-1]) for steps in map(training_steps, runs) if len(steps) and steps.iloc[-1] > 0]
    return len(budgets) > 1 and max(budgets) > LOG_RATIO * min(budgets)


def _steps_axis(ax: Axes, log: bool, label: str | None = STEPS_LABEL) -> None:
    """Env steps on the x axis, in k and M; log scale where the runs' budgets are far apart."""
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(MINOR_STEPS_FORMAT)
    ax.xaxis.set_major_formatter(STEPS_FORMAT)
    if label is not None:
        ax.set_xlabel(label + (", log scale" if log else ""))


def heldout_levels_figure(runs: Sequence[Run]) -> Figure:
    """Each run's score on every held-out level at its last held-out evaluation: the best agent (bar, value on top) and the mean of its agents (black line), with the solved threshold."""
    fig = Figure(figsize=(11, 5), layout="constrained")
    ax = fig.add_subplot()
    every, _ = _levels(runs)
    labels, colors = run_labels(runs), run_colors(runs)
    ax.set(
        ylabel="score on the level",
        title="Held-out levels at each run's last held-out evaluation: best agent (bar), mean of its agents (black line)",
    )
    if not every:
        _note(ax, f"{NO_HELDOUT} in any run (set evaluation.test_every)")
        return fig
    tables = [best_heldout(run) for run in runs]
    drawn = sum(1 for table in tables if len(table))  # runs without records take no slot
    width, k = 0.8 / drawn, 0
    handles = []
    for table, label, color in zip(tables, labels, colors):
        if not len(table):
            handles.append(
                Line2D([], [], ls="", marker="s", mfc="w", mec=color, label=f"{label}: {NO_HELDOUT}, not drawn")
            )
            continue
        last = table[table["iteration"] == table["iteration"].max()].set_index("level")
        x = np.array([every.index(lv) for lv in last.index], dtype=float) + (k - (drawn - 1) / 2) * width
        k += 1
        steps = last["env_steps"].iloc[0]
        when = f"iteration {int(last['iteration'].iloc[0])}" + (
            f", {steps_text(steps)} training env steps" if np.isfinite(steps) else ""
        )
        bars = ax.bar(x, last["best"].to_numpy(dtype=float), width * 0.92, color=color, label=f"{label}: {when}")
        handles.append(bars)
        if drawn * len(every) <= 40:  # values on top while they stay readable
            ax.bar_label(bars, fmt="%.0f", fontsize="x-small", padding=3)
        several = last["agents"].to_numpy() > 1
        if several.any():  # the mean says how typical the best agent is (one agent: the same)
            ax.hlines(
                last["mean"].to_numpy(dtype=float)[several],
                x[several] - width * 0.46,
                x[several] + width * 0.46,
                color="k",
                lw=2,
                zorder=3,
            )
    _threshold_lines(ax, runs)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(every)), every)
    ax.set_xlim(-0.6, len(every) - 0.4)
    ax.margins(y=0.12)
    extra = [Line2D([], [], color="k", lw=2, label="mean of the run's active agents (runs with several)")]
    extra += [h for h in ax.get_legend_handles_labels()[0] if isinstance(h, Line2D) and h.get_linestyle() == "--"]
    ax.legend(
        handles=handles + extra,
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.08),
        ncol=2,
        frameon=False,
    )
    return fig


def heldout_curves_figure(runs: Sequence[Run]) -> Figure:
    """The best agent's score on each held-out level, and its mean over the levels every run has, against the env steps each run spent training."""
    every, common = _levels(runs)
    panels = every + (["mean"] if common else [])
    ncols = min(3, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig = Figure(figsize=(4.2 * ncols, 3.0 * nrows + 1.0), layout="constrained")
    fig.suptitle("Held-out levels over training: best agent's score")
    log = _log_steps(runs)
    if not panels:
        ax = fig.add_subplot()
        _note(ax, f"{NO_HELDOUT} in any run (set evaluation.test_every)")
        _steps_axis(ax, log)
        return fig
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True).ravel()
    labels, colors = run_labels(runs), run_colors(runs)
    tables = [best_heldout(run) for run in runs]
    for ax, panel in zip(axes, panels):
        for table, color in zip(tables, colors):
            if not len(table):
                continue
            if panel == "mean":
                part = (
                    table[table["level"].isin(common)]
                    .groupby("iteration")
                    .agg(best=("best", "mean"), env_steps=("env_steps", "first"))
                    .reset_index()
                )
            else:
                part = table[table["level"] == panel]
            ax.plot(
                part["env_steps"].to_numpy(dtype=float),
                part["best"].to_numpy(dtype=float),
                color=color,
                marker="o",
                ms=3.5,
                lw=1.4,
            )
        _threshold_lines(ax, runs)
        ax.set_title(f"mean over {len(common)} levels" if panel == "mean" else panel)
        _steps_axis(ax, log, label=None)
        ax.set_ylabel("score")
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    for ax in axes[max(0, len(panels) - ncols) : len(panels)]:
        ax.set_xlabel(STEPS_LABEL if ncols == 1 else "training env steps" + (", log scale" if log else ""))
        ax.xaxis.set_tick_params(which="both", labelbottom=True)
    handles = [
        Line2D(
            [],
            [],
            color=color,
            marker="o",
            ms=3.5,
            lw=1.4,
            label=label if len(table) else f"{label}: {NO_HELDOUT}, not drawn",
            alpha=1.0 if len(table) else 0.4,
        )
        for label, color, table in zip(labels, colors, tables)
    ]
    handles += [
        Line2D([], [], color="k", ls="--", lw=1, label=f"solved ({t:g})")
        for t in sorted({_threshold(run) for run in runs})
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize="small", frameon=False)
    return fig


def training_scores_figure(runs: Sequence[Run]) -> Figure:
    """Each run's training score (its best agent on the level it trained on, per iteration, moving average) against the env steps it spent training."""
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    ax = fig.add_subplot()
    labels, colors = run_labels(runs), run_colors(runs)
    windows = []
    handles = []
    for run, label, color in zip(runs, labels, colors):
        it = run.iterations
        best = it.groupby("iteration")["score"].max().astype(float).sort_index() if len(it) else pd.Series(dtype=float)
        x = _steps_at(run, best.index)
        if not len(best) or not np.isfinite(x).any():
            why = "no iterations recorded" if not len(best) else "no phases recorded"
            handles.append(Line2D([], [], color=color, alpha=0.4, label=f"{label}: {why}, not drawn"))
            continue
        window = max(1, len(best) // 40)  # about 40 distinct steps per run, whatever its length
        windows.append(window)
        smooth = best.rolling(window, min_periods=1).mean().to_numpy()
        suffix = "" if len(run.heldout) else f" ({NO_HELDOUT})"
        handles.extend(ax.plot(x, smooth, color=color, lw=1.5, label=label + suffix))
    _threshold_lines(ax, runs)
    handles += [h for h in ax.get_lines() if h.get_linestyle() == "--"]
    window_text = (
        ""
        if not windows or max(windows) == 1
        else f"moving average over {min(windows)} iterations"
        if min(windows) == max(windows)
        else f"moving average over {min(windows)} to {max(windows)} iterations"
    )
    ax.set(
        ylabel="best agent's score on its training level",
        title="Training score over env steps"
        + (f" ({window_text})" if window_text else "")
        + "\neach curriculum trains on its own levels: compare them on the held-out levels",
    )
    _steps_axis(ax, _log_steps(runs))
    if not windows:
        _note(ax, "no run has iterations and phases recorded")
    ax.legend(handles=handles, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    return fig


def _setup(config: dict) -> str:
    """A run's config without its seed and the settings that never change its numbers."""
    from poet.config import where_only_settings

    data = json.loads(json.dumps(config, default=str))
    data.pop("seed", None)
    for setting in where_only_settings():
        *sections, name = setting.removesuffix(".*").split(".")
        table = data
        for section in sections:
            table = table.get(section) or {}
        table.pop(name, None)
    return json.dumps(data, sort_keys=True)


def curriculum_groups(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The runs of one set-up (the same config but for the seed) as one group, named by its
    curriculum ("#2" and on for a curriculum's other set-ups), in first-seen order."""
    setups: dict[str, list[Run]] = {}
    for run in runs:
        setups.setdefault(_setup(run.config), []).append(run)
    groups: dict[str, list[Run]] = {}
    for members in setups.values():
        name = curriculum_of(members[0].config)
        same = sum(1 for g in groups if g == name or g.startswith(f"{name} #"))
        groups[name if not same else f"{name} #{same + 1}"] = members
    return groups


def seeds_figure(runs: Sequence[Run]) -> Figure:
    """Per curriculum, over its runs (seeds): the best agent's score on each held-out level at the last evaluation, mean (bar), every run (dots) and the spread (min to max)."""
    groups = curriculum_groups(runs)
    every, _ = _levels(runs)
    fig = Figure(figsize=(11, 5), layout="constrained")
    ax = fig.add_subplot()
    ax.set(
        ylabel="score on the level", title="Held-out levels by curriculum: mean over its runs, every run, min to max"
    )
    if not every:
        _note(ax, f"{NO_HELDOUT} in any run (set evaluation.test_every)")
        return fig
    width = 0.8 / len(groups)
    label_of = dict(zip(map(id, runs), run_labels(runs)))
    for k, (name, members) in enumerate(groups.items()):
        lasts = []
        for run in members:
            table = best_heldout(run)
            if len(table):
                lasts.append(table[table["iteration"] == table["iteration"].max()].set_index("level")["best"])
        which = ", ".join(label_of[id(run)] for run in members)
        if not lasts:
            ax.bar([], [], color=f"C{k}", alpha=0.6, label=f"{name}: {NO_HELDOUT}, not drawn ({which})")
            continue
        frame = pd.DataFrame(lasts).reindex(columns=every).astype(float)
        x = np.arange(len(every)) + (k - (len(groups) - 1) / 2) * width
        mean, low, high = frame.mean().to_numpy(), frame.min().to_numpy(), frame.max().to_numpy()
        ax.bar(x, mean, width * 0.9, color=f"C{k}", alpha=0.6, label=f"{name}: {len(lasts)} run(s) ({which})")
        ax.errorbar(x, mean, yerr=[mean - low, high - mean], fmt="none", ecolor="k", capsize=3, lw=1)
        for row in frame.to_numpy():
            ax.scatter(x, row, color=f"C{k}", edgecolors="k", s=14, zorder=3)
    _threshold_lines(ax, runs)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(every)), every)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
    return fig


def robustness_figure(runs: Sequence[Run], n: int = 100, seed: int = 0, backend: str = "inprocess") -> Figure:
    """Robustness on the same levels for every run: per paper class (1-3), each curriculum's best-agent CVaR curve, mean over its runs with the spread (min to max) shaded."""
    from poet.analysis.figures import robustness_band

    groups = curriculum_groups(runs)
    fig = Figure(figsize=(15, 4.5), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    for ax, klass in zip(axes, (1, 2, 3)):
        curves = {
            name: [best_curve(run, klass, n, seed, backend) for run in members] for name, members in groups.items()
        }
        robustness_band(ax, curves, klass, n)
    return fig


def best_curve(run: Run, klass: int, n: int, seed: int, backend: str) -> pd.Series:
    """The CVaR curve (index alpha) of the run's best active agent on `n` levels of `klass`."""
    active = [a for a in run.agents() if a.active]
    curves = run.robustness(klass, agents=active, n=n, seed=seed, backend=backend)
    means = curves.groupby("pair_id")["cvar"].mean()
    return curves[curves["pair_id"] == means.idxmax()].set_index("alpha")["cvar"]


SCORED = {"robustness": robustness_figure}  # with `poet compare --score`: they score the agents again

FIGURES: dict[str, Callable[[Sequence[Run]], Figure]] = {
    "seeds": seeds_figure,
    "heldout_levels": heldout_levels_figure,
    "heldout_curves": heldout_curves_figure,
    "training_scores": training_scores_figure,
}


def caption(name: str) -> str:
    """The caption of a figure: its function's one-line docstring."""
    return ({**FIGURES, **SCORED}[name].__doc__ or name).strip().splitlines()[0]


# ---------------------------------------------------------------- summary and page


def _iterations_run(run: Run) -> int:
    """Iterations the run has done: the last one any table records, plus one (an iteration of a
    level-buffer curriculum that only explored trains no agent and has no `iterations` row)."""
    found = [
        int(t["iteration"].max())
        for t in (run.iterations, run.phases, run.heldout)
        if len(t) and t["iteration"].notna().any()
    ]
    return max(found, default=-1) + 1


def summary(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per run: what it is, its budget and its last held-out scores (best agent) on the shared levels."""
    _, common = _levels(runs)
    rows = []
    for run, label in zip(runs, run_labels(runs)):
        table, steps = best_heldout(run), training_steps(run)
        row = {
            "run": label,
            "directory": str(run.path),
            "curriculum": curriculum_of(run.config),
            "family": (run.config.get("env") or {}).get("family", "?"),
            "seed": run.config.get("seed", "?"),
            "iterations": _iterations_run(run),
            "training env steps": f"{int(steps.iloc[-1]):,}" if len(steps) else "?",
            "held-out evaluations": int(table["iteration"].nunique()) if len(table) else 0,
        }
        last = table[table["iteration"] == table["iteration"].max()].set_index("level")["best"] if len(table) else {}
        for level in common:
            row[level] = f"{last[level]:.0f}" if level in last else ""
        rows.append(row)
    return pd.DataFrame(rows)


def _html(runs: Sequence[Run], names: list[str]) -> str:
    """The index page: the runs' table, the notes, every figure with its caption."""
    table = summary(runs)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in table.itertuples(index=False)
    )
    _, common = _levels(runs)
    said = notes(runs)
    note_html = ("<ul>\n" + "\n".join(f"<li>{html.escape(n)}</li>" for n in said) + "\n</ul>") if said else ""
    figures = "\n".join(
        f'<figure><img src="{name}.png" alt="{name}"><figcaption>{html.escape(caption(name))}</figcaption></figure>'
        for name in names
    )
    title = html.escape(f"POET runs compared: {', '.join(run_labels(runs))}")
    levels = (
        f"Last held-out evaluation, best agent, on the levels every run has ({', '.join(common)})."
        if common
        else "No held-out level is shared by the runs."
    )
    return f"""{html_head(title, 1150)}
<p>{html.escape(levels)}</p>
<table>
<tr>{head}</tr>
{body}
</table>
{note_html}
{figures}
</body></html>
"""


def default_out_dir() -> Path:
    """runs/compare-<date-time>."""
    return Path("runs") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"


def write_comparison(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path | None = None,
    say: Callable[[str], None] | None = None,
    score: bool = False,
) -> Path:
    """Write every FIGURES figure of the runs as PNG and index.html into out_dir (default
    runs/compare-<date-time>); returns the folder. Bad input is a ConfigError, before any writing;
    `say` is told each of the `notes` (the page and the figures show them too). `score`: also
    the SCORED figures, which score every run's active agents on the same level samples."""
    runs = load_runs(run_dirs)
    out = Path(out_dir) if out_dir is not None else default_out_dir()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a directory")
    if (out / "records").is_dir():  # never write figures among a run's own files
        raise ConfigError(f"--out {str(out)!r} is a run directory; give another folder")
    makers = {**FIGURES, **(SCORED if score else {})}
    pages = {name: figure_png(make(runs)) for name, make in makers.items()}
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, png in pages.items():
            (out / f"{name}.png").write_bytes(png)
        (out / "index.html").write_text(_html(runs, list(makers)))
    except OSError as exc:
        raise ConfigError(f"--out {str(out)!r}: cannot write the comparison ({exc.strerror or exc})") from None
    for note in notes(runs) if say is not None else ():
        say(note)
    return out
