"""The population figures (`poet.analysis.figures`): what each draws, on a small run and on a
run of hundreds of envs made up from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection

import poet
from poet.analysis import figures, load_run
from poet.analysis.images import write_figure
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures") / "run"
    poet.run(tiny_config(), out=out, progress=False)
    return load_run(out)


def _big(run, n: int = 400):
    """A copy of `run` whose phylogeny has `n` envs in one lineage-rich tree and 500 transfers."""
    rng = np.random.default_rng(0)
    ids = [f"e{i:04d}" for i in range(n)]
    parents = [None] + [ids[int(rng.integers(max(0, i - 30), i))] for i in range(1, n)]
    envs = pd.DataFrame(
        {
            "env_id": ids,
            "family": "terrain",
            "pair_id": [f"p{i}" for i in range(n)],
            "parent_env_id": parents,
            "created_iteration": np.arange(n) * 10,
            "retired_iteration": pd.array([pd.NA] * n, dtype="Int64"),
            "solved_iteration": pd.array([i * 10 + 5 if i % 3 else pd.NA for i in range(n)], dtype="Int64"),
            "difficulty": pd.array(rng.integers(0, 4, n), dtype="Int64"),
            "params_json": ['{"values": {"roughness": 1.0}}'] * n,
        }
    )
    pairs = rng.integers(0, n, (500, 2))
    transfers = pd.DataFrame(
        {
            "iteration": np.sort(rng.integers(0, n * 10, 500)),
            "source_pair_id": [f"p{a}" for a, _ in pairs],
            "target_pair_id": [f"p{b}" for _, b in pairs],
            "kind": np.where(rng.random(500) < 0.5, "direct", "fine_tune"),
            "score": 1.0,
            "incumbent_score": 0.0,
            "accepted": True,
        }
    )
    return type(run)(run.path, run.config, run.iterations, envs, transfers, run.events, run.phases)


def _points(ax) -> int:
    return sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))


def test_phylogeny_draws_every_env_and_its_parent_link(run, tmp_path):
    fig = figures.phylogeny_figure(run)
    ax = fig.axes[0]
    tree = run.phylogeny
    envs_drawn = sum(len(c.get_offsets()) for c in ax.collections[1:3])  # solved, then not solved
    assert envs_drawn == len(tree)
    links = [c for c in ax.collections if isinstance(c, LineCollection)][0]
    assert len(links.get_segments()) == tree["parent_env_id"].notna().sum()
    write_figure(fig, tmp_path / "phylogeny.png")
    assert (tmp_path / "phylogeny.png").read_bytes()[:4] == b"\x89PNG"


def test_a_class_filter_keeps_the_class_and_its_ancestors(run):
    big = _big(run)
    tree = big.phylogeny
    fig = figures.phylogeny_figure(big, classes=[3])
    kept = figures._with_ancestors(tree, tree["difficulty"] == 3)
    assert f"{len(kept)} of {len(tree)} envs, classes 3 and their ancestors" in fig.axes[0].get_title()
    parent = dict(zip(tree["env_id"], tree["parent_env_id"]))
    for env_id in kept["env_id"]:
        assert not isinstance(parent[env_id], str) or parent[env_id] in set(kept["env_id"])
    assert set(tree.loc[tree["difficulty"] == 3, "env_id"]) <= set(kept["env_id"])


def test_many_transfers_become_ticks_and_few_stay_lines(run):
    big = _big(run)
    crowded = figures.phylogeny_figure(big)
    labels = [t.get_text() for t in crowded.axes[0].get_legend().get_texts()]
    assert any("tick on target row" in label for label in labels)
    assert not any("line from source row" in label for label in labels)
    few = figures.phylogeny_figure(big, transfers="lines")
    labels = [t.get_text() for t in few.axes[0].get_legend().get_texts()]
    assert sum("accepted" in label for label in labels) == 2  # direct and fine_tune, each counted
    assert figures.phylogeny_figure(big, transfers=False).axes[0].get_legend().get_texts()[-1].get_text() == (
        "not solved (hollow)"
    )


def test_cross_eval_heatmap_orders_envs_by_lineage(run):
    matrix = run.cross_eval(cache=False)
    fig = figures.cross_eval_figure(run, matrix)
    image = fig.axes[0].images[0].get_array()
    order = figures.lineage_order(run)
    assert image.shape == (len(matrix), len(matrix.columns)) and sorted(order) == sorted(matrix.columns)
    column = order.index(run.envs["env_id"].iloc[0])
    assert set(np.asarray(image[:, column])) == set(matrix[run.envs["env_id"].iloc[0]])


def test_robustness_figure_names_the_class_and_each_runs_best_agent(run):
    curves = run.robustness(2, n=6)
    fig = figures.robustness_figure({"poet": curves, "again": curves})
    ax = fig.axes[0]
    assert ax.get_title() == "Robustness on 6 very challenging levels"
    assert [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()] == ["poet", "again"]
    single = figures.robustness_figure(curves)
    assert len(single.axes[0].lines) == curves["pair_id"].nunique()  # the others in grey, the best in colour


def test_param_heatmaps_are_small_multiples_over_time(run):
    fig = figures.param_heatmap_figure(run, "roughness", "pit_gap_hi", snapshots=3)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 3 and titles[-1].endswith(f"{len(run.envs)} envs")
    with pytest.raises(ValueError, match="'height' is not a numeric env parameter of this run; it has roughness"):
        figures.param_heatmap_figure(run, "height", "roughness")


def test_poet_report_score_adds_the_scored_figures(run, tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "poet.cli", "report", str(run.path), "--out", str(tmp_path / "r"), "--score"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("cross_eval: ") and "env steps" in proc.stderr  # the cost, first
    page = (tmp_path / "r" / "index.html").read_text()
    for name in ("phylogeny", "env_param_map", "cross_eval", "robustness"):
        assert (tmp_path / "r" / f"{name}.png").read_bytes()[:4] == b"\x89PNG" and f'src="{name}.png"' in page
