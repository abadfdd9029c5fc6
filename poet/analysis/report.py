"""A static report of a run: one PNG per figure and an `index.html` that shows them.

Every figure is a function of a `poet.analysis.Run` returning a matplotlib `Figure`
(built with `matplotlib.figure.Figure`, so no display or pyplot state is needed);
`FIGURES` lists them by name, for `write_report` and `notebooks/analyze_run.ipynb`.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

import envs
from envs import EnvParams
from envs.terrain import DIFFICULTY_CLASSES
from poet.analysis import Run, load_run
from poet.analysis.images import course_figure, figure_rgb, write_png
from poet.config import ConfigError
from poet.curricula import curriculum_defaults
from poet.curricula.level_buffer import LevelBuffer

# Columns of `run.envs` that are not env parameters.
NON_PARAM_COLUMNS = {
    "env_id",
    "family",
    "pair_id",
    "parent_env_id",
    "created_iteration",
    "retired_iteration",
    "solved_iteration",
    "difficulty",
    "params_json",
    "course_seed",
}
SOLVED_COLOR, UNSOLVED_COLOR = "tab:green", "tab:gray"
MAX_COURSES = 48  # the report draws the courses of the newest envs up to this many
# A level-buffer run written before its curriculum declared report_traits: dcd's
# level_replay_rho, the only minimum fill such runs had.
LEGACY_MIN_FILL = 0.5
MAX_TREE_NODES = 60  # the env tree draws at most this many envs (readable labels) ...
MAX_TREE_INCHES = 14.0  # ... in a figure at most this tall


def _pair_order(run: Run) -> list[str]:
    """Pair ids in creation order (p0, p1, ..., p10), including any only seen in other tables."""
    ids = set(run.envs["pair_id"].dropna()) | set(run.iterations["pair_id"].dropna())
    ids |= set(run.transfers["source_pair_id"].dropna()) | set(run.transfers["target_pair_id"].dropna())

    def key(pid: str) -> tuple[int, str]:
        digits = re.sub(r"\D", "", str(pid))
        return (int(digits) if digits else 1 << 30, str(pid))

    return sorted(ids, key=key)


def _note(ax: Axes, text: str) -> None:
    """Grey centred text on an axes (for empty panels)."""
    ax.text(
        0.5,
        0.6,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="0.4",
        bbox={"facecolor": "w", "edgecolor": "none"},
    )


def _threshold(run: Run) -> float:
    """The run's solved threshold (the registered curricula's default if the run has no config:
    a curriculum named as code is never imported to read a run)."""
    value = run.config.get("solved_threshold")
    return float(value if value is not None else curriculum_defaults("")["solved_threshold"])


def traits(run: Run) -> dict:
    """What the run records and so how it is drawn: its curriculum's `report_traits()` as
    run.json keeps them (`poet.curricula.base`), or for a curriculum that declares none (and
    runs written before they were kept), what the tables show: a level buffer's events, or
    envs made by reproduction and transfers, or neither."""
    declared = run.info.get("report_traits")
    if declared:
        return dict(declared)
    kinds = set(run.events["kind"]) if len(run.events) else set()
    if kinds & {"replayed", "explored"}:
        return {"kind": "level_buffer", "edits": "edited" in kinds}
    if len(run.transfers) or run.envs["parent_env_id"].notna().any():
        admitted = run.events.loc[run.events["kind"] == "admitted", "detail"] if len(run.events) else []
        return {"kind": "population", "annecs_reference": any("annecs_reference" in str(d) for d in admitted)}
    return {"kind": "single"}


def _is_level_buffer(run: Run) -> bool:
    """Whether one agent trains only on levels replayed from a buffer."""
    return traits(run)["kind"] == "level_buffer"


def _last_iteration(run: Run) -> int:
    """The last iteration any table of the run records (-1: none)."""
    found = [
        int(t["iteration"].max())
        for t in (run.iterations, run.events, run.phases, run.heldout)
        if len(t) and t["iteration"].notna().any()
    ]
    return max(found, default=-1)


def _buffer_settings(run: Run) -> tuple[int, float]:
    """The run's level-buffer capacity and minimum fill before the first replay: as its
    curriculum declared them (`traits`), else its `curriculum_options`, else the levels it
    held and LEGACY_MIN_FILL."""
    declared, options = traits(run), run.config.get("curriculum_options") or {}
    held = _buffer_fill(run) if "buffer_size" not in declared and "buffer_size" not in options else None
    fallback = {"buffer_size": max([1, *([] if held is None else held.tolist())]), "min_fill": LEGACY_MIN_FILL}
    values = []
    for key, kind in (("buffer_size", int), ("min_fill", float)):
        try:
            values.append(kind(declared.get(key, options.get(key, fallback[key]))))
        except (TypeError, ValueError):
            values.append(fallback[key])
    capacity, min_fill = values
    return max(1, capacity), min(1.0, max(0.0, min_fill))


def _slot(detail: object) -> float:
    """The buffer slot an explored or edited level went to (NaN: not kept). Runs written before
    the detail was a JSON mapping said "..., buffer slot N" in words."""
    try:
        slot = json.loads(str(detail)).get("slot")
    except (ValueError, AttributeError):
        words = str(detail).rsplit("buffer slot ", 1)
        slot = words[1] if len(words) == 2 and words[1].isdigit() else None
    return float("nan") if slot is None else float(slot)


def _buffer_fill(run: Run) -> pd.Series:
    """Levels held in the buffer after each iteration, from the `explored` and `edited`
    events' slots (they fill in order, so the highest slot so far + 1)."""
    last = _last_iteration(run)
    index = pd.RangeIndex(0, last + 1, name="iteration")
    ev = run.events
    if not len(ev):
        return pd.Series(0, index=index, dtype="int64")
    offered = ev[ev["kind"].isin(["explored", "edited"])]
    slots = offered["detail"].map(_slot).astype(float)
    per_iteration = (slots + 1).groupby(offered["iteration"].astype(int)).max()
    held = per_iteration.reindex(index).cummax().ffill().fillna(0)
    return held.astype("int64")


# ---------------------------------------------------------------- figures


def scores_figure(run: Run) -> Figure:
    """Training scores with the solved threshold: every pair's on its own env (a heat map, smoothed, and the best and median pair); for a level-buffer run the agent's after each replay, and the buffer's fill.

    One row per pair in creation order; white where the pair was not active. The window of
    the moving average (in iterations) is in the title; the colour bar marks the threshold.
    A level-buffer run trains only on replayed levels, so its figure is `replay_scores_figure`.
    """
    if _is_level_buffer(run):
        return replay_scores_figure(run)
    fig = Figure(figsize=(9, 6), layout="constrained")
    heat, lines = fig.subplots(2, 1, sharex=True, height_ratios=[2.2, 1])
    it = run.iterations
    threshold = _threshold(run)
    if not len(it):
        _note(heat, "no iterations recorded")
        heat.set(title="Scores of every pair")
        return fig
    pairs = [p for p in _pair_order(run) if p in set(it["pair_id"])]
    table = it.pivot_table(index="pair_id", columns="iteration", values="score", aggfunc="last")
    table = table.reindex(index=pairs, columns=range(int(it["iteration"].min()), int(it["iteration"].max()) + 1))
    window = max(1, table.shape[1] // 60)  # about 60 distinct steps across the run, whatever its length
    smooth = table.T.rolling(window, min_periods=1).mean().T.where(table.notna())
    values = smooth.to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    low, high = np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0)
    low, high = min(low, threshold - 1), max(high, threshold + 1)
    image = heat.imshow(
        np.ma.masked_invalid(values),
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=low,
        vmax=high,
        extent=(table.columns[0] - 0.5, table.columns[-1] + 0.5, len(pairs) - 0.5, -0.5),
    )
    bar = fig.colorbar(image, ax=heat, label="score", pad=0.01)
    bar.ax.axhline(threshold, color="w", lw=2)
    bar.ax.axhline(threshold, color="k", lw=1, ls="--")
    step = max(1, -(-len(pairs) // 20))  # at most 20 labels
    heat.set_yticks(range(0, len(pairs), step), [str(p) for p in pairs[::step]], fontsize="small")
    heat.set(
        ylabel="pair",
        title=f"Scores of every pair (moving average over {window} iterations; "
        f"dashed on the colour bar: solved, {threshold:g})",
    )
    best = smooth.max(axis=0)
    median = smooth.median(axis=0)
    lines.plot(best.index, best.to_numpy(dtype=float), lw=1.4, label="best pair")
    lines.plot(median.index, median.to_numpy(dtype=float), lw=1.2, label="median pair")
    lines.axhline(threshold, color="k", ls="--", lw=1, label=f"solved ({threshold:g})")
    lines.set(xlabel="iteration", ylabel="score")
    lines.legend(fontsize="small", loc="lower right", ncol=3)
    return fig


def replay_scores_figure(run: Run) -> Figure:
    """A level-buffer run: the agent's score after each replay (one trainer
    step on a level drawn from the buffer) with its moving average and the solved threshold;
    below, the levels in the buffer over the iterations and the fill the first replay needs.
    Before any replay the top panel says so, with how far the buffer has filled."""
    fig = Figure(figsize=(9, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[2.2, 1])
    threshold = _threshold(run)
    capacity, min_fill = _buffer_settings(run)
    needed = LevelBuffer.levels_to_replay(capacity, min_fill)
    fill = _buffer_fill(run)
    it = run.iterations.sort_values("iteration", kind="stable")
    if len(it):
        x, y = it["iteration"].astype(float).to_numpy(), it["score"].astype(float).to_numpy()
        window = max(1, len(it) // 20)
        top.scatter(x, y, s=14, color="tab:blue", alpha=0.6, label="after a replay")
        top.plot(
            x,
            pd.Series(y).rolling(window, min_periods=1).mean().to_numpy(),
            color="tab:blue",
            lw=1.4,
            label=f"moving average over {window} replays",
        )
        top.axhline(threshold, color="k", ls="--", lw=1, label=f"solved ({threshold:g})")
        top.legend(fontsize="small", loc="lower right", ncol=3)
        top.set_title(f"The agent's score after each of its {len(it)} replays (one trainer step each)")
    else:
        explored = int((run.events["kind"] == "explored").sum()) if len(run.events) else 0
        _note(
            top,
            f"no training yet: {explored} levels explored, buffer fills to {needed} "
            f"(of {capacity}) before the first replay",
        )
        top.set_title("The agent's score after each replay")
    top.set(ylabel="score")
    if len(fill):
        bottom.step(fill.index, fill.to_numpy(), where="post", color="tab:purple", label="levels in the buffer")
    bottom.axhline(needed, color="tab:red", ls="--", lw=1, label=f"replays possible from {needed}")
    bottom.axhline(capacity, color="0.5", ls=":", lw=1, label=f"capacity {capacity}")
    bottom.set(xlabel="iteration", ylabel="levels", ylim=(0, capacity * 1.08))
    bottom.legend(fontsize="small", loc="lower right", ncol=3)
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _param_columns(run: Run) -> list[str]:
    """Numeric env parameter columns of `run.envs` (no ids, iterations or *_enabled flags)."""
    envs, types = run.envs, pd.api.types
    return [
        c
        for c in envs.columns
        if c not in NON_PARAM_COLUMNS
        and not c.endswith(("_enabled", "_id"))
        and types.is_numeric_dtype(envs[c])
        and not types.is_bool_dtype(envs[c])
    ]


def env_params_figure(run: Run) -> Figure:
    """Parameters of every admitted env at its creation iteration, with their running maximum."""
    cols = _param_columns(run)
    fig = Figure(figsize=(9, min(30.0, 1.8 + 1.6 * max(1, len(cols)))), layout="constrained")
    if not cols or not len(run.envs):
        ax = fig.add_subplot()
        _note(ax, "no numeric env parameters")
        ax.set(xlabel="creation iteration", title="Env parameters")
        return fig
    axes = fig.subplots(len(cols), 1, sharex=True, squeeze=False)[:, 0]
    envs = run.envs.sort_values("created_iteration", kind="stable")
    x = envs["created_iteration"].astype(float).to_numpy()
    for ax, col in zip(axes, cols):
        y = envs[col].astype(float).to_numpy()
        ax.scatter(x, y, s=18, zorder=3, label="admitted env")
        ax.step(x, np.fmax.accumulate(y), where="post", color="tab:red", lw=1, label="running max")
        ax.set_ylabel(col)
    axes[0].set_title("Env parameters at creation")
    axes[0].legend(fontsize="small", loc="upper left")
    axes[-1].set_xlabel("creation iteration")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _tree_layout(envs: pd.DataFrame) -> dict[str, float]:
    """y of each env: leaves in depth-first order one unit apart, parents centred on their children."""
    ids = list(envs["env_id"])
    known = set(ids)
    kids: dict[str, list[str]] = {e: [] for e in ids}
    roots = []
    for env_id, parent in zip(envs["env_id"], envs["parent_env_id"]):
        if isinstance(parent, str) and parent in known and parent != env_id:
            kids[parent].append(env_id)
        else:
            roots.append(env_id)
    y: dict[str, float] = {}
    next_leaf = [0.0]

    def place(node: str) -> float:
        y[node] = np.nan  # marks the node as visited (guards against cycles)
        ys = [place(k) for k in kids[node] if k not in y]
        if ys:
            y[node] = float(np.mean(ys))
        else:
            y[node], next_leaf[0] = next_leaf[0], next_leaf[0] + 1
        return y[node]

    for root in roots + ids:  # ids again: nodes only reachable through a cycle
        if root not in y:
            place(root)
    return y


def _env_label(params_json: object, env_id: str) -> str:
    """A node's label: a terrain family's obstacles (roughness, pit gap and stump height
    ranges), a few scalar parameters as name value, else the env id's first 8 characters."""
    try:
        values = EnvParams.from_json(str(params_json)).values
    except (TypeError, ValueError, KeyError):
        return str(env_id)[:8]
    if {"roughness", "pit_gap", "stump_height"} <= set(values):
        parts = [f"rough {_num(values['roughness'])}"]
        for key, short in (("pit_gap", "pits"), ("stump_height", "stumps")):
            group = values[key]
            if isinstance(group, (list, tuple)) and len(group) == 2:
                parts.append(f"{short} {_num(group[0])}-{_num(group[1])}")
        return ", ".join(parts)
    numbers = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if values and len(numbers) == len(values) <= 3:
        return ", ".join(f"{k} {_num(v)}" for k, v in numbers.items())
    return str(env_id)[:8]


def _two_lines(label: str, longest: int = 24) -> str:
    """A long node label broken at the ", " nearest its middle: labels of envs made one
    reproduction apart would otherwise run into each other."""
    cuts = [i for i in range(len(label)) if label.startswith(", ", i)]
    if len(label) <= longest or not cuts:
        return label
    cut = min(cuts, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "\n" + label[cut + 2 :]


def _num(value: object) -> str:
    try:
        return f"{round(float(value), 2):g}"
    except (TypeError, ValueError):
        return "?"


def _tree_selection(run: Run, envs: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, str]:
    """The envs the tree draws, their replay counts (level-buffer runs; empty otherwise) and a
    line saying what was left out ("" when nothing was).

    A level-buffer run draws the levels it replayed (the most replayed first) with their
    ancestors, never the levels it only explored or made by edits and never trained on;
    other runs draw every env, the newest first, with its ancestors. Either stops at
    MAX_TREE_NODES envs."""
    parent = dict(zip(envs["env_id"], envs["parent_env_id"]))
    buffer_run = _is_level_buffer(run)
    replays = pd.Series(dtype="int64")
    if buffer_run:
        ev = run.events
        replayed = ev[ev["kind"] == "replayed"] if len(ev) else ev
        replays = replayed.groupby("env_id").size() if len(replayed) else replays
        last = replayed.groupby("env_id")["iteration"].max() if len(replayed) else pd.Series(dtype=float)
        wanted = sorted((e for e in replays.index if e in parent), key=lambda e: (-replays[e], -last[e]))
    else:
        wanted = list(envs["env_id"])[::-1]
    chosen: dict[str, None] = {}
    for env_id in wanted:
        lineage, node = [], env_id
        while isinstance(node, str) and node in parent and node not in chosen and node not in lineage:
            lineage.append(node)
            node = parent[node]
        if len(chosen) + len(lineage) <= MAX_TREE_NODES:  # else a shorter lineage may still fit
            chosen.update(dict.fromkeys(lineage))
    if not chosen:  # no lineage fits: the first envs wanted, without ancestors
        chosen = dict.fromkeys(wanted[:MAX_TREE_NODES])
    drawn_wanted = sum(1 for env_id in wanted if env_id in chosen)
    shown = envs[envs["env_id"].isin(chosen)]
    notes = []
    if buffer_run:
        never = len(envs) - len(set(replays.index) & set(parent))
        if never:
            notes.append(
                f"{never} of {len(envs)} levels were never replayed (explored or edited, not trained "
                "on): only ancestors of replayed levels among them are drawn"
            )
        if drawn_wanted < len(wanted):
            notes.append(
                f"{len(wanted) - drawn_wanted} replayed levels beyond {MAX_TREE_NODES} nodes left out "
                "(the most replayed are drawn, with their ancestors)"
            )
    elif len(shown) < len(envs):
        notes.append(
            f"{len(envs) - len(shown)} of {len(envs)} envs left out: at most {MAX_TREE_NODES} are "
            "drawn, the newest with their ancestors"
        )
    return shown, replays, "; ".join(notes)


LABEL_SPAN = 0.22  # a node's label takes about this share of the tree's iteration span


def _label_room(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Whether each node's label fits before the next node on its row (the last on a row
    always does): a label that would run into a node is left out, the node still drawn
    (with its pair id above it where the run has several pairs)."""
    room = np.ones(len(xs), dtype=bool)
    width = LABEL_SPAN * max(float(np.max(xs) - np.min(xs)), 1.0) if len(xs) else 0.0
    for row in np.unique(ys):
        at = np.flatnonzero(ys == row)
        order = at[np.argsort(xs[at], kind="stable")]
        room[order[:-1]] = np.diff(xs[order]) >= width
    return room


def env_tree_figure(run: Run) -> Figure:
    """The tree of environments (parent to child) by creation iteration, each labelled by its parameters; for a level-buffer run only the replayed levels and their ancestors."""
    envs = run.envs.drop_duplicates("env_id").sort_values("created_iteration", kind="stable")
    shown, replays, left_out = _tree_selection(run, envs) if len(envs) else (envs, pd.Series(dtype="int64"), "")
    buffer_run = _is_level_buffer(run)
    y = _tree_layout(shown) if len(shown) else {}
    rows = int(max(y.values(), default=0)) + 1
    fig = Figure(figsize=(10, min(MAX_TREE_INCHES, max(3.0, 0.45 * rows + 2.0))), layout="constrained")
    ax = fig.add_subplot()
    title = "Env tree" if not buffer_run else "Level tree: the replayed levels and their ancestors"
    if not len(shown):
        ax.set(xlabel="creation iteration", title=title, yticks=[])
        _note(ax, "no envs" if not len(envs) else f"no level replayed yet: {len(envs)} levels, none trained on")
        return fig
    ax.set(xlabel="creation iteration", title="\n".join([title, *textwrap.wrap(left_out, 110)]), yticks=[])
    ax.title.set_fontsize("small" if left_out else "medium")
    x = dict(zip(shown["env_id"], shown["created_iteration"].astype(float)))
    for env_id, parent in zip(shown["env_id"], shown["parent_env_id"]):
        if isinstance(parent, str) and parent in x:
            ax.annotate(
                "",
                xy=(x[env_id], y[env_id]),
                xytext=(x[parent], y[parent]),
                arrowprops={"arrowstyle": "->", "color": "0.5", "lw": 1, "shrinkA": 6, "shrinkB": 6},
            )
    xs, ys = shown["env_id"].map(x).to_numpy(float), shown["env_id"].map(y).to_numpy(float)
    if buffer_run:
        times = shown["env_id"].map(replays).fillna(0).to_numpy(int)
        colors = np.where(times > 0, "tab:blue", UNSOLVED_COLOR)
        ax.scatter(xs, ys, s=40 + 25 * np.sqrt(times), c=list(colors), zorder=3)
        handles = [
            Line2D([], [], ls="", marker="o", color="tab:blue", label="replayed (size: how often)"),
            Line2D([], [], ls="", marker="o", color=UNSOLVED_COLOR, label="ancestor, never replayed"),
        ]
    else:
        solved = shown["solved_iteration"].notna().to_numpy()
        retired = shown["retired_iteration"].notna().to_numpy()
        colors = np.where(solved, SOLVED_COLOR, UNSOLVED_COLOR)
        ax.scatter(xs, ys, s=90, c=list(colors), edgecolors=np.where(retired, "k", "none").tolist(), zorder=3)
        handles = [
            Line2D([], [], ls="", marker="o", color=SOLVED_COLOR, label="solved"),
            Line2D([], [], ls="", marker="o", color=UNSOLVED_COLOR, label="not solved"),
            Line2D([], [], ls="", marker="o", mfc="w", mec="k", label="retired (black edge)"),
        ]
    # one agent per env (POET): its pair id after the env's label; one agent for all: none
    several = shown["pair_id"].nunique() > 1
    labelled = _label_room(xs, ys)
    for xi, yi, (_, row), room in zip(xs, ys, shown.iterrows(), labelled):
        pair = row["pair_id"] if several and isinstance(row["pair_id"], str) else None
        if not room:  # the label would run into the next node on its row: the pair id alone
            if pair is not None:
                ax.annotate(pair, (xi, yi), xytext=(0, 7), textcoords="offset points", ha="center", fontsize="x-small")
            continue
        label = _env_label(row.get("params_json"), row["env_id"]) + (f" ({pair})" if pair else "")
        ax.annotate(
            _two_lines(label),
            (xi, yi),
            xytext=(7, 0),
            textcoords="offset points",
            va="center",
            fontsize="x-small" if len(shown) > 20 else "small",
        )
    ax.legend(handles=handles, fontsize="small", loc="best")
    low, high = float(np.min(xs)), float(np.max(xs))
    span = max(high - low, 1.0)
    ax.set_xlim(low - 0.05 * span, high + 0.4 * span)  # room for the labels right of the nodes
    ax.margins(y=0.5 / max(1, rows) + 0.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _transfer_counts(run: Run, pairs: list[str], accepted_only: bool) -> np.ndarray:
    """Matrix [source, target] of transfer rows (all attempts, or accepted only)."""
    t = run.transfers
    if accepted_only and len(t):
        t = t[t["accepted"].astype(bool)]
    counts = np.zeros((len(pairs), len(pairs)), dtype=int)
    index = {p: i for i, p in enumerate(pairs)}
    for s, g in zip(t["source_pair_id"], t["target_pair_id"]):
        if s in index and g in index:
            counts[index[s], index[g]] += 1
    return counts


def transfer_matrix_figure(run: Run) -> Figure:
    """Transfers from source pair (rows) to target pair (columns): accepted, and all attempts."""
    pairs = _pair_order(run)
    size = min(14.0, 3.0 + 0.35 * len(pairs))
    fig = Figure(figsize=(2 * size + 1, size), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, accepted_only, title, cmap in (
        (axes[0], True, "accepted transfers", "Greens"),
        (axes[1], False, "transfer attempts", "Blues"),
    ):
        ax.set(title=title, xlabel="target pair", ylabel="source pair")
        if not pairs:
            _note(ax, "no pairs")
            continue
        counts = _transfer_counts(run, pairs, accepted_only)
        top = max(1, int(counts.max()))
        image = ax.imshow(counts, cmap=cmap, vmin=0, vmax=top)
        ticks = range(len(pairs))
        ax.set_xticks(ticks, pairs, rotation=90 if len(pairs) > 12 else 0, fontsize="small")
        ax.set_yticks(ticks, pairs, fontsize="small")
        if len(pairs) <= 20:
            for (i, j), n in np.ndenumerate(counts):
                if n:
                    ax.text(
                        j, i, str(n), ha="center", va="center", fontsize="x-small", color="w" if n > top / 2 else "k"
                    )
        if not len(run.transfers):
            _note(ax, "no transfers")
        bar = fig.colorbar(image, ax=ax, shrink=0.8, label="count")
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    return fig


def annecs_figure(run: Run) -> Figure:
    """ANNECS (novel environments created and solved) after each iteration: the paper's and the reference code's counts; for curricula without POET's reproduction, the levels solved.

    The paper counts envs that passed the MC when created and were later solved; the
    reference code counts admissions on which the best archived agent passes the MC.
    A curriculum that admits no envs by reproduction (a level buffer, or one agent on the
    envs its curriculum picks) shows the levels it solved instead, and those of them made
    from another level.
    """
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    annecs = run.annecs
    name = curriculum_of(run.config)
    if traits(run)["kind"] != "population" and len(annecs):
        solved = _solved_levels(run)
        ax.step(
            solved.index,
            solved.to_numpy(),
            where="post",
            color="tab:green",
            label=f"levels solved (score >= {_threshold(run):g} after a trainer step)",
        )
        ax.step(
            annecs.index,
            annecs.to_numpy(),
            where="post",
            color="tab:purple",
            linestyle="--",
            label="of them made from another level (edits, stages)",
        )
        ax.legend(fontsize="small", loc="upper left")
        ax.set(xlabel="iteration", ylabel="levels", title=f"Levels solved ({name} has no reproduction, so no ANNECS)")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        return fig
    if len(annecs):
        ax.step(
            annecs.index,
            annecs.to_numpy(),
            where="post",
            color="tab:purple",
            label="ANNECS (paper: passed the MC when created, later solved)",
        )
        if traits(run).get("annecs_reference"):
            ref = run.annecs_reference
            ax.step(
                ref.index,
                ref.to_numpy(),
                where="post",
                color="tab:gray",
                linestyle="--",
                label="ANNECS (reference code: best archived agent passes the MC at admission)",
            )
        ax.legend(fontsize="small", loc="upper left")
    else:
        _note(ax, "no iterations recorded")
    ax.set(xlabel="iteration", ylabel="ANNECS", title="ANNECS")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _solved_levels(run: Run) -> pd.Series:
    """Distinct envs solved by each iteration (from the `solved` events)."""
    ev = run.events
    solved = ev[ev["kind"] == "solved"].groupby("env_id")["iteration"].min() if len(ev) else pd.Series(dtype="int64")
    return run._per_iteration(solved.astype("int64"), "solved")


def difficulty_figure(run: Run) -> Figure:
    """Envs created (solid) and solved (dashed) by each iteration, per difficulty class of the POET paper.

    The classes count the paper's criteria an env meets (max stump height >= 2.4, max pit gap
    >= 6.0, roughness >= 4.5): none is easy, one challenging, two very challenging, all three
    extremely challenging. Only families that define the classes (terrain, bipedal) have them.
    """
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    envs_t = run.envs
    classes = envs_t["difficulty"].dropna().astype(int) if len(envs_t) else pd.Series(dtype=int)
    if not len(run.iterations) or not len(classes):
        _note(
            ax,
            "no iterations recorded" if not len(run.iterations) else "this run's family defines no difficulty classes",
        )
    else:
        last = _last_iteration(run)
        steps = np.arange(last + 1)
        colors = ("tab:green", "tab:orange", "tab:red", "tab:purple")
        for level, name in enumerate(DIFFICULTY_CLASSES):
            rows = envs_t[envs_t["difficulty"] == level]
            created = np.searchsorted(np.sort(rows["created_iteration"].to_numpy(dtype=int)), steps, side="right")
            solved_at = np.sort(rows["solved_iteration"].dropna().to_numpy(dtype=int))
            solved = np.searchsorted(solved_at, steps, side="right")
            label = f"{name}: {created[-1]} created, {solved[-1]} solved"
            ax.step(steps, created, where="post", color=colors[level], label=label)
            ax.step(steps, solved, where="post", color=colors[level], linestyle="--")
        ax.legend(fontsize="small", loc="upper left")
    ax.set(
        xlabel="iteration",
        ylabel="envs",
        title="Envs by the POET paper's difficulty class (solid created, dashed solved)",
    )
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def population_figure(run: Run) -> Figure:
    """Active pairs trained at each iteration, and pairs archived by then."""
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    it = run.iterations
    if len(it):
        active = it.groupby("iteration")["pair_id"].nunique()
        retired = run.envs["retired_iteration"].dropna().astype(int).to_numpy()
        archived = [int((retired <= i).sum()) for i in active.index]
        ax.step(active.index, active.to_numpy(), where="post", label="active")
        ax.step(active.index, archived, where="post", label="archived")
        ax.legend(fontsize="small", loc="upper left")
    else:
        _note(ax, "no iterations recorded")
    ax.set(xlabel="iteration", ylabel="pairs", title="Population")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def heldout_figure(run: Run) -> Figure:
    """The best active agent's score on each held-out level (evaluation.test_every), with the solved threshold."""
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    ho = run.heldout
    if len(ho):
        best = ho.groupby(["level", "iteration"], sort=False)["score"].max()
        styles = ["-", "--", "-.", ":"]  # levels that score alike stay apart
        for i, level in enumerate(dict.fromkeys(ho["level"])):
            series = best.loc[level]
            ax.plot(
                series.index,
                series.to_numpy(dtype=float),
                marker="osD^v"[i % 5],
                ms=4,
                lw=1.4,
                ls=styles[i % len(styles)],
                label=str(level),
            )
        ax.axhline(_threshold(run), color="k", ls="--", lw=1, label=f"solved ({_threshold(run):g})")
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    else:
        _note(ax, "no held-out evaluation in this run (set evaluation.test_every)")
    ax.set(xlabel="iteration", ylabel="best agent's score", title="Held-out levels")
    return fig


def phylogeny_figure(run: Run) -> Figure:
    """Every env in its lineage by creation iteration, coloured by the paper's class (hollow: unsolved), with the accepted transfers."""
    from poet.analysis import figures

    return figures.phylogeny_figure(run)


def env_param_map_figure(run: Run) -> Figure:
    """The envs over their first two parameters at four points of the run, each cell coloured by the best score reached on an env in it."""
    from poet.analysis import figures

    columns = _param_columns(run)
    fig = Figure(figsize=(8, 3), layout="constrained")
    if len(columns) < 2 or not len(run.envs):
        _note(fig.add_subplot(), "fewer than two numeric env parameters")
        return fig
    return figures.param_heatmap_figure(run, columns[0], columns[2 if len(columns) > 2 else 1])


FIGURES: dict[str, Callable[[Run], Figure]] = {
    "scores": scores_figure,
    "env_params": env_params_figure,
    "env_tree": env_tree_figure,
    "phylogeny": phylogeny_figure,
    "env_param_map": env_param_map_figure,
    "transfer_matrix": transfer_matrix_figure,
    "annecs": annecs_figure,
    "difficulty": difficulty_figure,
    "population": population_figure,
    "heldout": heldout_figure,
}


def caption(name: str) -> str:
    """The caption of a figure: its function's one-line docstring (SCORED's text for those)."""
    return SCORED[name] if name in SCORED else (FIGURES[name].__doc__ or name).strip().splitlines()[0]


def figure_png(fig: Figure, dpi: int = 100) -> bytes:
    """A figure as PNG bytes (Agg canvas, no display needed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


# ---------------------------------------------------------------- courses


def course_images(run: Run, limit: int = MAX_COURSES) -> dict[str, np.ndarray]:
    """Course profile (RGB array of `poet.analysis.images.course_figure`: env id and parameters in the
    title, axes in metres, a legend) of each env of the run, the newest `limit`, rebuilt from
    the records; empty when the run's family gives no profile or is not registered here."""
    env_cfg = run.config.get("env") or {}
    try:
        family = envs.make_family(env_cfg.get("family"), env_cfg.get("options") or {})
    except (KeyError, ValueError, TypeError, ImportError, FileNotFoundError):
        return {}
    if getattr(family, "course_profile", None) is None or not len(run.envs):
        return {}
    rows = run.envs.sort_values("created_iteration", kind="stable").tail(limit)
    params = [EnvParams.from_json(text) for text in rows["params_json"]]
    # an env pinned to a course is drawn on it; others on the course of seed 0
    return {env_id: figure_rgb(course_figure(family, p, 0, env_id)) for env_id, p in zip(rows["env_id"], params)}


def course_file(env_id: str) -> str:
    """The file name of an env's course picture: the id itself when it is a plain content id,
    else a hash of it (ids come from the records, which anyone may have edited)."""
    if re.fullmatch(r"[0-9A-Za-z_-]{1,64}", env_id):
        return f"{env_id}.png"
    return f"env-{hashlib.sha256(env_id.encode()).hexdigest()[:16]}.png"


def _course_caption(env_id: str, row: pd.Series) -> str:
    parent = row["parent_env_id"] if isinstance(row["parent_env_id"], str) else None
    solved = row["solved_iteration"]
    return (
        f"{env_id} (pair {row['pair_id']}): "
        + (f"child of {parent}, " if parent else "the initial env, ")
        + f"created at iteration {int(row['created_iteration'])}, "
        + (f"solved at iteration {int(solved)}" if pd.notna(solved) else "not solved")
    )


# ---------------------------------------------------------------- summary and page


def summary(run: Run) -> dict[str, object]:
    """The report's summary table: size of the run and what it achieved, in the terms of its
    curriculum (POET's envs, transfers and ANNECS; a level buffer's levels and replays; the
    trainer steps of the one-agent baselines), then wall time and env steps per phase."""
    it = run.iterations
    name = curriculum_of(run.config)
    throughput = (
        {
            f"{phase}: wall time, env steps, steps/s": f"{row.seconds:.1f} s, {int(row.env_steps):,}, {row.steps_per_second:,.0f}"
            for phase, row in run.throughput().iterrows()
        }
        if len(run.phases)
        else {}
    )
    out: dict[str, object] = {
        "curriculum": name,
        "family": run.config.get("env", {}).get("family", "?"),
        "seed": run.config.get("seed", "?"),
        "iterations": _last_iteration(run) + 1,
    }
    last_score = f"{float(it.sort_values('iteration', kind='stable')['score'].iloc[-1]):.1f}" if len(it) else None
    shape = traits(run)
    if shape["kind"] == "level_buffer":
        kinds = run.events["kind"].value_counts() if len(run.events) else pd.Series(dtype="int64")
        capacity, min_fill = _buffer_settings(run)
        fill = _buffer_fill(run)
        held = int(fill.iloc[-1]) if len(fill) else 0
        out["new levels explored (scored, not trained on)"] = int(kinds.get("explored", 0))
        if shape.get("edits") or kinds.get("edited", 0):
            out["levels made by editing a replayed one"] = int(kinds.get("edited", 0))
        out["replays (one trainer step each)"] = len(it)
        out["levels in the buffer / capacity"] = (
            f"{held} / {capacity} (replays start at {LevelBuffer.levels_to_replay(capacity, min_fill)})"
        )
        out["agent's score after its last replay"] = last_score or "no replay yet"
        out[f"levels solved (score >= {_threshold(run):g} after a replay)"] = _count_solved(run)
    elif shape["kind"] == "population":
        t, annecs = run.transfers, run.annecs
        out["envs admitted"] = len(run.envs)
        out["envs admitted by reproduction"] = int(run.envs["parent_env_id"].notna().sum())
        out["transfers accepted / attempted"] = f"{int(t['accepted'].sum()) if len(t) else 0} / {len(t)}"
        out["final ANNECS (paper's definition: envs made by reproduction and later solved)"] = (
            int(annecs.iloc[-1]) if len(annecs) else 0
        )
        if shape.get("annecs_reference"):
            out[
                "final ANNECS as the reference code counts it (admitted envs the best archived agent passed the MC on)"
            ] = int(run.annecs_reference.iloc[-1]) if len(annecs) else 0
    else:  # one agent on the levels its curriculum picks
        out["trainer steps"] = len(it)
        out["envs trained on"] = int(it["env_id"].nunique()) if len(it) else 0
        out["agent's score after its last trainer step"] = last_score or "no training yet"
        out[f"envs solved (score >= {_threshold(run):g} after a trainer step)"] = _count_solved(run)
    out.update(throughput)
    return out


def _count_solved(run: Run) -> int:
    ev = run.events
    return int(ev.loc[ev["kind"] == "solved", "env_id"].nunique()) if len(ev) else 0


def html_head(title: str, width: int) -> str:
    """The start of a report page, down to its heading (`title` already escaped)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; max-width: {width}px; margin: 2em auto; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: left; }}
figure {{ margin: 2em 0; }} img {{ max-width: 100%; }} figcaption {{ color: #444; }}
</style></head><body>
<h1>{title}</h1>"""


def _html(run: Run, names: list[str], courses: list[str]) -> str:
    """The index page: summary table, every figure with its caption, then the envs' courses."""
    rows = "\n".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary(run).items()
    )
    figures = "\n".join(
        f'<figure><img src="{name}.png" alt="{name}"><figcaption>{html.escape(caption(name))}</figcaption></figure>'
        for name in names
    )
    if courses:
        by_id = run.envs.set_index("env_id")
        figures += f"\n<h2>Courses of the newest {len(courses)} envs</h2>\n" + "\n".join(
            f'<figure><img src="courses/{html.escape(course_file(env_id), quote=True)}" '
            f'alt="course {html.escape(env_id, quote=True)}">'
            f"<figcaption>{html.escape(_course_caption(env_id, by_id.loc[env_id]))}</figcaption></figure>"
            for env_id in courses
        )
    title = html.escape(f"POET run {run.path.resolve().name}")
    return f"""{html_head(title, 1000)}
<p>{html.escape(str(run.path))}</p>
<table>
{rows}
</table>
{figures}
</body></html>
"""


SCORED = {
    "cross_eval": "Every active agent of the newest checkpoint on every env of the run, envs in lineage order (poet report --score).",
    "robustness": "Robustness: each active agent's mean score over its worst share of 100 levels of each paper class (poet report --score).",
}


def scored_figures(run: Run, backend: str = "inprocess") -> dict[str, Figure]:
    """The figures that score the run's agents again (`SCORED`): the cross-evaluation of the
    active agents (kept in the run directory) and, for a family with classes, robustness
    curves on 100 levels of each class 1-3."""
    from poet.analysis import figures

    active = [a for a in run.agents() if a.active]
    out = {"cross_eval": figures.cross_eval_figure(run, run.cross_eval(agents=active, backend=backend))}
    try:
        curves = {klass: run.robustness(klass, agents=active, backend=backend) for klass in (1, 2, 3)}
    except ConfigError:  # a family without paper classes
        return out
    fig = Figure(figsize=(15, 4.5), layout="constrained")
    for ax, frame in zip(fig.subplots(1, 3, sharey=True), curves.values()):
        figures.robustness_axes(ax, {run.path.name: frame}, best_only=False)
    out["robustness"] = fig
    return out


def write_report(run_dir: str | Path, out_dir: str | Path | None = None, score: bool = False) -> Path:
    """Write every FIGURES figure as PNG, the envs' course profiles as courses/<env_id>.png (families
    that draw them) and index.html into out_dir (default <run_dir>/report); returns index.html.
    `score`: also the SCORED figures, which score the run's agents again (`scored_figures`)."""
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "report"
    if out_dir is None and out.is_symlink():
        # a run directory someone else made must not decide where this report writes
        raise ConfigError(f"{str(out)!r} is a symbolic link; give --out to write the report elsewhere")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        made = {name: make(run) for name, make in FIGURES.items()}
        made.update(scored_figures(run) if score else {})
        for name, fig in made.items():
            (out / f"{name}.png").write_bytes(figure_png(fig))
        courses = course_images(run)
        for env_id, image in courses.items():
            write_png(image, out / "courses" / course_file(env_id))
        index = out / "index.html"
        index.write_text(_html(run, list(made), list(courses)))
    except OSError as exc:
        raise ConfigError(f"--out {str(out)!r}: cannot write the report ({exc.strerror or exc})") from None
    return index


def curriculum_of(config: dict) -> str:
    """The run's curriculum ("?" for a config without one)."""
    return str(config.get("curriculum", "?"))
