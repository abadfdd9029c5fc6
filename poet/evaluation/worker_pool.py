"""The Ray pool's workers: started, replaced and killed, and asked what they hold.

`WorkerPool` owns the pool's Ray actors, one worker class instance each (the pool's
`RolloutWorker`, `poet.evaluation.ray_pool`): it starts them and fails early if they do not
start (no CPU for them on the cluster), replaces one that died or overran, kills them all
at the end, and asks them their process ids, nodes and memory. What runs on them, and when,
is the dispatcher's (`poet.evaluation.dispatch`), which keeps each worker's units in flight
on its `PoolWorker`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from envs import EnvFamily
from poet.evaluation.noise import NoiseTable
from poet.policies import PolicySpec

STARTUP_SECONDS = 300.0  # for a new worker to answer, before the pool gives up (no CPU for it on the cluster)


@dataclass
class PoolWorker:
    """One worker of the pool: its actor, and the units the dispatcher has sent it."""

    actor: Any
    queue: deque = field(default_factory=deque)  # its submitted, unanswered units, in order
    started: float = 0.0  # when the unit at the head of `queue` began running

    @property
    def inflight(self) -> int:
        return len(self.queue)


class WorkerPool:
    """`workers` instances of `worker_cls` as Ray actors, each made with (family, spec as a
    dict, the noise table's Ray object, batch_rows), on a cluster of `cpus` CPUs."""

    def __init__(
        self,
        ray: Any,
        worker_cls: type,
        family: EnvFamily,
        spec: PolicySpec,
        noise: NoiseTable | None,
        batch_rows: int,
        workers: int,
        cpus: int,
    ):
        self._ray = ray
        self.family, self.spec, self.batch_rows = family, spec, batch_rows
        self.num_workers = workers
        # Fractional CPUs let a pool larger than the CPU count still schedule (tests, oversubscription).
        self.num_cpus = min(1.0, cpus / self.num_workers)
        self._actor_cls = ray.remote(num_cpus=self.num_cpus, max_restarts=0)(worker_cls)
        self.noise_ref = ray.put(noise.noise) if noise is not None else None
        self.restarts = 0
        self.workers: list[PoolWorker] = self.spawn(self.num_workers)

    def spawn(self, n: int) -> list[PoolWorker]:
        """`n` new workers, started (fails early if they do not start)."""
        actors = [
            self._actor_cls.remote(self.family, self.spec.to_dict(), self.noise_ref, self.batch_rows) for _ in range(n)
        ]
        try:
            self.get([a.pid.remote() for a in actors], STARTUP_SECONDS, "start")
            return [PoolWorker(a) for a in actors]
        except BaseException:
            for actor in actors:
                self.kill(actor)
            raise

    def replace(self, wi: int) -> None:
        """Kill worker `wi` and start a new one in its place."""
        self.kill(self.workers[wi].actor)
        self.workers[wi] = self.spawn(1)[0]
        self.restarts += 1

    def kill(self, actor: Any) -> None:
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # already dead
            pass

    def get(self, refs: list, timeout: float, what: str) -> list:
        """`ray.get` of the workers' answers `refs`; a timeout is an error that says the
        workers did not `what` in time, and what they asked of the cluster."""
        try:
            return self._ray.get(refs, timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise RuntimeError(
                f"the Ray pool's workers did not {what} within {timeout:.0f} s "
                f"({self.num_workers} workers asked for {self.num_cpus:g} CPU each; "
                f"the cluster has {self._ray.cluster_resources().get('CPU', 0):g})"
            ) from None

    # ---------------------------------------------------------------- diagnostics

    def on_one_node(self) -> bool:
        """Whether every worker runs on the driver's node."""
        here = self._ray.get_runtime_context().get_node_id()
        nodes = self.get([w.actor.node.remote() for w in self.workers], STARTUP_SECONDS, "answer")
        return all(node == here for node in nodes)

    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return self.get([w.actor.pid.remote() for w in self.workers], STARTUP_SECONDS, "answer")

    def memory(self) -> list[dict[str, float]]:
        """Current and peak resident memory of each worker, in MB."""
        return self.get([w.actor.memory.remote() for w in self.workers], STARTUP_SECONDS, "answer")

    def close(self) -> None:
        """Kill every worker and let go of the noise table."""
        for w in self.workers:
            self.kill(w.actor)
        self.workers = []
        self.noise_ref = None
