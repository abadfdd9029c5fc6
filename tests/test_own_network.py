"""Your own network, the docs' worked file (`docs/examples/mynets.py`, registered nowhere in
`poet/`): `poet run` trains it with ES and with PPO, on the Ray pool and in-process with
identical tables; a run killed hard and resumed equals the straight run; `poet report`
reads it, and reading it to run its policies imports the module only when trusted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from poet.analysis import load_run
from tests.conftest import ROOT, tiny_config
from tests.test_checkpoint import _assert_same_run, _newest_checkpoint

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


def _config(tmp: Path, name: str, backend: str, trainer: str, iterations: int = 6) -> Path:
    cfg = tiny_config(
        iterations=iterations,
        policy={"kind": KIND, "options": {"hidden": 6}},
        evaluation={"backend": backend},
        ray={"workers": 2},
        checkpoint={"every": 2, "keep": 2},
        **({"trainer": PPO} if trainer == "ppo" else {}),
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["es", "ppo"])
def test_your_own_network_trains_the_same_on_the_pool_and_in_process(tmp_path, trainer):
    runs = {}
    for backend in ("inprocess", "ray"):
        out = tmp_path / backend
        ran = _poet("run", _config(tmp_path, backend, backend, trainer), "--out", out, "--quiet")
        assert ran.returncode == 0, ran.stderr[-3000:]
        runs[backend] = out
    _assert_same_run(runs["inprocess"], runs["ray"])
    run = load_run(runs["ray"])
    assert run.info["policy"]["kind"] == KIND and run.info["policy"]["options"] == {"hidden": 6}
    assert len(run.iterations) > 0


@pytest.mark.slow
def test_your_own_network_killed_and_resumed_equals_the_straight_run(tmp_path):
    total = 8
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    ran = _poet("run", _config(tmp_path, "straight", "ray", "es", total), "--out", straight, "--quiet")
    assert ran.returncode == 0, ran.stderr[-3000:]
    long_config = _config(tmp_path, "long", "ray", "es", 100_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "poet.cli", "run", str(long_config), "--out", str(killed), "--quiet"],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while _newest_checkpoint(killed) < 2:
            if proc.poll() is not None:
                raise AssertionError(f"run ended before the kill: {proc.stderr.read().decode()[-2000:]}")
            assert time.monotonic() < deadline, "no checkpoint appeared in time"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the run and every Ray process it started
        proc.wait()
    assert proc.returncode == -signal.SIGKILL and _newest_checkpoint(killed) < total
    resumed = _poet("resume", killed, "--iterations", total, "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_same_run(straight, killed)
    reported = _poet("report", killed)
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert (killed / "report" / "index.html").is_file()
    # running the run's policies again imports the author's module: only when trusted
    untrusted = _poet("render", killed, "--pair", "p0", "--out", tmp_path / "ep.gif")
    assert untrusted.returncode != 0 and "POET_TRUST_CODE" in untrusted.stderr
    trusted = _poet("render", killed, "--pair", "p0", "--out", tmp_path / "ep.gif", POET_TRUST_CODE="1")
    assert trusted.returncode == 0, trusted.stderr[-3000:]
    assert (tmp_path / "ep.gif").stat().st_size > 0
