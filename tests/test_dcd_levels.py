"""dcd's 8-D BipedalWalker levels (`envs.dcd_levels`) against numbers from dcd's own code.

The golden file holds, for 20 levels x seeds of dcd's level space and for dcd's named test
envs, what facebookresearch/dcd's `BipedalWalkerCustom` built (gym 0.15.7, run outside the
project): the ground heights, the off-grid x of pit edges, every obstacle polygon as Box2D
holds it, and two fixed action sequences' returns, lengths and final observations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envs import EnvParams
from envs import dcd_levels as dcd
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


# dcd's BipedalWalkerAdversarialEnv (mode 'full', 8-D) after np.random.seed(seed), run outside the
# project (facebookresearch/dcd @72991be, gym 0.15.7): mutate_level(num_edits) on these vectors,
# (vector, seed, edits, result); reset_random's level vector, (mode, seed, result).
DCD_EDITS = [
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 0, 3, [0.3, 0.0, 0.8, 0.0, 0.2, 0.0, 0.4, 1.0]),
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 1, 3, [0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 2, 3, [0.009150541929746625, 0.0, 0.8, 0.0, 0.4, 0.2, 0.4, 2.0]),
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 3, 3, [0.0, 0.0, 0.4, 0.0, 0.4, 0.0, 0.4, 1.0]),
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 4, 3, [0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
    ([0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0], 5, 3, [0.3, 0.0, 0.8, 0.0, 0.4, 0.0, 0.6000000000000001, 2.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 0, 1, [2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 1, 1, [2.0, 1.2, 3.6, 0.4, 1.0, 0.3, 2.5, 4.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 2, 1, [2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 3, 1, [2.0, 1.2, 3.2, 0.4, 1.0, 0.5, 2.5, 4.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 4, 1, [2.0, 1.2, 4.0, 0.4, 1.0, 0.5, 2.5, 4.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0, 0.5, 2.5, 4.0], 5, 1, [2.0, 1.2, 3.6, 0.6000000000000001, 1.0, 0.5, 2.5, 4.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 0, 5, [0.0, 0.0, 0.0, 0.2, 0.0, 0.2, 0.0, 1.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 1, 5, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 2, 5, [0.07197032555783389, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 1.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 3, 5, [0.02437844220061396, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 4, 5, [0.0, 0.4, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 5, 5, [0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 1.0]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 0, 4, [9.721479236073318, 9.8, 9.9, 4.9, 4.9, 5.0, 4.9, 8.6]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 1, 4, [9.662051563622384, 9.8, 9.9, 4.9, 4.7, 4.9, 4.9, 8.6]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 2, 4, [10.0, 9.8, 9.9, 4.9, 4.9, 4.7, 4.9, 9.0]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 3, 4, [9.364231827391407, 9.4, 9.5, 4.9, 4.9, 4.9, 4.9, 8.6]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 4, 4, [9.9, 9.8, 9.9, 4.9, 4.9, 5.0, 4.7, 7.6]),
    ([9.9, 9.8, 9.9, 4.9, 4.9, 4.9, 4.9, 8.6], 5, 4, [9.9, 9.8, 9.9, 5.0, 4.9, 4.9, 5.0, 7.6]),
]
DCD_RANDOM = [
    (
        "full",
        0,
        [
            5.4881350392732475,
            7.151893663724195,
            6.027633760716439,
            2.724415914984484,
            2.1182739966945237,
            3.2294705653332807,
            2.1879360563134624,
            8.134184006256639,
        ],
    ),
    ("easy", 0, [0.32928810235639483, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
    (
        "full",
        1,
        [
            4.17022004702574,
            7.203244934421581,
            0.0011437481734488664,
            1.5116628631591988,
            0.7337794540855652,
            0.461692973843989,
            0.9313010568883545,
            3.764485816344382,
        ],
    ),
    ("easy", 1, [0.2502132028215444, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
    (
        "full",
        2,
        [
            4.359949021420038,
            0.25926231827891333,
            5.496624778787091,
            2.1766119630913843,
            2.101839010437445,
            1.6516741050193706,
            1.0232431701892124,
            5.95416773080531,
        ],
    ),
    ("easy", 2, [0.2615969412852022, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
    (
        "full",
        3,
        [
            5.507979025745755,
            7.081478226181048,
            2.9090473891294435,
            2.554138025988315,
            4.464734771738273,
            4.48146544466719,
            0.6279265523191813,
            2.657943025105494,
        ],
    ),
    ("easy", 3, [0.33047874154474527, 0.0, 0.8, 0.0, 0.4, 0.0, 0.4, 1.0]),
]


class _LegacyDraws:
    """numpy's legacy global generator behind the Generator methods the level space calls, so
    that a seed gives the draws dcd makes after `np.random.seed(seed)`."""

    def __init__(self, seed: int):
        self.state = np.random.RandomState(seed)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return self.state.randint(low, high, size)

    def uniform(self, low: float, high: float) -> float:
        return self.state.uniform(low, high)

    def random(self, size: int) -> np.ndarray:
        return self.state.rand(size)


def _families():
    from envs.terrain import TerrainFamily

    return [BipedalFamily(level_space="dcd"), TerrainFamily(level_space="dcd")]


@pytest.mark.parametrize("vec, seed, edits, expected", DCD_EDITS)
def test_an_edit_of_a_dcd_level_is_dcds_mutate_level(vec, seed, edits, expected):
    assert dcd.edit_vector(vec, _LegacyDraws(seed), edits) == pytest.approx(expected, abs=1e-12)
    for family in _families():  # the walker's and the terrain family's levels alike
        child = family.edit(EnvParams.create(family.name, dcd.from_vector(vec)), _LegacyDraws(seed), edits)
        assert dcd.vector(child.values) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("mode, seed, expected", DCD_RANDOM)
@pytest.mark.parametrize("index", [0, 1], ids=["bipedal", "terrain"])
def test_a_random_dcd_level_is_dcds_reset_random(mode, seed, expected, index):
    family = _families()[index]
    level = (family.sample if mode == "full" else family.sample_easy)(_LegacyDraws(seed))
    assert dcd.vector(level.values) == pytest.approx(expected, abs=1e-12)
    family.validate(level)


def test_the_dcd_level_space_option_and_poets_mutation():
    family = BipedalFamily(level_space="dcd")
    assert family.initial().values == dcd.level() and set(family.test_levels()) == set(BipedalFamily().test_levels())
    with pytest.raises(ValueError, match="POET's paper defines no mutation of dcd's 8-D levels"):
        family.mutate(family.initial(), np.random.default_rng(0))
    with pytest.raises(ValueError, match="level_space must be one of poet, dcd, got 'x'"):
        BipedalFamily(level_space="x")
    half = family.interpolate(family.initial(), EnvParams.create("bipedal", dcd.EXTENDED["Insane"]), 0.5)
    assert dcd.vector(half.values) == [4.5, 5.0, 5.0, 2.5, 2.5, 2.5, 2.5, 5.0]
    assert BipedalFamily().initial().values == {"roughness": 0.0, "pit_gap": [], "stump_height": []}


def test_poets_8d_mutation_moves_every_group_by_its_step_within_dcds_ranges():
    rng = np.random.default_rng(3)
    level = dcd.level(
        roughness=9.9, pit_gap=(3.0, 0.2), stump_height=(4.9, 5.0), stair_height=(0.0, 0.0), stair_steps=9
    )
    for _ in range(200):
        child = dcd.poet_mutate(level, rng)
        assert dcd.problems(child) == []
        assert 0 < abs(child["roughness"] - level["roughness"]) <= 0.6 or child["roughness"] == 10.0
        for name, step in dcd.POET_RANGE_STEPS.items():
            before, after = np.sort(level[name]), np.array(child[name])
            moved = np.round((after - before) / step, 9)
            assert after[0] <= after[1] and set(moved) <= {-1.0, 0.0, 1.0} and moved.any(), (name, before, after)
        assert abs(child["stair_steps"] - level["stair_steps"]) == 1.0
        level = child
    a, b = (dcd.poet_mutate(dcd.SUITE["Med-Stairs"], np.random.default_rng(5)) for _ in range(2))
    assert a == b  # a function of the level and the stream


def test_poets_8d_mutation_is_an_option_of_both_families():
    from envs.terrain import TerrainFamily

    bad = "option poet_mutation_8d must be true or false, got 'yes'"
    for make in (BipedalFamily, TerrainFamily):
        with pytest.raises(ValueError, match=bad):
            make(poet_mutation_8d="yes")
        family = make(level_space="dcd", poet_mutation_8d=True)
        child = family.mutate(family.initial(), np.random.default_rng(7))
        assert child.family == family.name
        assert child.values == dcd.poet_mutate(family.initial().values, np.random.default_rng(7))
        assert make(poet_mutation_8d=True).mutate(make().initial(), np.random.default_rng(0)) == make().mutate(
            make().initial(), np.random.default_rng(0)
        )  # POET's 5-D levels keep POET's op


def test_poet_runs_on_dcds_levels_with_the_8d_mutation(tmp_path):
    import poet
    from poet.analysis import load_run

    cfg = {
        "curriculum": "poet",
        "seed": 2,
        "iterations": 12,
        "env": {"family": "terrain", "options": {"level_space": "dcd", "poet_mutation_8d": True}},
        "policy": {"hidden": [8]},
        "evaluation": {"max_steps": 60, "eval_episodes": 1, "backend": "inprocess"},
        "reproduction": {"every": 2, "threshold": -1e9, "mc_lower": -1e9, "mc_upper": 1e9},
        "trainer": {"name": "es", "es": {"population": 4, "noise_table_size": 100_000}},
    }
    poet.run(cfg, out=tmp_path / "r", progress=False)
    levels = [EnvParams.from_json(text).values for text in load_run(tmp_path / "r").envs["params_json"]]
    assert len(levels) > 1 and all(dcd.is_dcd_level(v) for v in levels)
    assert any(v["stair_steps"] != 1.0 for v in levels)  # children left the flat start on all 8 numbers


def test_accel_runs_on_dcds_level_space_and_records_its_levels(tmp_path):
    import poet
    from poet.analysis import load_run

    cfg = {
        "curriculum": "accel",
        "curriculum_options": {"buffer_size": 4, "num_levels": 2},
        "seed": 1,
        "iterations": 12,
        "env": {"family": "bipedal", "options": {"max_episode_steps": 60, "level_space": "dcd"}},
        "policy": {"hidden": [8]},
        "evaluation": {"max_steps": 60, "eval_episodes": 1, "backend": "inprocess"},
        "trainer": {"name": "es", "es": {"population": 4, "noise_table_size": 100_000}},
    }
    poet.run(cfg, out=tmp_path / "r", progress=False)  # the family's env passes gymnasium's check_env first
    envs = load_run(tmp_path / "r").envs
    assert len(envs) > 4 and {"stair_height_lo", "stair_height_hi", "stair_steps"} <= set(envs.columns)
    for text in envs["params_json"]:
        assert dcd.is_dcd_level(EnvParams.from_json(text).values)


@pytest.mark.parametrize("seed", sorted(GOLDEN["hardcore"]))
def test_the_hardcore_level_is_gyms_bipedalwalkerhardcore(seed):
    assert dcd.SUITE["Hardcore"] == dcd.HARDCORE
    _check_course(dict(dcd.HARDCORE), int(seed), GOLDEN["hardcore"][seed])


def test_the_hardcore_level_has_no_params_to_characterise():
    family = BipedalFamily()
    hardcore = EnvParams.create("bipedal", dcd.HARDCORE, 3)
    family.validate(hardcore)
    for method in (family.features, family.flat, family.difficulty):
        with pytest.raises(ValueError, match="gym's hardcore course is a test level with no params"):
            method(hardcore)
