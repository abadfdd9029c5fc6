"""Every registered env family honours the EnvFamily contract, and EnvParams behaves."""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

# check_env also renders in every declared mode, "human" included: keep pygame headless.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import envs  # noqa: E402,F401 - registers the poet/ gymnasium ids
from envs.base import EnvFamily, EnvParams
from envs.registry import EXAMPLE_OPTIONS, FAMILIES, GYMNASIUM_IDS, make_family
from tests.conftest import mutation_chain

REPO_ROOT = Path(__file__).resolve().parent.parent
FAMILY_NAMES = sorted(FAMILIES)
N_MUTATIONS = 20


@functools.cache
def _family(name: str) -> EnvFamily:
    """One family per name for the whole module (families are stateless)."""
    return make_family(name, EXAMPLE_OPTIONS.get(name, {}))


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_family_satisfies_protocol(name: str) -> None:
    family = _family(name)
    assert isinstance(family, EnvFamily)
    assert family.initial().family == family.name


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_check_env_at_initial_and_mutated_params(name: str) -> None:
    family = _family(name)
    for params in [family.initial(), *mutation_chain(family, N_MUTATIONS, seed=0)]:
        env = family.make_env(params)
        try:
            check_env(env.unwrapped)
        finally:
            env.close()


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_params_survive_json_round_trip(name: str) -> None:
    family = _family(name)
    for params in [family.initial(), *mutation_chain(family, N_MUTATIONS, seed=1)]:
        back = EnvParams.from_json(params.to_json())
        assert back == params and back.id == params.id and hash(back) == hash(params)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_validate_accepts_initial_and_mutated(name: str) -> None:
    family = _family(name)
    for params in [family.initial(), *mutation_chain(family, N_MUTATIONS, seed=2)]:
        family.validate(params)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_mutation_is_reproducible_and_in_bounds(name: str) -> None:
    family = _family(name)
    first, second = mutation_chain(family, N_MUTATIONS, seed=3), mutation_chain(family, N_MUTATIONS, seed=3)
    assert [p.id for p in first] == [p.id for p in second]
    for params in first:
        family.validate(params)  # validate is each family's bounds check
        assert params.family == family.name
    bounds = getattr(family, "param_specs", ())  # GymFamily exposes explicit ranges
    for spec in bounds:
        assert all(spec.low <= p[spec.name] <= spec.high for p in first)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_features_are_finite_fixed_length_vectors(name: str) -> None:
    family = _family(name)
    feats = [family.features(p) for p in [family.initial(), *mutation_chain(family, N_MUTATIONS, seed=4)]]
    length = feats[0].shape
    for f in feats:
        assert isinstance(f, np.ndarray) and f.ndim == 1 and f.shape == length
        assert np.issubdtype(f.dtype, np.floating) and np.all(np.isfinite(f))
    assert length[0] > 0


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_flat_gives_one_scalar_per_column(name: str) -> None:
    family = _family(name)
    flat = family.flat(family.initial())
    assert flat and all(isinstance(k, str) and np.isscalar(v) for k, v in flat.items())


@pytest.mark.parametrize("name", sorted(GYMNASIUM_IDS))
def test_gymnasium_make_registered_id(name: str) -> None:
    env = gym.make(GYMNASIUM_IDS[name])
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    env.action_space.seed(0)
    env.step(env.action_space.sample())
    env.close()


def _trace(env: gym.Env, seed: int, steps: int = 15) -> np.ndarray:
    """Observations under actions sampled from the env's own seeded action space."""
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    trace = [np.asarray(obs, dtype=np.float64).ravel()]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        trace.append(np.asarray(obs, dtype=np.float64).ravel())
        if terminated or truncated:
            break
    env.close()
    return np.stack(trace)


@pytest.mark.parametrize("name", sorted(GYMNASIUM_IDS))
def test_gymnasium_make_with_params_builds_that_env(name: str) -> None:
    family = _family(name)
    params = mutation_chain(family, N_MUTATIONS, seed=5)[-1]
    via_gym = _trace(gym.make(GYMNASIUM_IDS[name], params=params), seed=9)
    via_family = _trace(family.make_env(params), seed=9)
    np.testing.assert_array_equal(via_gym, via_family)
    via_dict = _trace(gym.make(GYMNASIUM_IDS[name], params=params.values), seed=9)
    np.testing.assert_array_equal(via_dict, via_family)


# ---------------------------------------------------------------- EnvParams


def _nested() -> dict[str, Any]:
    return {"b": [1, 2.5, {"z": [0.0, -1]}], "a": {"y": "s", "x": None}, "pairs": [[1, 2], [3, 4]], "flag": True}


def test_env_params_are_hashable_and_value_equal() -> None:
    p, q = EnvParams.create("f", {"x": 1.0, "y": 2}), EnvParams.create("f", {"y": 2, "x": 1.0})
    assert p == q and hash(p) == hash(q) and p.id == q.id
    assert len({p, q}) == 1
    assert EnvParams.create("g", p.values) != p


def test_env_params_id_is_stable_across_processes() -> None:
    values = {"gravity": -9.5, "nested": {"b": [1, 2], "a": 0.1}}
    code = (
        "from envs.base import EnvParams; "
        "print(EnvParams.create('fam', {'nested': {'a': 0.1, 'b': [1, 2]}, 'gravity': -9.5}).id)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert out.stdout.strip() == EnvParams.create("fam", values).id


def test_negative_zero_has_the_same_id_as_zero() -> None:
    assert EnvParams.create("f", {"x": -0.0}).id == EnvParams.create("f", {"x": 0.0}).id
    assert EnvParams.create("f", {"x": [-0.0]}) == EnvParams.create("f", {"x": [0.0]})


def test_nested_values_round_trip() -> None:
    p = EnvParams.create("f", _nested())
    assert p.values == _nested()
    back = EnvParams.from_json(p.to_json())
    assert back == p and back.id == p.id and back.values == _nested()


def test_lists_of_pairs_stay_lists() -> None:
    p = EnvParams.create("f", {"pairs": [["a", 1], ["b", 2]]})
    assert p["pairs"] == [["a", 1], ["b", 2]]
    assert isinstance(EnvParams.from_json(p.to_json())["pairs"], list)


def test_dict_and_list_of_pairs_are_different_params() -> None:
    # Their JSON (and so their id) differs, so == and hash must tell them apart too.
    hashed = EnvParams.create("f", {"a": 1.5}, course_seed=3)
    hash(hashed)  # cached on the instance, but never pickled: string hashes differ between processes
    assert "_hash" not in pickle.loads(pickle.dumps(hashed)).__dict__ and hashed.__dict__.get("_hash") == hash(hashed)

    as_list = EnvParams.create("f", {"pairs": [["a", 1], ["b", 2]]})
    as_dict = EnvParams.create("f", {"pairs": {"a": 1, "b": 2}})
    assert as_list.id != as_dict.id
    assert as_list != as_dict
    assert len({as_list, as_dict}) == 2


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_sample_draws_valid_params_reproducibly_over_the_range(name: str) -> None:
    family = make_family(name, EXAMPLE_OPTIONS.get(name))
    draws = [family.sample(np.random.default_rng([3, i])) for i in range(12)]
    for params in draws:
        family.validate(params)
    assert family.sample(np.random.default_rng([3, 0])) == draws[0]  # a function of the generator only
    assert len({p.id for p in draws}) >= 10  # random, not a fixed point


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_interpolate_ends_on_start_and_target_and_stays_valid(name: str) -> None:
    family = make_family(name, EXAMPLE_OPTIONS.get(name))
    if not callable(getattr(family, "interpolate", None)):
        pytest.skip(f"{name} has no interpolation (the path curriculum refuses it)")
    start, target = family.initial(), family.sample(np.random.default_rng(11))
    assert family.interpolate(start, target, 0.0) == start and family.interpolate(start, target, 1.0) == target
    for t in (0.1, 0.5, 0.9):
        family.validate(family.interpolate(start, target, t))
