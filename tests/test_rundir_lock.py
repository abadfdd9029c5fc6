"""One writer per run directory: a second `run`/`resume` is refused while the first lives, and
a lock left by a dead process is taken over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pandas as pd
import pytest

import poet
from poet.analysis import load_run
from poet.runtime.rundir_lock import RunDirInUse, RunDirLock
from tests.conftest import ROOT

TABLES = ("iterations", "envs", "transfers", "events", "phases")
HOLD = (
    "import sys, time; from poet.runtime.rundir_lock import RunDirLock; RunDirLock(sys.argv[1]).acquire(); "
    "print('locked', flush=True); time.sleep(120)"
)


def _tables(run_dir) -> dict[str, bytes]:
    files = {t: run_dir / "records" / f"{t}.jsonl" for t in TABLES}
    return {t: f.read_bytes() if f.exists() else b"" for t, f in files.items()}


def test_two_concurrent_resumes_one_refused_tables_intact(tiny, tmp_path):
    cfg = tiny(iterations=4, checkpoint={"every": 2})
    run_dir = tmp_path / "r"
    poet.run(cfg, out=run_dir, progress=False)
    before = _tables(run_dir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the first writer: a live process holding the directory, as a running `poet resume` does
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        second = subprocess.run(
            [sys.executable, "-m", "poet.cli", "resume", str(run_dir), "--iterations", "6"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"is in use by pid {holder.pid} on {socket.gethostname()}" in lines[0]
        assert _tables(run_dir) == before  # nothing truncated, nothing appended
        with pytest.raises(RunDirInUse):
            poet.resume(run_dir, iterations=6, progress=False)
        assert _tables(run_dir) == before
    finally:
        holder.kill()
        holder.wait()
    # the holder died holding the lock: the next resume takes it over and finishes the run
    poet.resume(run_dir, iterations=6, progress=False)
    straight = tmp_path / "straight"
    poet.run({**cfg, "iterations": 6}, out=straight, progress=False)
    a, b = load_run(run_dir), load_run(straight)
    for table in TABLES[:4]:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)


def test_lock_is_released_and_reentrant_across_holders(tmp_path):
    with RunDirLock(tmp_path):
        with pytest.raises(RunDirInUse, match=f"pid {os.getpid()}"):
            RunDirLock(tmp_path).acquire()
    with RunDirLock(tmp_path):  # released on exit: the next holder gets it
        pass
