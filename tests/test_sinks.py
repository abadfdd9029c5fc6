"""TensorBoard and MLflow sinks: their curves equal the run's tables, and a killed and resumed
run has every step once."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest

import poet
from poet.analysis import load_run
from poet.runtime.sinks import read_mlflow, read_tensorboard
from tests.conftest import ROOT
from tests.test_checkpoint import _kill_after_checkpoint, _write_config

pytest.importorskip("tensorboardX")
pytest.importorskip("mlflow")


def _curves(run_dir):
    run_id = (run_dir / "mlflow_run_id").read_text().strip()
    return read_tensorboard(run_dir / "tensorboard"), read_mlflow(run_dir / "mlruns", run_id)


def _scores(points, prefix="score/"):
    return {(tag[len(prefix) :], step): value for tag, step, value in points if tag.startswith(prefix)}


def _check_against_tables(run_dir) -> None:
    run = load_run(run_dir)
    tb, ml = _curves(run_dir)
    expected = {(r.pair_id, int(r.iteration)): float(r.score) for r in run.iterations.itertuples()}
    got_tb, got_ml = _scores(tb), _scores(ml)
    assert got_tb.keys() == expected.keys() == got_ml.keys()
    for key, value in expected.items():
        assert got_tb[key] == pytest.approx(value, rel=1e-6)  # TensorBoard keeps float32
        assert got_ml[key] == pytest.approx(value, rel=1e-12)
    last = int(run.iterations["iteration"].max())
    annecs = {step: v for tag, step, v in ml if tag == "run/annecs"}
    assert sorted(annecs) == list(range(last + 1)) and annecs[last] == run.annecs.iloc[-1]
    phases = {(tag, step) for tag, step, _ in tb if tag.startswith("phase/train/")}
    assert {step for _, step in phases} == set(run.phases.loc[run.phases["phase"] == "train", "iteration"])


def test_a_quickstart_run_with_both_sinks_writes_the_tables_curves(ray_local, tmp_path):
    poet.run(
        ROOT / "experiments" / "quickstart.yaml",
        out=tmp_path / "r",
        progress=False,
        overrides=["iterations=25", "logging.tensorboard=true", "logging.mlflow=true"],
    )
    _check_against_tables(tmp_path / "r")
    assert load_run(tmp_path / "r").iterations["pair_id"].nunique() >= 2  # past the first reproduction


def test_a_killed_and_resumed_run_has_every_step_once(tiny, tmp_path):
    cfg = tiny(iterations=10, checkpoint={"every": 3}, logging={"tensorboard": True, "mlflow": True})
    config = _write_config(tmp_path / "cfg.yaml", cfg)
    out = tmp_path / "killed"
    _kill_after_checkpoint([sys.executable, "-m", "poet.cli", "run", str(config), "--out", str(out), "--quiet"], out, 6)
    poet.resume(out, progress=False)
    tb, ml = _curves(out)
    for points in (tb, ml):
        repeated = [k for k, n in Counter((tag, step) for tag, step, _ in points).items() if n > 1]
        assert not repeated, repeated[:5]
    _check_against_tables(out)
    np.testing.assert_array_equal(sorted({s for _, s, _ in tb}), np.arange(10))
