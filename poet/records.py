"""Run tables written during a run: one JSON-lines file per tidy table.

Tables: `iterations` (iteration x pair), `envs` (one row per admitted env), `transfers`
(one row per transfer attempt), `events` (admissions, retirements, solved envs, phase
summaries). Rows are appended and flushed after each phase; `poet.analysis.load_run`
reads them back as pandas DataFrames.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

TABLES = ("iterations", "envs", "transfers", "events", "phases", "heldout")


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value


def json_text(value: Any) -> str:
    """Compact JSON of plain or numpy data (non-finite floats as null)."""
    return json.dumps(_plain(value), separators=(",", ":"), allow_nan=False)


class RecordWriter:
    """Appends rows to the run's tables."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir) / "records"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, IO[str]] = {}
        self._rows = {t: _count_rows(self.dir / f"{t}.jsonl") for t in TABLES}
        self.listeners: list[Callable[[str, dict[str, Any]], None]] = []  # told of every row (logger sinks)

    def write(self, table: str, row: dict[str, Any]) -> None:
        """Append a row to a table."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        f = self._files.get(table)
        if f is None:
            f = self._files[table] = open(self.dir / f"{table}.jsonl", "a", encoding="utf-8")
        f.write(json_text(row) + "\n")
        self._rows[table] += 1
        for listener in self.listeners:
            listener(table, row)

    def event(
        self,
        iteration: int,
        kind: str,
        pair_id: str | None = None,
        env_id: str | None = None,
        detail: str | Mapping[str, Any] = "",
    ) -> None:
        """One row of the events table. `kind`: admitted, child, retired, reproduce, transfer,
        transfer_accepted, solved (POET), replayed, explored, edited (PLR, ACCEL), or a user
        curriculum's own; a mapping `detail` is stored as compact JSON (`json.loads` reads it)."""
        self.write(
            "events",
            {
                "iteration": iteration,
                "kind": kind,
                "pair_id": pair_id,
                "env_id": env_id,
                "detail": detail if isinstance(detail, str) else json_text(detail),
            },
        )

    def row_counts(self) -> dict[str, int]:
        """Rows written so far per table (a checkpoint stores them to cut the tables back on resume)."""
        return dict(self._rows)

    def flush(self) -> None:
        """Push rows to the OS."""
        for f in self._files.values():
            f.flush()

    def sync(self) -> None:
        """Push rows to the disk itself (fsync), so a checkpoint never outlives the rows it counts."""
        self.flush()
        for f in self._files.values():
            os.fsync(f.fileno())
        fsync_dir(self.dir)

    def close(self) -> None:
        """Flush and close every table."""
        for f in self._files.values():
            f.close()
        self._files.clear()


def fsync_dir(path: str | Path) -> None:
    """fsync a directory, so the names created or renamed in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def complete_rows(run_dir: str | Path) -> dict[str, int]:
    """Complete rows (newline-terminated, non-blank lines) on disk per table."""
    return {table: _count_rows(Path(run_dir) / "records" / f"{table}.jsonl") for table in TABLES}


def read_rows(run_dir: str | Path, table: str) -> list[dict[str, Any]]:
    """Every complete row of a table, in order (an empty list if the table has none).

    A last line without its newline is a row still being written by a live run (or torn by
    a crash): it is left out, as resume leaves it out.
    """
    path = Path(run_dir) / "records" / f"{table}.jsonl"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if _is_row(line)]


def _is_row(line: str) -> bool:
    # a row is a whole line: a last line without its newline is still being written (or torn)
    return line.endswith("\n") and bool(line.strip())


def _count_rows(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if _is_row(line))


def truncate_tables(run_dir: str | Path, rows: dict[str, int]) -> None:
    """Cut every table back to its first `rows[table]` rows (rows written after a checkpoint)."""
    folder = Path(run_dir) / "records"
    for table in TABLES:
        path = folder / f"{table}.jsonl"
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as f:
            kept = [line for line in f if _is_row(line)][: rows.get(table, 0)]
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")  # rows end with their newline
        tmp.replace(path)
