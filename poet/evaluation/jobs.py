"""Whole units of work on the evaluation pool: a trainer's training loop run as one job.

A `Job` names a function by `"package.module:function"` (importable on every worker) and
carries a picklable payload. The function is called as `fn(worker, payload)`, where
`worker` gives the pool's `family`, `spec` (PolicySpec) and `noise` (NoiseTable or None).
Like an evaluation request, a job's result must depend on its payload only: jobs run
with torch limited to one thread, so neither the machine nor the backend changes a float.
A job that steps envs reports how many under the key "env_steps_taken" of its (dict)
value, so the pool's throughput counts them (`job_steps`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from envs import EnvFamily
from poet.evaluation.noise import NoiseTable
from poet.plugins import import_named
from poet.policies import PolicySpec


class WorkerView(Protocol):
    """What a job function sees of the worker it runs on."""

    family: EnvFamily
    spec: PolicySpec
    noise: NoiseTable | None


@dataclass(frozen=True)
class Job:
    """Run `fn(worker, payload)` on the pool. `cost` orders dispatch (largest first); `tag` names it in errors."""

    fn: str
    payload: Any
    cost: float = 1.0
    tag: str = ""


@dataclass(frozen=True)
class JobResult:
    """A job's return value, or the error it raised (one line)."""

    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the job returned."""
        return self.error is None

    @classmethod
    def failed(cls, job: Job, message: str) -> JobResult:
        """The error result of `job`, its message prefixed with the job's tag."""
        return cls(error=f"{job.tag}: {message}" if job.tag else message)


def job_steps(results: list[JobResult]) -> int:
    """Env steps the jobs reported taking (their value's "env_steps_taken")."""
    return sum(int(r.value.get("env_steps_taken", 0)) for r in results if r.ok and isinstance(r.value, dict))


@functools.cache
def resolve_job_fn(path: str) -> Callable[[Any, Any], Any]:
    """The function named `package.module:function` (resolved once per process)."""
    fn = import_named(path, "job function", registered=False)
    if not callable(fn):
        raise ValueError(f"job function {path!r} is not callable")
    return fn


def run_job(worker: WorkerView, job: Job) -> JobResult:
    """Run one job here with torch on one thread; an exception becomes the result's error."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # same floats in a 1-thread Ray worker and in this process
    try:
        return JobResult(value=resolve_job_fn(job.fn)(worker, job.payload))
    except Exception as exc:  # noqa: BLE001 - reported to the caller with the job's tag
        return JobResult.failed(job, f"{type(exc).__name__}: {exc}")
    finally:
        torch.set_num_threads(threads)
