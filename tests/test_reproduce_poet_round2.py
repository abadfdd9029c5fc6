"""experiments/reproduce_poet_round2.py: the plan's target rule and budgets, and a quick study
(POET, its controls, a resume) that never writes into the committed results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import reproduce_poet_round2 as study  # noqa: E402

SCRIPT = ROOT / "experiments" / "reproduce_poet_round2.py"


def _env(env_id: str, realised_class: int, pit: float, stump: float, rough: float, solved: int) -> dict:
    realised = {"pit_gap": pit, "stump_height": stump, "roughness": rough}
    return {
        "env_id": env_id,
        "realised_class": realised_class,
        "excess": study.excess(realised),
        "solved_iteration": solved,
    }


def test_excess_sums_the_relative_excess_of_the_criteria_met_only():
    # pit 7.5 / 6.0 - 1 = 0.25, stump 3.6 / 2.4 - 1 = 0.5; roughness 1.0 is under 4.5: no part
    assert study.excess({"pit_gap": 7.5, "stump_height": 3.6, "roughness": 1.0}) == pytest.approx(0.75)
    assert study.excess({"pit_gap": 5.9, "stump_height": 0.0, "roughness": 0.0}) == 0.0


def test_targets_are_the_largest_excess_among_envs_realising_the_class_ties_to_the_earlier_solve():
    envs = [
        _env("a", 1, 6.6, 0.0, 0.0, 50),  # excess 0.1
        _env("b", 1, 0.0, 3.6, 0.0, 40),  # 0.5
        _env("c", 1, 9.0, 0.0, 0.0, 90),  # 0.5, solved later than b
        _env("d", 1, 0.0, 2.4, 0.0, 10),  # 0.0
        _env("e", 2, 7.2, 2.88, 0.0, 70),  # the only class-2 env
        _env("f", 0, 0.0, 0.0, 0.0, 0),
    ]
    picked = study.pick_targets(envs, (1, 2, 3))
    assert picked["1"] == {"candidates": 4, "shortfall": 0, "env_ids": ["b", "c", "a"]}
    assert picked["2"] == {"candidates": 1, "shortfall": 2, "env_ids": ["e"]}
    assert picked["3"] == {"candidates": 0, "shortfall": 3, "env_ids": []}


def test_thirds_read_a_plateau_only_when_the_last_thirds_gain_is_under_a_quarter_of_the_firsts():
    rising = list(range(1, 10))  # ANNECS after 1..9 iterations: +3 in the first third, +3 in the last
    assert study.thirds(rising) == {"first_third": 3, "last_third": 3, "levels_off": False}
    flat = [2, 4, 8, 8, 8, 8, 8, 8, 9]
    assert study.thirds(flat) == {"first_third": 8, "last_third": 1, "levels_off": True}
    assert study.thirds([4, 4, 4, 4, 4, 4, 4, 5, 6])["levels_off"] is False  # 2 is not under 4 / 4


def test_fixed_course_test_pairs_each_poet_seed_with_its_methods_run(tmp_path):
    def best(solved: int) -> list[float]:  # 20 courses, `solved` of them at or over 230
        return [300.0] * solved + [100.0] * (20 - solved)

    seeds = [{"seed": s, "fixed_courses": {"classes": {c: {"best": best(10 + s)} for c in "123"}}} for s in range(8)]
    (tmp_path / "ued").mkdir()
    for s in range(8):
        for c in (1, 2):  # ACCEL solves 5 of 20 on every class; no DR run and no class-3 run yet
            record = {"poet_seed": s, "class": c, "arm": "accel", "fixed_courses": {k: best(5) for k in "123"}}
            (tmp_path / "ued" / f"seed{s}-class{c}-accel.json").write_text(json.dumps(record))
    tests = {(t["class"], t["arm"]): t for t in study.fixed_course_tests(seeds, tmp_path, 230.0)}
    accel = tests[(1, "accel")]
    assert accel["seeds"] == list(range(8)) and accel["method"] == [0.25] * 8
    assert accel["poet"] == [(10 + s) / 20 for s in range(8)]
    assert accel["p"] == accel["min_p"] == 2**-8  # POET ahead at every seed
    assert accel["p_holm"] == pytest.approx(2 * 2**-8)  # Holm over the two tests that have data
    assert tests[(3, "accel")]["p"] is None and tests[(1, "dr")]["seeds"] == []


def _call(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_quick_study_writes_poet_and_control_files_at_the_budget_and_resumes(tmp_path):
    results = tmp_path / "results"
    done = _call("poet", "--seed", 0, "--quick", "--results", results)
    assert done.returncode == 0, done.stderr
    summary = json.loads((results / "poet" / "seed0.json").read_text())
    assert summary["starts"][0]["iteration"] == 0 and summary["fixed_courses"]["episodes"] == 5
    assert [len(c["best"]) for c in summary["fixed_courses"]["classes"].values()] == [20, 20, 20]
    steps = summary["env_steps"]
    for t in summary["targets"]:
        assert 0 < t["budget_env_steps"] <= steps and t["realised_class"] == t["class"]
    assert summary["targets"], "a quick POET solves class-0 envs: its targets"
    done = _call("controls", "--seed", 0, "--quick", "--results", results)
    assert done.returncode == 0, done.stderr
    records = [json.loads(p.read_text()) for p in sorted((results / "controls").glob("*.json"))]
    assert len(records) == 3 * len(summary["targets"])  # direct, path, path_restart; one seed each
    for r in records:  # each run took its target's budget, and at most one ES step more
        assert r["env_steps"] >= r["budget_env_steps"] and r["share_of_budget"] >= 1.0
        assert r["starts"] and r["score"] is not None
    again = _call("controls", "--seed", 0, "--quick", "--results", results)
    assert "0 runs to go" in again.stdout
    status = _call("status", "--results", results, "--control-seeds", 1)
    assert f"controls {len(records)}/{len(records)} runs" in status.stdout
    done = _call("analyse", "--quick", "--results", results)
    assert done.returncode == 0, done.stderr
    result = json.loads((results / "results.json").read_text())
    assert result["complete_seeds"] == [0] and (results / "results.md").exists()
    for e in result["estimand"]:  # one seed: the interval by seed is the rate itself
        assert e["runs"] == sum(len(t["runs"][e["arm"]]) for t in result["targets"] if t["class"] == e["class"])
        assert e["rate_ci95_by_seed"] == [e["rate"], e["rate"]] and e["seeds"] == 1
        assert e["seeds_supporting"] == int(e["solved"] < e["runs"] / 2)
    assert all(len(t["runs"]["direct"]) == 1 and "realised_class" in t for t in result["targets"])
    done = _call("ued", "--seed", 0, "--quick", "--results", results)
    assert done.returncode == 0, done.stderr
    for arm in ("accel", "dr"):  # one run per class with targets: class 0 in a quick study
        r = json.loads((results / "ued" / f"seed0-class0-{arm}.json").read_text())
        assert r["env_steps"] >= r["budget_env_steps"] and len(r["target_scores"]) == len(summary["targets"])
        assert [len(v) for v in r["fixed_courses"].values()] == [20, 20, 20] and r["chosen_checkpoint"] >= 1
        ckpts = sorted((results.parent / "runs" / "ued" / f"seed0-class0-{arm}" / "checkpoints").iterdir())
        assert len(ckpts) == r["iterations"]  # every=1 in a quick run: every checkpoint kept, one to choose from
    done = _call("annecs", "--curriculum", "enhanced_poet", "--family", "terrain", "--quick", "--results", results)
    assert done.returncode == 0, done.stderr
    arm = json.loads((results / "annecs" / "enhanced_poet-terrain-seed0.json").read_text())
    r = arm["reproduction"]
    assert arm["iterations"] == 24 and r["phases"] == 5 and 0 <= r["share_at_cap"] <= 1
    assert r["children"]["admitted"] == arm["envs_created"] - 1 == r["at_cap"]  # at most 1 admitted a phase
    _call("analyse", "--quick", "--results", results)
    assert json.loads((results / "results.json").read_text())["annecs"][0]["family"] == "terrain"


def test_quick_never_writes_into_the_committed_results():
    done = _call("poet", "--quick", "--results", ROOT / "experiments" / "results" / "x")
    assert done.returncode == 2 and "never writes into experiments/results/" in done.stderr
