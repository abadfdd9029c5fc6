"""Exceptions the command line turns into one-line messages (kept free of heavy imports)."""

from __future__ import annotations

import errno
from pathlib import Path

# What a full disk, a read-only place or missing permissions raise (OSError.errno).
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


class EvaluationFailed(RuntimeError):
    """An evaluation raised or gave non-finite values and the run is set to stop."""


class RunInterrupted(RuntimeError):
    """The run stopped on SIGINT/SIGTERM after checkpointing."""

    def __init__(self, iteration: int, run_dir: Path):
        self.iteration, self.run_dir = iteration, run_dir
        super().__init__(
            f"interrupted before iteration {iteration}; checkpoint saved; continue with: poet resume {run_dir}"
        )


class WaveInterrupted(RuntimeError):
    """A stop was requested (SIGINT/SIGTERM) while an evaluator was working: the work in
    progress is abandoned and the run goes back to its last completed iteration."""


class StorageError(RuntimeError):
    """A run directory could not be written: a full disk, a read-only place, no permission."""

    def __init__(self, exc: OSError, run_dir: Path, path: Path | None = None):
        where = exc.filename or path or run_dir
        if exc.errno in FULL:
            remedy = f"free space, then continue with: poet resume {run_dir}"
        else:
            remedy = f"make it writable (or copy the run directory somewhere writable), then: poet resume {run_dir}"
        super().__init__(f"cannot write {where}: {exc.strerror or exc}; {remedy}")


def is_storage_error(exc: BaseException) -> bool:
    """Whether `exc` is the disk's or the file system's answer, not a bug."""
    return isinstance(exc, OSError) and exc.errno in (*FULL, *UNWRITABLE)
