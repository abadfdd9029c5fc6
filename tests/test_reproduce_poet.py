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
