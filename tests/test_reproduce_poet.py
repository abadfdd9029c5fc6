"""experiments/reproduce_poet.py --quick: every output is written, with the structure docs/study.md reads."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from poet.analysis import load_run
from tests.conftest import ROOT
from tests.test_docs import _cells, check_cell

sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import study_tables  # noqa: E402


def _reproduce(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "reproduce_poet.py"), "--quick", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _committed_results() -> dict[str, str]:
    folder = ROOT / "experiments" / "results"
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def test_reproduce_poet_quick_writes_tables_figures_and_json_elsewhere_and_resumes():
    """One quick study (two calls: the second resumes it), never into the committed results."""
    before = _committed_results()
    refused = _reproduce("--results", ROOT / "experiments" / "results" / "reproduce_poet")
    assert refused.returncode == 2 and "never writes into experiments/results" in refused.stderr
    run = _reproduce()
    assert run.returncode == 0, run.stderr[-3000:]
    results = Path(run.stdout.strip().splitlines()[-1].rsplit("results in ", 1)[1])
    try:
        assert not results.resolve().is_relative_to(ROOT)
        _check_quick_study(results, results.parent / "runs")
    finally:
        shutil.rmtree(results.parent, ignore_errors=True)
    assert _committed_results() == before


def _check_quick_study(results: Path, out: Path) -> None:
    """The quick study's outputs in `results` (its runs in `out`), and a second call that
    resumes every run gives the same numbers."""
    data = json.loads((results / "results.json").read_text())
    assert [s["seed"] for s in data["poet"]] == [0, 1]
    assert [(a["arm"], a["seed"]) for a in data["annecs"]["runs"]] == [("poet", 0), ("enhanced_poet", 0)]
    assert data["poet"][0]["classes"]["easy"]["solved"] >= 1
    assert [c["class"] for c in data["classes"]] == [0, 1, 2, 3]
    by_seed = {}
    for t in data["targets"]:
        by_seed.setdefault((t["poet_seed"], t["class"]), []).append(t)
        assert t["budget"] == 2 * t["lineage_steps"] >= 2 and t["poet_score"] >= data["solved_threshold"]
        assert set(t["controls"]) == {"direct", "path", "accel", "dr"}
        assert all(len(runs) == 1 for runs in t["controls"].values())
        assert t["controls"]["direct"][0]["iterations"] == t["budget"]
        assert "sigma_floor_iteration" in t["controls"]["direct"][0]
        # direct trains on the target's own course, and the path ends on it: the same env id
        direct, path = (load_run(t["controls"][name][0]["run_dir"]).iterations for name in ("direct", "path"))
        assert set(direct["env_id"]) == {t["env_id"]}
        assert path.loc[path["iteration"].idxmax(), "env_id"] == t["env_id"]
    assert {seed for seed, _ in by_seed} == {0, 1} and all(len(ts) == 1 for ts in by_seed.values())
    for group in by_seed.values():  # as many env steps as the class's longest direct run
        longest = max(t["controls"]["direct"][0]["env_steps"] for t in group)
        assert all(t["controls"][name][0]["env_steps"] >= longest for t in group for name in ("accel", "dr"))
    easy = data["classes"][0]
    assert easy["targets"] == len(by_seed) and easy["seeds_solving"] == 2
    for summary in easy["controls"].values():
        test = summary["test"]
        assert test["unit"] == "target" and test["k"] == easy["targets"] and test["min_p"] == 2.0 ** -test["k"]
        assert test["p"] >= test["min_p"] and test["p_holm"] >= test["p"]
    assert all(c["controls"]["direct"]["test"]["p"] is None for c in data["classes"][1:] if not c["targets"])
    assert set(data["parts_seconds"]) == {"poet", "direct", "path", "accel", "dr", "enhanced_poet"}
    cost = data["annecs"]["cost"]["enhanced_poet-seed0"]
    assert set(cost["by_phase"]) >= {"train", "reproduce"} and set(cost["by_phase_per_block"]) == set(cost["by_phase"])
    assert (
        sum(cost["env_steps_by_phase"].values())
        == cost["env_steps"]
        == sum(map(sum, cost["env_steps_by_phase_per_block"].values()))
    )
    # docs/study.md's tables, built from the JSON with each number's key, are the ones the script wrote
    tables = [make(str(results / "results.json")) for make in study_tables.TABLES.values()]
    assert [row for t in tables for row in _cells(t.markdown())] == _cells((results / "results.md").read_text())
    numbers = [cell for t in tables for row in t.rows for cell in row if cell.source]
    assert len(numbers) > 100
    for cell in numbers:
        check_cell(cell)
    for name in ("scores.png", "climb.png", "annecs.png"):
        assert (results / name).read_bytes()[:4] == b"\x89PNG"
    # a second call resumes every run where it is (all finished): the same numbers
    again = _reproduce("--out", out, "--results", results)
    assert again.returncode == 0, again.stderr[-3000:]
    # every control run had finished: no time left is guessed from them, each stage ends "done"
    progress = [line for line in again.stdout.splitlines() if " runs, " in line]
    assert len(progress) == 8 and not any("min left" in line for line in progress)
    assert [line for line in progress if line.endswith("done")] == [progress[3], progress[7]]
    second = json.loads((results / "results.json").read_text())
    assert second["targets"] == data["targets"] and second["classes"] == data["classes"]


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


def test_poet_best_counts_the_admitted_agent_and_accepted_transfers():
    """Env e (pair p1) was admitted with an agent scoring 297 there, ES then scored 150 and
    171, a transfer of 180 was accepted and one of 290 refused, and another pair's transfer
    of 299 went elsewhere: POET's best on e is 297; on an env with no records, None."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "experiments"))
    from reproduce_poet import poet_best

    run = SimpleNamespace(
        envs=pd.DataFrame({"env_id": ["e", "f"], "pair_id": ["p1", "p2"]}),
        iterations=pd.DataFrame({"iteration": [1, 2], "env_id": ["e", "e"], "score": [150.0, 171.0]}),
        transfers=pd.DataFrame(
            {"target_pair_id": ["p1", "p1", "p2"], "score": [180.0, 290.0, 299.0], "accepted": [True, False, True]}
        ),
        events=pd.DataFrame(
            {
                "kind": ["admitted", "solved"],
                "env_id": ["e", "e"],
                "detail": [json.dumps({"transfer_score": 297.0}), "transfer score 297.0"],
            }
        ),
    )
    assert poet_best(run, "e") == 297.0
    run.events = run.events.iloc[:0]
    assert poet_best(run, "e") == 180.0
    assert poet_best(run, "g") is None


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
