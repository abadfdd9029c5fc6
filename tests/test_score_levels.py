"""`poet score RUN --levels NAME` and `run.score_levels`: a run's agents on a family's named
level set, with dcd's published numbers beside (read from its CSVs)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

import poet
from poet.analysis import load_run
from tests.conftest import ROOT

CURRICULA = {  # POET, ACCEL (an ES student, quick) and a user's curriculum named module:Class
    "poet": {"curriculum": "poet", "reproduction": {"every": 100}},
    "accel": {
        "curriculum": "accel",
        "curriculum_options": {"buffer_size": 4, "num_levels": 2},
        "trainer": {"name": "es"},
    },
    "user": {"curriculum": "experiments.ladder_curriculum:LadderCurriculum", "curriculum_options": {"rungs": 2}},
}


def _bipedal_run(tmp_path, name: str):
    pytest.importorskip("Box2D")
    cfg = {
        "seed": 1,
        "iterations": 3,
        "progress": False,
        "env": {"family": "bipedal", "options": {"max_episode_steps": 60}},
        "policy": {"hidden": [8]},
        "evaluation": {"max_steps": 60, "eval_episodes": 1, "backend": "inprocess"},
        "trainer": {"name": "es", "es": {"population": 4, "noise_table_size": 100_000}},
        **CURRICULA[name],
    }
    out = tmp_path / name
    poet.run(cfg, out=out, progress=False)
    return out


def _csv_means(file: str) -> dict[str, float]:
    with open(ROOT / "envs" / "published" / "dcd_bipedal8d" / file, newline="") as f:
        return {row[0]: float(np.mean([float(x) for x in row[1:]])) for row in list(csv.reader(f))[1:]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_poet_score_prints_the_table_of_its_json_with_dcds_csv_means_beside(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the user's curriculum is importable from the repository root
    run_dir = _bipedal_run(tmp_path, name)
    done = subprocess.run(
        [sys.executable, "-m", "poet.cli", "score", str(run_dir), "--levels", "dcd", "--episodes", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((run_dir / "analysis" / "score-dcd.json").read_text())
    assert (run_dir / "analysis" / "score-dcd.png").stat().st_size > 0
    assert [r["level"] for r in data["rows"]] == [
        "BipedalWalker",
        "Hardcore",
        "Med-Stairs",
        "Med-PitGap",
        "Med-StumpHeight",
        "Med-Roughness",
    ]
    lines = done.stdout.splitlines()
    for row in data["rows"]:  # each printed row is its JSON row's numbers
        line = next(x for x in lines if x.startswith(f"| {row['level']} |"))
        assert f"{row['mean_return']:.1f} [{row['mean_return_lo']:.1f}, {row['mean_return_hi']:.1f}]" in line
        assert f"{row['solved_rate']:.2f} [{row['solved_rate_lo']:.2f}, {row['solved_rate_hi']:.2f}]" in line
        assert row["episodes"] == 3 and row["mean_return_lo"] <= row["mean_return"] <= row["mean_return_hi"]
    means = _csv_means("bipedal8d-accel_20k-updates.csv")
    accel = data["published"]["accel"]
    assert accel["Hardcore"]["solved_rate"] == pytest.approx(means["solved_rate:BipedalWalkerHardcore-v3"])
    assert accel["Med-Stairs"]["test_returns"] == pytest.approx(means["test_returns:BipedalWalker-Med-Stairs-v0"])
    line = next(x for x in lines if x.startswith("| Med-Stairs |"))
    assert f"{accel['Med-Stairs']['solved_rate']:.3f} / {accel['Med-Stairs']['test_returns']:.1f}" in line


@pytest.mark.slow
def test_score_levels_picks_the_best_agent_per_level_or_gives_every_one(tmp_path):
    run = load_run(_bipedal_run(tmp_path, "poet"))
    every = run.score_levels("poet-rose", episodes=2, pick="all")
    best = run.score_levels("poet-rose", episodes=2)
    assert len(best) == 6 and set(every["level"]) == set(best["level"])
    for r in best.itertuples():
        mine = every[every["level"] == r.level]
        assert r.mean_return == mine["mean_return"].max()
    with pytest.raises(
        poet.ConfigError, match="no level set 'nope' in family 'bipedal'; it has dcd, dcd-extended, poet-rose"
    ):
        run.score_levels("nope")


def test_a_family_without_level_sets_is_one_line(tiny, tmp_path):
    cppn = {"family": "terrain_cppn", "options": {"course_length": 20.0, "max_episode_steps": 150}}
    poet.run(tiny(iterations=1, env=cppn), out=tmp_path / "r", progress=False)
    done = subprocess.run(
        [sys.executable, "-m", "poet.cli", "score", str(tmp_path / "r"), "--levels", "dcd"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.strip() == (
        "poet: error: --levels: env family 'terrain_cppn' has no named level sets (`level_sets`)"
    )


def test_a_terrain_run_is_scored_on_dcds_suite_as_its_analogues(tiny, tmp_path):
    poet.run(tiny(iterations=2), out=tmp_path / "r", progress=False)
    scores = load_run(tmp_path / "r").score_levels("dcd", episodes=2)
    assert list(scores["level"]) == ["BipedalWalker", "Med-Stairs", "Med-PitGap", "Med-StumpHeight", "Med-Roughness"]
    assert (scores["episodes"] == 2).all() and scores["mean_return"].notna().all()


def test_a_directory_that_is_not_a_run_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "poet.cli", "score", str(tmp_path / "nope"), "--levels", "dcd"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.startswith("poet: error: ") and "is not a run directory" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
