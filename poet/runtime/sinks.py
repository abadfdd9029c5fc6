"""Logger sinks: the run's records as live curves in TensorBoard and MLflow (both optional).

`logging: {tensorboard: true, mlflow: true}` turns them on, together or apart. Every row a
run writes to its tables also goes to the sinks as scalars at step = its iteration:

- `iterations`: `score/<pair>` (the pair's score on its own env) and `<metric>/<pair>` for
  every trainer metric (ES: lr, sigma, es_return_mean, ...; PPO: losses, ...);
- `phases`: `phase/<phase>/seconds`, `phase/<phase>/env_steps`;
- `heldout`: `heldout/<level>/<pair>`;
- after each iteration: `run/annecs`, `run/active`, `run/archived`, `run/env_steps_per_s`.

A resumed run cuts every curve back to the checkpoint's iteration before writing on
(TensorBoard event files are rewritten, MLflow's file store metric files trimmed), so a
killed and resumed run has each step once. TensorBoard goes to `RUN_DIR/tensorboard`
(tensorboardX), MLflow to a local file store `RUN_DIR/mlruns` unless `logging.mlflow_uri`
names another (a remote store cannot be trimmed: its curves may repeat steps after a
resume). Install with `pip install -e .[logging]`.
"""

from __future__ import annotations

import math
import os
import struct
import time
from pathlib import Path
from typing import Any, Protocol

TB_DIR, MLFLOW_DIR = "tensorboard", "mlruns"


class Sink(Protocol):
    """Where scalars go."""

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """Scalars at one step."""
        ...

    def flush(self) -> None:
        """Make what was written so far durable (called before each checkpoint)."""
        ...

    def close(self) -> None:
        """Flush and release."""
        ...


def row_scalars(table: str, row: dict[str, Any]) -> dict[str, float]:
    """The scalars of one record row (empty for tables the sinks do not show)."""
    out: dict[str, float] = {}
    if table == "iterations":
        pair = row["pair_id"]
        out[f"score/{pair}"] = row["score"]
        for key, value in row.items():
            if key not in ("iteration", "pair_id", "env_id", "score"):
                out[f"{key}/{pair}"] = value
    elif table == "phases":
        out[f"phase/{row['phase']}/seconds"] = row["seconds"]
        out[f"phase/{row['phase']}/env_steps"] = row["env_steps"]
    elif table == "heldout":
        out[f"heldout/{row['level']}/{row['pair_id']}"] = row["score"]
    return {
        k: float(v)
        for k, v in out.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
    }


# ---------------------------------------------------------------- TensorBoard

TB_FLUSH_SECONDS = 10.0


class TensorBoardSink:
    """TensorBoard event files under RUN_DIR/tensorboard, written as the scalars come.

    Not tensorboardX's SummaryWriter: it writes from a background thread, and its flush
    does not wait for that thread, so a run killed right after a checkpoint could lose
    steps the checkpoint holds (a resume would then never write them again).
    """

    def __init__(self, run_dir: Path, start: int):
        from tensorboardX.event_file_writer import EventsWriter

        log_dir = Path(run_dir) / TB_DIR
        trim_tensorboard(log_dir, start)
        log_dir.mkdir(parents=True, exist_ok=True)
        # the pid keeps a resume started within the second of the last file from overwriting it
        self.events = EventsWriter(str(log_dir / "events"), filename_suffix=f".{os.getpid()}")
        self.flushed = time.monotonic()

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        now = time.time()
        for tag, value in values.items():
            self.events.write_event(Event(wall_time=now, step=int(step), summary=scalar(tag, value)))
        if time.monotonic() - self.flushed > TB_FLUSH_SECONDS:  # a TensorBoard watching the run sees it go
            self.flush()

    def flush(self) -> None:
        self.events.flush()
        self.flushed = time.monotonic()

    def close(self) -> None:
        self.events.close()


def _records(path: Path) -> list[bytes]:
    data, out, i = path.read_bytes(), [], 0
    while i + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[i : i + 8])
        end = i + 12 + length + 4
        if end > len(data):
            break  # a torn last record (killed mid-write)
        out.append(data[i + 12 : i + 12 + length])
        i = end
    return out


def read_tensorboard(log_dir: str | Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in the event files under `log_dir`, in file order."""
    from tensorboardX.proto.event_pb2 import Event

    out = []
    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for record in _records(path):
            event = Event.FromString(record)
            for value in event.summary.value:
                out.append((value.tag, int(event.step), float(value.simple_value)))
    return out


def trim_tensorboard(log_dir: Path, start: int) -> None:
    """Drop every summary at step >= `start` from the event files (a resume writes them again)."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import RecordWriter

    def keep(record: bytes) -> bool:
        event = Event.FromString(record)
        return not (event.HasField("summary") and event.step >= start)

    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        kept = [r for r in _records(path) if keep(r)]
        tmp = path.with_name(path.name + ".trim")
        writer = RecordWriter(str(tmp))
        for record in kept:
            writer.write(record)
        writer.close()
        tmp.replace(path)


# ---------------------------------------------------------------- MLflow


class MLflowSink:
    """One MLflow run per POET run (its id kept in RUN_DIR/mlflow_run_id, so a resume continues it)."""

    def __init__(self, run_dir: Path, start: int, uri: str | None, experiment: str, run_name: str):
        from mlflow.tracking import MlflowClient

        self.local = uri is None
        if self.local:  # MLflow 3 keeps its file store behind this switch ("maintenance mode"); it is what we trim
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.uri = uri if uri is not None else (Path(run_dir) / MLFLOW_DIR).resolve().as_uri()
        self.client = MlflowClient(tracking_uri=self.uri)
        id_file = Path(run_dir) / "mlflow_run_id"
        if id_file.exists():
            self.run_id = id_file.read_text().strip()
            if self.local:
                trim_mlflow(Path(run_dir) / MLFLOW_DIR, self.run_id, start)
        else:
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
            self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id
            id_file.write_text(self.run_id)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(_mlflow_key(k), v, now, step) for k, v in values.items()]
        for i in range(0, len(metrics), 1000):  # the store's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[i : i + 1000])

    def flush(self) -> None:
        """The store writes as it goes."""

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _mlflow_key(tag: str) -> str:
    # MLflow keys allow letters, digits, _ - . / and space
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in tag)


def _metric_files(store: Path, run_id: str) -> list[Path]:
    return [p for p in store.glob(f"*/{run_id}/metrics/**/*") if p.is_file()]


def read_mlflow(store: str | Path, run_id: str) -> list[tuple[str, int, float]]:
    """(key, step, value) of every metric point of a run in a local MLflow file store."""
    out = []
    for path in _metric_files(Path(store), run_id):
        key = "/".join(path.relative_to(store).parts[3:])  # experiment/run/metrics/<key>; "/" nests folders
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                out.append((key, int(parts[2]), float(parts[1])))
    return out


def trim_mlflow(store: Path, run_id: str, start: int) -> None:
    """Drop every metric point at step >= `start` of a run in a local file store."""
    for path in _metric_files(store, run_id):
        lines = [ln for ln in path.read_text().splitlines() if len(f := ln.split()) >= 3 and int(f[2]) < start]
        path.write_text("".join(f"{ln}\n" for ln in lines))
