"""The `terrain_cppn` family: bipedal_cppn's genome and ground on the terrain runner's core."""

from __future__ import annotations

import numpy as np
import pytest

import poet
from envs.base import EnvParamError, EnvParams
from envs.bipedal import TERRAIN_HEIGHT, TERRAIN_STEP
from envs.bipedal_cppn import BipedalCPPNFamily, ground_heights
from envs.registry import make_family
from envs.terrain import RES
from envs.terrain_cppn import TerrainCPPNFamily
from poet.analysis import load_run

FAM = TerrainCPPNFamily()


def _grounds(n: int = 4) -> list[EnvParams]:
    rng = np.random.default_rng(5)
    out = [FAM.initial(rng)]
    while len(out) < n:
        out.append(FAM.mutate(out[-1], rng))
    return out


def test_genomes_and_operators_are_bipedal_cppns():
    walker = BipedalCPPNFamily()
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    start = FAM.initial(a)
    assert start.family == "terrain_cppn" and start.values == walker.initial(b).values
    child = FAM.mutate(start, a)
    assert child.values == walker.mutate(EnvParams.create("bipedal_cppn", start.values), b).values
    assert FAM.flat(child) == walker.flat(EnvParams.create("bipedal_cppn", child.values))


def test_the_ground_is_the_walkers_metre_for_metre_and_the_seed_changes_nothing():
    for params in _grounds():
        course = FAM.course(params, 0)
        walker = ground_heights(params.values["genome"]) - TERRAIN_HEIGHT
        steps = np.arange(1, int(FAM.course_length / TERRAIN_STEP))
        cells = np.rint(steps * TERRAIN_STEP / RES).astype(int)
        on_grid = np.abs(cells * RES - steps * TERRAIN_STEP) < 1e-9  # cells that sit on a walker step
        np.testing.assert_allclose(course.base[cells[on_grid]], walker[steps[on_grid]], atol=1e-12)
        assert not course.pit.any() and not course.stump.any() and course.obstacles == ()
        np.testing.assert_array_equal(FAM.course(params, 12345).table, course.table)


def test_a_course_is_rebuilt_from_its_recorded_json():
    params = _grounds(3)[-1]
    again = EnvParams.from_json(params.to_json())
    np.testing.assert_array_equal(TerrainCPPNFamily().course(again).table, FAM.course(params).table)


def test_the_gymnasium_env_and_the_batch_give_the_same_numbers():
    grounds = _grounds(3)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(200, len(grounds), 2))
    batch = FAM.make_batch(grounds, [0] * len(grounds), FAM.max_episode_steps)
    obs = batch.reset()
    for i, params in enumerate(grounds):
        env = FAM.make_env(params)
        o, _ = env.reset(seed=0)
        np.testing.assert_array_equal(o, obs[i])
    envs_ = [FAM.make_env(p) for p in grounds]
    for env in envs_:
        env.reset(seed=0)
    done = np.zeros(len(grounds), dtype=bool)
    for t in range(200):
        b_obs, b_rew, b_term, b_trunc = batch.step(actions[t])
        for i, env in enumerate(envs_):
            if done[i]:
                continue
            o, r, term, trunc, _ = env.step(actions[t, i])
            np.testing.assert_array_equal(o, b_obs[i])
            assert (r, term, trunc) == (b_rew[i], b_term[i], b_trunc[i])
            done[i] = term or trunc


def test_bad_params_name_this_family_and_the_field():
    with pytest.raises(EnvParamError, match=r"terrain_cppn\.genome"):
        FAM.validate(EnvParams.create("terrain_cppn", {"genome": {"nodes": "x"}}))
    with pytest.raises(EnvParamError, match=r"terrain_cppn\.family"):
        FAM.validate(EnvParams.create("bipedal_cppn", FAM.initial().values))
    with pytest.raises(ValueError, match="course_length"):
        make_family("terrain_cppn", {"course_length": 1.0})


def test_enhanced_poet_runs_on_it_and_records_rebuildable_envs(tiny, tmp_path):
    cfg = tiny(
        curriculum="enhanced_poet",
        iterations=8,
        env={"family": "terrain_cppn", "options": {"course_length": 20.0, "max_episode_steps": 150}},
    )
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert set(run.envs["family"]) == {"terrain_cppn"} and len(run.envs) >= 2
    assert run.envs["difficulty"].isna().all()  # the paper's classes are for terrain's params
    family = TerrainCPPNFamily(course_length=20.0, max_episode_steps=150)
    for text in run.envs["params_json"]:
        family.validate(EnvParams.from_json(text))
