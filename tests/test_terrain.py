"""Tests of the numpy terrain runner family (envs/terrain.py)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers poet/Terrain-v0)
from envs.base import EnvParamError, EnvParams
from envs.registry import make_family
from envs.terrain import (
    OBS_DIM,
    PIT_SCALE,
    RES,
    START_PAD,
    STUMP_SCALE,
    TerrainBatch,
    TerrainEnv,
    TerrainFamily,
    generate_course,
)

FAM = TerrainFamily()
LIDAR = slice(5, OBS_DIM)  # look-ahead samples at 0.5, 1.0, ... m


def terrain(roughness: float = 0.0, pit_gap: list | None = None, stump_height: list | None = None) -> EnvParams:
    values = {"roughness": roughness, "pit_gap": pit_gap or [], "stump_height": stump_height or []}
    return EnvParams.create("terrain", values)


def mutation_chain(seed: int, n: int) -> list[EnvParams]:
    """initial, then n chained mutations (later ones are harder)."""
    rng = np.random.default_rng(seed)
    chain = [FAM.initial()]
    for _ in range(n):
        chain.append(FAM.mutate(chain[-1], rng))
    return chain


def run_batch(params: list[EnvParams], seeds: list[int], policy, max_steps: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Returns (episode returns, last reward) of each row under a policy obs -> actions."""
    batch = FAM.make_batch(params, seeds, max_steps)
    obs = batch.reset()
    total = np.zeros(len(params))
    last = np.zeros(len(params))
    done = np.zeros(len(params), dtype=bool)
    for _ in range(max_steps):
        obs, rew, term, trunc = batch.step(policy(obs))
        total += rew
        last = np.where(term | trunc, rew, last)
        done |= term | trunc
        if done.all():
            break
    assert done.all()
    return total, last


def constant(a0: float, a1: float):
    return lambda obs: np.tile([a0, a1], (len(obs), 1))


def late_full_jump(obs: np.ndarray) -> np.ndarray:
    """Drive forward; a full jump at the last moment before a pit (the longest leap), or before a tall step."""
    lidar = obs[:, LIDAR]
    jump = (lidar[:, 0] <= -0.999) | (lidar[:, 1:3] > 0.125).any(axis=1)
    return np.stack([np.ones(len(obs)), np.where(jump, 1.0, 0.0)], axis=1)


def smart(obs: np.ndarray) -> np.ndarray:
    """Drive forward; a 0.6 jump when a pit (-1) or a step taller than 0.25 m is 1-2 m ahead."""
    near = obs[:, LIDAR][:, 1:4]  # 1.0, 1.5, 2.0 m
    jump = ((near <= -0.999) | (near > 0.125)).any(axis=1)
    return np.stack([np.ones(len(obs)), np.where(jump, 0.6, 0.0)], axis=1)


# ---------------------------------------------------------------- gymnasium API
@pytest.mark.parametrize("index", range(21))
@pytest.mark.filterwarnings("ignore:.*not having a spec")
def test_check_env_initial_and_mutated(index: int) -> None:
    params = mutation_chain(seed=7, n=20)[index]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make("poet/Terrain-v0", params=params.values, render_mode="rgb_array")
        check_env(env.unwrapped)
    assert not [str(w.message) for w in caught if "gymnasium" in w.filename or "WARN" in str(w.message)]
    # The directly built env passes too (its only note is that it has no gymnasium spec).
    check_env(FAM.make_env(params, render_mode="rgb_array"))


def test_spaces_render_and_truncation() -> None:
    fam = TerrainFamily(max_episode_steps=7)
    env = fam.make_env(fam.initial(), render_mode="rgb_array")
    obs, info = env.reset(seed=3)
    assert obs.shape == (OBS_DIM,) and obs.dtype == np.float32 and obs in env.observation_space
    assert info["course_seed"] == 3
    frame = env.render()
    assert frame.shape == (200, 400, 3) and frame.dtype == np.uint8
    for t in range(7):
        _, _, term, trunc, _ = env.step(np.zeros(2, np.float32))
        assert not term and trunc == (t == 6)


def test_registry_builds_family_and_options_are_validated() -> None:
    assert isinstance(make_family("terrain", {"course_length": 40.0}), TerrainFamily)
    for bad in ({"course_length": -1.0}, {"course_length": "80"}, {"course_length": float("inf")}):
        with pytest.raises(ValueError, match="course_length"):
            TerrainFamily(**bad)
    for bad in ({"max_episode_steps": 0}, {"max_episode_steps": 2.5}, {"max_episode_steps": True}):
        with pytest.raises(ValueError, match="max_episode_steps"):
            TerrainFamily(**bad)


# ----------------------------------------------------------------------- params
def test_initial_features_and_flat() -> None:
    p = FAM.initial()
    assert p.values == {"roughness": 0.0, "pit_gap": [], "stump_height": []}
    assert FAM.features(p).tolist() == [0.0] * 5 and FAM.features(p).dtype == np.float64
    assert FAM.flat(p) == {
        "roughness": 0.0,
        "pit_gap_lo": 0.0,
        "pit_gap_hi": 0.0,
        "pit_gap_enabled": 0.0,
        "stump_height_lo": 0.0,
        "stump_height_hi": 0.0,
        "stump_height_enabled": 0.0,
    }
    q = terrain(2.5, [0.4, 1.2], [0.2, 0.6])
    assert FAM.features(q).tolist() == [2.5, 0.4, 1.2, 0.2, 0.6]
    assert FAM.flat(q)["pit_gap_enabled"] == 1.0 and FAM.flat(q)["stump_height_hi"] == 0.6


def test_first_mutation_enables_pits_and_stumps() -> None:
    child = FAM.mutate(FAM.initial(), np.random.default_rng(0))
    assert child["pit_gap"] == [0.0, 0.8] and child["stump_height"] == [0.0, 0.4]
    assert 0.0 <= child["roughness"] <= 0.6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mutation_stays_in_bounds(seed: int) -> None:
    chain = mutation_chain(seed, 2000)
    for p in chain[1:]:
        FAM.validate(p)
        r, (plo, phi), (slo, shi) = p["roughness"], p["pit_gap"], p["stump_height"]
        assert 0.0 <= r <= 10.0 and round(r, 1) == r and isinstance(r, float)
        assert 0.0 <= plo <= phi <= 8.0 and phi >= 0.8
        assert 0.0 <= slo <= shi <= 5.0 and shi >= 0.4
        assert all(round(v, 1) == v for v in (plo, phi, slo, shi))
    # Chains get far: the whole range is reachable.
    assert max(p["pit_gap"][1] for p in chain[1:]) >= 4.0
    assert max(p["stump_height"][1] for p in chain[1:]) >= 2.5
    assert max(p["roughness"] for p in chain) >= 3.0


def test_mutation_is_reproducible_and_moves() -> None:
    assert [p.id for p in mutation_chain(5, 50)] == [p.id for p in mutation_chain(5, 50)]
    assert [p.id for p in mutation_chain(5, 50)] != [p.id for p in mutation_chain(6, 50)]
    parent = terrain(1.0, [2.0, 4.0], [1.0, 2.0])
    rng = np.random.default_rng(1)
    for _ in range(50):
        child = FAM.mutate(parent, rng)
        assert child["pit_gap"] != parent["pit_gap"] and child["stump_height"] != parent["stump_height"]
        dlo, dhi = child["pit_gap"][0] - 2.0, child["pit_gap"][1] - 4.0
        assert {round(dlo, 1), round(dhi, 1)} <= {-0.4, 0.0, 0.4}


@pytest.mark.parametrize(
    "values, field",
    [
        ({"pit_gap": [], "stump_height": []}, "roughness"),
        ({"roughness": 0.0, "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": []}, "stump_height"),
        ({"roughness": 0.0, "pit_gap": [], "stump_height": [], "gravity": 9.8}, "gravity"),
        ({"roughness": "rough", "pit_gap": [], "stump_height": []}, "roughness"),
        ({"roughness": True, "pit_gap": [], "stump_height": []}, "roughness"),
        ({"roughness": -0.1, "pit_gap": [], "stump_height": []}, "roughness"),
        ({"roughness": 10.1, "pit_gap": [], "stump_height": []}, "roughness"),
        ({"roughness": 0.0, "pit_gap": 1.0, "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [1.0], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [0.0, 1.0, 2.0], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [2.0, 1.0], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [0.0, 8.4], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [-0.4, 1.0], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [0.0, 0.4], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [0.0, "1"], "stump_height": []}, "pit_gap"),
        ({"roughness": 0.0, "pit_gap": [], "stump_height": [0.0, 5.2]}, "stump_height"),
        ({"roughness": 0.0, "pit_gap": [], "stump_height": [0.0, 0.2]}, "stump_height"),
        ({"roughness": 0.0, "pit_gap": [], "stump_height": [1.0, 0.6]}, "stump_height"),
    ],
)
def test_validate_rejects_bad_params(values: dict, field: str) -> None:
    params = EnvParams.create("terrain", values)
    with pytest.raises(EnvParamError) as err:
        FAM.validate(params)
    assert err.value.field == field and field in str(err.value)
    with pytest.raises(EnvParamError):
        FAM.make_env(params)


def test_validate_rejects_wrong_family() -> None:
    with pytest.raises(EnvParamError, match="family"):
        FAM.validate(EnvParams.create("cartpole", FAM.initial().values))


# ---------------------------------------------------------------------- courses
def random_params(rng: np.random.Generator) -> EnvParams:
    def group(top: float, min_hi: float) -> list[float]:
        if rng.random() < 0.3:
            return []
        hi = round(rng.uniform(min_hi, top), 1)
        return [round(rng.uniform(0.0, hi), 1), hi]

    return terrain(round(rng.uniform(0, 10), 1) * (rng.random() < 0.7), group(8.0, 0.8), group(5.0, 0.4))


def test_course_obstacles_match_params() -> None:
    rng = np.random.default_rng(0)
    for _ in range(60):
        p = random_params(rng)
        seed = int(rng.integers(1000))
        course = generate_course(p, seed)
        pit_gap, stump = p["pit_gap"], p["stump_height"]
        kinds = {kind for kind, _, _ in course.obstacles}
        assert kinds <= ({"pit"} if pit_gap else set()) | ({"stump"} if stump else set())
        for kind, x0, size in course.obstacles:
            assert START_PAD <= x0 <= course.course_length
            lo, hi, scale = (*pit_gap, PIT_SCALE) if kind == "pit" else (*stump, STUMP_SCALE)
            assert lo * scale - 1e-12 <= size <= hi * scale + 1e-12
        assert course.pit.any() == any(k == "pit" for k in kinds)
        pit_cells = [int(round(w / RES)) for k, _, w in course.obstacles if k == "pit"]
        assert course.pit.sum() == sum(pit_cells) and min(pit_cells, default=1) >= 1
        for kind, x0, size in course.obstacles:
            i = int(round(x0 / RES))
            if kind == "stump":  # on level ground, as POET's generator places them
                assert np.all(course.base[i : i + 11] == course.base[i]) and course.stump[i : i + 10].all()
                assert np.all(course.height[i : i + 10] == course.base[i] + size)
            else:  # POET's level banks: the ground on both sides of a pit is at its rim's height
                j = i + int(round(size / RES))
                assert course.pit[i] and not course.pit[i - 1] and not course.pit[j]
                assert course.rim[i] == course.height[j] == course.base[i]
                assert abs(course.height[i - 1] - course.rim[i]) <= RES * abs(course.slope[i - 1]) + 1e-12
        assert course.stump.any() == ("stump" in kinds)
        assert not course.pit[: int(START_PAD / RES)].any() and not course.pit[int(course.course_length / RES) :].any()
        assert np.all(course.base[: int(START_PAD / RES)] == 0.0)
        if not stump and not pit_gap:
            assert not course.obstacles
        # Same params and seed, same course.
        assert np.array_equal(generate_course(p, seed).height, course.height)


def test_both_kinds_appear_when_both_enabled() -> None:
    kinds = {k for s in range(5) for k, _, _ in generate_course(terrain(0.0, [1.0, 2.0], [1.0, 2.0]), s).obstacles}
    assert kinds == {"pit", "stump"}


def test_flat_course_is_exactly_flat() -> None:
    for seed in range(5):
        course = generate_course(FAM.initial(), seed)
        assert np.all(course.height == 0.0) and np.all(course.slope == 0.0) and not course.pit.any()
        assert course.obstacles == ()
        # Obstacles sit on an exactly flat ground too when roughness is 0.
        c = generate_course(terrain(0.0, [1.0, 2.0], [1.0, 2.0]), seed)
        assert np.all(c.base == 0.0)
    rough = generate_course(terrain(5.0), 0)
    assert np.ptp(rough.height) > 1.0


# ------------------------------------------------------- batch == gymnasium env
def test_batch_matches_env_bit_for_bit_and_rows_are_independent() -> None:
    chain = mutation_chain(3, 63)
    params = chain[1:] + [terrain(4.0, [0.0, 2.0], [0.0, 1.0])]
    seeds = [1000 + 17 * i for i in range(64)]
    rng = np.random.default_rng(11)
    actions = np.stack([rng.uniform(-0.3, 1.2, (600, 64)), rng.uniform(-1.2, 0.8, (600, 64))], axis=2)
    actions = actions.astype(np.float32)

    def batch_run(rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        batch = FAM.make_batch([params[i] for i in rows], [seeds[i] for i in rows], 600)
        assert batch.num_envs == len(rows)
        obs_hist = [batch.reset()]
        total = np.zeros(len(rows))
        for t in range(600):
            obs, rew, term, trunc = batch.step(actions[t, rows])
            obs_hist.append(obs)
            total += rew
        return total, np.stack(obs_hist)

    full, full_obs = batch_run(list(range(64)))
    seven, _ = batch_run(list(range(7)))
    assert np.array_equal(full[:7], seven)
    for i in (0, 5, 40, 63):
        one, _ = batch_run([i])
        assert one[0] == full[i]
        env = FAM.make_env(params[i])
        obs, _ = env.reset(seed=seeds[i])
        assert np.array_equal(obs, full_obs[0, i])
        total, t = 0.0, 0
        while True:
            obs, rew, term, trunc, _ = env.step(actions[t, i])
            t += 1
            total += rew
            assert np.array_equal(obs, full_obs[t, i])
            if term or trunc:
                break
        assert total == full[i]
    assert full.min() < 0 < full.max()  # the random actions both fall and progress


def test_rows_on_one_course_share_its_cells_and_step_as_on_their_own() -> None:
    """A pinned env's rows (one cached course) are laid in the table once; each row still
    steps exactly as in a batch of its own."""
    chain = mutation_chain(5, 12)
    pinned = [chain[3], chain[11], FAM.initial()]
    rows = [0, 1, 0, 2, 1, 1, 0, 2]  # interleaved: a course's rows are not neighbours
    batch = FAM.make_batch([pinned[k] for k in rows], [40 + rows[r] for r in range(len(rows))], 500)
    n_cells = batch.courses[0].n_cells
    assert batch.table.shape[0] == 3 * n_cells
    assert batch.bases.tolist() == [0, n_cells, 0, 2 * n_cells, n_cells, n_cells, 0, 2 * n_cells]
    rng = np.random.default_rng(3)
    actions = np.stack([rng.uniform(-0.3, 1.2, (500, 8)), rng.uniform(-1.2, 0.8, (500, 8))], axis=2)
    actions = actions.astype(np.float32)
    singles = [FAM.make_batch([pinned[k]], [40 + k], 500) for k in rows]
    obs = batch.reset()
    for r, single in enumerate(singles):
        assert np.array_equal(single.reset()[0], obs[r])
    for t in range(500):
        obs, rew, term, trunc = batch.step(actions[t])
        for r, single in enumerate(singles):
            o, w, te, tr = single.step(actions[t, r : r + 1])
            assert np.array_equal(o[0], obs[r]) and w[0] == rew[r] and te[0] == term[r] and tr[0] == trunc[r]


def test_done_rows_return_zero_and_keep_their_state() -> None:
    batch = FAM.make_batch([terrain(0.0, [6.0, 8.0]), FAM.initial()], [0, 0], 600)
    batch.reset()
    fwd = np.array([[1.0, 0.0], [0.0, 0.0]])
    for _ in range(600):
        obs, rew, term, trunc = batch.step(fwd)
        if term[0]:
            assert rew[0] == -100.0
            break
    for _ in range(3):
        obs2, rew, term, trunc = batch.step(fwd)
        assert rew[0] == 0.0 and not term[0] and not trunc[0]
        assert np.array_equal(obs2[0], obs[0])


# ----------------------------------------------------------------------- scores
def test_drive_forward_finishes_flat_course() -> None:
    returns, last = run_batch([FAM.initial()] * 3, [0, 1, 2], constant(1.0, 0.0))
    assert np.all((returns >= 280.0) & (returns <= 300.0))
    batch = FAM.make_batch([FAM.initial()], [0], 600)
    batch.reset()
    steps = 0
    while not batch.step(np.array([[1.0, 0.0]]))[2][0]:
        steps += 1
    assert steps < 600 and batch.x[0] >= batch.course_length


def test_drive_forward_falls_into_wide_pits() -> None:
    returns, last = run_batch([terrain(0.0, [6.0, 8.0])] * 5, list(range(5)), constant(1.0, 0.0))
    assert np.all(last == -100.0) and np.all(returns < 0.0)


def test_standing_still_scores_zero() -> None:
    returns, _ = run_batch([FAM.initial(), terrain(5.0, [1.0, 2.0], [1.0, 2.0])], [0, 1], constant(0.0, 0.0))
    assert np.all(np.abs(returns) < 1e-9)


def test_tall_stumps_cannot_be_passed() -> None:
    params = terrain(0.0, None, [5.0, 5.0])  # the domain maximum, 1.46 m: the highest jump clears 1.2 + 0.25 m
    grid = [constant(a0, a1) for a0 in (0.5, 1.0) for a1 in (-1.0, 0.0, 0.3, 0.6, 1.0)] + [smart, late_full_jump]
    for policy in grid:
        returns, _ = run_batch([params] * 3, [0, 1, 2], policy)
        assert returns.max() < 100.0


def test_hard_but_possible_and_impossible_pits() -> None:
    # The longest leap from level ground is just under 6.5 m, the domain maximum (8 units):
    # 5.6 m pits can be crossed, 6.5 m pits cannot.
    returns, _ = run_batch([terrain(0.0, [6.9, 6.9])] * 5, list(range(5)), late_full_jump)
    assert np.all(returns >= 230.0)
    for policy in (late_full_jump, smart, constant(1.0, 1.0), constant(1.0, 0.0)):
        returns, _ = run_batch([terrain(0.0, [8.0, 8.0])] * 5, list(range(5)), policy)
        assert returns.max() < 100.0


def test_smart_controller_solves_moderate_obstacles() -> None:
    params = terrain(0.0, [0.0, 2.5], [0.0, 1.4])  # pits up to 2 m, stumps up to 0.4 m
    returns, _ = run_batch([params] * 20, list(range(20)), smart)
    assert (returns >= 230.0).sum() >= 16
    # Always-forward without jumping fails on the same courses.
    returns_fwd, _ = run_batch([params] * 20, list(range(20)), constant(1.0, 0.0))
    assert (returns_fwd >= 230.0).sum() < 10


def test_direct_batch_construction() -> None:
    course = generate_course(FAM.initial(), 0)
    batch = TerrainBatch([course, course], max_steps=5)
    assert batch.reset().shape == (2, OBS_DIM)
    assert isinstance(FAM.make_env(FAM.initial()), TerrainEnv)
    with pytest.raises(ValueError):
        FAM.make_batch([FAM.initial()], [0, 1], 10)


def test_sample_is_dcds_reset_random_over_this_familys_ranges() -> None:
    from envs.terrain import PIT_MAX, ROUGH_MAX, STUMP_MAX

    family = TerrainFamily()
    for seed in range(20):
        u = np.random.default_rng(seed)
        rough, pits, stumps = (
            u.uniform(0, ROUGH_MAX),
            sorted(u.uniform(0, PIT_MAX, 2)),
            sorted(u.uniform(0, STUMP_MAX, 2)),
        )
        v = family.sample(np.random.default_rng(seed)).values
        assert v["roughness"] == rough
        assert v["pit_gap"] == (pits if pits[1] >= 0.8 else [])
        assert v["stump_height"] == (stumps if stumps[1] >= 0.4 else [])


def test_sample_easy_is_dcds_easy_level() -> None:
    family = TerrainFamily()
    for seed in range(10):
        v = family.sample_easy(np.random.default_rng(seed)).values
        assert v["roughness"] == np.random.default_rng(seed).uniform(0, 0.6)
        assert v["pit_gap"] == [0.0, 0.8] and v["stump_height"] == [0.0, 0.4]
        family.validate(family.sample_easy(np.random.default_rng(seed)))


def test_interpolate_moves_every_number_linearly_and_ends_on_the_target() -> None:
    family = TerrainFamily()
    start = family.initial()
    target = EnvParams.create("terrain", {"roughness": 4.0, "pit_gap": [1.2, 2.4], "stump_height": [0.5, 1.5]})
    assert family.interpolate(start, target, 0.0) == start and family.interpolate(start, target, 1.0) == target
    # t = 0.25: roughness 1.0; pits [0.3, 0.6] (hi below 0.8: off); stumps [0.125, 0.375] -> 0.13, 0.38 (below 0.4: off)
    quarter = family.interpolate(start, target, 0.25).values
    assert quarter == {"roughness": 1.0, "pit_gap": [], "stump_height": []}
    # t = 0.5: roughness 2.0; pits [0.6, 1.2]; stumps [0.25, 0.75]
    half = family.interpolate(start, target, 0.5).values
    assert half == {"roughness": 2.0, "pit_gap": [0.6, 1.2], "stump_height": [0.25, 0.75]}


def test_course_profile_is_the_course_in_metres() -> None:
    """The profile a figure is drawn from: the course's own ground, pits and stumps, in metres."""
    fam = TerrainFamily(course_length=40.0)
    params = terrain(3.0, [1.0, 3.0], [1.0, 2.0])
    course = fam.course(params, 1)
    profile = fam.course_profile(params, seed=1)
    assert profile.family == "terrain" and profile.seed == 1
    assert profile.description == "roughness 3 · pit gap 1-3 · stump height 1-2"
    assert profile.start == (0.0, START_PAD) and profile.finish == 40.0
    assert np.allclose(profile.x, np.arange(course.n_cells) * RES)
    assert np.array_equal(np.isnan(profile.y), course.pit)  # bottomless pits: no ground at all
    assert np.array_equal(profile.y[~course.pit], course.base[~course.pit])
    kinds = [k for k, _, _ in course.obstacles]
    assert len(profile.pits) == kinds.count("pit") > 0 and len(profile.stumps) == kinds.count("stump") > 0
    for (x0, x1), (_, start, width) in zip(profile.pits, [o for o in course.obstacles if o[0] == "pit"]):
        assert x0 == pytest.approx(start) and x1 - x0 == pytest.approx(width, abs=RES)
    for (x0, _, bottom, top), (_, start, height) in zip(
        profile.stumps, [o for o in course.obstacles if o[0] == "stump"]
    ):
        assert x0 == pytest.approx(start) and top - bottom >= height - 1e-9
    flat = fam.course_profile(fam.initial(), seed=1)
    assert flat.description == "roughness 0 · no pits · no stumps" and not flat.pits and not flat.stumps
    assert np.all(flat.y == 0.0)


# the POET paper's classes: max stump height >= 2.4, max pit gap >= 6.0, roughness >= 4.5
@pytest.mark.parametrize(
    "values, expected",
    [
        ({"roughness": 0.0, "pit_gap": [], "stump_height": []}, 0),
        ({"roughness": 4.4, "pit_gap": [0.0, 5.9], "stump_height": [2.3, 2.3]}, 0),  # just below all three
        ({"roughness": 4.5, "pit_gap": [], "stump_height": []}, 1),
        ({"roughness": 0.0, "pit_gap": [0.0, 6.0], "stump_height": []}, 1),
        ({"roughness": 0.0, "pit_gap": [], "stump_height": [0.0, 2.4]}, 1),  # the upper end counts
        ({"roughness": 0.0, "pit_gap": [5.0, 5.9], "stump_height": [2.4, 2.4]}, 1),
        ({"roughness": 4.5, "pit_gap": [6.0, 6.0], "stump_height": []}, 2),
        ({"roughness": 0.0, "pit_gap": [1.0, 7.2], "stump_height": [1.0, 3.0]}, 2),
        ({"roughness": 5.6, "pit_gap": [4.48, 6.4], "stump_height": [2.4, 2.82]}, 3),  # dcd's POET "rose 1a"
        ({"roughness": 4.5, "pit_gap": [6.0, 6.0], "stump_height": [2.4, 2.4]}, 3),
    ],
)
@pytest.mark.parametrize("name", ["terrain", "bipedal"])
def test_difficulty_classes_at_the_papers_thresholds(name, values, expected):
    from envs.terrain import DIFFICULTY_CLASSES

    family = make_family(name)
    assert family.difficulty(EnvParams.create(name, values)) == expected
    assert (
        DIFFICULTY_CLASSES[expected] == ("easy", "challenging", "very challenging", "extremely challenging")[expected]
    )


def test_difficulty_refuses_bad_params():
    with pytest.raises(EnvParamError, match="roughness"):
        FAM.difficulty(terrain(roughness=-1.0))


def test_envs_table_records_each_envs_difficulty(tiny, tmp_path):
    import poet
    from envs.terrain import difficulty
    from poet.analysis import load_run

    # an easy start env that reproduction can push across a threshold
    cfg = tiny(
        iterations=9,
        env={
            "family": "terrain",
            "start": {"roughness": 4.2, "pit_gap": [], "stump_height": []},
            "options": {"course_length": 20.0, "max_episode_steps": 150},
        },
        reproduction={"threshold": -1000.0},
    )
    poet.run(cfg, out=tmp_path / "r", progress=False)
    envs_t = load_run(tmp_path / "r").envs
    assert str(envs_t["difficulty"].dtype) == "Int64"
    expected = [difficulty(EnvParams.from_json(j).values) for j in envs_t["params_json"]]
    assert envs_t["difficulty"].tolist() == expected
    assert set(expected) == {0, 1}, "the run should hold envs on both sides of the roughness threshold"
    # experiments/difficulty_climb.py reads the same classes
    import sys

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "experiments"))
    from difficulty_climb import climb

    report = climb(tmp_path / "r", every=4)
    assert [c["created"] for c in report["classes"].values()] == [expected.count(k) for k in range(4)]
    assert [row["iteration"] for row in report["solved_envs_over_iterations"]] == [3, 7, 8]
    solved = envs_t["solved_iteration"].notna()
    assert report["solved_envs_over_iterations"][-1]["envs_solved"] == int(solved.sum())
    # experiments/course_generalisation.py scores the roughest solved envs' agents on fresh courses
    from course_generalisation import generalisation

    fresh = generalisation(tmp_path / "r", n_envs=2, n_courses=3)
    roughest = envs_t[solved].sort_values("roughness", ascending=False)["roughness"].head(2).tolist()
    assert [e["params"]["roughness"] for e in fresh["envs"]] == roughest
    for e in fresh["envs"]:
        assert [c["roughness"] for c in e["fresh_courses"]] == [e["params"]["roughness"], 4.5, 5.1]
        assert all(0 <= c["solved"] + c["below_mc"] <= c["courses"] == 3 for c in e["fresh_courses"])


class _LegacyDraws:
    """numpy's legacy global generator behind the Generator methods `edit_vector` calls, so
    that a seed gives the draws dcd's `mutate_level` makes after `np.random.seed(seed)`."""

    def __init__(self, seed: int):
        self.state = np.random.RandomState(seed)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return self.state.randint(low, high, size)

    def uniform(self, low: float, high: float) -> float:
        return self.state.uniform(low, high)


# dcd's BipedalWalkerAdversarialEnv.mutate_level in POET mode (facebookresearch/dcd @72991be),
# run on these level vectors after np.random.seed(seed): (vector, seed, edits, result).
DCD_EDITS = [
    ([0.3, 0.0, 0.8, 0.0, 0.4], 0, 3, [0.3, 0.0, 0.8, 0.2, 0.4]),
    ([0.3, 0.0, 0.8, 0.0, 0.4], 1, 3, [0.24459684313872132, 0.0, 0.8, 0.0, 0.4]),
    ([0.3, 0.0, 0.8, 0.0, 0.4], 2, 3, [0.0, 0.0, 0.8, 0.2, 0.4]),
    ([0.3, 0.0, 0.8, 0.0, 0.4], 3, 3, [0.0, 0.0, 0.4, 0.0, 0.4]),
    ([0.3, 0.0, 0.8, 0.0, 0.4], 4, 3, [0.3, 0.4, 0.4, 0.0, 0.4]),
    ([0.3, 0.0, 0.8, 0.0, 0.4], 5, 3, [0.0, 0.4, 0.8, 0.0, 0.4]),
    ([2.0, 1.2, 3.6, 0.4, 1.0], 6, 1, [2.0, 1.2, 3.6, 0.4, 1.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0], 8, 1, [2.0, 1.2, 3.6, 0.2, 1.0]),
    ([2.0, 1.2, 3.6, 0.4, 1.0], 9, 1, [2.0, 1.2, 3.6, 0.4, 1.2]),
    ([2.0, 1.2, 3.6, 0.4, 1.0], 11, 1, [2.0, 0.7999999999999999, 3.6, 0.4, 1.0]),
    ([0.0, 0.0, 0.0, 0.0, 0.0], 12, 5, [0.0, 0.4, 0.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("vector, seed, edits, expected", DCD_EDITS)
def test_accel_edit_moves_one_entry_a_step_as_dcd_does(vector, seed, edits, expected):
    from envs.terrain import edit_vector

    assert edit_vector(vector, _LegacyDraws(seed), edits).tolist() == expected


def test_accel_edit_of_a_course_sorts_the_ends_and_turns_low_groups_off():
    from envs.terrain import from_edit_vector

    family = TerrainFamily()
    easy = EnvParams.create("terrain", {"roughness": 0.3, "pit_gap": [0.0, 0.8], "stump_height": [0.0, 0.4]})
    child = family.edit(easy, _LegacyDraws(3), 3)  # dcd: [0.0, 0.0, 0.4, 0.0, 0.4]
    assert child.values == {"roughness": 0.0, "pit_gap": [], "stump_height": [0.0, 0.4]}
    crossed = from_edit_vector([1.0, 3.0, 1.2, 0.6, 0.2])
    assert crossed.values == {"roughness": 1.0, "pit_gap": [1.2, 3.0], "stump_height": [0.2, 0.6]}
    family.validate(crossed)
    # one edit changes at most one number of the vector
    rng = np.random.default_rng(5)
    for _ in range(200):
        before = family.sample(rng)
        after = family.edit(before, rng, 1)
        family.validate(after)
        assert (family.features(before) != family.features(after)).sum() <= 2  # an end, or a group turned off
