"""A user's own gymnasium env (tests/usergym/usergym registers `usergym/Drift-v0` when imported)
through the generic `gym` family: `env_id: "usergym:usergym/Drift-v0"`, and a plain GymFamily
from the user's factory, in the driver and on Ray workers that never imported the module."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import poet
from envs.generic import GymFamily
from poet.analysis import load_run
from poet.config import ConfigError
from poet.parts import build_family, load_config
from poet.runtime.runner import workers_checked
from tests.conftest import ROOT, tiny_config

USERGYM = ROOT / "tests" / "usergym"  # the user's project: the `usergym` package is in it
MODULE_ID = "usergym:usergym/Drift-v0"
TABLES = ("iterations", "envs", "transfers", "events")


@pytest.fixture(autouse=True)
def usergym_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's package on this process's path, as PYTHONPATH puts it on the subprocesses'."""
    monkeypatch.syspath_prepend(str(USERGYM))


def _spec(env_id: str = MODULE_ID, **extra: Any) -> dict[str, Any]:
    """An inline spec over the user's env."""
    return {
        "name": "drift",
        "env_id": env_id,
        "params": {
            "drift": {"initial": 0.1, "low": -0.5, "high": 0.5, "step": 0.2},
            "target": {"initial": 1.0, "low": -2.0, "high": 2.0, "step": 0.5},
        },
        "scores": {"solved": 30.0, "reproduce": 5.0, "mc_lower": 1.0, "mc_upper": 39.0},
        **extra,
    }


def _config(env: dict[str, Any], backend: str = "inprocess") -> dict[str, Any]:
    """A few iterations of POET with ES on short episodes of the user's env."""
    evaluation = {"max_steps": 30, "eval_episodes": 2, "backend": backend}
    return tiny_config(
        iterations=4,
        env=env,
        policy={"hidden": [8]},
        evaluation=evaluation,
        trainer={"name": "es", "es": {"population": 8, "noise_table_size": 100_000, "lr": 0.03}},
        reproduction={"every": 2, "threshold": 5.0, "mc_lower": 1.0, "mc_upper": 39.0, "max_children": 4},
        transfer={"every": 2},
        ray={"workers": 2},
    )


def _in_fresh_process(code: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """`code` in a new interpreter that can import the user's package but has not."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(USERGYM)])}
    return subprocess.run(
        [sys.executable, "-c", code], input=stdin, cwd=ROOT, env=env, capture_output=True, timeout=300
    )


def _poet_run(cfg: dict[str, Any], tmp_path, name: str) -> subprocess.CompletedProcess:
    """`poet run` from the command line, with the user's package on PYTHONPATH (so on the
    workers of the Ray it starts) and nowhere in the project."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(USERGYM)])}
    cmd = [sys.executable, "-m", "poet.cli", "run", str(config), "--out", str(tmp_path / name), "--quiet"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------- parsing


def test_module_form_imports_the_module_and_every_make_keeps_it() -> None:
    family = GymFamily(_spec())
    assert family.spec.env_id == MODULE_ID and family.worker_module == "usergym"
    env = family.make_env(family.initial())
    assert env.spec.max_episode_steps == 40 and env.unwrapped.target == 1.0  # the registration's limit
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2,)


@pytest.mark.parametrize(
    ("env_id", "fragments"),
    [
        ("no_such_usermod:Drift-v0", ["'env_id'", "cannot import module 'no_such_usermod'", "ModuleNotFoundError"]),
        ("usergym:usergym/Nope-v0", ["'env_id'", "module 'usergym'", "did not register", "'usergym/Nope-v0'"]),
        ("usergym:a:b", ["'env_id'", "'module:id'"]),
        (":usergym/Drift-v0", ["'env_id'", "'module:id'"]),
        ("usergym/Unknown-v0", ["'env_id'", "not a registered", "'module:id'"]),
    ],
)
def test_a_module_id_that_cannot_be_made_names_the_key_and_the_module(env_id: str, fragments: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        GymFamily(_spec(env_id))
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_the_config_error_names_env_options(tmp_path) -> None:
    cfg = _config({"family": "gym", "options": _spec("no_such_usermod:Drift-v0")})
    with pytest.raises(ConfigError, match=r"^env\.options: .*'env_id'.*cannot import module 'no_such_usermod'"):
        poet.run(cfg, out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- ids the user's code registered

UNPICKLE_AND_MAKE = """
import pickle, sys
import gymnasium as gym
import envs.generic
assert "usergym" not in sys.modules and {env_id!r} not in gym.registry
family = pickle.loads(sys.stdin.buffer.read())
env = family.make_env(family.initial())
env.reset(seed=0)
print(env.unwrapped.target, env.spec.max_episode_steps)
"""


def test_a_plain_gym_family_over_the_users_id_works_where_the_module_was_never_imported() -> None:
    from usergym.families import make_family

    family = make_family()
    assert type(family) is GymFamily and family.spec.env_id == "usergym/Drift-v0"
    assert family.worker_module == "usergym"  # the entry point's module, for the workers' check
    blob = pickle.dumps(family)
    assert b"usergym:DriftEnv" in blob  # the entry point travels by name
    proc = _in_fresh_process(UNPICKLE_AND_MAKE.format(env_id="usergym/Drift-v0"), blob)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().split() == ["1.0", "40"]


def test_a_registration_made_outside_the_entry_points_module_is_registered_again() -> None:
    import gymnasium as gym

    env_id = "usergym_tests/FarTarget-v0"  # importing usergym does not register it
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point="usergym:DriftEnv", kwargs={"target": 1.5}, max_episode_steps=25)
    spec = _spec(env_id)
    del spec["params"]["target"]  # fixed by the registration's kwargs
    blob = pickle.dumps(GymFamily(spec))
    proc = _in_fresh_process(UNPICKLE_AND_MAKE.format(env_id=env_id), blob)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().split() == ["1.5", "25"]


def test_an_entry_point_that_cannot_be_named_fails_where_the_family_is_unpickled() -> None:
    import gymnasium as gym
    from usergym import DriftEnv

    env_id = "usergym_tests/Unnamed-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=lambda **kwargs: DriftEnv(**kwargs))
    family = GymFamily(_spec(env_id))
    assert family.worker_module is None
    proc = _in_fresh_process(UNPICKLE_AND_MAKE.format(env_id=env_id), pickle.dumps(family))
    message = proc.stderr.decode()
    assert proc.returncode != 0 and "ValueError" in message and repr(env_id) in message, message[-2000:]
    assert "entry_point='module:Class'" in message and "'module:id'" in message


def test_gymnasiums_and_the_projects_own_ids_ask_the_workers_for_nothing() -> None:
    from envs import make_family

    for name in ("lunar_lander", "cartpole"):  # gymnasium's LunarLander, envs' poet/CartPolePhysics-v1
        assert make_family(name).worker_module is None, name


# ---------------------------------------------------------------- the workers' check


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"family": "gym", "options": _spec()}, "env.options.env_id"),
        ({"family": "usergym.families:make_family", "options": {}}, "env.family (its env id)"),
    ],
)
def test_workers_that_cannot_import_the_env_module_are_a_config_error_naming_the_field(
    env: dict[str, Any], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poet.runtime import ray_session

    asked: list[list[str]] = []

    def cannot_import(modules: list[str], timeout_s: float = 120.0) -> dict[str, str]:
        asked.append(modules)
        return {"usergym": "ModuleNotFoundError: No module named 'usergym'"}

    monkeypatch.setattr(ray_session, "ensure_ray", lambda *args: False)  # no Ray: the answer is faked
    monkeypatch.setattr(ray_session, "workers_import_errors", cannot_import)
    cfg = load_config(data=_config(env, backend="ray"))
    family = build_family(cfg)
    with pytest.raises(ConfigError) as info, workers_checked(cfg, family):
        pass
    assert "usergym" in asked[0]
    assert str(info.value).startswith(f"{field}: the Ray workers cannot import 'usergym'"), str(info.value)
    assert "ray.runtime_env" in str(info.value)


# ---------------------------------------------------------------- whole runs on the Ray pool


def _assert_same_tables(a: Path, b: Path) -> None:
    ra, rb = load_run(a), load_run(b)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(ra, table), getattr(rb, table), check_exact=True, obj=table)


@pytest.mark.slow
def test_poet_run_on_the_ray_pool_with_env_id_module_form_equals_the_in_process_run(tmp_path) -> None:
    env = {"family": "gym", "options": _spec()}
    pool = _poet_run(_config(env, backend="ray"), tmp_path, "pool")
    assert pool.returncode == 0, pool.stderr[-3000:]
    poet.run(_config(env), out=tmp_path / "local", progress=False)
    run = load_run(tmp_path / "pool")
    assert run.iterations["iteration"].unique().tolist() == [0, 1, 2, 3]
    assert run.config["env"]["options"]["env_id"] == MODULE_ID and run.config["evaluation"]["backend"] == "ray"
    _assert_same_tables(tmp_path / "pool", tmp_path / "local")


@pytest.mark.slow
def test_poet_run_on_the_ray_pool_with_a_plain_gym_family_from_the_users_factory(tmp_path) -> None:
    env = {"family": "usergym.families:make_family", "options": {}}
    pool = _poet_run(_config(env, backend="ray"), tmp_path, "pool")
    assert pool.returncode == 0, pool.stderr[-3000:]
    run = load_run(tmp_path / "pool")
    assert run.iterations["iteration"].unique().tolist() == [0, 1, 2, 3]
    assert len(run.envs) >= 1 and set(run.envs["family"]) == {"drift"}
