"""The terrain family at POET's geometry: its units come from the runner's limits, the paper's
classes are within the planner's reach and the domain maxima beyond it (a small version of
experiments/feasibility.py), and a run made with the old geometry is not resumed."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import poet
from envs import EnvParams, terrain
from envs.terrain_planner import limit, plan
from poet.config import ConfigError
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
import feasibility  # noqa: E402
import fixed_courses  # noqa: E402

SEEDS = 20


def pits(metres: float) -> dict:
    return {"roughness": 0.0, "pit_gap": (metres / terrain.PIT_SCALE,) * 2, "stump_height": ()}


def stumps(metres: float) -> dict:
    return {"roughness": 0.0, "pit_gap": (), "stump_height": (metres / terrain.STUMP_SCALE,) * 2}


def test_the_domain_maxima_are_the_runners_limits_on_level_ground():
    """The units' principle: 8 pit-gap units and 5 stump-height units are the narrowest pit
    and the lowest stump the planner never clears (on 100 course seeds in the full script)."""
    assert terrain.PIT_MAX * terrain.PIT_SCALE == pytest.approx(6.5)
    assert terrain.STUMP_MAX * terrain.STUMP_SCALE == pytest.approx(1.46)
    assert not feasibility.clears_any(pits(6.5), 100, 256)
    assert feasibility.clears_any(pits(6.4), 100, 256)
    assert not feasibility.clears_any(stumps(1.46), SEEDS, 64)
    assert feasibility.clears_any(stumps(1.45), SEEDS, 64)


def test_limit_bisects_to_the_smallest_size_not_cleared():
    assert limit(lambda size: size < 2.35, 1.0, 4.0, 0.1) == pytest.approx(2.4)
    with pytest.raises(ValueError, match="smallest"):
        limit(lambda size: False, 1.0, 4.0)
    with pytest.raises(ValueError, match="largest"):
        limit(lambda size: True, 1.0, 4.0)


@pytest.mark.parametrize("criteria", [("roughness",), ("pit_gap",), ("stump_height",), feasibility.CRITERIA])
def test_the_papers_thresholds_are_within_the_planners_reach(criteria):
    at = feasibility.LEVELS["threshold"]
    values = {"roughness": 0.0, "pit_gap": (), "stump_height": ()} | {name: at[name] for name in criteria}
    assert feasibility.clear_rate(values, SEEDS, 256) >= 0.9 * SEEDS


@pytest.mark.parametrize("criteria", [("pit_gap",), ("stump_height",), feasibility.CRITERIA])
def test_the_domain_maxima_are_beyond_it(criteria):
    at = feasibility.LEVELS["maximum"]
    values = {"roughness": 0.0, "pit_gap": (), "stump_height": ()} | {name: at[name] for name in criteria}
    assert feasibility.clear_rate(values, SEEDS, 64) == 0


def test_the_planner_clears_every_course_the_scripted_controller_clears():
    """The scripted controller's actions (full drive, full jumps) are among those the planner
    searches, so a course the controller finishes is one the planner must clear."""
    values = {"roughness": 4.5, "pit_gap": (0.8, 6.0), "stump_height": (0.2, 2.4)}
    for seed in range(10):
        course = feasibility.course(**values, seed=seed)
        if any(feasibility.scripted(course, lead) for lead in feasibility.STUMP_LEADS):
            assert plan(course, feasibility.MAX_STEPS)[0], seed


def test_quick_refuses_to_write_into_the_committed_results(monkeypatch, capsys):
    for argv in (["--quick"], ["--quick", "--json", str(ROOT / "experiments" / "results" / "f.json")]):
        monkeypatch.setattr(sys, "argv", ["feasibility.py", *argv])
        with pytest.raises(SystemExit):
            feasibility.main()
        assert "outside experiments/results" in capsys.readouterr().err


def test_a_run_made_with_the_old_geometry_is_not_resumed(tiny, tmp_path):
    out = tmp_path / "run"
    poet.run(tiny(iterations=2), out=out)
    made = json.loads((out / "run.json").read_text())
    assert made["family_version"] == terrain.TerrainFamily.version == 2
    del made["family_version"]  # as a run made before the family had versions
    (out / "run.json").write_text(json.dumps(made))
    with pytest.raises(ConfigError, match="version 1 of the 'terrain' family.*builds differently.*start a new run"):
        poet.resume(out, iterations=4)
    assert poet.analysis.load_run(out).envs is not None  # its records still load


def test_a_courses_realised_class_counts_only_what_it_draws():
    """A range whose upper end sits at a threshold draws below it: the label counts the
    criterion, the course does not; a range pinned at the threshold meets it."""
    family = terrain.TerrainFamily()
    at_the_end = family.sample(np.random.default_rng(0)).replace(
        roughness=5.0, pit_gap=[5.0, 6.0], stump_height=[2.0, 2.4]
    )
    pinned = at_the_end.replace(pit_gap=[6.0, 6.0], stump_height=[2.4, 2.4])
    assert family.difficulty(at_the_end) == family.difficulty(pinned) == 3
    assert {family.realised_difficulty(at_the_end, s) for s in range(5)} == {1}
    assert {family.realised_difficulty(pinned, s) for s in range(5)} == {3}
    smooth = pinned.replace(roughness=4.4, stump_height=[])
    assert family.difficulty(smooth) == 1 and family.realised_difficulty(smooth, 0) == 1


def test_the_fixed_courses_realise_their_class_are_cleared_and_never_quick_into_results(tmp_path, monkeypatch):
    out = tmp_path / "fixed.json"
    monkeypatch.setattr(sys, "argv", ["fixed_courses.py", "--quick", "--json", str(out)])
    fixed_courses.main()
    found = json.loads(out.read_text())
    family = terrain.TerrainFamily()
    for c, drawn in found["classes"].items():
        assert len(drawn["courses"]) == 3 and drawn["draws"] >= drawn["realised_class"] >= 3
        for entry in drawn["courses"]:
            params = EnvParams.create("terrain", entry["params"])
            course = family.course(params, entry["course_seed"])
            assert terrain.course_difficulty(course, params.values["roughness"]) == int(c)
            assert plan(course, found["max_steps"])[0]
    monkeypatch.setattr(sys, "argv", ["fixed_courses.py", "--quick"])
    with pytest.raises(SystemExit):
        fixed_courses.main()


def test_the_planner_clears_dcds_test_suite_on_terrain_and_names_each_set():
    """The suite's terrain analogues are within the runner's reach (the full script: 100
    courses each), and the family's sets are dcd's names, gym's hardcore course left out."""
    family = terrain.TerrainFamily(course_length=feasibility.COURSE_LENGTH)
    sets = family.level_sets()
    assert set(sets["dcd"]) == {"BipedalWalker", "Med-Stairs", "Med-PitGap", "Med-StumpHeight", "Med-Roughness"}
    assert "XChal" in sets["dcd-extended"] and len(sets["poet-rose"]) == 6
    for level, episodes in sets["dcd"].items():
        assert [e.course_seed for e in episodes] == list(range(100))
        cleared = sum(plan(family.course(e, e.course_seed), feasibility.MAX_STEPS, 256)[0] for e in episodes[:5])
        assert cleared == 5, level
