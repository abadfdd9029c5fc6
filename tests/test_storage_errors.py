"""A full disk, a read-only run directory, and `poet resume --set`: one line each through the
command line, and nothing partial left behind for good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, tiny_config
from tests.test_checkpoint import _assert_same_run

# Runs `poet` in a fresh interpreter after `PATCH`, which makes the file system answer as a
# full disk or a read-only one would (a tmpfs would need privileges CI may not have).
RUNNER = """
import errno, os, sys
import numpy as np
from poet.cli import main
{patch}
sys.exit(main(sys.argv[1:]))
"""
FULL_DISK_ON_SECOND_CHECKPOINT = """
savez, calls = np.savez, []
def full(path, *args, **kwargs):
    calls.append(path)
    if len(calls) == 2:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return savez(path, *args, **kwargs)
np.savez = full
"""
READ_ONLY_LOCK = """
real_open = os.open
def read_only(path, *args, **kwargs):
    if str(path).endswith(".lock"):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    return real_open(path, *args, **kwargs)
os.open = read_only
"""


def poet(*args: object, patch: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUNNER.format(patch=patch), *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("poet: error:")]
    assert len(errors) == 1 and proc.stderr.strip().splitlines()[-1] == errors[0], proc.stderr
    return errors[0]


def config(tmp_path: Path, **sections) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_config(**{"checkpoint": {"every": 2}, **sections})))
    return path


def test_a_full_disk_while_checkpointing_is_one_line_and_resume_goes_on(tmp_path):
    out = tmp_path / "run"
    failed = poet("run", config(tmp_path, iterations=6), "--out", out, "--quiet", patch=FULL_DISK_ON_SECOND_CHECKPOINT)
    line = one_line(failed, 1)
    assert "No space left on device" in line and f"free space, then continue with: poet resume {out}" in line
    assert not list((out / "checkpoints").glob(".tmp-*")), "the partial checkpoint stays behind"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["ckpt-000000002"]
    resumed = poet("resume", out, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    straight = tmp_path / "straight"
    assert poet("run", config(tmp_path, iterations=6), "--out", straight, "--quiet").returncode == 0
    _assert_same_run(out, straight)


def test_resume_removes_partial_checkpoints_a_killed_writer_left(tmp_path):
    out = tmp_path / "run"
    assert poet("run", config(tmp_path, iterations=2), "--out", out, "--quiet").returncode == 0
    stale = out / "checkpoints" / ".tmp-99999-ckpt-000000004"
    stale.mkdir()
    (stale / "arrays.npz").write_bytes(b"half a file")
    assert poet("resume", out, "--iterations", "4", "--quiet").returncode == 0
    assert not stale.exists()


def test_resume_of_a_read_only_run_directory_is_one_line(tmp_path):
    out = tmp_path / "run"
    assert poet("run", config(tmp_path, iterations=2), "--out", out, "--quiet").returncode == 0
    line = one_line(poet("resume", out, "--iterations", "4", patch=READ_ONLY_LOCK), 1)
    assert "Read-only file system" in line and "copy the run directory somewhere writable" in line


def test_resume_set_takes_where_only_settings_and_refuses_the_others(tmp_path):
    out = tmp_path / "run"
    assert poet("run", config(tmp_path, iterations=2), "--out", out, "--quiet").returncode == 0
    refused = poet("resume", out, "--iterations", "4", "--set", "seed=5")
    assert "--set seed: a resumed run keeps every setting that changes results" in one_line(refused, 2)
    taken = poet("resume", out, "--iterations", "4", "--set", "checkpoint.keep=1", "--set", "logging.tensorboard=false")
    assert taken.returncode == 0, taken.stderr
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["ckpt-000000004"]
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["iterations"] == 4 and saved["checkpoint"]["keep"] != 1, "a --set holds for this resume only"
