"""Whole runs: determinism, both POET curricula, record tables, and the quickstart's acceptance."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import envs
import poet
from poet.analysis import load_run
from tests.conftest import ROOT

TABLES = ("iterations", "envs", "transfers", "events")


def _run(cfg: dict, out) -> poet.analysis.Run:
    poet.run(cfg, out=out, progress=False)
    return load_run(out)


def _assert_same_tables(a, b) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)


@pytest.mark.parametrize("curriculum", ["poet", "enhanced_poet"])
def test_same_seed_same_tables(tiny, tmp_path, curriculum):
    a = _run(tiny(curriculum=curriculum), tmp_path / "a")
    b = _run(tiny(curriculum=curriculum), tmp_path / "b")
    _assert_same_tables(a, b)
    assert len(a.envs) >= 2, "the tiny run should admit at least one child"
    assert len(a.transfers) > 0


def test_results_do_not_depend_on_batching(tiny, tmp_path):
    a = _run(tiny(), tmp_path / "a")
    b = _run(tiny(evaluation={"batch_rows": 5}), tmp_path / "b")
    _assert_same_tables(a, b)


def test_other_seed_other_run(tiny, tmp_path):
    a = _run(tiny(seed=1), tmp_path / "a")
    b = _run(tiny(seed=2), tmp_path / "b")
    assert not np.array_equal(a.iterations["score"].to_numpy(), b.iterations["score"].to_numpy())


@pytest.mark.parametrize("curriculum", ["poet", "enhanced_poet"])
def test_record_tables_are_tidy_and_consistent(tiny, tmp_path, curriculum):
    run = _run(tiny(curriculum=curriculum), tmp_path / "r")
    it, env_t, tr, ev = run.iterations, run.envs, run.transfers, run.events
    # one row per iteration x active pair; ES metrics alongside
    assert not it.duplicated(["iteration", "pair_id"]).any()
    assert set(it["iteration"]) == set(range(12))
    for col in ("lr", "sigma", "es_return_mean", "grad_norm"):
        assert col in it.columns
    # envs: one row per admitted env, lineage, one column per parameter
    assert env_t["env_id"].is_unique
    assert env_t["parent_env_id"].isna().sum() == 1
    assert set(env_t["parent_env_id"].dropna()) <= set(env_t["env_id"])
    for col in ("roughness", "pit_gap_lo", "pit_gap_hi", "stump_height_lo", "stump_height_hi"):
        assert col in env_t.columns
    fam = envs.make_family("terrain", {"course_length": 20.0, "max_episode_steps": 150})
    for _, row in env_t.iterrows():
        params = envs.EnvParams.from_json(row["params_json"])
        assert params.id == row["env_id"]
        fam.validate(params)
    # transfers: kinds, at most one accepted per target and phase
    assert set(tr["kind"]) <= {"direct", "fine_tune"}
    assert (tr.groupby(["iteration", "target_pair_id"])["accepted"].sum() <= 1).all()
    accepted = tr[tr["accepted"]]
    assert (accepted["score"] > accepted["incumbent_score"]).all()
    # capacity respected every iteration
    assert it.groupby("iteration")["pair_id"].nunique().max() <= 4
    retired = env_t["retired_iteration"].dropna()
    assert len(ev[ev["kind"] == "retired"]) == len(retired)
    # MC: every admitted child passed it
    kids = run.children()
    admitted = kids[kids["admitted_as"].notna()]
    assert admitted["passed_mc"].all()
    assert ((admitted["mc_score"] >= 25) & (admitted["mc_score"] <= 340)).all()
    assert run.annecs.index[-1] == 11


def test_enhanced_transfer_rule_uses_recent_scores(tiny, tmp_path):
    run = _run(tiny(curriculum="enhanced_poet"), tmp_path / "r")
    it, tr = run.iterations, run.transfers
    for (iteration, target), rows in tr.groupby(["iteration", "target_pair_id"]):
        hist = it[(it["pair_id"] == target) & (it["iteration"] <= iteration)]["score"].tail(5)
        assert rows["bar"].iloc[0] == pytest.approx(hist.max())
        # only candidates whose direct score passed the bar were fine-tuned, and only those may replace
        direct = rows[rows["kind"] == "direct"].set_index("source_pair_id")["score"]
        for src in rows[rows["kind"] == "fine_tune"]["source_pair_id"]:
            assert direct[src] > hist.max()
        assert not rows[rows["kind"] == "direct"]["accepted"].any()
        assert (rows[rows["accepted"]]["score"] > hist.max()).all()


def test_enhanced_admits_best_active_agent(tiny, tmp_path):
    run = _run(tiny(curriculum="enhanced_poet"), tmp_path / "r")
    admitted = run.events[run.events["kind"] == "admitted"]
    details = [json.loads(d) for d in admitted["detail"]]
    assert any("agent_from" in d for d in details)


QUICKSTART_OUTPUT = re.compile(r"```\n(poet: running 120 iterations.*?)```", re.S)


@pytest.mark.slow
def test_quickstart_shows_poet_working(ray_local, tmp_path, capsys):
    """Acceptance: the quickstart admits >= 4 envs, accepts a transfer, and solves a harder env;
    the lines of its output the README and Getting started quote are the lines it prints."""
    result = poet.run(ROOT / "experiments" / "quickstart.yaml", out=tmp_path / "q", progress=True)
    printed = capsys.readouterr().err.splitlines()
    quoted = [
        line
        for page in ("README.md", "docs/getting-started.md")
        for line in QUICKSTART_OUTPUT.search((ROOT / page).read_text()).group(1).splitlines()
    ]
    for line in quoted:
        if line.startswith("iter "):
            assert line in printed, f"the docs quote {line!r}; the quickstart printed {printed}"
        if line.startswith("done: "):  # the counts, not the seconds
            done = [p for p in printed if p.startswith("done: ")]
            assert done and done[0].split("), ")[1].split(";")[0] == line.split("), ")[1].split(";")[0], done
    run = load_run(result.run_dir)
    # The default backend is the Ray pool; the in-process backend gives the same tables.
    assert run.config["evaluation"]["backend"] == "ray"
    poet.run(
        ROOT / "experiments" / "quickstart.yaml",
        out=tmp_path / "q-inprocess",
        progress=False,
        overrides=["evaluation.backend=inprocess"],
    )
    _assert_same_tables(run, load_run(tmp_path / "q-inprocess"))
    children = run.envs[run.envs["parent_env_id"].notna()]
    assert len(children) >= 4
    assert run.transfers["accepted"].sum() >= 1
    fam = envs.make_family("terrain")
    initial = fam.features(envs.EnvParams.from_json(run.envs.iloc[0]["params_json"]))
    harder_solved = [
        row.env_id
        for row in children.itertuples()
        if np.all(fam.features(envs.EnvParams.from_json(row.params_json)) >= initial)
        and np.any(fam.features(envs.EnvParams.from_json(row.params_json)) > initial)
        and pd.notna(row.solved_iteration)
    ]
    assert harder_solved, "no admitted env harder than the initial one was solved"
    solved_scores = run.iterations[run.iterations["env_id"].isin(harder_solved)]["score"]
    assert solved_scores.max() >= 230
    # The env tree the docs show is this run's (docs/make_pictures.py --only tree draws it).
    from poet.analysis.report import FIGURES, env_tree_figure, figure_png, write_report
    from tests.test_figures import assert_same_picture

    (tmp_path / "tree.png").write_bytes(figure_png(env_tree_figure(run)))
    assert_same_picture(ROOT / "docs" / "quickstart_env_tree.png", tmp_path / "tree.png")
    # ... and so are the population figures the analysis page shows
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    pictures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pictures)
    for name, fig in pictures.population_figures(run).items():
        (tmp_path / f"{name}.png").write_bytes(figure_png(fig))
        assert_same_picture(ROOT / "docs" / f"quickstart_{name}.png", tmp_path / f"{name}.png")
    # `poet report` on the quickstart run writes every figure and the page.

    index = write_report(result.run_dir)
    for name in FIGURES:
        png = index.parent / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"{name}.png" in index.read_text()


def test_run_records_its_throughput_per_phase(tiny, tmp_path):
    """Every phase writes its wall time and the env steps it simulated; the report shows them."""
    run = _run(tiny(), tmp_path / "r")
    ph = run.phases
    train = ph[ph["phase"] == "train"]
    assert train["iteration"].tolist() == list(range(12))
    assert sorted(ph.loc[ph["phase"] == "reproduce", "iteration"]) == [4, 8]
    assert (ph["seconds"] > 0).all() and (train["env_steps"] > 0).all()
    # one ES step: 16 perturbed rollouts of at most 150 steps each, then one score episode
    # (its pinned course runs once whatever eval_episodes says) per active pair
    first = int(train["env_steps"].iloc[0])
    assert 17 <= first <= 17 * 150
    tp = run.throughput()
    assert tp.loc["all", "env_steps"] == ph["env_steps"].sum()
    assert tp.loc["train", "steps_per_second"] == pytest.approx(train["env_steps"].sum() / train["seconds"].sum())
    from poet.analysis.report import summary

    assert "train: wall time, env steps, steps/s" in summary(run)


@pytest.mark.parametrize("interrupted", [False, True])
def test_the_run_freezes_what_precedes_its_loop_and_thaws_it_after(tiny, tmp_path, monkeypatch, interrupted):
    """Full collections during the loop skip what existed before it (frozen), and the freeze
    ends with the loop, also when a stop interrupts a wave."""
    import gc

    from poet.errors import RunInterrupted, WaveInterrupted
    from poet.runtime.orchestrator import Orchestrator

    seen = []
    original = Orchestrator.run

    def run(self, iterations):
        seen.append(gc.get_freeze_count())
        if interrupted:
            raise WaveInterrupted("a stop during the first wave")
        return original(self, iterations)

    monkeypatch.setattr(Orchestrator, "run", run)
    assert gc.get_freeze_count() == 0
    if interrupted:
        with pytest.raises(RunInterrupted):
            poet.run(tiny(iterations=2), out=tmp_path / "r", progress=False)
    else:
        poet.run(tiny(iterations=2), out=tmp_path / "r", progress=False)
    assert seen and seen[0] > 10_000  # the interpreter's and the libraries' objects at least
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_to_the_caller(tiny, tmp_path):
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        poet.run(tiny(iterations=1), out=tmp_path / "r", progress=False)
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()


BOOM = """
class Boom:
    name = "boom"
    def __init__(self, options, context):
        raise RuntimeError("trainer constructor failed")
    def init_state(self, theta): ...
    def reset_state(self, state, theta): ...
    def step(self, tasks, evaluator): ...
"""


@pytest.mark.slow
def test_ray_is_released_when_the_trainer_constructor_fails(tiny, tmp_path):
    """A run that fails after its pool started leaves no Ray behind in the calling process."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "boom_trainer.py").write_text(BOOM)
    cfg = tiny(iterations=1, evaluation={"backend": "ray"}, ray={"workers": 1}, trainer={"name": "boom_trainer:Boom"})
    code = (
        "import sys, ray, poet\n"
        f"cfg = {cfg!r}\n"
        "try:\n    poet.run(cfg, out=sys.argv[1], progress=False)\n"
        "except RuntimeError as exc:\n    print('raised:', exc)\n"
        "print('ray up:', ray.is_initialized())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert "raised: trainer constructor failed" in out.stdout, out.stderr[-2000:]
    assert "ray up: False" in out.stdout


def test_default_run_directories_of_the_same_second_get_their_own_names(tmp_path, monkeypatch):
    from poet.runtime.runner import default_out_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("poet.runtime.runner.time.strftime", lambda fmt: "20260101-000000")
    first = default_out_dir("experiments/quickstart.yaml")
    assert first == Path("runs/quickstart-20260101-000000")
    first.mkdir(parents=True)
    second = default_out_dir("experiments/quickstart.yaml")
    assert second == Path("runs/quickstart-20260101-000000-2")
    second.mkdir()
    assert default_out_dir("experiments/quickstart.yaml") == Path("runs/quickstart-20260101-000000-3")


def test_the_progress_bars_clock_starts_when_the_pool_is_ready(monkeypatch):
    """ETA and throughput count from the pool's start, not Ray's: the first `1/40 [00:06<04:10]`
    of a 9 s run was Ray's start spread over the whole run."""
    from poet.runtime import loop

    bar = loop.Progress(40, 0, True)
    bar.bar.start_t = bar.bar.last_print_t = 1000.0  # the bar as made before Ray started
    monkeypatch.setattr(loop.time, "time", lambda: 1006.0)
    bar.started()
    assert bar.bar.start_t == bar.bar.last_print_t == 1006.0
    bar.close()
