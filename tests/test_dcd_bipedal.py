"""experiments/dcd_bipedal.py --quick: DR, robust PLR and ACCEL trained their updates, POET
matched their env steps, every run scored on dcd's suite (on `terrain`, its analogues), each
run's file written as it finished, dcd's numbers beside."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "experiments" / "dcd_bipedal.py"
SUITE = ["BipedalWalker", "Hardcore", "Med-Stairs", "Med-PitGap", "Med-StumpHeight", "Med-Roughness"]


def quick(family: str, results) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--family", family, "--results", str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bipedal", "terrain"])
def test_quick_benchmark_trains_matches_and_scores_every_run(family, tmp_path):
    if family == "bipedal":
        pytest.importorskip("Box2D")
    done = quick(family, tmp_path)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in (tmp_path / family).glob("*.json"))
    assert files == ["accel-seed0.json", "dr-seed0.json", "poet-seed0.json", "robust_plr-seed0.json"]
    result = json.loads((tmp_path / "results.json").read_text())
    entry = result["families"][family]
    runs = {r["curriculum"]: r for r in entry["runs"]}
    for name in ("dr", "robust_plr", "accel"):
        assert runs[name]["updates"] == runs[name]["updates_asked"] == 2  # robust PLR explores too: more iterations
        assert runs[name]["iterations"] >= 2 and runs[name]["starts"][0]["code"]["commit"]
    goal = int(np.mean([runs[n]["env_steps"] for n in ("dr", "robust_plr", "accel")]))
    assert runs["poet"]["env_steps_goal"] == goal and runs["poet"]["env_steps"] >= goal
    levels = SUITE if family == "bipedal" else [x for x in SUITE if x != "Hardcore"]
    for r in runs.values():
        assert [row["level"] for row in r["scores"]] == levels and all(row["episodes"] == 2 for row in r["scores"])
    assert entry["fraction_of_dcd_updates"] == [2 / 20_000]
    assert result["published"]["accel"]["Hardcore"]["solved_rate"] == pytest.approx(0.629)
    assert entry["summary"]["poet"][levels[0]]["seeds"] == 1

    again = quick(family, tmp_path)  # every run's file exists: nothing runs again
    assert again.returncode == 0 and "env steps;" not in again.stdout, again.stdout


def test_quick_never_writes_into_the_committed_results():
    done = quick("terrain", ROOT / "experiments" / "results" / "x")
    assert done.returncode == 2 and "never writes into experiments/results/" in done.stderr


def test_gather_writes_only_the_summary_of_the_files_there(tmp_path):
    run = {"curriculum": "dr", "seed": 0, "updates": 200, "scores": [{"level": "Med-Stairs", "solved_rate": 0.5}]}
    run["scores"][0]["mean_return"] = 100.0
    (tmp_path / "bipedal").mkdir()
    (tmp_path / "bipedal" / "dr-seed0.json").write_text(json.dumps(run))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--gather", "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["families"]["bipedal"]["fraction_of_dcd_updates"] == [0.01]
    assert result["families"]["bipedal"]["summary"]["dr"]["Med-Stairs"] == {
        "seeds": 1,
        "solved_rate": 0.5,
        "mean_return": 100.0,
    }
    assert result["families"]["terrain"]["runs"] == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "bipedal",
        "results.json",
    ]
