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
  worker for a batched family or a torch policy, shrinking chunks for gymnasium envs with
  the compiled forward), dispatched to the least
  busy worker with a bounded number in flight per worker.
  A worker that dies has its chunks re-run on a replacement. Results are keyed by
  request position, so nothing is lost or counted twice, and no chunking changes a number.
- A wave of a compiled family (a row kernel) and a compiled policy forward expected to take
  at most `local_wave_steps` env steps runs in the driver, with the workers' code: below
  that, the round trip to the workers costs more than the steps it would share out. Its
  episodes are bounded by their step caps, so it needs no deadline; gymnasium envs, and
  policies whose forward runs in torch, always go to the workers.
- On one machine (every worker on the driver's node; `driver_share`), the driver also takes
  one worker's share of a bigger wave of a compiled family, cut one chunk per worker, and
  runs it while the other workers run theirs: the wave keeps as many processes busy, and one
  share pays no round trip. The worker it stands in for sits the wave out (it still runs
  jobs).
- Every chunk and job has a deadline once it starts running (`Deadlines`: by default a
  generous multiple of its work at the measured rate, never under a floor); one that runs past it
  has its worker killed and replaced and is retried like one whose worker died, so an

The pool's parts, each in its own place: its workers' lifecycle and diagnostics
(`WorkerPool`, `poet.evaluation.worker_pool`); units in flight, retries and deadlines
(`Dispatcher`, `poet.evaluation.dispatch`); how a wave is cut into chunks (`plan_wave`,
`poet.evaluation.planning`). Here: what runs in each worker (`RolloutWorker`) and how a
chunk travels to it (`pack_chunk`), one wave's results as they come wherever its chunks
run (`_Wave`), one call's jobs (`_PoolJobs`), and `RayEvaluator`, the facade that puts
them together.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pickle
import resource
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from envs import EnvCache, EnvFamily
from poet.evaluation.dispatch import Dispatcher
from poet.evaluation.jobs import Job, JobResult, job_steps, run_job
from poet.evaluation.noise import NoiseTable
from poet.evaluation.planning import Deadlines, EpisodeLengths, plan_wave
from poet.evaluation.policy_store import PolicyStore
from poet.evaluation.protocol import EvalRequest, EvalResult, PolicyRef
from poet.evaluation.requests import RequestTable, RolloutTally, error_result
from poet.evaluation.rollout import Packed, results_of, run_table
from poet.evaluation.row_loop import row_kernel_of
from poet.evaluation.worker_pool import PoolWorker, WorkerPool
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


# A chunk's weights go with the call as byte strings each under Ray's 100 KB limit for
# sending an argument inline: no object store reference to resolve or release for the usual
# chunk; past Ray's inline budget for one call, Ray puts the rest in its object store.
INLINE_PART_BYTES = 96 * 1024
# Expected env steps up to which a row-kernel wave runs in the driver. A small wave ends
# sooner in one process than on the workers, whose round trip costs more than the steps it
# shares out (benchmarks/small_waves.py measures where the two cross); this stays well below
# that, as a cluster's driver may be slower than its workers.
LOCAL_WAVE_STEPS = 8192


class _Wave:
    """One `evaluate` call: its requests as a table, and their results as its chunks deliver
    them, wherever a chunk ran (in the driver, the driver's share, on a worker)."""

    def __init__(self, requests: Sequence[EvalRequest], episode_lengths: EpisodeLengths, deadlines: Deadlines):
        self.requests = requests
        self.results: list[EvalResult | None] = [None] * len(requests)
        self.steps = 0
        # the wave as columns, once: its chunks are cut from them, and planned and costed on them
        self.table = RequestTable.of(requests)
        self.rows = self.table.rows()
        self.caps = self.rows * self.table.max_steps  # a chunk's work for its deadline: its steps at their caps
        self.episode_lengths, self.deadlines = episode_lengths, deadlines

    def deliver(self, chunk: list[int], out: tuple[Packed, ChunkStats]) -> None:
        """`run_chunk`'s answer for requests `chunk`: their results, and what the pool learns
        from them for its plans and deadlines."""
        packed, (seconds, chunk_steps, longest) = out
        for i, r in zip(chunk, results_of(packed, self.table.episodes[chunk].tolist())):
            self.results[i] = r
        self.episode_lengths.observe(self.table, packed[1], [e for e, _ in packed[2]], chunk)
        self.steps += chunk_steps
        self.deadlines.observe("chunk", seconds, longest + chunk_steps)

    def deliver_pickled(self, chunk: list[int], out: bytes, _elapsed: float) -> None:
        """A worker's answer for requests `chunk` (`RolloutWorker.run`'s, pickled)."""
        self.deliver(chunk, pickle.loads(out))

    def give_up(self, chunk: list[int], message: str) -> None:
        """Requests `chunk` failed on the workers: each gets an error result."""
        for i in chunk:
            self.results[i] = error_result(self.requests[i], message)

    def budget(self, chunk: list[int]) -> float:
        """How long requests `chunk` may run on a worker."""
        return self.deadlines.budget("chunk", int(self.table.max_steps[chunk].max()) + int(self.caps[chunk].sum()))


class _PoolJobs:
    """One `run_jobs` call: its jobs, sent to the workers, and their results as they come."""

    def __init__(self, jobs: Sequence[Job], pool: WorkerPool, deadlines: Deadlines):
        self.jobs, self.pool, self.deadlines = jobs, pool, deadlines
        self.results: list[JobResult | None] = [None] * len(jobs)

    def cost(self, unit: list[int]) -> float:
        """The env steps jobs `unit` cost together."""
        return sum(self.jobs[i].cost for i in unit)

    def submit(self, wi: int, unit: list[int]) -> Any:
        """Jobs `unit` to worker `wi`."""
        return self.pool.workers[wi].actor.run_jobs.remote([self.jobs[i] for i in unit])

    def deliver(self, unit: list[int], out: list[JobResult], seconds: float) -> None:
        """The results of jobs `unit`, which took their worker `seconds`."""
        for i, r in zip(unit, out):
            self.results[i] = r
        self.deadlines.observe("job", seconds, self.cost(unit))

    def give_up(self, unit: list[int], message: str) -> None:
        """Jobs `unit` failed on the workers: each gets an error result."""
        for i in unit:
            self.results[i] = JobResult.failed(self.jobs[i], message)

    def budget(self, unit: list[int]) -> float:
        """How long jobs `unit` may run on a worker."""
        return self.deadlines.budget("job", self.cost(unit))


class RayEvaluator:
    """Evaluator on a persistent pool of Ray actors (see the module docstring), a facade: its
    workers are a `WorkerPool`, its units of work go out through a `Dispatcher`, its waves are
    cut by `plan_wave`. It decides where each wave runs (in the driver, the driver's share, on
    the workers), and collects a wave's results in a `_Wave`, a call's jobs in `_PoolJobs`."""

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
        self.pool: WorkerPool | None = None
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
            inflight, retries = int(inflight_per_worker), int(max_chunk_retries)
            # waves expected to take at most this many env steps run here (a compiled family
            # and a compiled forward only: a torch policy's step costs as much as a round trip)
            self.local_wave_steps = 0 if self.steps_in_slots or not spec.compiled else int(local_wave_steps)
            self.local_waves = 0  # how many waves ran here
            self.noise = noise
            self.env_steps = 0
            self.pool = WorkerPool(ray, RolloutWorker, family, spec, noise, self.batch_rows, self.num_workers, cpus)
            self.dispatcher = Dispatcher(ray, self.pool, inflight, retries)
            # the driver takes a worker's share of a compiled family's waves; unset: when
            # every worker runs on the driver's node (one machine)
            if self.steps_in_slots:
                self.driver_share = False
            else:
                self.driver_share = self.pool.on_one_node() if driver_share is None else bool(driver_share)
            self.driver_shares = 0  # how many shares the driver ran
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> list[PoolWorker]:
        """The current workers (each one's Ray actor: `.actor`)."""
        return self.pool.workers

    @property
    def restarts(self) -> int:
        """How many workers were replaced (died or overran)."""
        return self.pool.restarts

    @property
    def _noise_ref(self) -> Any:
        """The noise table's Ray object (None: no table, or closed)."""
        return self.pool.noise_ref

    @property
    def inflight_per_worker(self) -> int:
        return self.dispatcher.inflight_per_worker

    @property
    def max_chunk_retries(self) -> int:
        return self.dispatcher.max_retries

    # ---------------------------------------------------------------- weights

    def put(self, weights: np.ndarray) -> PolicyRef:
        return self.policies.put(weights)

    def release(self, refs: Sequence[PolicyRef]) -> None:
        self.policies.release(refs)

    # ---------------------------------------------------------------- waves

    def evaluate(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        """One result per request, in order, each a function of its request only.

        A wave of a compiled family expected (`episode_lengths`) to take at most
        `local_wave_steps` env steps runs here in the driver (`_run_here`). Any other is cut
        into chunks (`_plan`) that go to the workers (`_dispatch`); on one machine
        (`driver_share`) the driver runs one worker's share meanwhile (`_run_share`). The env
        steps simulated are added to `env_steps`. Raises WaveInterrupted when `should_stop`
        turns true during the wave.
        """
        wave = _Wave(requests, self.episode_lengths, self.deadlines)
        cost = self.episode_lengths.costs(wave.table)
        if len(requests) and cost.sum() <= self.local_wave_steps:
            self._run_here(wave, list(range(len(requests))), wave.table)
            self.local_waves += 1
        elif len(requests):
            self._run_on_workers(wave, cost)
        self.env_steps += wave.steps
        return wave.results  # type: ignore[return-value]

    def _run_here(self, wave: _Wave, chunk: list[int], table: RequestTable) -> None:
        """Run requests `chunk` of the wave, whose table (in that order) is `table`, here."""
        weights = self.policies.stack(table.keys)
        out = run_chunk(self.family, self.spec, table, weights, self.noise, self.batch_rows, None, self.should_stop)
        wave.deliver(chunk, out)

    def _run_share(self, wave: _Wave, chunk: list[int]) -> None:
        """The driver's share of the wave, requests `chunk`, run here while the workers run theirs."""
        self._run_here(wave, chunk, wave.table.take(chunk))  # the plan's order, not the wave's
        self.driver_shares += 1

    def _run_on_workers(self, wave: _Wave, cost: np.ndarray) -> None:
        """The wave's chunks on the workers, but the driver's share where it takes one."""
        chunks = self._plan(wave.table, wave.rows, cost)
        # a wave cut finer than one chunk per worker (more rows than `batch_rows` each, or
        # `chunks_per_worker`) keeps every worker busy: a share would be one process too many
        shared = self.driver_share and len(chunks) == self.num_workers and self.chunks_per_worker is None
        mine = chunks.pop(0) if shared else None
        self._dispatch(
            chunks,
            lambda wi, chunk: self._submit(wi, wave.table, chunk),
            wave.deliver_pickled,
            wave.give_up,
            wave.budget,
            None if mine is None else functools.partial(self._run_share, wave, mine),
        )

    def _plan(self, wave: RequestTable, rows: np.ndarray, cost: np.ndarray) -> list[list[int]]:
        """The wave's chunks."""
        return plan_wave(
            wave,
            rows,
            cost,
            self.num_workers,
            self.batch_rows,
            self.steps_in_slots and self.spec.compiled,
            self.chunks_per_worker,
        )

    def _submit(self, wi: int, wave: RequestTable, chunk: list[int]) -> Any:
        head, parts = pack_chunk(wave, chunk, self.policies)
        return self.workers[wi].actor.run.remote(head, *parts)

    def _dispatch(
        self,
        units: list[list[int]],
        submit: Callable[[int, list[int]], Any],
        deliver: Callable[[list[int], Any, float], None],
        give_up: Callable[[list[int], str], None],
        budget: Callable[[list[int]], float],
        alongside: Callable[[], None] | None = None,
    ) -> None:
        """Units of work over the workers until all are done (`Dispatcher.run`), abandoned
        when `should_stop` turns true."""
        self.dispatcher.run(units, submit, deliver, give_up, budget, alongside, self.should_stop)

    # ---------------------------------------------------------------- jobs

    def run_jobs(self, jobs: Sequence[Job]) -> list[JobResult]:
        """One job per dispatch, the costliest first; results in the order of `jobs`."""
        batch = _PoolJobs(jobs, self.pool, self.deadlines)
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i].cost)
        self._dispatch([[i] for i in order], batch.submit, batch.deliver, batch.give_up, batch.budget)
        self.env_steps += job_steps(batch.results)  # type: ignore[arg-type]
        return batch.results  # type: ignore[return-value]

    # ---------------------------------------------------------------- introspection and shutdown

    def worker_pids(self) -> list[int]:
        """Process ids of the current workers."""
        return self.pool.pids()

    def worker_memory(self) -> list[dict[str, float]]:
        """Current and peak resident memory of each worker, in MB."""
        return self.pool.memory()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.policies.clear()
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
