"""Your own network, the docs' worked file (`docs/examples/mynets.py`, registered nowhere in
`poet/`): `poet run` trains it with ES and with PPO, on the Ray pool and in-process with
identical tables; a run killed hard and resumed equals the straight run; `poet report`
reads it, and reading it to run its policies imports the module only when trusted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import poet
from poet.analysis import load_run
from tests.conftest import ROOT, poet_in_process, tiny_config
from tests.test_checkpoint import _assert_same_run, _kill_after_checkpoint

EXAMPLES = ROOT / "docs" / "examples"
KIND = "mynets:GRUPolicy"
PPO = {"name": "ppo", "ppo": {"n_envs": 2, "n_steps": 32, "epochs": 2, "minibatch_size": 32, "normalize_obs": False}}


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(ROOT)])}


def _poet(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poet.cli", *map(str, args)],
        cwd=ROOT,
        env={**_env(), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _config(tmp: Path, name: str, backend: str, trainer: str, iterations: int = 4) -> Path:
    small = tiny_config()
    cfg = tiny_config(
        iterations=iterations,
        env={"options": {"course_length": 12.0, "max_episode_steps": 60}},
        policy={"kind": KIND, "options": {"hidden": 6}},
        evaluation={"backend": backend, "max_steps": 60, "eval_episodes": 1},
        ray={"workers": 2},
        checkpoint={"every": 2, "keep": 2},
        trainer=PPO if trainer == "ppo" else {**small["trainer"], "es": {**small["trainer"]["es"], "population": 6}},
        reproduction={"every": 2, "threshold": 5.0},
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def mynets(monkeypatch):
    """The worked file importable in this process, as `poet` finds it on the Python path."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["es", "ppo"])
def test_your_own_network_trains_the_same_on_the_pool_and_in_process(tmp_path, mynets, trainer):
    """The pool's run goes through the CLI in a process of its own (its Ray workers import the
    module from PYTHONPATH); the in-process run in this one."""
    ran = _poet("run", _config(tmp_path, "ray", "ray", trainer), "--out", tmp_path / "ray", "--quiet")
    assert ran.returncode == 0, ran.stderr[-3000:]
    config = yaml.safe_load(_config(tmp_path, "inprocess", "inprocess", trainer).read_text())
    poet.run(config, out=tmp_path / "inprocess", progress=False)
    _assert_same_run(tmp_path / "inprocess", tmp_path / "ray")
    run = load_run(tmp_path / "ray")
    assert run.info["policy"]["kind"] == KIND and run.info["policy"]["options"] == {"hidden": 6}
    assert len(run.iterations) > 0


@pytest.mark.slow
def test_your_own_network_killed_and_resumed_equals_the_straight_run(tmp_path, mynets):
    total = 6
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    poet.run(
        yaml.safe_load(_config(tmp_path, "straight", "inprocess", "es", total).read_text()),
        out=straight,
        progress=False,
    )
    long_config = _config(tmp_path, "long", "inprocess", "es", 100_000)
    cmd = [sys.executable, "-m", "poet.cli", "run", str(long_config), "--out", str(killed), "--quiet"]
    assert _kill_after_checkpoint(cmd, killed, 2, path=_env()["PYTHONPATH"]) < total
    resumed = poet_in_process(["resume", killed, "--iterations", total, "--quiet"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_same_run(straight, killed)
    reported = poet_in_process(["report", killed])
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert (killed / "report" / "index.html").is_file()


def test_reading_a_run_imports_its_own_network_only_when_trusted(tmp_path, mynets, monkeypatch):
    """`poet render` runs the run's policies again: it imports the author's module only with
    POET_TRUST_CODE=1 (`poet report`, above, needs no policy and never does)."""
    run_dir = tmp_path / "run"
    config = yaml.safe_load(_config(tmp_path, "run", "inprocess", "es", 2).read_text())
    poet.run({**config, "checkpoint": {"every": 1}}, out=run_dir, progress=False)
    monkeypatch.delenv("POET_TRUST_CODE", raising=False)
    untrusted = poet_in_process(["render", run_dir, "--pair", "p0", "--out", tmp_path / "ep.gif"])
    assert untrusted.returncode != 0 and "POET_TRUST_CODE" in untrusted.stderr
    monkeypatch.setenv("POET_TRUST_CODE", "1")
    trusted = poet_in_process(["render", run_dir, "--pair", "p0", "--out", tmp_path / "ep.gif"])
    assert trusted.returncode == 0, trusted.stderr[-3000:]
    assert (tmp_path / "ep.gif").stat().st_size > 0
