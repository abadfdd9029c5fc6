"""experiments/dcd_bipedal.py --quick: DR, robust PLR and ACCEL trained their updates, POET
matched their env steps, every run scored on dcd's suite, dcd's numbers beside."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

pytest.importorskip("Box2D")
SCRIPT = ROOT / "experiments" / "dcd_bipedal.py"


@pytest.mark.slow
def test_quick_benchmark_trains_matches_and_scores_every_run(tmp_path):
    out = tmp_path / "dcd.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    runs = {r["curriculum"]: r for r in result["runs"]}
    assert list(runs) == ["dr", "robust_plr", "accel", "poet"]
    for name in ("dr", "robust_plr", "accel"):
        assert runs[name]["updates"] == result["updates"] == 2  # robust PLR explores too: more iterations
        assert runs[name]["iterations"] >= 2 and runs[name]["starts"]
    goal = int(np.mean([runs[n]["env_steps"] for n in ("dr", "robust_plr", "accel")]))
    assert runs["poet"]["env_steps"] >= goal
    levels = ["BipedalWalker", "Hardcore", "Med-Stairs", "Med-PitGap", "Med-StumpHeight", "Med-Roughness"]
    for r in runs.values():
        assert [row["level"] for row in r["scores"]] == levels and all(row["episodes"] == 2 for row in r["scores"])
    assert result["published"]["accel"]["Hardcore"]["solved_rate"] == pytest.approx(0.629)
    assert result["summary"]["poet"]["Hardcore"]["seeds"] == 1


def test_quick_never_writes_into_the_committed_results():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(ROOT / "experiments" / "results" / "x.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "never writes into experiments/results/" in done.stderr
