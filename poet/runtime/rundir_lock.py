"""An exclusive lock on a run directory while a process writes it (`poet run`, `poet resume`).

The lock is an OS file lock (`flock`) on `<run dir>/.lock`, so it goes away with the process
that holds it, however that process ends: a lock left by a dead process on this host is
simply taken over. The file also records who holds it (pid, host, start time), for the
error a second writer gets.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import time
from pathlib import Path

from poet.config import ConfigError
from poet.errors import StorageError, is_storage_error

LOCK_NAME = ".lock"


class RunDirInUse(ConfigError):
    """Another live process holds the run directory's lock."""


class RunDirLock:
    """Hold the run directory's lock for the duration of a `with` block (or acquire/release)."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunDirLock:
        """Take the lock, or raise ConfigError naming the process that holds it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if is_storage_error(exc):
                raise StorageError(exc, self.path.parent) from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunDirInUse(
                f"run directory {str(self.path.parent)!r} is in use by {holder}; wait for it to finish or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"pid": os.getpid(), "host": platform.node(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
            ).encode(),
        )
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back (the file stays; its content is only read while it is locked)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
        return f"pid {info['pid']} on {info['host']} (since {info['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
