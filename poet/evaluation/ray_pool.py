"""The persistent Ray actor pool: the default Evaluator.

- Workers are created once and live for the whole run. Chunks and jobs reach them as Ray
  actor tasks; the pool opens no connection of its own.
- A chunk travels as a few byte strings: its requests and keys pickled into one, its policy
  weights as raw float32 bytes in parts under Ray's inline size (Ray moves what exceeds its
  per-call inline budget to its object store itself). A worker builds its batched policy
  from the arrays of the chunk at hand and drops it afterwards, so its memory does not
  grow with the number of policies seen.
- The ES noise table is put once; each node maps it once and workers slice it.
- Jobs (whole training loops, `poet.evaluation.jobs`) go over the same workers, one per
  dispatch, the costliest first, with the same fault handling.
- Requests are packed into chunks by the rule in `poet.evaluation.planning` (one chunk per
  worker for a batched family, shrinking chunks for gymnasium envs), dispatched to the least
  busy worker with a bounded number in flight per worker.
  A worker that dies has its chunks re-run on a replacement. Results are keyed by
  request position, so nothing is lost or counted twice, and no chunking changes a number.
- A wave of a compiled family (a row kernel) expected to take at most `local_wave_steps`
  env steps runs in the driver, with the workers' code: below that, the round trip to the
  workers costs more than the steps it would share out. Its episodes are bounded by their
  step caps, so it needs no deadline; gymnasium envs always go to the workers.
- On one machine (every worker on the driver's node; `driver_share`), the driver also takes
  one worker's share of a bigger wave of a compiled family, cut one chunk per worker, and
  runs it while the other workers run theirs: the wave keeps as many processes busy, and one
  share pays no round trip. The worker it stands in for sits the wave out (it still runs
  jobs).
- Every chunk and job has a deadline once it starts running (`Deadlines`: by default a
  generous multiple of its work at the measured rate, never under a floor); one that runs past it
  has its worker killed and replaced and is retried like one whose worker died, so an
  env step that never returns on a worker cannot hang a run. A stop request (`should_stop`) is
  looked at several times a second and abandons the wave (`WaveInterrupted`).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import resource
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs import EnvCache, EnvFamily
from poet.errors import WaveInterrupted
from poet.evaluation.jobs import Job, JobResult, job_steps, run_job
from poet.evaluation.noise import NoiseTable
from poet.evaluation.planning import Deadlines, EpisodeLengths, plan_chunks, plan_guided
from poet.evaluation.policy_store import PolicyStore
from poet.evaluation.protocol import EvalRequest, EvalResult, PolicyRef
from poet.evaluation.rollout import (
    ENV_SLOTS,
    Packed,
    RequestTable,
    RolloutTally,
    error_result,
    results_of,
    row_kernel_of,
    run_table,
)
from poet.policies import PolicySpec


# A chunk travels as a table of columns (`RequestTable`), not as hundreds of dataclass
# instances: per-object serialisation cost more than short rollouts, and the worker runs the
# table as it comes. Both ways the pool pickles it itself into one byte string, and sends
# weights as raw float32 bytes: Ray serialises each argument and result on its own, and a few
# byte strings start a chunk sooner than tuples and arrays (the pool's page of the docs has the
# measurement).
def pack_chunk(wave: RequestTable, chunk: Sequence[int], policies: PolicyStore) -> tuple[bytes, list[bytes]]:
    """What `RolloutWorker.run` takes for requests `chunk` of a wave: the pickled table of
    those requests, and the weights of their policies, in the table's rows' order, as float32
    byte strings, each under Ray's inline size."""
    table = wave.take(chunk)
    head = pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL)
    data = policies.stack(table.keys).tobytes()
    return head, [data[i : i + INLINE_PART_BYTES] for i in range(0, len(data), INLINE_PART_BYTES)]


ChunkStats = tuple[float, int, int]  # seconds, env steps simulated, the longest episode's steps


def run_chunk(
    family: EnvFamily,
    spec: PolicySpec,
    table: RequestTable,
    rows: np.ndarray,
    noise: NoiseTable | None,
    batch_rows: int,
    env_cache: EnvCache | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[Packed, ChunkStats]:
    """`run_table` on a chunk whose policies' weights are `rows`, and what the pool learns from
    it for its deadlines and step count."""
    t0 = time.perf_counter()
    tally = RolloutTally()
    packed = run_table(family, spec, table, rows, noise, batch_rows, should_stop, env_cache, tally)
    return packed, (time.perf_counter() - t0, tally.steps, tally.longest)


class RolloutWorker:
    """What runs inside each Ray actor: the family, the policy spec and the node's noise table."""

    def __init__(self, family: EnvFamily, spec: dict, noise: np.ndarray | None, batch_rows: int):
        # One core per worker: torch's own threads would fight the pool. torch takes its thread
        # count from OMP_NUM_THREADS when it loads, so a rollout-only worker never loads torch;
        # a family that loaded it while its arguments were unpickled is set here.
        os.environ["OMP_NUM_THREADS"] = "1"
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        self.family = family
        self.spec = PolicySpec.from_dict(spec)
        self.noise = NoiseTable.from_array(noise) if noise is not None else None
        self.batch_rows = batch_rows
        self.env_cache = EnvCache(family)  # used gymnasium envs, for the next chunks

    def run(self, head: bytes, *weights: bytes) -> bytes:
        """Evaluate a chunk: `head` is the pickled `RequestTable`; its weights rows are the
        float32 rows of the `weights` byte strings. Returns `run_chunk`'s answer, pickled."""
        table = pickle.loads(head)
        rows = np.frombuffer(b"".join(weights), dtype=np.float32).reshape(-1, self.spec.num_params)
        out = run_chunk(self.family, self.spec, table, rows, self.noise, self.batch_rows, self.env_cache)
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)

    def run_jobs(self, jobs: list[Job]) -> list[JobResult]:
        """Run whole jobs (a trainer's training loops) here, in order."""
        return [run_job(self, job) for job in jobs]

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()

    def node(self) -> str:
        """The Ray node this worker runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def memory(self) -> dict[str, float]:
        """Resident memory now and at peak, in MB. "Now" is read after the C allocator hands
        its free pages back to the OS (glibc's `malloc_trim`, where there is one): what the
        worker holds, not what its allocator keeps for the next chunk."""
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        now_kb = 0
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        now_kb = int(line.split()[1])
        except OSError:
            pass
        return {"rss_mb": now_kb / 1024, "peak_rss_mb": peak_kb / 1024}


def ray_failure(exc: BaseException) -> str:
    """The exception's type and the first line of what Ray says about it (e.g. the exit code)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next(
        (line for line in lines if "exit" in line.lower() or "killed" in line.lower()), lines[0] if lines else ""
    )
    return f"{type(exc).__name__}: {detail[:300]}" if detail else type(exc).__name__


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


@dataclass
class _Unit:
    items: list[int]
    attempt: int
    budget: float  # seconds it may run once started
    answer: Any  # the Ray object ref of the call that runs it


@dataclass
class _Worker:
    actor: Any
    queue: deque[_Unit] = field(default_factory=deque)  # its submitted, unanswered units, in order
    started: float = 0.0  # when the unit at the head of `queue` began running

    @property
    def inflight(self) -> int:
        return len(self.queue)


# A chunk's weights go with the call as byte strings each under Ray's 100 KB limit for
# sending an argument inline: no object store reference to resolve or release for the usual
# chunk; past Ray's inline budget for one call, Ray puts the rest in its object store.
INLINE_PART_BYTES = 96 * 1024
# the fewest episodes in a chunk of gymnasium envs (stepped ENV_SLOTS at a time): smaller last
# chunks balance a wave's end better but each costs a round trip (on waves of 64 gymnasium walker
# episodes in benchmarks/eval_pool.py, 8 beat both smaller and larger minimums)
MIN_SLOT_CHUNK_ROWS = 2 * ENV_SLOTS
# how often a waiting wave looks at stop requests and deadlines
POLL_SECONDS = 0.25
STARTUP_SECONDS = 300.0  # for a new worker to answer, before the pool gives up (no CPU for it on the cluster)
# Expected env steps up to which a row-kernel wave runs in the driver. A small wave ends
# sooner in one process than on the workers, whose round trip costs more than the steps it
# shares out (benchmarks/small_waves.py measures where the two cross); this stays well below
# that, as a cluster's driver may be slower than its workers.
LOCAL_WAVE_STEPS = 8192


class RayEvaluator:
    """Evaluator on a persistent pool of Ray actors (see the module docstring)."""

    def __init__(
        self,
        family: EnvFamily,
        spec: PolicySpec,
        noise: NoiseTable | None = None,
        *,
        workers: int | None = None,
        batch_rows: int = 4096,
        chunks_per_worker: int | None = None,
        inflight_per_worker: int = 2,
        max_chunk_retries: int = 3,
        deadlines: Deadlines | None = None,
        local_wave_steps: int = LOCAL_WAVE_STEPS,
        driver_share: bool | None = None,
        owns_ray: bool = False,
    ):
        import ray

        if not ray.is_initialized():
            raise RuntimeError("the Ray pool needs a running Ray: start or join one first (ray.init)")
        self._ray = ray
        self._owns_ray = owns_ray  # shut Ray down on close: the caller started it for this pool
        self.workers: list[_Worker] = []
        self._noise_ref = None
        self.policies = PolicyStore(spec)  # sent with each chunk that uses them
        self.should_stop: Callable[[], bool] | None = None  # polled while a wave waits (stop requests)
        try:  # a failure from here on closes the workers started so far and a Ray this pool started
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.num_workers = int(workers) if workers else cpus
            if self.num_workers < 1:
                raise ValueError(f"evaluation.workers must be >= 1, got {self.num_workers}")
            self.family, self.spec, self.batch_rows = family, spec, int(batch_rows)
            # how a chunk's episodes run decides how a wave is cut (`_plan`); known once
            self.steps_in_slots = row_kernel_of(family, spec) is None
            # None: the pool's own rule (`_plan`)
            self.chunks_per_worker = None if chunks_per_worker is None else int(chunks_per_worker)
            self.episode_lengths = EpisodeLengths()
            self.deadlines = deadlines if deadlines is not None else Deadlines()
            self.inflight_per_worker = int(inflight_per_worker)
            self.max_chunk_retries = int(max_chunk_retries)
            # waves expected to take at most this many env steps run here (compiled families only)
            self.local_wave_steps = 0 if self.steps_in_slots else int(local_wave_steps)
            self.local_waves = 0  # how many waves ran here
            self.noise = noise
            # Fractional CPUs let a pool larger than the CPU count still schedule (tests, oversubscription).
            self._num_cpus = min(1.0, cpus / self.num_workers)
            self._actor_cls = ray.remote(num_cpus=self._num_cpus, max_restarts=0)(RolloutWorker)
            self._noise_ref = ray.put(noise.noise) if noise is not None else None
            self.restarts = 0
            self.env_steps = 0
            self.workers = self._spawn(self.num_workers)
            # the driver takes a worker's share of a compiled family's waves; unset: when
            # every worker runs on the driver's node (one machine)
            if self.steps_in_slots:
                self.driver_share = False
            else:
                self.driver_share = self._on_one_node() if driver_share is None else bool(driver_share)
            self.driver_shares = 0  # how many shares the driver ran
        except BaseException:
            self.close()
            raise

    def _spawn(self, n: int) -> list[_Worker]:
        """`n` new workers, started (fails early if they do not start)."""
        actors = [
            self._actor_cls.remote(self.family, self.spec.to_dict(), self._noise_ref, self.batch_rows) for _ in range(n)
        ]
        try:
            self._get([a.pid.remote() for a in actors], STARTUP_SECONDS, "start")
            return [_Worker(a) for a in actors]
        except BaseException:
            for actor in actors:
                self._kill(actor)
            raise

    def _on_one_node(self) -> bool:
        """Whether every worker runs on the driver's node."""
        here = self._ray.get_runtime_context().get_node_id()
        nodes = self._get([w.actor.node.remote() for w in self.workers], STARTUP_SECONDS, "answer")
        return all(node == here for node in nodes)

    def _kill(self, actor: Any) -> None:
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # already dead
            pass

    def _get(self, refs: list, timeout: float, what: str) -> list:
        try:
            return self._ray.get(refs, timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"the Ray pool's workers did not {what} within {timeout:.0f} s "
                f"({self.num_workers} workers asked for {self._num_cpus:g} CPU each; "
                f"the cluster has {self._ray.cluster_resources().get('CPU', 0):g})"
            ) from None

    # ---------------------------------------------------------------- weights

    def put(self, weights: np.ndarray) -> PolicyRef:
        return self.policies.put(weights)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        self.policies.release(refs)

    # ---------------------------------------------------------------- waves

    def _submit(self, wi: int, wave: RequestTable, chunk: list[int]) -> Any:
        head, parts = pack_chunk(wave, chunk, self.policies)
        return self.workers[wi].actor.run.remote(head, *parts)

    def _replace(self, wi: int) -> None:
        self._kill(self.workers[wi].actor)
        self.workers[wi] = self._spawn(1)[0]
        self.restarts += 1

    def _dispatch(
        self,
        units: list[list[int]],
        submit: Callable[[int, list[int]], Any],
        deliver: Callable[[list[int], Any, float], None],
        give_up: Callable[[list[int], str], None],
        budget: Callable[[list[int]], float],
        alongside: Callable[[], None] | None = None,
    ) -> None:
        """Dispatch units of work (lists of item indices) over the workers until all are done.

        `submit(worker_index, unit)` calls that worker with the unit (returns the call's ref), `deliver(unit,
        output, seconds)` takes its answer, `budget(unit)` is its deadline in seconds, and
        `give_up(unit, message)` is called for a unit whose worker died or that ran past
        its deadline more than `max_chunk_retries` times. Such a worker is killed and
        replaced; the unit that was running on it is re-run in halves (so in the end only a
        request that kills workers or never finishes fails), the units queued behind it are
        re-run as they were. Each unit is delivered exactly once. If the wave is given up (a
        stop request, an error), the answers still to come belong to no one and are skipped,
        not taken for the next wave's. `alongside`, if given, runs in the driver once the
        first units are sent (at once where there are none).
        """
        queue = deque((unit, 0) for unit in units)

        def fail(wi: int, why: Callable[[int], str]) -> None:
            self._fail(queue, give_up, wi, why)

        try:
            while queue or any(w.queue for w in self.workers) or alongside is not None:
                if self.should_stop is not None and self.should_stop():
                    raise WaveInterrupted("stop requested during a wave")
                self._submit_queued(queue, submit, budget)
                if alongside is not None:
                    alongside, run = None, alongside
                    run()
                    continue  # the answers that came meanwhile, and any stop request, on the next turn
                self._take_answers(deliver, fail)
                now = time.monotonic()
                for wi, worker in enumerate(self.workers):
                    if worker.queue and now > worker.started + worker.queue[0].budget:
                        limit = worker.queue[0].budget
                        fail(
                            wi,
                            lambda n, t=limit: (
                                f"it ran past its deadline of {t:.3g} s {_times(n)} (its worker was killed)"
                            ),
                        )
        finally:  # a wave given up (a stop request, an error): its answers still to come are skipped
            for worker in self.workers:
                worker.queue.clear()

    def _fail(
        self, queue: deque, give_up: Callable[[list[int], str], None], wi: int, why: Callable[[int], str]
    ) -> None:
        """Worker `wi` died or overran running its head unit: replace it and re-plan its units.
        `why(n)` says what happened n times."""
        head, *behind = self.workers[wi].queue
        self._replace(wi)
        for e in reversed(behind):  # not theirs to pay for: same attempt, front of the queue
            queue.appendleft((e.items, e.attempt))
        if len(head.items) > 1:
            half = len(head.items) // 2
            queue.appendleft((head.items[half:], head.attempt))
            queue.appendleft((head.items[:half], head.attempt))
        elif head.attempt + 1 > self.max_chunk_retries:
            give_up(head.items, why(head.attempt + 1))
        else:
            queue.appendleft((head.items, head.attempt + 1))

    def _submit_queued(
        self, queue: deque, submit: Callable[[int, list[int]], Any], budget: Callable[[list[int]], float]
    ) -> None:
        """The next units (the costliest left first) to the least busy workers, so a wave of a few
        big chunks spreads over all workers instead of queueing on the first."""
        while queue:
            wi = min(range(len(self.workers)), key=lambda w: self.workers[w].inflight)
            worker = self.workers[wi]
            # Queueing a unit behind a running one hides the call's latency, but the last
            # units of a wave go only to idle workers: queued behind a long unit, one would
            # keep its worker busy while the others have nothing left to do.
            if worker.inflight >= (self.inflight_per_worker if len(queue) > len(self.workers) else 1):
                break
            unit, attempt = queue.popleft()
            if not worker.queue:
                worker.started = time.monotonic()
            worker.queue.append(_Unit(unit, attempt, budget(unit), submit(wi, unit)))

    def _take_answers(
        self, deliver: Callable[[list[int], Any, float], None], fail: Callable[[int, Callable[[int], str]], None]
    ) -> None:
        """Wait (until the next deadline, at most POLL_SECONDS) for a worker's head unit and
        deliver what has come; a dead worker's unit goes to `fail`."""
        now = time.monotonic()
        due = min((w.started + w.queue[0].budget for w in self.workers if w.queue), default=now)
        heads = {w.queue[0].answer: wi for wi, w in enumerate(self.workers) if w.queue}
        ready, _ = self._ray.wait(list(heads), num_returns=1, timeout=min(POLL_SECONDS, max(0.0, due - now)))
        for ref in ready:
            wi = heads[ref]
            worker = self.workers[wi]
            try:
                out = self._ray.get(ref)
            except (
                self._ray.exceptions.RayActorError,
                self._ray.exceptions.WorkerCrashedError,
                self._ray.exceptions.ObjectLostError,
            ) as exc:
                reason = ray_failure(exc)
                fail(wi, lambda n, r=reason: f"the worker died {_times(n)} running it ({r})")
                continue
            entry = worker.queue.popleft()
            now = time.monotonic()
            seconds, worker.started = now - worker.started, now  # the next unit starts now
            deliver(entry.items, out, seconds)

    def _plan(self, wave: RequestTable, rows: np.ndarray, cost: np.ndarray) -> list[list[int]]:
        """The wave's chunks."""
        if self.chunks_per_worker is not None:
            return plan_chunks(wave.policy, rows, cost, self.num_workers * self.chunks_per_worker, self.batch_rows)
        if self.steps_in_slots:
            # gymnasium envs stepped ENV_SLOTS at a time: chunks shrinking towards the end of
            # the wave, down to MIN_SLOT_CHUNK_ROWS episodes.
            return plan_guided(rows, cost, self.num_workers, MIN_SLOT_CHUNK_ROWS, self.batch_rows)
        # a row kernel: one chunk of balanced cost per worker (rows are nearly free in a
        # batch, and more chunks would only add round trips)
        return plan_chunks(wave.policy, rows, cost, self.num_workers, self.batch_rows)

    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        results: list[EvalResult | None] = [None] * len(requests)
        steps = 0
        # the wave as columns, once: its chunks are cut from them, and planned and costed on them
        wave = RequestTable.of(requests)
        rows = wave.rows()
        caps = rows * wave.max_steps  # a chunk's work for its deadline: its steps at their caps

        def deliver(chunk: list[int], out: tuple[Packed, ChunkStats]) -> None:
            nonlocal steps
            packed, (seconds, chunk_steps, longest) = out
            for i, r in zip(chunk, results_of(packed, wave.episodes[chunk].tolist())):
                results[i] = r
            self.episode_lengths.observe(wave, packed[1], [e for e, _ in packed[2]], chunk)
            steps += chunk_steps
            self.deadlines.observe("chunk", seconds, longest + chunk_steps)

        def give_up(chunk: list[int], message: str) -> None:
            for i in chunk:
                results[i] = error_result(requests[i], message)

        def budget(chunk: list[int]) -> float:
            return self.deadlines.budget("chunk", int(wave.max_steps[chunk].max()) + int(caps[chunk].sum()))

        def run_here(chunk: list[int], table: RequestTable) -> None:
            """Run requests `chunk` of the wave, whose table (in that order) is `table`, here."""
            weights = self.policies.stack(table.keys)
            out = run_chunk(self.family, self.spec, table, weights, self.noise, self.batch_rows, None, self.should_stop)
            deliver(chunk, out)

        cost = self.episode_lengths.costs(wave)
        if len(requests) and cost.sum() <= self.local_wave_steps:
            run_here(list(range(len(requests))), wave)
            self.local_waves += 1
        elif len(requests):
            chunks = self._plan(wave, rows, cost)
            # a wave cut finer than one chunk per worker (more rows than `batch_rows` each, or
            # `chunks_per_worker`) keeps every worker busy: a share would be one process too many
            shared = self.driver_share and len(chunks) == self.num_workers and self.chunks_per_worker is None
            mine = chunks.pop(0) if shared else None

            def share() -> None:
                run_here(mine, wave.take(mine))  # the plan's order, not the wave's
                self.driver_shares += 1

            self._dispatch(
                chunks,
                lambda wi, chunk: self._submit(wi, wave, chunk),
                lambda chunk, out, _elapsed: deliver(chunk, pickle.loads(out)),
                give_up,
                budget,
                None if mine is None else share,
            )
        self.env_steps += steps
        return results  # type: ignore[return-value]

    def run_jobs(self, jobs: Sequence[Job]) -> list[JobResult]:
        """One job per dispatch, the costliest first; results in the order of `jobs`."""
        results: list[JobResult | None] = [None] * len(jobs)
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i].cost)

        def submit(wi: int, unit: list[int]) -> Any:
            return self.workers[wi].actor.run_jobs.remote([jobs[i] for i in unit])

        def deliver(unit: list[int], out: list[JobResult], seconds: float) -> None:
            for i, r in zip(unit, out):
                results[i] = r
            self.deadlines.observe("job", seconds, sum(jobs[i].cost for i in unit))

        def give_up(unit: list[int], message: str) -> None:
            for i in unit:
                results[i] = JobResult.failed(jobs[i], message)

        self._dispatch(
            [[i] for i in order],
            submit,
            deliver,
            give_up,
            lambda unit: self.deadlines.budget("job", sum(jobs[i].cost for i in unit)),
        )
        self.env_steps += job_steps(results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    # ---------------------------------------------------------------- introspection and shutdown

    def worker_pids(self) -> list[int]:
        """Process ids of the current workers."""
        return self._get([w.actor.pid.remote() for w in self.workers], STARTUP_SECONDS, "answer")

    def worker_memory(self) -> list[dict[str, float]]:
        """Current and peak resident memory of each worker, in MB."""
        return self._get([w.actor.memory.remote() for w in self.workers], STARTUP_SECONDS, "answer")

    def close(self) -> None:
        for w in self.workers:
            self._kill(w.actor)
        self.workers = []
        self.policies.clear()
        self._noise_ref = None
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
