"""A run's loop: iterations of the orchestrator with progress, checkpoints at iteration
boundaries, logger sinks, stop requests and the closing line.

`RunLoop` owns nothing the run's results depend on: the context it is given holds the state
and the services, and the loop only decides when to save, when to stop and what to print.
"""

from __future__ import annotations

import gc
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from poet.config import ConfigError, RunConfig
from poet.context import RunContext
from poet.curricula.common import population_fields
from poet.errors import RunInterrupted, StorageError, WaveInterrupted, is_storage_error
from poet.parts import RunParts
from poet.records import truncate_tables
from poet.runtime import checkpoint
from poet.runtime.orchestrator import Orchestrator
from poet.runtime.sinks import Sink, row_scalars


@dataclass
class RunResult:
    """Where a finished run lives, and its headline numbers."""

    run_dir: Path
    iterations: int
    active: int
    archived: int
    annecs: int
    seconds: float  # the whole wall time, Ray's start included
    # Enhanced POET: admitted envs on which the best archived agent passed the MC (the reference
    # code's ANNECS count, beside the paper's `annecs`)
    annecs_reference: int = 0
    ray_start_seconds: float = 0.0  # of `seconds`, starting Ray and the pool (0 in process)


class Progress:
    """A progress bar with ETA on stderr; phase summaries print above it."""

    def __init__(self, total: int, start: int, enabled: bool):
        self.enabled = enabled
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="it", dynamic_ncols=True, file=sys.stderr)

    def started(self) -> None:
        """The pool is ready: ETA and throughput count from now, not from Ray's start."""
        if self.bar is not None:
            self.bar.start_t = self.bar.last_print_t = time.time()

    def log(self, line: str) -> None:
        """Print a summary line without breaking the bar."""
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        elif self.enabled:
            print(line, file=sys.stderr)

    def update(self, orch: Orchestrator) -> None:
        """Advance the bar after an iteration."""
        if self.bar is None:
            return
        # A curriculum may say what its iteration did in its own terms (POET's ANNECS, a level
        # buffer filling before its first replay); otherwise the population's.
        fields = getattr(orch.curriculum, "progress_fields", None)
        postfix = fields(orch.ctx) if callable(fields) else None
        if postfix is None:
            postfix = population_fields(orch.ctx, "solved")
        self.bar.set_postfix(**postfix, steps_per_s=f"{orch.last_steps_per_second:,.0f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        """Finish the bar."""
        if self.bar is not None:
            self.bar.close()


class StopRequest:
    """SIGINT/SIGTERM ask the run to stop: the evaluators abandon the wave in progress within a
    fraction of a second and the run checkpoints its last completed iteration (a second
    SIGINT aborts at once)."""

    def __init__(self, log: Callable[[str], None]):
        self.requested, self.log, self._old = False, log, {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.log(
            f"{signal.Signals(signum).name}: stopping; the iteration in progress is dropped and the last "
            "completed one checkpointed (Ctrl-C again aborts without a checkpoint)"
        )

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def make_sinks(cfg: RunConfig, run_dir: Path, start: int) -> list[Sink]:
    """The logger sinks `logging` asks for, their curves cut back to `start` (a resume)."""
    sinks: list[Sink] = []
    try:
        if cfg.logging.tensorboard:
            from poet.runtime.sinks import TensorBoardSink

            sinks.append(TensorBoardSink(run_dir, start))
        if cfg.logging.mlflow:
            from poet.runtime.sinks import MLflowSink

            sinks.append(
                MLflowSink(run_dir, start, cfg.logging.mlflow_uri, cfg.logging.mlflow_experiment, Path(run_dir).name)
            )
    except ImportError as exc:
        for sink in sinks:
            sink.close()
        raise ConfigError(f"logging: {exc.name or exc} is not installed (pip install -e .[logging])") from None
    return sinks


class RunLoop:
    """Runs (or continues) a run's schedule over a built context.

    `snapshot`: the checkpoint a resume continues from (None: a fresh start). `identity`: what
    the run's checkpoints are valid for. `ray_start`: seconds already spent starting the pool.
    """

    def __init__(
        self,
        parts: RunParts,
        ctx: RunContext,
        run_dir: Path,
        bar: Progress,
        snapshot: checkpoint.Snapshot | None,
        identity: str,
        ray_start: float = 0.0,
    ):
        self.parts, self.ctx, self.run_dir, self.bar = parts, ctx, run_dir, bar
        self.snapshot, self.identity, self.ray_start = snapshot, identity, ray_start
        start = snapshot.iteration if snapshot is not None else 0
        self.last_saved = start if snapshot is not None else -1
        # The state at the last iteration boundary, copied: what checkpoints write, and what a
        # stop in the middle of an iteration goes back to (that iteration is dropped).
        self.boundary: checkpoint.Captured | None = None
        self.stop: StopRequest | None = None
        try:
            self.sinks = make_sinks(parts.cfg, run_dir, start)
        except BaseException:
            ctx.records.close()
            ctx.evaluator.close()
            raise
        if self.sinks:
            ctx.records.listeners.append(self._to_sinks)
        self.orch = Orchestrator(ctx, parts.curriculum, on_iteration=self._after_iteration)

    def run(self) -> RunResult:
        """The iterations up to the config's target; the run's result, or RunInterrupted after
        a stop request (the last completed iteration checkpointed)."""
        t0 = time.perf_counter()
        with StopRequest(self.bar.log) as self.stop:
            dropped = self._iterate()
        if dropped:  # the tables end where the checkpoint does, as after a clean stop
            truncate_tables(self.run_dir, self.boundary.table_rows)
            raise RunInterrupted(self.boundary.iteration, self.run_dir)
        iterating = time.perf_counter() - t0
        result = self._result(iterating)
        print(self._closing_line(result, iterating), file=sys.stderr)
        return result

    def _iterate(self) -> bool:
        """Start or restore, iterate, save; close every service, also on failure. Returns
        whether a stop request abandoned a wave (the iteration in progress is dropped)."""
        ctx, dropped, storage_failed = self.ctx, False, False
        try:
            workers = getattr(ctx.evaluator, "num_workers", None)
            if workers is not None:
                self.bar.log(f"ray pool ready: {workers} workers")
            self.bar.started()
            if self.snapshot is not None:
                ctx.restore(self.snapshot.state)
            elif not ctx.state.population.active:
                self.orch.start()
            self.boundary = checkpoint.capture(ctx)
            ctx.evaluator.should_stop = lambda: self.stop.requested
            dropped = self._run_frozen()
            self._save()
        except (OSError, StorageError) as exc:  # the disk's answer is one line, not a traceback
            if isinstance(exc, OSError) and not is_storage_error(exc):
                raise
            storage_failed = True
            if isinstance(exc, StorageError):
                raise
            raise StorageError(exc, self.run_dir) from None
        finally:
            self._close(storage_failed)
        return dropped

    def _run_frozen(self) -> bool:
        """The orchestrator's iterations with what exists now frozen for the collector: it lives
        as long as the run, and full passes over it would keep the workers waiting for their
        next chunk. Returns whether a stop request abandoned a wave."""
        thaw = gc.get_freeze_count() == 0  # a caller's own freeze is the caller's to lift
        gc.freeze()
        try:
            self.orch.run(self.parts.cfg.iterations)
        except WaveInterrupted:
            return True
        finally:
            if thaw:  # collectable again once the run is over (a notebook goes on)
                gc.unfreeze()
        return False

    def _after_iteration(self, orch: Orchestrator) -> None:
        """Progress, the run's curves, the boundary's copy, a checkpoint when due; a stop request
        ends the run here."""
        self.bar.update(orch)
        if self.sinks:
            pop = self.ctx.state.population
            summary = {
                "run/annecs": orch.annecs(),
                "run/active": len(pop.active),
                "run/archived": len(pop.archive),
                "run/env_steps_per_s": orch.last_steps_per_second,
            }
            for sink in self.sinks:
                sink.scalars(orch.iteration - 1, {k: float(v) for k, v in summary.items() if math.isfinite(v)})
        self.boundary = checkpoint.capture(self.ctx)
        every = self.parts.cfg.checkpoint.every
        if (every and orch.iteration % every == 0) or self.stop.requested:
            self._save()
        if self.stop.requested and orch.iteration < self.parts.cfg.iterations:
            raise RunInterrupted(orch.iteration, self.run_dir)

    def _save(self) -> None:
        """A checkpoint of the last boundary, unless it is saved already."""
        if self.last_saved != self.boundary.iteration:
            for sink in self.sinks:  # a checkpoint's steps must be in the curves when it is
                sink.flush()
            checkpoint.write(self.ctx, self.boundary, self.run_dir, self.identity, self.parts.cfg.checkpoint.keep)
            self.last_saved = self.boundary.iteration

    def _to_sinks(self, table: str, row: dict) -> None:
        values = row_scalars(table, row)
        if values:
            for sink in self.sinks:
                sink.scalars(int(row["iteration"]), values)

    def _close(self, storage_failed: bool) -> None:
        self.bar.close()
        try:
            self.ctx.records.close()
        except OSError:
            if not storage_failed:  # else the same disk said no twice; the first says it
                raise
        self.ctx.evaluator.close()
        for sink in self.sinks:
            sink.close()

    def _result(self, iterating: float) -> RunResult:
        state = self.ctx.state
        pop = state.population
        return RunResult(
            self.run_dir,
            self.orch.iteration,
            len(pop.active),
            len(pop.archive),
            state.annecs(),
            self.ray_start + iterating,
            state.annecs_reference,
            self.ray_start,
        )

    def _closing_line(self, result: RunResult, iterating: float) -> str:
        ray_start = self.ray_start
        # the parts rounded first, so that they add up to the whole as printed
        took = (
            f"{round(ray_start) + round(iterating)}s (Ray start {round(ray_start)}s, iterations {round(iterating)}s)"
            if self.parts.cfg.evaluation.backend == "ray"
            else f"{round(iterating)}s"
        )
        outcome = getattr(self.parts.curriculum, "outcome", None)
        # ANNECS is POET's measure (envs made by reproduction); other curricula solve levels they pick
        said = outcome(self.ctx.state) if callable(outcome) else f"{result.annecs} envs solved besides the first"
        return f"done: {result.iterations} iterations in {took}, {said}; run directory {self.run_dir}"
