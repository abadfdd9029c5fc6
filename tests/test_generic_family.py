"""GymFamily: spec validation, params handling, and that evolved kwargs reach the dynamics."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import yaml

from envs.base import EnvParamError, EnvParams
from envs.cartpole_physics import ENV_ID as CARTPOLE_ID
from envs.cartpole_physics import CartPolePhysicsEnv, register
from envs.generic import GymFamily, parse_spec
from envs.registry import SPEC_DIR

CARTPOLE_SPEC = SPEC_DIR / "cartpole.yaml"
LANDER_SPEC = SPEC_DIR / "lunar_lander.yaml"


def _base_spec() -> dict[str, Any]:
    """A small valid inline spec (CartPole physics builds in milliseconds)."""
    return {
        "name": "cp",
        "env_id": CARTPOLE_ID,
        "max_episode_steps": 50,
        "params": {
            "gravity": {"initial": 9.8, "low": 4.0, "high": 20.0, "step": 1.0},
            "length": {"initial": 0.5, "low": 0.2, "high": 2.0, "step": 0.1},
        },
    }


def _edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    spec = copy.deepcopy(_base_spec())
    change(spec)
    return spec


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit that sets a dotted key of the spec."""

    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        node[last] = value

    return change


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[key]
        del node[last]

    return change


# ---------------------------------------------------------------- spec validation

BAD_SPECS = {
    "unknown_env_id": (_set("env_id", "NoSuchEnv-v9"), ["env_id", "NoSuchEnv-v9", "not a registered"]),
    "env_id_not_string": (_set("env_id", 3), ["env_id"]),
    "low_above_high": (_set("params.gravity.low", 25.0), ["params.gravity.low", "> high"]),
    "initial_below_low": (_set("params.gravity.initial", 1.0), ["params.gravity.initial", "outside"]),
    "initial_above_high": (_set("params.length.initial", 3.0), ["params.length.initial", "outside"]),
    "step_zero": (_set("params.gravity.step", 0.0), ["params.gravity.step", "> 0"]),
    "step_negative": (_set("params.gravity.step", -1.0), ["params.gravity.step", "> 0"]),
    "non_numeric_bound": (_set("params.gravity.high", "lots"), ["params.gravity.high", "number", "lots"]),
    "bool_as_number": (_set("params.gravity.initial", True), ["params.gravity.initial", "number"]),
    "infinite_bound": (_set("params.gravity.high", float("inf")), ["params.gravity.high", "finite"]),
    "missing_env_id": (_delete("env_id"), ["env_id", "missing"]),
    "missing_name": (_delete("name"), ["name", "missing"]),
    "missing_params": (_delete("params"), ["params", "missing"]),
    "missing_param_step": (_delete("params.gravity.step"), ["params.gravity.step", "missing"]),
    "unknown_top_key": (_set("colour", "red"), ["colour", "unknown"]),
    "unknown_param_key": (_set("params.gravity.mean", 1.0), ["params.gravity.mean", "unknown"]),
    "param_not_mapping": (_set("params.gravity", 9.8), ["params.gravity", "mapping"]),
    "empty_params": (_set("params", {}), ["params", "non-empty"]),
    "bad_param_type": (_set("params.gravity.type", "complex"), ["params.gravity.type", "complex"]),
    "fractional_int_bound": (
        _set("params.gravity", {"initial": 10, "low": 4.5, "high": 20, "step": 1, "type": "int"}),
        ["params.gravity.low", "integer"],
    ),
    "int_step_below_one": (
        _set("params.gravity", {"initial": 10, "low": 4, "high": 20, "step": 0.4, "type": "int"}),
        ["params.gravity.step", ">= 1"],
    ),
    "kwargs_not_mapping": (_set("kwargs", [1, 2]), ["kwargs", "mapping"]),
    "param_also_in_kwargs": (_set("kwargs", {"gravity": 9.8}), ["params.gravity", "kwargs"]),
    "reserved_param_name": (
        _set("params.render_mode", {"initial": 0, "low": 0, "high": 1, "step": 1}),
        ["params.render_mode", "reserved"],
    ),
    "bad_max_episode_steps": (_set("max_episode_steps", 0), ["max_episode_steps", "positive"]),
    "empty_name": (_set("name", ""), ["name", "non-empty"]),
    "scores_not_mapping": (_set("scores", 475), ["scores", "mapping"]),
    "unknown_score": (_set("scores", {"solve": 475}), ["scores.solve", "unknown"]),
    "score_not_number": (_set("scores", {"solved": "high"}), ["scores.solved", "number"]),
    "mc_bounds_crossed": (_set("scores", {"mc_lower": 300, "mc_upper": 50}), ["scores.mc_lower", "<="]),
}


@pytest.mark.parametrize("kind", sorted(BAD_SPECS))
def test_bad_spec_is_rejected_naming_the_problem(kind: str) -> None:
    change, fragments = BAD_SPECS[kind]
    with pytest.raises(ValueError) as info:
        GymFamily(_edit(change))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_spec_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ValueError, match="mapping"):
        parse_spec(["name", "env_id"])


def test_param_the_constructor_does_not_accept_fails_at_construction() -> None:
    spec = _edit(_set("params.wingspan", {"initial": 1.0, "low": 0.5, "high": 2.0, "step": 0.1}))
    with pytest.raises(ValueError) as info:
        GymFamily(spec)
    message = str(info.value)
    assert "params.wingspan" in message and "'wingspan'" in message and CARTPOLE_ID in message


def test_fixed_kwarg_the_constructor_does_not_accept_fails_at_construction() -> None:
    with pytest.raises(ValueError) as info:
        GymFamily.from_yaml(LANDER_SPEC, kwargs={"hover": True})
    assert "kwargs.hover" in str(info.value) and "LunarLander-v3" in str(info.value)


def test_range_the_constructor_rejects_fails_at_construction() -> None:
    # LunarLander asserts gravity < 0, so a high bound of 0 must fail before any mutation.
    with pytest.raises(ValueError) as info:
        GymFamily.from_yaml(LANDER_SPEC, params={"gravity": {"high": 0.0}})
    message = str(info.value)
    assert "LunarLander-v3" in message and "high" in message and "gravity" in message


def test_unreadable_yaml_path_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ValueError, match="nope.yaml"):
        GymFamily.from_yaml(missing)


def test_yaml_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="mapping"):
        GymFamily.from_yaml(path)


def test_yaml_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_edit(_set("params.gravity.step", -2.0))))
    with pytest.raises(ValueError) as info:
        GymFamily.from_yaml(path)
    assert "bad.yaml" in str(info.value) and "params.gravity.step" in str(info.value)


# ---------------------------------------------------------------- constructors


def test_from_yaml_overrides_deep_merge() -> None:
    fam = GymFamily.from_yaml(CARTPOLE_SPEC, name="cp2", max_episode_steps=20, params={"gravity": {"high": 12.0}})
    assert fam.name == "cp2" and fam.spec.max_episode_steps == 20
    gravity = {p.name: p for p in fam.param_specs}["gravity"]
    assert (gravity.low, gravity.high, gravity.initial) == (4.0, 12.0, 9.8)
    assert [p.name for p in fam.param_specs] == ["gravity", "masscart", "masspole", "length", "force_mag"]


def test_from_options_with_spec_path_and_inline() -> None:
    from_path = GymFamily.from_options(spec=str(LANDER_SPEC))
    assert from_path.name == "lunar_lander" and from_path.spec.env_id == "LunarLander-v3"
    inline = GymFamily.from_options(**_base_spec())
    assert inline.name == "cp" and inline.initial().values == {"gravity": 9.8, "length": 0.5}


def test_from_options_without_anything_says_what_is_needed() -> None:
    with pytest.raises(ValueError, match="spec="):
        GymFamily.from_options()


# ---------------------------------------------------------------- params


@pytest.fixture(scope="module")
def cartpole() -> GymFamily:
    return GymFamily.from_yaml(CARTPOLE_SPEC)


def test_initial_values_follow_the_spec(cartpole: GymFamily) -> None:
    p = cartpole.initial()
    assert p.family == "cartpole"
    assert p.values == {"gravity": 9.8, "masscart": 1.0, "masspole": 0.1, "length": 0.5, "force_mag": 10.0}


def test_mutation_moves_within_step_and_bounds_rounded(cartpole: GymFamily) -> None:
    rng = np.random.default_rng(3)
    p = cartpole.initial()
    for _ in range(200):
        child = cartpole.mutate(p, rng)
        for spec in cartpole.param_specs:
            v, parent = child[spec.name], p[spec.name]
            assert spec.low <= v <= spec.high
            assert abs(v - parent) <= spec.step + 1e-6
            assert v == round(v, 6)
        p = child
    assert p != cartpole.initial()


def test_mutation_uses_only_the_given_rng(cartpole: GymFamily) -> None:
    a = cartpole.mutate(cartpole.initial(), np.random.default_rng(11))
    np.random.seed(0)  # the global numpy RNG must not matter
    b = cartpole.mutate(cartpole.initial(), np.random.default_rng(11))
    assert a == b and a.id == b.id


def test_features_normalise_to_unit_interval(cartpole: GymFamily) -> None:
    lows = {p.name: p.low for p in cartpole.param_specs}
    highs = {p.name: p.high for p in cartpole.param_specs}
    assert np.array_equal(cartpole.features(EnvParams.create("cartpole", lows)), np.zeros(5))
    assert np.array_equal(cartpole.features(EnvParams.create("cartpole", highs)), np.ones(5))
    f = cartpole.features(cartpole.initial())
    assert f.dtype == np.float64 and f.shape == (5,)
    assert f[0] == pytest.approx((9.8 - 4.0) / 16.0)


def test_flat_is_one_float_per_param(cartpole: GymFamily) -> None:
    flat = cartpole.flat(cartpole.initial())
    assert list(flat) == ["gravity", "masscart", "masspole", "length", "force_mag"]
    assert all(isinstance(v, float) for v in flat.values())


BAD_PARAMS = {
    "wrong_family": (lambda v: EnvParams.create("lunar_lander", v), "family"),
    "missing": (lambda v: EnvParams.create("cartpole", {k: x for k, x in v.items() if k != "length"}), "length"),
    "unknown": (lambda v: EnvParams.create("cartpole", {**v, "wind": 1.0}), "wind"),
    "non_numeric": (lambda v: EnvParams.create("cartpole", {**v, "masspole": "heavy"}), "masspole"),
    "bool": (lambda v: EnvParams.create("cartpole", {**v, "masspole": True}), "masspole"),
    "below_low": (lambda v: EnvParams.create("cartpole", {**v, "gravity": 3.9}), "gravity"),
    "above_high": (lambda v: EnvParams.create("cartpole", {**v, "force_mag": 20.5}), "force_mag"),
}


@pytest.mark.parametrize("kind", sorted(BAD_PARAMS))
def test_validate_names_the_bad_field(cartpole: GymFamily, kind: str) -> None:
    build, field = BAD_PARAMS[kind]
    params = build(cartpole.initial().values)
    with pytest.raises(EnvParamError) as info:
        cartpole.validate(params)
    assert info.value.field == field and field in str(info.value)
    with pytest.raises(EnvParamError):
        cartpole.make_env(params)


def test_make_env_applies_episode_limit_and_render_mode() -> None:
    fam = GymFamily.from_yaml(CARTPOLE_SPEC, max_episode_steps=5, params={"gravity": {"low": 9.8, "initial": 9.8}})
    env = fam.make_env(fam.initial(), render_mode="rgb_array")
    assert env.render_mode == "rgb_array"
    assert env.unwrapped.gravity == 9.8
    env.reset(seed=0)
    truncated = [env.step(t % 2)[3] for t in range(5)]
    assert truncated == [False] * 4 + [True]
    env.close()


# ---------------------------------------------------------------- integer params


class _CountEnv(gym.Env):
    """A tiny env whose constructor insists on an int, to test `type: int`."""

    observation_space = gym.spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, n: int = 3, render_mode: str | None = None):
        if not isinstance(n, int):
            raise TypeError(f"n must be an int, got {n!r}")
        self.n = n

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.array([self.n], dtype=np.float32), {}

    def step(self, action):
        return np.array([self.n], dtype=np.float32), 0.0, True, False, {}


INT_ENV_ID = "poet_test/CountEnv-v0"
if INT_ENV_ID not in gym.registry:
    gym.register(id=INT_ENV_ID, entry_point=_CountEnv)


def test_int_params_stay_integers() -> None:
    fam = GymFamily(
        {
            "name": "count",
            "env_id": INT_ENV_ID,
            "params": {"n": {"initial": 3, "low": 1, "high": 9, "step": 2, "type": "int"}},
        }
    )
    rng = np.random.default_rng(0)
    p = fam.initial()
    seen = set()
    for _ in range(50):
        p = fam.mutate(p, rng)
        assert isinstance(p["n"], int) and 1 <= p["n"] <= 9
        seen.add(p["n"])
    assert len(seen) > 1
    assert fam.make_env(p).unwrapped.n == p["n"]
    with pytest.raises(EnvParamError, match="integer"):
        fam.validate(EnvParams.create("count", {"n": 3.5}))


# ---------------------------------------------------------------- dynamics


def _rollout(env: gym.Env, seed: int, actions: list[Any]) -> np.ndarray:
    """Observations of a fixed action sequence (stops at episode end)."""
    obs, _ = env.reset(seed=seed)
    trace = [np.asarray(obs, dtype=np.float64)]
    for action in actions:
        obs, _, terminated, truncated, _ = env.step(action)
        trace.append(np.asarray(obs, dtype=np.float64))
        if terminated or truncated:
            break
    env.close()
    return np.stack(trace)


CARTPOLE_ACTIONS = [1, 0, 0, 1, 1, 1, 0, 1, 0, 0] * 3


def test_cartpole_physics_defaults_match_gymnasium_cartpole() -> None:
    ours = _rollout(gym.make(CARTPOLE_ID), 5, CARTPOLE_ACTIONS)
    theirs = _rollout(gym.make("CartPole-v1"), 5, CARTPOLE_ACTIONS)
    np.testing.assert_array_equal(ours, theirs)


def test_cartpole_physics_recomputes_derived_constants() -> None:
    env = CartPolePhysicsEnv(masscart=2.0, masspole=0.5, length=1.5)
    assert env.total_mass == pytest.approx(2.5)
    assert env.polemass_length == pytest.approx(0.75)


def test_cartpole_physics_rejects_nonpositive_constants() -> None:
    with pytest.raises(ValueError, match="masspole"):
        CartPolePhysicsEnv(masspole=0.0)


def test_cartpole_register_is_idempotent() -> None:
    register()
    register()
    assert gym.spec(CARTPOLE_ID).max_episode_steps == 500


@pytest.mark.parametrize("name", ["gravity", "masscart", "masspole", "length", "force_mag"])
def test_each_cartpole_constant_changes_the_trajectory(cartpole: GymFamily, name: str) -> None:
    base = cartpole.initial()
    high = {p.name: p.high for p in cartpole.param_specs}[name]
    changed = base.replace(**{name: high})
    same = _rollout(cartpole.make_env(base), 7, CARTPOLE_ACTIONS)
    again = _rollout(cartpole.make_env(base), 7, CARTPOLE_ACTIONS)
    other = _rollout(cartpole.make_env(changed), 7, CARTPOLE_ACTIONS)
    np.testing.assert_array_equal(same, again)
    n = min(len(same), len(other))
    assert not np.allclose(same[:n], other[:n])


def test_heavier_longer_pole_changes_the_trajectory(cartpole: GymFamily) -> None:
    base = cartpole.initial()
    heavy = base.replace(masspole=0.8, length=1.5)
    a = _rollout(cartpole.make_env(base), 1, CARTPOLE_ACTIONS)
    b = _rollout(cartpole.make_env(heavy), 1, CARTPOLE_ACTIONS)
    np.testing.assert_array_equal(a[0], b[0])  # same seed, same start
    n = min(len(a), len(b))
    assert not np.allclose(a[1:n], b[1:n])


def test_lunar_lander_wind_changes_the_trajectory() -> None:
    fam = GymFamily.from_yaml(LANDER_SPEC)
    calm = fam.initial()
    windy = calm.replace(wind_power=15.0, turbulence_power=1.5)
    actions = [np.zeros(2, dtype=np.float32)] * 40
    a = _rollout(fam.make_env(calm), 2, actions)
    a_again = _rollout(fam.make_env(calm), 2, actions)
    b = _rollout(fam.make_env(windy), 2, actions)
    np.testing.assert_array_equal(a, a_again)
    n = min(len(a), len(b))
    assert not np.allclose(a[:n], b[:n])
    assert fam.make_env(windy).unwrapped.wind_power == 15.0


# ---------------------------------------------------------------- score scale


def test_shipped_specs_state_a_score_scale_that_a_run_takes() -> None:
    """CartPole's returns are steps balanced (at most 500), not BipedalWalker's: a run on it
    takes the spec's thresholds where the config leaves them unset, and a config's own win."""
    from poet import load_config

    cfg = load_config(data={"env": {"family": "cartpole"}})
    assert (cfg.solved_threshold, cfg.reproduction.threshold) == (475.0, 413.0)
    assert (cfg.reproduction.mc_lower, cfg.reproduction.mc_upper) == (52.0, 500.0)
    assert load_config(data={"env": {"family": "cartpole"}, "solved_threshold": 400}).solved_threshold == 400.0
    lander = load_config(data={"env": {"family": "lunar_lander"}})
    assert (lander.solved_threshold, lander.reproduction.mc_upper) == (200.0, 296.0)
    terrain = load_config(data={"env": {"family": "terrain"}})  # BipedalWalker's scale: POET's
    assert (terrain.solved_threshold, terrain.reproduction.threshold) == (230.0, 200.0)
    assert (terrain.reproduction.mc_lower, terrain.reproduction.mc_upper) == (25.0, 340.0)


def test_family_without_a_score_scale_warns_in_one_line_through_the_cli(tmp_path: Path) -> None:
    """A spec that names no `scores` runs on POET's thresholds, and the user is told so."""
    import subprocess
    import sys

    spec = yaml.safe_load(CARTPOLE_SPEC.read_text())
    del spec["scores"]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    command = [sys.executable, "-m", "poet.cli", "run", "--backend", "inprocess", "--iterations", "0", "--quiet"]
    command += ["--out", str(tmp_path / "run"), "--set", "env.family=gym", "--set", f"env.options={{spec: {path}}}"]
    command += ["--set", "evaluation.test_every=0"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    warning = [line for line in proc.stderr.splitlines() if line.startswith("poet: warning:")]
    assert warning == [
        "poet: warning: env.family 'cartpole' declares no score scale (`defaults`, docs/envs.md), so "
        "solved_threshold, reproduction.threshold, reproduction.mc_lower, reproduction.mc_upper take POET's "
        "BipedalWalker values; set them for this family's returns"
    ], proc.stderr
