"""dcd's 8-D levels on the compiled `terrain` family: stairs in the course layout, as dcd's
ground line runs over them, in this family's units; POET's 5-D courses as before."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import poet
from envs import EnvParams
from envs import dcd_levels as dcd
from envs.terrain import RES, STAIR_SCALE, STAIR_WIDTH, TerrainFamily

FAMILY = TerrainFamily()


def _course(values: dict, seed: int):
    return FAMILY.course(EnvParams.create("terrain", values), seed)


def test_a_dcd_level_without_stairs_builds_the_course_of_its_5d_twin():
    for seed in range(20):
        level = dcd.level(roughness=2.5, pit_gap=(3.0, 1.0), stump_height=(0.3, 2.0), stair_height=(0.1, 0.15))
        twin = {"roughness": 2.5, "pit_gap": [1.0, 3.0], "stump_height": [0.3, 2.0]}  # the ranges sorted
        a, b = _course(level, seed), _course(twin, seed)
        assert a.table.tobytes() == b.table.tobytes() and a.obstacles == b.obstacles


def test_stairs_follow_dcds_ground_line_and_move_the_ground_after_them():
    cells = int(round(STAIR_WIDTH / RES))
    directions = set()
    for seed in range(30):
        course = _course(dcd.level(stair_height=(2.0, 2.0), stair_steps=5), seed)
        code, first, size, steps = course.obstacle_arrays
        assert (code == 2).all() and set(steps) <= {1, 2, 3, 4}  # randint(5) steps: 0 (no stairs) to 4
        for a, h, n in zip(first, size, steps):
            assert h == pytest.approx(2.0 * STAIR_SCALE)
            before, after = course.height[a - 1], course.height[a + n * cells]
            rise = 1 if after > before or (n == 1 and after == before) else -1
            directions.add(rise)
            for j in range(n):  # up: the first step flush, then one step higher each; down: each one lower
                top = course.height[a + j * cells : a + (j + 1) * cells]
                want = before + j * h * rise - (h if rise < 0 else 0.0)
                np.testing.assert_allclose(top, want, atol=1e-12)
            assert after == pytest.approx(before + (n - 1) * h if rise > 0 else before - n * h)
            assert not course.slope[a : a + n * cells].any() and course.stair[a : a + n * cells].all()
    assert directions == {1, -1}


# sha256 (first 16 hex) of the course table of dcd's stair levels: the same bytes on every machine
PINNED = {
    ("Med-Stairs", 0): "6584b406e6109572",
    ("Med-Stairs", 7): "f2e4f2619e70b06a",
    ("High-Stairs", 0): "050f226c617abb16",
    ("High-Stairs", 7): "68dddb842cad36fb",
    ("Insane", 0): "922239f8c04fb6f0",
    ("Insane", 7): "c4f3ca4bdf37918b",
}


@pytest.mark.parametrize("name, seed", sorted(PINNED))
def test_a_stairs_course_is_pinned_to_the_byte(name, seed):
    course = _course({**dcd.SUITE, **dcd.EXTENDED}[name], seed)
    assert hashlib.sha256(course.table.tobytes()).hexdigest()[:16] == PINNED[(name, seed)]


def test_the_terrain_family_reads_and_draws_dcds_levels():
    family = TerrainFamily(level_space="dcd")
    rng = np.random.default_rng(1)
    levels = [family.sample(rng) for _ in range(30)] + [family.sample_easy(rng)]
    for level in levels:
        family.validate(level)
        assert dcd.is_dcd_level(level.values) and 0 <= family.difficulty(level) <= 3
        child = family.edit(level, rng, 3)
        assert (family.features(child) != family.features(level)).sum() <= 3
    assert set(family.test_levels()) == set(TerrainFamily().test_levels())  # the same held-out set
    assert family.flat(levels[0]).keys() >= {"stair_height_lo", "stair_steps"}
    with pytest.raises(ValueError, match="POET's paper defines no mutation of dcd's 8-D levels"):
        family.mutate(family.initial(), rng)
    profile = family.course_profile(EnvParams.create("terrain", dcd.SUITE["Med-Stairs"]), 7)
    assert "stairs 2.00-2.00" in profile.description and np.isfinite(profile.y).all()


def test_accel_runs_on_the_terrain_familys_dcd_levels(tiny, tmp_path):
    cfg = tiny(
        curriculum="accel",
        curriculum_options={"buffer_size": 4, "num_levels": 2},
        iterations=8,
        env={"family": "terrain", "options": {"course_length": 20.0, "max_episode_steps": 150, "level_space": "dcd"}},
        trainer={"name": "es"},
    )
    poet.run(cfg, out=tmp_path / "r", progress=False)
    from poet.analysis import load_run

    envs = load_run(tmp_path / "r").envs
    assert len(envs) > 2 and all(dcd.is_dcd_level(EnvParams.from_json(t).values) for t in envs["params_json"])
