"""EnvCache: reused envs give exactly a new env's episodes, only where the family renews them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from envs import EnvCache, EnvParams
from envs.generic import renew_gym_env
from envs.registry import EXAMPLE_OPTIONS, FAMILIES, make_family
from poet.evaluation.protocol import EvalRequest, PolicyRef
from poet.evaluation.rollout import run_requests
from poet.policies import spec_for_spaces
from tests.conftest import mutation_chain

LOCKSTEP_FAMILIES = sorted(n for n in FAMILIES if not hasattr(make_family(n, EXAMPLE_OPTIONS.get(n)), "row_kernel"))


def _policy_action(space: gym.Space, weights: np.ndarray, obs: np.ndarray):
    """A fixed random linear policy: actions depend on the observation, so trajectories differ if states do."""
    out = np.asarray(obs, dtype=np.float64).ravel() @ weights
    if isinstance(space, gym.spaces.Discrete):
        return int(np.argmax(out[: space.n]))
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    return (low + (np.tanh(out[: space.shape[0]]) + 1.0) * 0.5 * (high - low)).astype(space.dtype)


def _episode(env: gym.Env, seed: int, weights: np.ndarray, max_steps: int = 250) -> np.ndarray:
    """Observations and rewards of one episode, flattened."""
    obs, _ = env.reset(seed=seed)
    trace = [np.asarray(obs, dtype=np.float64).ravel()]
    for _ in range(max_steps):
        obs, reward, terminated, truncated, _ = env.step(_policy_action(env.action_space, weights, obs))
        trace.append(np.r_[np.asarray(obs, dtype=np.float64).ravel(), float(reward)])
        if terminated or truncated:
            break
    return np.concatenate(trace)


@pytest.mark.parametrize("name", LOCKSTEP_FAMILIES)
def test_renewed_envs_replay_a_new_envs_episodes(name: str) -> None:
    """Every family stepped env by env renews its envs, and a renewed env's episode is bit for bit a new env's,
    whatever ran on it before (other params, other seeds, other policies)."""
    family = make_family(name, EXAMPLE_OPTIONS.get(name))
    assert callable(getattr(family, "renew", None)), f"{name} builds a new env for every episode"
    params = [family.initial(), *mutation_chain(family, 3, seed=2)]
    probe = family.make_env(params[0])
    obs_dim = int(np.prod(probe.observation_space.shape))
    probe.close()
    rng = np.random.default_rng(5)
    episodes = [(params[i % len(params)], 40 + i, rng.normal(0.0, 0.5, (obs_dim, 8))) for i in range(10)]
    fresh = []
    for p, seed, w in episodes:
        env = family.make_env(p)
        fresh.append(_episode(env, seed, w))
        env.close()
    cache, reused, made = EnvCache(family), [], 0
    for p, seed, w in episodes + episodes[::-1]:  # each env runs several episodes, in another order
        made += cache.idle == 0 or p not in cache._idle
        env = cache.take(p)
        reused.append(_episode(env, seed, w))
        cache.give_back(p, env)
    assert cache.idle == len(params) and made == len(params)  # one env per params did every episode
    for a, b in zip(fresh + fresh[::-1], reused):
        np.testing.assert_array_equal(a, b)
    cache.close()
    assert cache.idle == 0


def test_renew_swaps_the_box2d_world_and_keeps_its_gravity() -> None:
    env = gym.make("LunarLander-v3", gravity=-5.0, disable_env_checker=True)
    env.reset(seed=0)
    old = env.unwrapped.world
    assert renew_gym_env(env)
    assert env.unwrapped.world is not old and tuple(env.unwrapped.world.gravity) == (0.0, -5.0)
    assert env.unwrapped.moon is None  # the old world's bodies were destroyed with it


class _OwnEnv(gym.Env):
    """An env the cache knows nothing about: its reset may leave state behind."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(1, dtype=np.float32), 0.0, True, False, {}


@pytest.mark.parametrize(
    "make",
    [
        lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1", disable_env_checker=True)),
        lambda: gym.make("CartPole-v1", render_mode="rgb_array", disable_env_checker=True),
        lambda: gym.wrappers.TimeLimit(_OwnEnv(), 10),
        lambda: _OwnEnv(),
    ],
    ids=["extra wrapper", "rendering", "unknown env wrapped", "unknown env"],
)
def test_envs_not_known_to_reset_exactly_are_not_renewed(make) -> None:
    assert renew_gym_env(make()) is False


@pytest.mark.parametrize(
    "env_id",
    [
        "CartPole-v1",
        "Pendulum-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Acrobot-v1",
        "BipedalWalker-v3",
        "LunarLander-v3",
    ],
)
def test_known_envs_are_renewed(env_id: str) -> None:
    assert renew_gym_env(gym.make(env_id, disable_env_checker=True)) is True


class _CountingFamily:
    """A tiny family of CartPole envs that counts what the cache does to them."""

    name = "counting"

    def __init__(self, renews: bool = True):
        self.renews, self.made, self.closed = renews, 0, 0

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> gym.Env:
        self.made += 1
        env = gym.make("CartPole-v1", disable_env_checker=True)
        family, close = self, env.close

        def counted_close() -> None:
            family.closed += 1
            close()

        env.close = counted_close
        return env

    def renew(self, env: gym.Env) -> bool:
        return self.renews


def _p(i: int) -> EnvParams:
    return EnvParams.create("counting", {"i": i})


def test_cache_keeps_at_most_max_idle_envs_dropping_the_least_recently_used() -> None:
    family = _CountingFamily()
    cache = EnvCache(family, max_idle=3)
    envs = {i: cache.take(_p(i)) for i in range(4)}
    for i in range(4):
        cache.give_back(_p(i), envs[i])
    assert cache.idle == 3 and family.closed == 1  # params 0, given back first, went
    assert cache.take(_p(3)) is envs[3] and cache.take(_p(1)) is envs[1]
    made = family.made
    cache.take(_p(0))
    assert family.made == made + 1  # evicted: built anew
    cache.close()
    assert cache.idle == 0 and family.closed == 2


def test_cache_closes_envs_a_family_does_not_renew() -> None:
    family = _CountingFamily(renews=False)
    cache = EnvCache(family)
    env = cache.take(_p(0))
    cache.give_back(_p(0), env)
    assert cache.idle == 0 and family.closed == 1


class _Raises(gym.Wrapper):
    """An env whose every step raises."""

    def step(self, action):
        raise RuntimeError("this env breaks")


def test_envs_in_use_when_a_batch_raises_are_closed_not_kept() -> None:
    """Params i=1 raise at their first step: the batch's envs are closed, the batch is re-run request by
    request (i=0 alone finishes and its env is kept; i=1 fails alone and its env is closed)."""
    family = _CountingFamily()
    make = family.make_env
    family.make_env = lambda p, render_mode=None: _Raises(make(p)) if p["i"] == 1 else make(p)
    spec = spec_for_spaces(gym.spaces.Box(-np.inf, np.inf, (4,)), gym.spaces.Discrete(2), (4,), "tanh")
    weights = np.zeros(spec.num_params, dtype=np.float32)
    reqs = [EvalRequest(PolicyRef("w"), _p(i), 1, 10 + i, 20) for i in (0, 1)]
    cache = EnvCache(family)
    results = run_requests(family, spec, reqs, lambda ref: weights, None, env_cache=cache)
    assert results[0].ok and "this env breaks" in results[1].error.message
    assert family.made == 4 and family.closed == 3 and cache.idle == 1


def test_bipedalwalker_v3_replays_a_new_envs_episodes_only_with_a_new_world() -> None:
    """Why the world is replaced: reused as it is, the same seed gives other episodes."""
    rng = np.random.default_rng(1)
    episodes = [(70 + i, rng.normal(0.0, 0.5, (24, 8))) for i in range(12)]
    fresh = [_episode(gym.make("BipedalWalker-v3", disable_env_checker=True), s, w) for s, w in episodes]
    kept, renewed = (gym.make("BipedalWalker-v3", disable_env_checker=True) for _ in range(2))
    differ_kept, differ_renewed = 0, 0
    for (seed, w), ref in zip(episodes, fresh):
        differ_kept += not np.array_equal(_episode(kept, seed, w), ref)
        assert renew_gym_env(renewed)
        differ_renewed += not np.array_equal(_episode(renewed, seed, w), ref)
    assert differ_kept > 0 and differ_renewed == 0
