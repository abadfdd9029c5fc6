"""Which code made a run: the git commit of the checkout the `poet` package was imported
from, recorded in the run directory's `run.json` each time the run starts or resumes."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parents[1]


def code_state() -> dict[str, Any] | None:
    """{"commit": sha, "dirty": whether tracked files differ from it}, or None where the
    package is not in a git checkout (an installed wheel) or git is not there."""
    try:
        commit = _git("rev-parse", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(_PACKAGE), *args], capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


def record_start(run_json: Path, iteration: int) -> None:
    """Add this start (the code, the iteration it starts from, the time) to `run.json`'s
    `starts`, the run's provenance: one entry for a fresh run, one more per resume."""
    meta = json.loads(run_json.read_text())
    meta.setdefault("starts", []).append(
        {
            "iteration": int(iteration),
            "code": code_state(),
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    run_json.write_text(json.dumps(meta, indent=2))
