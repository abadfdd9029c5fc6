"""A real multi-process Ray cluster on this machine, the way a cluster user starts one:
`ray start --head`, a second `ray start --address`, then `poet run --address`. Its tables
equal an in-process run's. The test stops exactly the cluster it started."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import poet
from poet.analysis import load_run
from tests.conftest import ROOT, tiny_config

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster_pids(temp_dir: str) -> list[int]:
    """The processes of the cluster under `temp_dir` (their command lines name it), with their children."""
    parents: dict[int, int] = {}
    mine: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry)] = ppid
        if temp_dir in cmdline:
            mine.add(int(entry))
    grew = True
    while grew:
        children = {pid for pid, ppid in parents.items() if ppid in mine} - mine
        grew = bool(children)
        mine |= children
    return sorted(mine)


@pytest.mark.slow
def test_ray_start_cluster_and_poet_run_address_give_the_local_tables(tmp_path):
    temp_dir = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths must stay under 107 chars
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32), RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=str(ROOT))
    port = _free_port()
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    cfg = tiny_config(iterations=6, evaluation={**tiny_config()["evaluation"], "backend": "ray"})
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(cfg))
    try:
        for cmd in ([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp_dir}",
                     f"--dashboard-agent-listen-port={_free_port()}", *common],
                    [RAY, "start", f"--address=127.0.0.1:{port}", f"--dashboard-agent-listen-port={_free_port()}",
                     *common]):
            started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            assert started.returncode == 0, started.stderr[-2000:]
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "poet.cli", "run", str(config), "--address", f"127.0.0.1:{port}",
                              "--workers", "2", "--out", str(tmp_path / "cluster"), "--quiet"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        assert time.monotonic() - t0 < 300
        # A user's own family, shipped to the nodes by Ray's runtime environment: the nodes'
        # workers were started without it on their path; only this driver has it.
        userpkg = ROOT / "tests" / "userpkg"
        shipped = subprocess.run(
            [sys.executable, "-m", "poet.cli", "run", str(config), "--address", f"127.0.0.1:{port}", "--workers", "2",
             "--set", "env.family=mypkg.families:make_family", "--set", "env.options={course_length: 20}",
             "--set", f"ray.runtime_env={{py_modules: [{userpkg / 'mypkg'}]}}",
             "--out", str(tmp_path / "shipped"), "--quiet"],
            cwd=ROOT, env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(userpkg)])}, capture_output=True,
            text=True, timeout=600)
        assert shipped.returncode == 0, shipped.stderr[-3000:]
        assert sorted(load_run(tmp_path / "shipped").iterations["iteration"].unique()) == list(range(6))
    finally:
        for pid in _cluster_pids(temp_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert not _cluster_pids(temp_dir)
    local = tmp_path / "local"
    poet.run({**cfg, "evaluation": {**cfg["evaluation"], "backend": "inprocess"}}, out=local, progress=False)
    a, b = load_run(local), load_run(tmp_path / "cluster")
    for table in ("iterations", "envs", "transfers", "events"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)
