"""Units of work dispatched over the pool's workers: units in flight, retries and deadlines.

A unit is a list of item indices (a wave's chunk of requests, or jobs). The `Dispatcher`
sends the units to the least busy workers of a `WorkerPool`, a bounded number in flight per
worker, takes their answers as they come, and has each unit's worker killed and replaced
when it dies or runs past the unit's deadline: the unit is then re-run (in halves where it
holds more than one item), and given up after too many tries. It looks at stop requests
several times a second while it waits.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from poet.errors import WaveInterrupted
from poet.evaluation.worker_pool import WorkerPool

# how often a waiting wave looks at stop requests and deadlines
POLL_SECONDS = 0.25


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


class Dispatcher:
    """Units over the workers of `pool`, at most `inflight_per_worker` in flight on each, a
    unit given up after its worker died or it ran past its deadline more than `max_retries`
    times."""

    def __init__(self, ray: Any, pool: WorkerPool, inflight_per_worker: int, max_retries: int):
        self._ray = ray
        self.pool = pool
        self.inflight_per_worker = inflight_per_worker
        self.max_retries = max_retries

    def run(
        self,
        units: list[list[int]],
        submit: Callable[[int, list[int]], Any],
        deliver: Callable[[list[int], Any, float], None],
        give_up: Callable[[list[int], str], None],
        budget: Callable[[list[int]], float],
        alongside: Callable[[], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Dispatch units of work (lists of item indices) over the workers until all are done.

        `submit(worker_index, unit)` calls that worker with the unit (returns the call's ref), `deliver(unit,
        output, seconds)` takes its answer, `budget(unit)` is its deadline in seconds, and
        `give_up(unit, message)` is called for a unit whose worker died or that ran past
        its deadline more than `max_retries` times. Such a worker is killed and
        replaced; the unit that was running on it is re-run in halves (so in the end only a
        request that kills workers or never finishes fails), the units queued behind it are
        re-run as they were. Each unit is delivered exactly once. If the wave is given up (a
        stop request, an error), the answers still to come belong to no one and are skipped,
        not taken for the next wave's. `alongside`, if given, runs in the driver once the
        first units are sent (at once where there are none). `should_stop` is looked at on
        every turn: when it is true, the wave is abandoned (WaveInterrupted).
        """
        queue = deque((unit, 0) for unit in units)
        try:
            while queue or any(w.queue for w in self.pool.workers) or alongside is not None:
                if should_stop is not None and should_stop():
                    raise WaveInterrupted("stop requested during a wave")
                self._submit_queued(queue, submit, budget)
                if alongside is not None:
                    alongside, run = None, alongside
                    run()
                    continue  # the answers that came meanwhile, and any stop request, on the next turn
                self._take_answers(queue, deliver, give_up)
                self._fail_overdue(queue, give_up)
        finally:  # a wave given up (a stop request, an error): its answers still to come are skipped
            for worker in self.pool.workers:
                worker.queue.clear()

    def _fail(
        self, queue: deque, give_up: Callable[[list[int], str], None], wi: int, why: Callable[[int], str]
    ) -> None:
        """Worker `wi` died or overran running its head unit: replace it and re-plan its units.
        `why(n)` says what happened n times."""
        head, *behind = self.pool.workers[wi].queue
        self.pool.replace(wi)
        for e in reversed(behind):  # not theirs to pay for: same attempt, front of the queue
            queue.appendleft((e.items, e.attempt))
        if len(head.items) > 1:
            half = len(head.items) // 2
            queue.appendleft((head.items[half:], head.attempt))
            queue.appendleft((head.items[:half], head.attempt))
        elif head.attempt + 1 > self.max_retries:
            give_up(head.items, why(head.attempt + 1))
        else:
            queue.appendleft((head.items, head.attempt + 1))

    def _fail_overdue(self, queue: deque, give_up: Callable[[list[int], str], None]) -> None:
        """Every worker whose head unit ran past its deadline goes to `_fail`."""
        now = time.monotonic()
        for wi, worker in enumerate(self.pool.workers):
            if worker.queue and now > worker.started + worker.queue[0].budget:
                limit = worker.queue[0].budget
                self._fail(
                    queue,
                    give_up,
                    wi,
                    lambda n, t=limit: f"it ran past its deadline of {t:.3g} s {_times(n)} (its worker was killed)",
                )

    def _submit_queued(
        self, queue: deque, submit: Callable[[int, list[int]], Any], budget: Callable[[list[int]], float]
    ) -> None:
        """The next units (the costliest left first) to the least busy workers, so a wave of a few
        big chunks spreads over all workers instead of queueing on the first."""
        workers = self.pool.workers
        while queue:
            wi = min(range(len(workers)), key=lambda w: workers[w].inflight)
            worker = workers[wi]
            # Queueing a unit behind a running one hides the call's latency, but the last
            # units of a wave go only to idle workers: queued behind a long unit, one would
            # keep its worker busy while the others have nothing left to do.
            if worker.inflight >= (self.inflight_per_worker if len(queue) > len(workers) else 1):
                break
            unit, attempt = queue.popleft()
            if not worker.queue:
                worker.started = time.monotonic()
            worker.queue.append(_Unit(unit, attempt, budget(unit), submit(wi, unit)))

    def _take_answers(
        self, queue: deque, deliver: Callable[[list[int], Any, float], None], give_up: Callable[[list[int], str], None]
    ) -> None:
        """Wait (until the next deadline, at most POLL_SECONDS) for a worker's head unit and
        deliver what has come; a dead worker's unit goes to `_fail`."""
        workers = self.pool.workers
        now = time.monotonic()
        due = min((w.started + w.queue[0].budget for w in workers if w.queue), default=now)
        heads = {w.queue[0].answer: wi for wi, w in enumerate(workers) if w.queue}
        ready, _ = self._ray.wait(list(heads), num_returns=1, timeout=min(POLL_SECONDS, max(0.0, due - now)))
        for ref in ready:
            wi = heads[ref]
            worker = workers[wi]
            try:
                out = self._ray.get(ref)
            except (
                self._ray.exceptions.RayActorError,
                self._ray.exceptions.WorkerCrashedError,
                self._ray.exceptions.ObjectLostError,
            ) as exc:
                reason = ray_failure(exc)
                self._fail(queue, give_up, wi, lambda n, r=reason: f"the worker died {_times(n)} running it ({r})")
                continue
            entry = worker.queue.popleft()
            now = time.monotonic()
            seconds, worker.started = now - worker.started, now  # the next unit starts now
            deliver(entry.items, out, seconds)
