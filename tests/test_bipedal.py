"""The `bipedal` family: gymnasium's Box2D BipedalWalker on courses built from POET's params."""

from __future__ import annotations

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

pytest.importorskip("Box2D")

import envs  # noqa: E402
from envs.base import EnvParamError, EnvParams  # noqa: E402
from envs.bipedal import TERRAIN_HEIGHT, TERRAIN_STEP, BipedalFamily, BipedalTerrainEnv, course_obstacles  # noqa: E402
from tests.conftest import mutation_chain  # noqa: E402


@pytest.fixture(scope="module")
def family() -> BipedalFamily:
    return envs.make_family("bipedal")


def _params(**values) -> EnvParams:
    base = {"roughness": 0.0, "pit_gap": [], "stump_height": []}
    base.update(values)
    return EnvParams.create("bipedal", base)


def test_check_env_initial_and_mutated(family) -> None:
    for p in [family.initial(), *mutation_chain(family, 20, seed=11)]:
        family.validate(p)
        env = family.make_env(p)
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_params_are_terrains_under_another_name(family) -> None:
    terrain = envs.make_family("terrain")
    assert family.initial().values == terrain.initial().values and family.initial().family == "bipedal"
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    p, q = family.initial(), terrain.initial()
    for _ in range(10):
        p, q = family.mutate(p, rng_a), terrain.mutate(q, rng_b)
        assert p.family == "bipedal" and p.values == q.values
        assert np.array_equal(family.features(p), terrain.features(q))
        assert family.flat(p) == terrain.flat(q)
    with pytest.raises(EnvParamError) as err:
        family.validate(_params(roughness=11.0))
    assert err.value.family == "bipedal" and err.value.field == "roughness"
    with pytest.raises(EnvParamError) as err:
        family.validate(EnvParams.create("terrain", family.initial().values))
    assert err.value.field == "family"


def test_obstacles_only_enabled_and_in_range(family) -> None:
    cases = [
        _params(pit_gap=[0.4, 3.0]),
        _params(stump_height=[0.0, 2.0]),
        _params(roughness=3.0, pit_gap=[1.0, 1.4], stump_height=[0.2, 0.8]),
        *mutation_chain(family, 8, seed=5),
    ]
    seen = set()
    for p in cases:
        v = p.values
        for seed in (0, 1, 2):
            env = family.make_env(p)
            env.reset(seed=seed)
            obstacles = course_obstacles(env)
            kinds = {k for k, _, _ in obstacles}
            enabled = {k for k, on in (("pit", v["pit_gap"]), ("stump", v["stump_height"])) if on}
            assert kinds <= enabled, (p.values, kinds)
            if enabled:
                assert obstacles, "an enabled kind should appear on a 200-step course"
            for kind, x0, size in obstacles:
                lo, hi = v["pit_gap"] if kind == "pit" else v["stump_height"]
                assert lo <= size <= hi
                assert x0 >= TERRAIN_STEP * 20 - 1e-9  # not on the start pad
            seen |= kinds
            # pits: the opening between the two walls is `width` steps
            walls = [np.asarray(q) for q in env.obstacle_polys]
            pit_walls = iter(w for w in walls if w[:, 1].min() < w[:, 1].max() - 3.9 * TERRAIN_STEP)
            for kind, x0, size in obstacles:
                if kind == "pit":
                    left, right = next(pit_walls), next(pit_walls)
                    assert left[:, 0].max() == pytest.approx(x0)
                    assert right[:, 0].min() - left[:, 0].max() == pytest.approx(size * TERRAIN_STEP)
            env.close()
    assert seen == {"pit", "stump"}


def test_flat_course(family) -> None:
    env = family.make_env(family.initial())
    for seed in (0, 3):
        env.reset(seed=seed)
        assert course_obstacles(env) == []
        assert env.obstacle_polys == []
        assert set(env.terrain_y) == {TERRAIN_HEIGHT}
    env.close()
    # roughness alone makes it uneven
    rough = family.make_env(_params(roughness=2.0))
    rough.reset(seed=0)
    assert np.ptp(rough.terrain_y) > 0.1
    rough.close()


def _rollout(family, p: EnvParams, seed: int, steps: int) -> tuple[list[float], list[float], float]:
    env = family.make_env(p)
    env.reset(seed=seed)
    actions = np.random.default_rng(123).uniform(-1, 1, size=(steps, 4)).astype(np.float32)
    total = 0.0
    for a in actions:
        _, r, term, trunc, _ = env.step(a)
        total += r
        if term or trunc:
            break
    out = (list(env.terrain_x), list(env.terrain_y), total)
    env.close()
    return out


def test_same_seed_same_course_and_returns(family) -> None:
    p = _params(roughness=2.5, pit_gap=[0.8, 2.0], stump_height=[0.2, 1.0])
    a, b = _rollout(family, p, 7, 300), _rollout(family, p, 7, 300)
    assert a == b
    c = _rollout(family, p, 8, 300)
    assert c[1] != a[1]


def test_truncates_at_max_episode_steps() -> None:
    fam = BipedalFamily(max_episode_steps=30)
    env = fam.make_env(fam.initial())
    env.reset(seed=0)
    for t in range(1, 31):
        _, _, term, trunc, _ = env.step(np.zeros(4, dtype=np.float32))
        if term:
            break
        assert trunc == (t == 30)
    assert BipedalFamily().max_episode_steps == 2000


def test_render_rgb_array_and_profile(family) -> None:
    p = _params(roughness=1.0, pit_gap=[0.8, 1.6], stump_height=[0.4, 1.0])
    env = family.make_env(p, render_mode="rgb_array")
    env.reset(seed=2)
    env.step(env.action_space.sample())
    frame = env.render()
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8
    assert frame.std() > 0
    env.close()

    # the course profile (what `poet profile` draws) is the env's own course, in metres
    profile = family.course_profile(p, seed=2)
    env = family.make_env(p)
    env.reset(seed=2)
    assert np.array_equal(profile.y, env.terrain_y) and profile.x[0] == 0.0 and np.all(np.diff(profile.x) >= 0)
    obstacles = course_obstacles(env)
    env.close()
    pits = [(x, w) for kind, x, w in obstacles if kind == "pit"]
    stumps = [(x, h) for kind, x, h in obstacles if kind == "stump"]
    assert pits and stumps and len(profile.pits) == len(pits) and len(profile.stumps) == len(stumps)
    assert len(profile.solids) == 2 * len(pits)  # each pit's two walls
    for (x0, x1), (x, width) in zip(profile.pits, pits):
        assert x0 == x and x1 - x0 == pytest.approx(width * TERRAIN_STEP)
    for (x0, x1, bottom, top), (x, height) in zip(profile.stumps, stumps):
        assert x0 == x and x1 - x0 == pytest.approx(TERRAIN_STEP)
        assert top - bottom == pytest.approx(max(height * TERRAIN_STEP, 0.01))
    assert profile.start == (0.0, 20 * TERRAIN_STEP) and profile.finish == pytest.approx((200 - 10) * TERRAIN_STEP)
    assert profile.description == "roughness 1 · pit gap 0.8-1.6 · stump height 0.4-1" and profile.seed == 2
    flat = family.course_profile(family.initial(), seed=2)
    assert np.all(flat.y == TERRAIN_HEIGHT) and not flat.pits and not flat.stumps and not flat.solids


def test_gymnasium_id() -> None:
    env = gym.make("poet/BipedalTerrain-v0", params={"roughness": 1.0, "pit_gap": [], "stump_height": [0.0, 0.4]})
    assert isinstance(env.unwrapped, BipedalTerrainEnv)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (24,) and env.action_space.shape == (4,)
    env.close()


def test_in_process_evaluator(family) -> None:
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.policies import init_flat, spec_for_spaces

    env = family.make_env(family.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (40, 40), "tanh")
    env.close()
    ev = InProcessEvaluator(family, spec)
    ref = ev.put(init_flat(spec, np.random.default_rng(0)))
    params = mutation_chain(family, 3, seed=2)[-1]
    req = EvalRequest(ref, params, episodes=1, seed=5, max_steps=50)
    (res,) = ev.evaluate([req])
    assert res.ok, res.error
    assert res.returns.shape == (1,) and 1 <= res.lengths[0] <= 50 and np.isfinite(res.returns).all()
    (again,) = ev.evaluate([req])
    assert again.returns.tobytes() == res.returns.tobytes()
    ev.close()
