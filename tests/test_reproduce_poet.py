"""experiments/reproduce_poet.py --quick: every output is written, with the structure the README reads."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_reproduce_poet_quick_writes_table_figures_and_json(tmp_path):
    out = tmp_path / "reproduce"
    run = subprocess.run([sys.executable, str(ROOT / "experiments" / "reproduce_poet.py"), "--quick", "--out", str(out)],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert data["poet"]["solved"] >= 1 and len(data["targets"]) == 1
    target = data["targets"][0]
    assert target["budget"] >= 1 and set(target["baselines"]) == {"direct", "path", "accel", "dr"}
    for result in target["baselines"].values():
        assert len(result["scores"]) == result["seeds"] == 1 and 0 <= result["solved"] <= 1
    iterations = data["poet"]["iterations"]
    for key in ("poet", "enhanced_poet", "enhanced_poet_reference_counter"):
        assert len(data["annecs"][key]) == iterations
    assert "| target | difficulty |" in (out / "results.md").read_text()
    for name in ("targets.png", "annecs.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_annecs_poet_vs_enhanced_quick_writes_curves_figure_and_json_and_resumes(tmp_path):
    script = ROOT / "experiments" / "annecs_poet_vs_enhanced.py"
    args = ["--quick", "--iterations", "6", "--seeds", "0", "1", "--out", str(tmp_path / "runs"),
            "--json", str(tmp_path / "a.json"), "--figure", str(tmp_path / "a.png")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads((tmp_path / "a.json").read_text())
    assert [(r["arm"], r["family"], r["seed"]) for r in data["runs"]] == [
        ("poet", "terrain", 0), ("enhanced_poet", "terrain_cppn", 0),
        ("poet", "terrain", 1), ("enhanced_poet", "terrain_cppn", 1)]
    for r in data["runs"]:
        assert len(r["annecs_curve"]) == r["iterations"] == 6 and r["annecs_curve"][-1] == r["annecs"]
        assert ("annecs_reference_curve" in r) == (r["arm"] == "enhanced_poet")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    # run again further: the runs resume to the new target, their first iterations unchanged
    args[2] = "9"
    run = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    longer = json.loads((tmp_path / "a.json").read_text())
    for short, long_ in zip(data["runs"], longer["runs"]):
        assert long_["iterations"] == 9 and long_["annecs_curve"][:6] == short["annecs_curve"]
