"""One-call figures of a population, readable with hundreds of envs:

    phylogeny_figure(run)                    # the env tree, coloured by class, transfers overlaid
    cross_eval_figure(run, run.cross_eval()) # agents x envs, both in lineage order
    robustness_figure({"poet": curves})      # CVaR curves, the class in the title
    param_heatmap_figure(run, "roughness", "pit_gap_hi")  # small multiples over time

Each returns a matplotlib Figure; `poet.analysis.images.write_figure` saves one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from envs.terrain import DIFFICULTY_CLASSES
from poet.analysis.load import Run
from poet.analysis.report import _note, _param_columns, _threshold, _tree_layout

CLASS_COLORS = ("#9e9e9e", "#1f77b4", "#ff7f0e", "#d62728")  # easy .. extremely challenging
NO_CLASS_COLOR = "#555555"
TRANSFER_COLORS = ("#2ca02c", "#9467bd", "#8c564b")  # one per transfer kind, in sorted order
LABELLED = 60  # at most this many tick labels on an axis; beyond, none (ids would overlap)
TRANSFER_LINES = 200  # beyond this many accepted transfers, "auto" marks them on their target's row


def _class_color(klass: object) -> str:
    return CLASS_COLORS[int(klass)] if pd.notna(klass) and 0 <= int(klass) < len(CLASS_COLORS) else NO_CLASS_COLOR


def _with_ancestors(tree: pd.DataFrame, keep: pd.Series) -> pd.DataFrame:
    """The rows `keep` selects and every ancestor of them, so the drawn tree stays connected."""
    parent = dict(zip(tree["env_id"], tree["parent_env_id"]))
    chosen = set(tree.loc[keep, "env_id"])
    for env_id in list(chosen):
        node = parent.get(env_id)
        while isinstance(node, str) and node in parent and node not in chosen:
            chosen.add(node)
            node = parent.get(node)
    return tree[tree["env_id"].isin(chosen)]


def phylogeny_figure(run: Run, classes: Sequence[int] | None = None, transfers: str | bool = "auto") -> Figure:
    """Every env by creation iteration (x) in its lineage (y: leaves in depth-first order),
    coloured by the paper's class, filled when solved; parent links in grey. `classes` keeps
    the envs of those classes and their ancestors.

    Accepted transfers between drawn envs: "lines", a vertical line at the transfer's
    iteration from the source env's row to the target's, with a tick on the target's;
    "markers", only a tick on the target's row where its agent was replaced; "auto", lines
    up to TRANSFER_LINES transfers, else markers; False, none.
    """
    tree = run.phylogeny
    shown = tree if classes is None else _with_ancestors(tree, tree["difficulty"].isin(list(classes)))
    y = _tree_layout(shown) if len(shown) else {}
    rows = int(max(y.values(), default=0)) + 1
    fig = Figure(figsize=(11, float(np.clip(0.12 * rows + 2.5, 4.0, 16.0))), layout="constrained")
    ax = fig.add_subplot()
    picked = "" if classes is None else f", classes {', '.join(map(str, classes))} and their ancestors"
    ax.set(xlabel="creation iteration", yticks=[], title=f"Env phylogeny: {len(shown)} of {len(tree)} envs{picked}")
    if not len(shown):
        _note(ax, "no envs")
        return fig
    x = dict(zip(shown["env_id"], shown["created_iteration"].astype(float)))
    elbows = [  # down the parent's row, then to the child
        [(x[p], y[p]), (x[e], y[p]), (x[e], y[e])]
        for e, p in zip(shown["env_id"], shown["parent_env_id"])
        if isinstance(p, str) and p in y
    ]
    ax.add_collection(LineCollection(elbows, colors="0.75", linewidths=0.6, zorder=1))
    size = float(np.clip(3000 / max(len(shown), 1), 6, 60))
    colors = np.array([_class_color(k) for k in shown["difficulty"]])
    solved = shown["solved_iteration"].notna().to_numpy()
    xs = shown["env_id"].map(x).to_numpy(float)
    ys = shown["env_id"].map(y).to_numpy(float)
    ax.scatter(xs[solved], ys[solved], s=size, c=list(colors[solved]), zorder=3)
    ax.scatter(xs[~solved], ys[~solved], s=size, facecolors="white", edgecolors=list(colors[~solved]), zorder=3)
    handles = [
        Line2D([], [], ls="", marker="o", color=CLASS_COLORS[k], label=DIFFICULTY_CLASSES[k])
        for k in sorted({int(k) for k in shown["difficulty"].dropna()})
    ]
    handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="0.3", label="not solved (hollow)"))
    edges = run.transfer_edges
    edges = edges[edges["accepted"] & edges["source_env_id"].isin(y) & edges["target_env_id"].isin(y)]
    style = ("lines" if len(edges) <= TRANSFER_LINES else "markers") if transfers == "auto" else transfers
    for i, (kind, part) in enumerate(edges.groupby("kind") if style else []):
        color = TRANSFER_COLORS[i % len(TRANSFER_COLORS)]
        its, sources, targets = part["iteration"].to_numpy(float), part["source_env_id"], part["target_env_id"]
        if style == "lines":
            segments = [[(i, y[s]), (i, y[t])] for i, s, t in zip(its, sources, targets)]
            ax.add_collection(LineCollection(segments, colors=color, linewidths=0.7, alpha=0.6, zorder=2))
            ax.scatter(its, targets.map(y), marker="_", s=25, c=color, zorder=2)
        else:
            ax.scatter(its, targets.map(y), marker="|", s=size, c=color, alpha=0.5, lw=0.8, zorder=2)
        shape = "line from source row" if style == "lines" else "tick on target row"
        handles.append(Line2D([], [], color=color, label=f"{kind} transfer, {shape} ({len(part)} accepted)"))
    ax.autoscale_view()
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def lineage_order(run: Run) -> list[str]:
    """Env ids in depth-first lineage order (siblings by creation)."""
    tree = run.phylogeny
    y = _tree_layout(tree) if len(tree) else {}
    return sorted(y, key=lambda env_id: y[env_id])


def cross_eval_figure(run: Run, matrix: pd.DataFrame | None = None) -> Figure:
    """The agents x envs scores (`run.cross_eval()` unless given) as a heat map: envs in
    lineage order, each agent's row next to its env's column order; the run's solved
    threshold is the colour scale's midpoint."""
    matrix = run.cross_eval() if matrix is None else matrix
    order = [e for e in lineage_order(run) if e in matrix.columns]
    order += [e for e in matrix.columns if e not in order]
    env_of = dict(zip(run.phylogeny["pair_id"], run.phylogeny["env_id"]))
    position = {e: i for i, e in enumerate(order)}
    agents = sorted(matrix.index, key=lambda p: position.get(env_of.get(p), len(order)))
    data = matrix.loc[agents, order].to_numpy(float)
    fig = Figure(figsize=(float(np.clip(0.1 * len(order) + 4, 6, 14)), float(np.clip(0.1 * len(agents) + 3, 4, 12))))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    threshold = _threshold(run)
    finite = data[np.isfinite(data)]
    low = float(min(finite.min(), threshold - 1)) if finite.size else threshold - 1
    high = float(max(finite.max(), threshold + 1)) if finite.size else threshold + 1
    image = ax.imshow(
        data, aspect="auto", cmap="RdYlGn", norm=TwoSlopeNorm(threshold, low, high), interpolation="nearest"
    )
    fig.colorbar(image, ax=ax, label=f"score (solved at {threshold:g})", shrink=0.8)
    ax.set(
        xlabel="env (lineage order)", ylabel="agent (by its env)", title="Cross-evaluation: every agent on every env"
    )
    ax.set_yticks(range(len(agents)), agents if len(agents) <= LABELLED else [""] * len(agents), fontsize="x-small")
    own = [position.get(env_of.get(p)) for p in agents]
    ax.scatter(
        [o for o in own if o is not None],
        [i for i, o in enumerate(own) if o is not None],
        marker="s",
        s=8,
        facecolors="none",
        edgecolors="k",
        lw=0.5,
    )
    ax.set_xticks([])
    ax.set_xlabel("env (lineage order); a square: the agent's own env")
    return fig


def robustness_figure(curves: Mapping[str, pd.DataFrame] | pd.DataFrame, best_only: bool | None = None) -> Figure:
    """CVaR curves (`Run.robustness`) of one run or several on the same levels: mean score
    over the worst alpha share of levels. Per run, its best agent (highest mean over alpha)
    in colour and, for a single run, every other agent in grey. The class is in the title."""
    runs = {"run": curves} if isinstance(curves, pd.DataFrame) else dict(curves)
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    robustness_axes(fig.add_subplot(), runs, len(runs) > 1 if best_only is None else best_only)
    return fig


def robustness_axes(ax: Axes, runs: Mapping[str, pd.DataFrame], best_only: bool) -> None:
    """`robustness_figure` on one axes."""
    classes, counts = set(), set()
    for i, (name, frame) in enumerate(runs.items()):
        classes |= set(frame["class"].dropna().astype(int))
        counts |= set(frame["levels"])
        means = frame.groupby("pair_id")["cvar"].mean()
        best = means.idxmax()
        if not best_only:
            for _, curve in frame[frame["pair_id"] != best].groupby("pair_id"):
                ax.plot(curve["alpha"], curve["cvar"], color="0.8", lw=0.8)
        curve = frame[frame["pair_id"] == best]
        ax.plot(curve["alpha"], curve["cvar"], lw=2, color=f"C{i}", label=f"{name}: {best} (best of {len(means)})")
    what = ", ".join(DIFFICULTY_CLASSES[k] for k in sorted(classes)) or "given levels"
    levels = "/".join(str(n) for n in sorted(counts))
    ax.set(
        xlabel="alpha (share of worst levels)",
        ylabel="mean score over them (CVaR)",
        xscale="log",
        title=f"Robustness on {levels} {what} levels",
    )
    ax.legend(fontsize="small")


def robustness_band(ax: Axes, curves: Mapping[str, Sequence[pd.Series]], klass: int, n: int) -> None:
    """Per group, the mean of its curves (CVaR by alpha) with min to max shaded, on one axes."""
    for i, (name, members) in enumerate(curves.items()):
        frame = pd.DataFrame(list(members))
        alphas = frame.columns.to_numpy(float)
        ax.fill_between(alphas, frame.min().to_numpy(), frame.max().to_numpy(), color=f"C{i}", alpha=0.2, lw=0)
        ax.plot(alphas, frame.mean().to_numpy(), color=f"C{i}", lw=2, label=f"{name}: mean of {len(frame)} run(s)")
    ax.set(
        xlabel="alpha (share of worst levels)",
        ylabel="best agent's mean score over them (CVaR)",
        xscale="log",
        title=f"Robustness on {n} {DIFFICULTY_CLASSES[klass]} levels",
    )
    ax.legend(fontsize="small")


def param_heatmap_figure(run: Run, x: str, y: str, snapshots: int = 4, bins: int = 12) -> Figure:
    """Envs over two parameters at `snapshots` iterations (small multiples): each cell coloured
    by the best score any agent reached on an env of that cell by then (blank: no env)."""
    columns = _param_columns(run)
    for name in (x, y):
        if name not in columns:
            raise ValueError(f"{name!r} is not a numeric env parameter of this run; it has {', '.join(columns)}")
    envs = run.envs
    last = int(run.iterations["iteration"].max()) if len(run.iterations) else 0
    times = sorted({int(t) for t in np.linspace(0, last, snapshots + 1)[1:]})
    xs, ys = envs[x].astype(float).to_numpy(), envs[y].astype(float).to_numpy()
    x_edges = np.linspace(np.nanmin(xs), np.nanmax(xs) + 1e-9, bins + 1) if len(envs) else np.arange(2)
    y_edges = np.linspace(np.nanmin(ys), np.nanmax(ys) + 1e-9, bins + 1) if len(envs) else np.arange(2)
    scores = run.iterations[["iteration", "env_id", "score"]]
    fig = Figure(figsize=(3.2 * len(times) + 1.2, 3.6), layout="constrained")
    axes = fig.subplots(1, len(times), sharex=True, sharey=True, squeeze=False)[0]
    threshold = _threshold(run)
    image = None
    for ax, t in zip(axes, times):
        best = scores[scores["iteration"] <= t].groupby("env_id")["score"].max()
        alive = envs["created_iteration"].astype(float) <= t
        grid = np.full((bins, bins), np.nan)
        for xv, yv, env_id in zip(xs[alive], ys[alive], envs.loc[alive, "env_id"]):
            i = int(np.clip(np.searchsorted(x_edges, xv, side="right") - 1, 0, bins - 1))
            j = int(np.clip(np.searchsorted(y_edges, yv, side="right") - 1, 0, bins - 1))
            value = best.get(env_id, np.nan)
            grid[j, i] = value if np.isnan(grid[j, i]) else np.nanmax([grid[j, i], value])
        image = ax.pcolormesh(x_edges, y_edges, grid, cmap="viridis", vmin=-100, vmax=max(threshold, 300))
        ax.set(title=f"iteration {t}: {int(alive.sum())} envs", xlabel=x)
    axes[0].set_ylabel(y)
    if image is not None:
        fig.colorbar(image, ax=list(axes), label="best score on an env of the cell")
    return fig
