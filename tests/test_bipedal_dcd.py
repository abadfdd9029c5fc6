"""dcd's 8-D BipedalWalker levels (`envs.bipedal_dcd`) against numbers from dcd's own code.

The golden file holds, for 20 levels x seeds of dcd's level space and for dcd's named test
envs, what facebookresearch/dcd's `BipedalWalkerCustom` built (gym 0.15.7, run outside the
project): the ground heights, the off-grid x of pit edges, every obstacle polygon as Box2D
holds it, and two fixed action sequences' returns, lengths and final observations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envs import EnvParams
from envs import bipedal_dcd as dcd
from tests.conftest import ROOT

pytest.importorskip("Box2D")
from envs.bipedal import TERRAIN_STEP, BipedalFamily, BipedalTerrainEnv  # noqa: E402

GOLDEN = json.loads((ROOT / "tests" / "data" / "dcd_bipedal_golden.json").read_text())
ACTIONS = {"random": np.random.RandomState(1).uniform(-1, 1, size=(600, 4)), "still": np.zeros((600, 4))}


def _polys(env: BipedalTerrainEnv) -> list[list[list[float]]]:
    """The course's obstacle polygons as Box2D holds them, in the order they were made."""
    import Box2D

    shapes = [f.shape for body in env.terrain for f in body.fixtures if isinstance(f.shape, Box2D.b2PolygonShape)]
    return [[list(v) for v in s.vertices] for s in reversed(shapes)]


def _check_course(values: dict, seed: int, want: dict) -> None:
    env = BipedalTerrainEnv(EnvParams.create("bipedal", values, seed))
    env.reset(seed=seed)
    np.testing.assert_allclose(env.terrain_y, want["terrain_y"], rtol=0, atol=1e-9)
    off = {str(i): x for i, x in enumerate(env.terrain_x) if x != i * TERRAIN_STEP}
    assert off.keys() == want["terrain_x_off_grid"].keys()
    np.testing.assert_allclose(list(off.values()), list(want["terrain_x_off_grid"].values()), rtol=0, atol=1e-9)
    got = _polys(env)
    assert len(got) == len(want["polys"])
    for a, b in zip(got, want["polys"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    for name, actions in ACTIONS.items():
        env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done and steps < len(actions):
            obs, reward, done, _, _ = env.step(actions[steps])
            total, steps = total + reward, steps + 1
        assert steps == want[name]["steps"]
        assert total == pytest.approx(want[name]["return"], abs=1e-6)
        np.testing.assert_allclose(obs, want[name]["final_obs"], rtol=0, atol=1e-6)  # gymnasium's are float32
    env.close()


@pytest.mark.parametrize("entry", GOLDEN["levels"], ids=lambda e: f"seed{e['seed']}-{e['vec'][0]:.2f}")
def test_a_dcd_level_builds_dcds_course_and_episodes(entry):
    _check_course(dcd.from_vector(entry["vec"]), entry["seed"], entry)


def _dcd_config(values: dict) -> dict:
    """`config_of` in the key names of dcd's EnvConfig."""
    c = dcd.config_of(values)
    return {"ground_roughness": c.pop("roughness"), **c}


@pytest.mark.parametrize("name", sorted(GOLDEN["suite"]))
def test_the_named_levels_are_dcds_test_envs(name):
    levels = {**dcd.SUITE, **dcd.EXTENDED, **dcd.POET_ROSE, "Default": dcd.level()}
    key = {"Med-Stumps": "Med-StumpHeight", "High-Stumps": "High-StumpHeight"}.get(name, name)
    want = GOLDEN["suite"][name]
    got = _dcd_config(levels[key])
    assert got.keys() == want["config"].keys()
    unsorted = [f for f, v in want["config"].items() if isinstance(v, list) and v != sorted(v)]
    for field, value in want["config"].items():  # the ranges as sets: dcd's levels sort them
        assert sorted(np.atleast_1d(got[field])) == pytest.approx(sorted(np.atleast_1d(value))), field
    if unsorted:  # dcd's rose 3b gives its pit range high end first (docs/curricula/known-issues.md)
        assert (name, unsorted) == ("POET-Rose-3b", ["pit_gap"])
        return
    _check_course(levels[key], GOLDEN["suite_seed"], want)


def test_legacy_gym_rng_draws_gym_015s_numbers():
    # seeding.np_random(s) of gym 0.15.7, then rand(), randint(5, 10), uniform(-1, 1)
    want = {
        0: (0.05436005625078322, 8, 0.26538189116820665),
        1: (0.8073904357288909, 9, 0.4355751006471835),
        42: (0.3741433781083283, 8, 0.11218832011225599),
        2**32 - 1: (0.34169230697100794, 8, -0.3389576202717637),
        2**64 + 5: (0.1257176246691768, 6, 0.6424297361978142),
    }
    for seed, (r, k, u) in want.items():
        rng = dcd.legacy_gym_rng(seed)
        assert (rng.rand(), rng.randint(5, 10), rng.uniform(-1, 1)) == (r, k, u)
    with pytest.raises(ValueError, match="non-negative integer"):
        dcd.legacy_gym_rng(-1)


def test_a_bad_dcd_level_names_its_field():
    family = BipedalFamily()
    bad = {**dcd.level(), "stair_height": [0.0, 6.0]}
    with pytest.raises(ValueError, match="stair_height: must be in \\[0, 5\\], got 6.0"):
        family.make_env(EnvParams.create("bipedal", bad, 0))
    with pytest.raises(ValueError, match="pit_gap: must be two numbers"):
        family.make_env(EnvParams.create("bipedal", {**dcd.level(), "pit_gap": [1.0]}, 0))


def test_xchal_levels_are_fixed_and_in_dcds_ranges():
    a, b = dcd.xchal_levels(), dcd.xchal_levels()
    assert a == b and len(a) == 100
    for v in a:
        assert 2.4 <= v["stump_height"][1] <= 3.0 and 6.0 <= v["pit_gap"][1] <= 8.0 and 4.5 <= v["roughness"] <= 8.0
        assert not dcd.problems(v)


def test_the_family_reads_a_dcd_level_its_class_features_and_profile():
    family = BipedalFamily()
    insane = EnvParams.create("bipedal", dcd.EXTENDED["Insane"], 5)
    family.validate(insane)
    assert family.difficulty(insane) == 3  # pits 10, stumps 5, roughness 9: every criterion of the paper
    assert family.features(insane).tolist() == [9.0, 10.0, 10.0, 5.0, 5.0, 5.0, 5.0, 9.0]
    flat = family.flat(EnvParams.create("bipedal", dcd.SUITE["Med-Stairs"], 0))
    assert flat["stair_height_lo"] == flat["stair_height_hi"] == 2.0 and flat["pit_gap_enabled"] == 0.0
    stairs = EnvParams.create("bipedal", dcd.level(stair_height=(1.0, 1.5), stair_steps=9), 11)
    profile = family.course_profile(stairs, 11)
    env = BipedalTerrainEnv(stairs)
    env.reset(seed=11)
    steps = sum(int(size) for kind, _, size in env.obstacles if kind == "stairs")
    assert steps > 0 and len(profile.solids) == steps and "stairs 1.00-1.50" in profile.description
