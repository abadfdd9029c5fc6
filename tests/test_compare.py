"""`poet compare`: several runs side by side on the same held-out levels, and the quickstart's held-out levels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

import poet
from poet.analysis import load_run
from poet.analysis.compare import FIGURES, best_heldout, notes, run_labels, summary, training_steps
from tests.conftest import ROOT, poet_in_process, tiny_config
from tests.test_cli import assert_one_error_line

PNG = b"\x89PNG\r\n\x1a\n"
LEVELS = ["flat", "pits", "stumps", "rough", "combined"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny runs: POET and ACCEL with held-out levels every 4 iterations, DR without."""
    root = tmp_path_factory.mktemp("runs")
    heldout = {"evaluation": {**tiny_config()["evaluation"], "test_every": 4}}
    configs = {
        "poet": tiny_config(**heldout),
        "accel": tiny_config(curriculum="accel", curriculum_options={"buffer_size": 4, "num_levels": 2}, **heldout),
        "dr": tiny_config(curriculum="dr", iterations=6),
    }
    for name, cfg in configs.items():
        poet.run(cfg, out=root / name, progress=False)
    return {name: root / name for name in configs}


# ---------------------------------------------------------------- the quickstart's held-out levels


def test_quickstart_records_held_out_levels_every_20_iterations(tmp_path):
    cfg = poet.load_config(ROOT / "experiments" / "quickstart.yaml")
    assert cfg.evaluation.test_every == 20
    # the quickstart itself at smoke sizes: its first held-out evaluation is after iteration 19
    proc = poet_in_process(
        [
            "run",
            "experiments/quickstart.yaml",
            "--out",
            tmp_path / "q",
            "--iterations",
            20,
            "--quiet",
            "--backend",
            "inprocess",
            "--set",
            "evaluation.max_steps=40",
            "--set",
            "trainer.es.population=4",
            "--set",
            "env.options.course_length=20",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    ho = load_run(tmp_path / "q").heldout
    assert ho["iteration"].unique().tolist() == [19] and ho["level"].tolist() == LEVELS


@pytest.mark.parametrize("curriculum", ["poet", "accel"])
def test_held_out_evaluation_leaves_every_other_table_unchanged(tmp_path, curriculum):
    """It draws on no random stream the run uses: the same tables with and without it, except `heldout` and timings."""
    options = {"curriculum": curriculum}
    if curriculum == "accel":
        options["curriculum_options"] = {"buffer_size": 4, "num_levels": 2}
    with_ho = tiny_config(evaluation={**tiny_config()["evaluation"], "test_every": 2}, **options)
    poet.run(with_ho, out=tmp_path / "with", progress=False)
    poet.run(tiny_config(**options), out=tmp_path / "without", progress=False)
    a, b = load_run(tmp_path / "with"), load_run(tmp_path / "without")
    assert len(a.heldout) and not len(b.heldout)
    for table in ("iterations", "envs", "transfers", "events"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)
    steps = [
        p.phases[p.phases["phase"] != "heldout"][["iteration", "phase", "env_steps"]].reset_index(drop=True)
        for p in (a, b)
    ]
    pd.testing.assert_frame_equal(*steps)


# ---------------------------------------------------------------- poet compare


def test_compare_writes_figures_and_index_for_two_curricula(runs, tmp_path):
    out = tmp_path / "cmp"
    proc = poet_in_process(["compare", runs["poet"], runs["accel"], "--out", out])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out) and proc.stderr == ""
    for name in FIGURES:
        assert (out / f"{name}.png").read_bytes()[:8] == PNG
    page = (out / "index.html").read_text()
    assert "poet (poet)" in page and "accel (accel)" in page
    assert all(f'src="{name}.png"' in page for name in FIGURES)
    assert "<li>" not in page  # nothing to warn about: same family, same levels, both evaluated


def test_compare_draws_a_run_without_held_out_records_and_says_so(runs, tmp_path):
    out = tmp_path / "cmp"
    proc = poet_in_process(["compare", runs["poet"], runs["accel"], runs["dr"], "--out", out])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "poet: note: no held-out records in dr (dr) (evaluation.test_every is 0 or was never due): "
        "drawn in the training-score figure only"
    ]
    assert "no held-out records in dr (dr)" in (out / "index.html").read_text()


def _legend_texts(fig: Figure) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def test_figure_functions_take_loaded_runs(runs):
    loaded = [load_run(runs[name]) for name in ("poet", "accel", "dr")]
    labels = run_labels(loaded)
    assert labels == ["poet (poet)", "accel (accel)", "dr (dr)"]
    for name, make in FIGURES.items():
        fig = make(loaded)
        assert isinstance(fig, Figure), name
        texts = _legend_texts(fig)
        # every run is in every legend, drawn or said not to be
        for label in labels:
            assert any(label in t for t in texts), (name, label, texts)
    levels = FIGURES["heldout_levels"](loaded)
    assert [t.get_text() for t in levels.axes[0].get_xticklabels()] == LEVELS
    assert any("dr (dr): no held-out records" in t for t in _legend_texts(levels))
    curves = FIGURES["heldout_curves"](loaded)
    assert [ax.get_title() for ax in curves.axes if ax.get_visible() and ax.axison] == [*LEVELS, "mean over 5 levels"]
    # the x axis is the env steps spent training, from the phases table without the held-out phase
    poet_run = loaded[0]
    steps = training_steps(poet_run)
    trained = poet_run.phases[poet_run.phases["phase"] != "heldout"]["env_steps"].sum()
    assert steps.iloc[-1] == trained and steps.is_monotonic_increasing
    table = best_heldout(poet_run)
    assert table["iteration"].unique().tolist() == [3, 7, 11]
    assert table["env_steps"].tolist() == [steps[i] for i in table["iteration"]]
    assert (table["best"] >= table["mean"]).all()
    # budgets over 4 times apart (POET trains several pairs): a log env-step axis, else a linear one
    assert steps.iloc[-1] > 4 * training_steps(loaded[1]).iloc[-1]
    assert (
        curves.axes[0].get_xscale() == "log" and "log scale" in FIGURES["training_scores"](loaded).axes[0].get_xlabel()
    )
    assert FIGURES["training_scores"](loaded[1:]).axes[0].get_xscale() == "linear"
    row = summary(loaded).set_index("run").loc["poet (poet)"]
    assert row["held-out evaluations"] == 3 and set(LEVELS) <= set(row.index)
    # iterations done, also those where ACCEL only explored (no `iterations` row)
    assert summary(loaded)["iterations"].tolist() == [12, 12, 6]


def test_runs_with_other_levels_compare_on_the_levels_they_share(runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs["accel"], other)
    path = other / "records" / "heldout.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["level"] = {"pits": "gaps"}.get(row["level"], row["level"])
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    said = notes([load_run(runs["poet"]), load_run(other)])
    assert said == [
        "held-out levels not in every run: pits, gaps; runs compare on the levels they share "
        "(flat, stumps, rough, combined)"
    ]
    proc = poet_in_process(["compare", runs["poet"], other, "--out", tmp_path / "cmp"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"poet: note: {said[0]}\n"
    fig = FIGURES["heldout_levels"]([load_run(runs["poet"]), load_run(other)])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "flat",
        "pits",
        "stumps",
        "rough",
        "combined",
        "gaps",
    ]


def test_compare_errors_are_one_line(runs, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    cases = [
        (["compare", runs["poet"]], ("needs at least 2 run directories, got 1", "poet report DIR")),
        (["compare", runs["poet"], tmp_path], (str(tmp_path), "is not a run directory")),
        (["compare", runs["poet"], f"{runs['poet']}/"], ("is given twice",)),
        (["compare", runs["poet"], runs["accel"], "--out", a_file], ("--out", "is a file")),
        (["compare", runs["poet"], runs["accel"], "--out", runs["dr"]], ("--out", "is a run directory")),
    ]
    for args, needles in cases:
        assert_one_error_line(poet_in_process(args), *needles)
    assert not (runs["dr"] / "heldout_levels.png").exists()
    proc = poet_in_process(["compare"])
    assert proc.returncode == 2 and proc.stderr.startswith("poet: error:") and len(proc.stderr.splitlines()) == 1


def test_seeds_of_one_curriculum_are_grouped_and_scored_on_the_same_levels(runs, tmp_path):
    """A second POET seed joins the first in one group: the seeds figure draws its mean,
    spread and every run; `--score` adds robustness curves on one level sample per class."""
    from poet.analysis.compare import curriculum_groups

    second = tmp_path / "poet-seed4"
    poet.run(tiny_config(seed=4, evaluation={**tiny_config()["evaluation"], "test_every": 4}), out=second)
    loaded = [load_run(runs["poet"]), load_run(second), load_run(runs["accel"])]
    groups = curriculum_groups(loaded)
    assert list(groups) == ["poet", "accel"] and [len(g) for g in groups.values()] == [2, 1]
    other = load_run(runs["poet"])
    other.config = {**other.config, "reproduction": {**other.config["reproduction"], "capacity": 9}}
    assert list(curriculum_groups([*loaded, other])) == ["poet", "accel", "poet #2"]  # another set-up
    seeds = FIGURES["seeds"](loaded)
    texts = [t.get_text() for t in seeds.axes[0].get_legend().get_texts() if "run(s)" in t.get_text()]
    assert texts == ["poet: 2 run(s) (poet (poet), poet-seed4 (poet))", "accel: 1 run(s) (accel (accel))"]
    out = tmp_path / "cmp"
    proc = poet_in_process(["compare", runs["poet"], second, runs["accel"], "--out", out, "--score"])
    assert proc.returncode == 0, proc.stderr
    assert (out / "robustness.png").read_bytes()[:8] == PNG and 'src="robustness.png"' in (
        out / "index.html"
    ).read_text()
