"""A real multi-process Ray cluster on this machine, the way a cluster user starts one:
`ray start --head`, a second `ray start --address`, then `poet run --address`. Its tables
equal an in-process run's. A wrong address, or a driver without the cluster's token, fails
in seconds with one line naming ray.address. Each test stops exactly the cluster it started
(never with `ray stop`, which would stop every Ray instance on the machine)."""

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
from poet.runtime.ray_session import ClusterError, check_cluster
from tests.conftest import ROOT, tiny_config

RAY = str(Path(sys.executable).with_name("ray"))
# On a busy machine a node's raylet gave up before its agents were up ("Timed out waiting for
# file .../metrics_agent_port", the node's start failing); with this longer wait it starts.
SLOW_MACHINE = {"RAY_raylet_start_wait_time_s": "120"}


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
            state, ppid_text = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[:2]
            ppid = int(ppid_text)
        except (OSError, ValueError, IndexError):
            continue
        if state in ("Z", "X"):  # dead, not yet reaped: nothing left to stop
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
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONPATH=str(ROOT),
        **SLOW_MACHINE,
    )
    port = _free_port()
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    cfg = tiny_config(iterations=6, evaluation={**tiny_config()["evaluation"], "backend": "ray"})
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(cfg))
    try:
        for cmd in (
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                "--include-dashboard=false",
                f"--temp-dir={temp_dir}",
                f"--dashboard-agent-listen-port={_free_port()}",
                *common,
            ],
            [RAY, "start", f"--address=127.0.0.1:{port}", f"--dashboard-agent-listen-port={_free_port()}", *common],
        ):
            started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            assert started.returncode == 0, started.stderr[-2000:]
        t0 = time.monotonic()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "poet.cli",
                "run",
                str(config),
                "--address",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--out",
                str(tmp_path / "cluster"),
                "--quiet",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert time.monotonic() - t0 < 300
        # A user's own family, shipped to the nodes by Ray's runtime environment: the nodes'
        # workers were started without it on their path; only this driver has it.
        userpkg = ROOT / "tests" / "userpkg"
        user_family = ["--set", "env.family=mypkg.families:make_family", "--set", "env.options={course_length: 20}"]
        unshipped = subprocess.run(  # without the runtime environment: one line, before any file
            [sys.executable, "-m", "poet.cli", "run", str(config), "--address", f"127.0.0.1:{port}", *user_family]
            + ["--out", str(tmp_path / "unshipped"), "--quiet"],
            cwd=ROOT,
            env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(userpkg)])},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert unshipped.returncode == 2 and "Traceback" not in unshipped.stderr, unshipped.stderr[-3000:]
        line = unshipped.stderr.strip().splitlines()[-1]
        assert line.startswith("poet: error: env.family: the Ray workers cannot import 'mypkg.families'"), line
        assert "ray.runtime_env" in line and not (tmp_path / "unshipped").exists()
        shipped = subprocess.run(
            [
                sys.executable,
                "-m",
                "poet.cli",
                "run",
                str(config),
                "--address",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--set",
                "env.family=mypkg.families:make_family",
                "--set",
                "env.options={course_length: 20}",
                "--set",
                f"ray.runtime_env={{py_modules: [{userpkg / 'mypkg'}]}}",
                "--out",
                str(tmp_path / "shipped"),
                "--quiet",
            ],
            cwd=ROOT,
            env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(userpkg)])},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert shipped.returncode == 0, shipped.stderr[-3000:]
        assert sorted(load_run(tmp_path / "shipped").iterations["iteration"].unique()) == list(range(6))
    finally:
        _stop_cluster(temp_dir)
    assert not _cluster_pids(temp_dir)
    local = tmp_path / "local"
    poet.run({**cfg, "evaluation": {**cfg["evaluation"], "backend": "inprocess"}}, out=local, progress=False)
    a, b = load_run(local), load_run(tmp_path / "cluster")
    for table in ("iterations", "envs", "transfers", "events"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)


# ---------------------------------------------------------------- joining fails fast and clearly

HANG_S = 180  # generous: Ray's own connect retried for minutes on these addresses


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any Ray address or authentication settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT), **extra)
    return env


def _poet_run_at(address: str, out: Path, env: dict[str, str]) -> str:
    """`poet run --address ADDRESS --iterations 1`, expected to fail: exit 2, no traceback and
    no line that is not poet's own (no Ray C++ warnings); returns its error line."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "poet.cli",
            "run",
            "--address",
            address,
            "--iterations",
            "1",
            "--workers",
            "1",
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("poet: ") for line in lines), proc.stderr[-3000:]
    assert lines[-1].startswith("poet: error: ray.address: "), lines[-1]
    assert sum(line.startswith("poet: error:") for line in lines) == 1, proc.stderr
    assert not out.exists(), "a cluster that cannot be joined is found before the run directory is made"
    return lines[-1]


def test_address_auto_never_joins_another_runs_local_pool(ray_local, tmp_path):
    """A Ray runs on this machine (this test process's own, as another `poet run`'s private
    pool would) and no cluster was started with `ray start`: `auto` has nothing to join and
    says so in one line, where Ray's own `auto` would join that pool."""
    line = _poet_run_at("auto", tmp_path / "out", _clean_env(RAY_TMPDIR=str(tmp_path)))
    assert "'auto' joins the cluster RAY_ADDRESS names, and RAY_ADDRESS is not set" in line
    assert "a run's own local pool is never joined" in line


def test_address_auto_with_a_stale_ray_address_says_so(ray_local, tmp_path):
    """RAY_ADDRESS names a cluster that no longer runs: `auto` does not fall back to the Ray
    that does run here."""
    env = _clean_env(RAY_TMPDIR=str(tmp_path), RAY_ADDRESS=f"127.0.0.1:{_free_port()}")
    line = _poet_run_at("auto", tmp_path / "out", env)
    assert line.startswith("poet: error: ray.address: nothing is listening at auto (as "), line


def test_poet_run_at_an_address_where_nothing_listens_fails_with_one_line(tmp_path):
    line = _poet_run_at("127.0.0.1:9", tmp_path / "run", _clean_env())
    assert "nothing is listening at 127.0.0.1:9" in line, line


@pytest.mark.parametrize(
    "address, needle",
    [
        ("nosuchhost.invalid:6379", "cannot resolve host 'nosuchhost.invalid'"),
        ("ray://127.0.0.1:9", "nothing is listening at ray://127.0.0.1:9"),
        ("127.0.0.1:9", "`ray start --head --port=9`"),
        ("127.0.0.1", "is not HOST:PORT"),
        ("127.0.0.1:99999", "is not HOST:PORT"),
        ("ray://127.0.0.1", "is not ray://HOST:PORT"),
    ],
)
def test_check_cluster_names_what_is_wrong_with_the_address(monkeypatch, address, needle):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ClusterError) as err:
        check_cluster(address)
    assert str(err.value).startswith("ray.address: "), err.value
    assert needle in str(err.value), err.value
    assert "\n" not in str(err.value)


def test_check_cluster_tells_a_port_that_is_not_a_ray_head(monkeypatch):
    """Something listens, but no GCS answers there (a wrong port): an error within seconds,
    not Ray's minutes of retries."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with socket.socket() as server:
        server.bind(("", 0))  # every interface: Ray connects to this node's address, not loopback
        server.listen(1)  # never accepts: the connection opens, nothing answers on it
        with pytest.raises(ClusterError, match=r"no Ray head.s GCS answers there within 5 s"):
            check_cluster(f"127.0.0.1:{server.getsockname()[1]}")


def _stop_cluster(temp_dir: str) -> None:
    """Kill the processes of the cluster under `temp_dir`, and only those; again while any is
    left (one may be forking as the first round lands), for up to 30 s."""
    deadline = time.monotonic() + 30
    while (pids := _cluster_pids(temp_dir)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def token_head():
    """A one-node cluster started with token authentication, as docs/cluster.md says:
    (address, its token). Stopped (its own processes only) after the module."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must stay under 107 chars
    token = secrets.token_hex(32)
    port = _free_port()
    try:
        started = subprocess.run(
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=1",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={temp_dir}",
                f"--dashboard-agent-listen-port={_free_port()}",
            ],
            env=_clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, **SLOW_MACHINE),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert started.returncode == 0, started.stderr[-2000:]
        yield f"127.0.0.1:{port}", token
    finally:
        _stop_cluster(temp_dir)
    assert not _cluster_pids(temp_dir)


@pytest.mark.slow
def test_poet_run_without_the_token_of_a_token_cluster_says_so_in_one_line(token_head, tmp_path):
    address, _token = token_head
    line = _poet_run_at(address, tmp_path / "run", _clean_env())
    assert "requires authentication" in line, line
    for needle in ("RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "ray get-auth-token"):
        assert needle in line, (needle, line)


@pytest.mark.slow
def test_poet_run_with_a_wrong_token_says_it_was_rejected(token_head, tmp_path):
    address, token = token_head
    wrong = _clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    line = _poet_run_at(address, tmp_path / "wrong", wrong)
    assert "rejected the authentication token from RAY_AUTH_TOKEN" in line, line
    missing = _clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(tmp_path / "no_such_token"))
    line = _poet_run_at(address, tmp_path / "missing", missing)
    assert "RAY_AUTH_TOKEN_PATH" in line and "no_such_token" in line, line
