"""experiments/reproduce_poet.py --quick: every output is written, with the structure docs/study.md reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def _reproduce(out, results):
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "reproduce_poet.py"),
            "--quick",
            "--out",
            str(out),
            "--results",
            str(results),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_reproduce_poet_quick_writes_tables_figures_and_json_and_resumes(tmp_path):
    out, results = tmp_path / "runs", tmp_path / "results"
    run = _reproduce(out, results)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads((results / "results.json").read_text())
    assert [(a["arm"], a["seed"]) for a in data["arms"]] == [("poet", 0), ("enhanced_poet", 0)]
    assert data["climb"]["classes"]["easy"]["solved"] >= 1
    assert data["classes"] and all(len(c["targets"]) == 1 for c in data["classes"])
    for c in data["classes"]:
        assert set(c["controls"]) == {"direct", "path", "accel", "dr"}
        for summary in c["controls"].values():
            assert summary["runs"] == 1 and 0 <= summary["reached_threshold"] <= 1
            assert set(summary["mann_whitney_poet_greater"]) == {"u", "p"}
        for t in c["targets"]:
            assert t["budget"] == 2 * t["lineage_steps"] >= 2 and t["poet_score"] >= data["solved_threshold"]
            assert t["controls"]["direct"]["iterations"] == [t["budget"]]
            for name in ("accel", "dr"):  # as many env steps as the class's longest direct run
                assert (
                    min(t["controls"][name]["env_steps"])
                    >= c["env_steps"]
                    == max(s for u in c["targets"] for s in u["controls"]["direct"]["env_steps"])
                )
            assert all(len(v["scores"]) == 1 for v in t["controls"].values())
    assert "| class | POET: envs created / solved |" in (results / "results.md").read_text()
    for name in ("scores.png", "climb.png", "annecs.png"):
        assert (results / name).read_bytes()[:4] == b"\x89PNG"
    # a second call resumes every run where it is (all finished): the same numbers
    again = _reproduce(out, results)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads((results / "results.json").read_text())
    assert {k: v for k, v in second.items() if k not in ("seconds", "arms")} == {
        k: v for k, v in data.items() if k not in ("seconds", "arms")
    }


def test_lineage_steps_count_each_env_of_the_chain_until_the_next_was_created():
    """Start env a (iterations 0-9), child b made at 4 (trains 4-9), grandchild c made at 6 and
    solved at 8: a counts 0..4 (5 steps), b 4..6 (3), c 6..8 (3)."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "experiments"))
    from reproduce_poet import lineage_steps

    envs = pd.DataFrame(
        {
            "env_id": ["a", "b", "c"],
            "parent_env_id": [None, "a", "b"],
            "created_iteration": [0, 4, 6],
            "solved_iteration": [2, 5, 8],
        }
    )
    rows = [(i, "a") for i in range(10)] + [(i, "b") for i in range(4, 10)] + [(i, "c") for i in range(6, 10)]
    iterations = pd.DataFrame(rows, columns=["iteration", "env_id"])

    class FakeRun:
        pass

    run = FakeRun()
    run.envs, run.iterations = envs, iterations
    assert lineage_steps(run, "c") == 5 + 3 + 3
    assert lineage_steps(run, "a") == 3


def test_annecs_poet_vs_enhanced_quick_writes_curves_figure_and_json_and_resumes(tmp_path):
    script = ROOT / "experiments" / "annecs_poet_vs_enhanced.py"
    args = [
        "--quick",
        "--iterations",
        "6",
        "--seeds",
        "0",
        "1",
        "--out",
        str(tmp_path / "runs"),
        "--json",
        str(tmp_path / "a.json"),
        "--figure",
        str(tmp_path / "a.png"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads((tmp_path / "a.json").read_text())
    assert [(r["arm"], r["family"], r["seed"]) for r in data["runs"]] == [
        ("poet", "terrain", 0),
        ("enhanced_poet", "terrain_cppn", 0),
        ("poet", "terrain", 1),
        ("enhanced_poet", "terrain_cppn", 1),
    ]
    for r in data["runs"]:
        assert len(r["annecs_curve"]) == r["iterations"] == 6 and r["annecs_curve"][-1] == r["annecs"]
        assert ("annecs_reference_curve" in r) == (r["arm"] == "enhanced_poet")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    # run again further: the runs resume to the new target, their first iterations unchanged
    args[2] = "9"
    run = subprocess.run(
        [sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-3000:]
    longer = json.loads((tmp_path / "a.json").read_text())
    for short, long_ in zip(data["runs"], longer["runs"]):
        assert long_["iterations"] == 9 and long_["annecs_curve"][:6] == short["annecs_curve"]
