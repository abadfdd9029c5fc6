"""A batch's requests as a table and its episodes as rows: what every evaluator runs.

Requests are expanded into rows (one per episode); every row acts with its own weights.
A wave is planned, a chunk travels and runs as a `RequestTable` (its requests as columns);
`RequestTable.batch` gives the `Rows` of some of its requests, which the row loops step
(`poet.evaluation.row_loop`, `poet.evaluation.lockstep`, `poet.evaluation.slots`). Also
here: each request's reset seeds, the error result of a request, the check of its ES
perturbations against the noise table, and the tally of what a run simulated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs import EnvParams
from poet.evaluation.noise import NoiseTable
from poet.evaluation.protocol import EvalError, EvalRequest, EvalResult, Perturbation, PolicyRef
from poet.policies import PolicySpec, batched_policy
from poet.seeding import episode_seeds

# what a batch's row loop polls for a stop request (None: no one asks)
StopCheck = Callable[[], bool] | None


def check_perturbations(offsets: np.ndarray, dim: int, noise: NoiseTable | None) -> None:
    """Raise unless every ES perturbation (offset >= 0; -1: none) lies in the noise table: a
    caller's bug, raised before any episode runs."""
    perturbed = offsets[offsets >= 0]
    if not perturbed.size:
        return
    if noise is None:
        raise ValueError("an ES perturbation was requested but this evaluator has no noise table")
    worst = int(perturbed.max())
    if worst + dim > noise.size:
        raise IndexError(f"noise offset {worst} + dim {dim} outside a table of {noise.size}")


def error_result(req: EvalRequest, message: str) -> EvalResult:
    """A result that carries an error with the request's identity."""
    err = EvalError(message=message, env_json=req.env.to_json(), tag=req.tag, seed=req.seed)
    return EvalResult(returns=np.full(req.episodes, np.nan), lengths=np.zeros(req.episodes, dtype=np.int64), error=err)


def row_seeds(req: EvalRequest) -> list[int]:
    """The reset seeds of the distinct episodes a request needs (`env_row_seeds`)."""
    return env_row_seeds(req.env, req.seed, req.episodes)


def env_row_seeds(env: EnvParams, seed: int, episodes: int) -> list[int]:
    """The reset seeds of the distinct episodes of `episodes` on `env` from a request's seed.

    An env pinned to one course (`course_seed`) gives the same episode every time, since
    policies and seeded envs are deterministic: it is run once and its outcome stands for
    all the episodes (the reference runs them all; the numbers are the same).
    """
    if env.course_seed is not None:
        return [env.course_seed]
    return episode_seeds(seed, episodes)


def simulated_steps(requests: Sequence[EvalRequest], results: Sequence[EvalResult]) -> int:
    """Env steps actually taken for `results` (a pinned course's episode counts once)."""
    return sum(int(np.sum(res.lengths[: req.rows])) for req, res in zip(requests, results))


@dataclass
class RolloutTally:
    """What `run_requests` simulated, counted from its batches as they end (the same numbers as
    `simulated_steps` and the longest result length, without a pass over every result)."""

    steps: int = 0  # env steps of the episodes that gave results (errors count none)
    longest: int = 0  # the longest of those episodes


@dataclass
class Rows:
    """A batch's episodes, one row each: its env, reset seed and step cap, and the policy that
    acts in it (row r with weights row `policy.index[r]`)."""

    params: list[EnvParams]
    seeds: list[int]
    caps: np.ndarray  # int64
    policy: Any  # `batched_policy`'s: the compiled BatchedPolicy or a torch kind's


@dataclass(eq=False)
class RequestTable(Sequence[EvalRequest]):
    """Requests as columns, one entry per request: the form in which a wave is planned, a chunk
    travels to a worker and runs there (a few arrays pickle and index faster than hundreds of
    small objects). The weights are rows of a separate array; `policy` gives each request's
    row, and `keys` the key of the policy in each row.

    A table is a sequence of `EvalRequest`s (built on demand), so a caller may hand one to any
    `Evaluator.evaluate`: a trainer that asks for thousands of requests at a time builds the
    table with a `RequestTableBuilder`, without an object per request, and an evaluator
    takes it as it is.
    """

    envs: list[EnvParams]  # the distinct envs
    env: np.ndarray  # int64: each request's env in `envs`
    policy: np.ndarray  # int64: each request's weights row
    episodes: np.ndarray  # int64
    seeds: list[int]  # Python ints: a request's seed need not fit 64 bits
    max_steps: np.ndarray  # int64
    offset: np.ndarray  # int64: an ES perturbation's noise offset, -1 for none
    scale: np.ndarray  # float64: its sign * sigma (0 for none)
    tags: list[str]
    keys: list[str]  # the policy key of each weights row

    @classmethod
    def of(cls, requests: Sequence[EvalRequest]) -> RequestTable:
        """The table of `requests` (a table is its own)."""
        if isinstance(requests, RequestTable):
            return requests
        envs: dict[EnvParams, int] = {}
        rows: dict[str, int] = {}
        env, policy, episodes, seeds, max_steps, offset, scale, tags = ([] for _ in range(8))
        for r in requests:
            p = r.perturbation
            env.append(envs.setdefault(r.env, len(envs)))
            policy.append(rows.setdefault(r.policy.key, len(rows)))
            episodes.append(r.episodes)
            seeds.append(r.seed)
            max_steps.append(r.max_steps)
            offset.append(-1 if p is None else p.offset)
            scale.append(0.0 if p is None else p.sign * p.sigma)
            tags.append(r.tag)
        return cls.of_lists(list(envs), list(rows), (env, policy, episodes, seeds, max_steps, offset, scale, tags))

    @classmethod
    def of_lists(cls, envs: list[EnvParams], keys: list[str], columns: Sequence[list[Any]]) -> RequestTable:
        """The table whose columns (env, policy, episodes, seeds, max_steps, offset, scale,
        tags) are given as lists, each entry a request's."""
        env, policy, episodes, seeds, max_steps, offset, scale, tags = columns
        ints = [np.asarray(c, dtype=np.int64) for c in (env, policy, episodes, max_steps, offset)]
        return cls(envs, *ints[:3], list(seeds), *ints[3:], np.asarray(scale, dtype=np.float64), list(tags), keys)

    def __getitem__(self, i: Any) -> Any:
        """Request i (a list of them for a slice)."""
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        offset, scale = int(self.offset[i]), float(self.scale[i])
        return EvalRequest(
            PolicyRef(self.keys[self.policy[i]]),
            self.envs[self.env[i]],
            int(self.episodes[i]),
            self.seeds[i],
            int(self.max_steps[i]),
            None if offset < 0 else Perturbation(offset, abs(scale), 1 if scale >= 0 else -1),
            self.tags[i],
        )

    def __len__(self) -> int:
        return len(self.seeds)

    def rows(self) -> np.ndarray:
        """Each request's distinct episodes: one on an env pinned to a course (all are equal)."""
        pinned = np.array([e.course_seed is not None for e in self.envs], dtype=bool)
        return np.where(pinned[self.env], 1, self.episodes) if len(self) else np.zeros(0, dtype=np.int64)

    def take(self, requests: Sequence[int]) -> RequestTable:
        """The table of some of the requests, in the order given, with only the envs and
        policies they use."""
        idx = np.asarray(requests, dtype=np.int64)
        envs, env = np.unique(self.env[idx], return_inverse=True)
        used, policy = np.unique(self.policy[idx], return_inverse=True)
        seeds, tags = self.seeds, self.tags
        return RequestTable(
            [self.envs[e] for e in envs.tolist()],
            env.astype(np.int64),
            policy.astype(np.int64),
            self.episodes[idx],
            [seeds[i] for i in idx.tolist()],
            self.max_steps[idx],
            self.offset[idx],
            self.scale[idx],
            [tags[i] for i in idx.tolist()],
            [self.keys[u] for u in used.tolist()],
        )

    def error(self, i: int, message: str) -> EvalError:
        """Request i's error, with its identity."""
        return EvalError(
            message=message, env_json=self.envs[self.env[i]].to_json(), tag=self.tags[i], seed=self.seeds[i]
        )

    def batch(
        self, first: int, stop: int, rows: np.ndarray, spec: PolicySpec, weights: np.ndarray, noise: NoiseTable | None
    ) -> Rows:
        """The rows of every distinct episode of requests first..stop-1 (`rows[i]` of request
        i: one on a pinned course); an ES request's rows carry its perturbation, applied where
        the row runs (`BatchedPolicy.perturbations`), not materialised here."""
        counts = rows[first:stop]
        params = [self.envs[e] for e in np.repeat(self.env[first:stop], counts).tolist()]
        seeds: list[int] = []
        for i in range(first, stop):
            seeds += env_row_seeds(self.envs[self.env[i]], self.seeds[i], int(self.episodes[i]))
        # only the weights this batch uses, each once: its rows then read a few policies' weights
        used, index = np.unique(np.repeat(self.policy[first:stop], counts), return_inverse=True)
        offsets = np.repeat(self.offset[first:stop], counts)
        perturbations = None
        if noise is not None and offsets.size and offsets.max() >= 0:
            perturbations = noise.noise, offsets, np.repeat(self.scale[first:stop], counts).astype(np.float32)
        policy = batched_policy(spec, weights[used], index.astype(np.int64), perturbations)
        return Rows(params, seeds, np.repeat(self.max_steps[first:stop], counts), policy)


class RequestTableBuilder:
    """Collects requests as columns, a group of one policy's requests at a time, and builds
    their `RequestTable`: what a trainer uses instead of one `EvalRequest` per request."""

    def __init__(self) -> None:
        self._envs: dict[EnvParams, int] = {}
        self._keys: dict[str, int] = {}
        self._columns: tuple[list[Any], ...] = tuple([] for _ in range(8))

    def __len__(self) -> int:
        return len(self._columns[0])

    def add(
        self,
        policy: PolicyRef,
        envs: Sequence[EnvParams],
        env: Sequence[int],
        seeds: Sequence[int],
        episodes: int,
        max_steps: int,
        offsets: Sequence[int] | None = None,
        scales: Sequence[float] | None = None,
        tag: str = "",
    ) -> None:
        """len(seeds) requests of `policy`: request i on `envs[env[i]]` for `episodes` episodes
        from `seeds[i]`, each at most `max_steps` steps, and, where `offsets` are given,
        perturbed by `scales[i]` (sign * sigma) times the noise at `offsets[i]`."""
        n = len(seeds)
        ids = [self._envs.setdefault(e, len(self._envs)) for e in envs]
        row = self._keys.setdefault(policy.key, len(self._keys))
        env_col, policy_col, episodes_col, seeds_col, steps_col, offset_col, scale_col, tags_col = self._columns
        env_col.extend(ids[i] for i in env)
        policy_col.extend([row] * n)
        episodes_col.extend([episodes] * n)
        seeds_col.extend(int(s) for s in seeds)
        steps_col.extend([max_steps] * n)
        offset_col.extend([-1] * n if offsets is None else offsets)
        scale_col.extend([0.0] * n if scales is None else scales)
        tags_col.extend([tag] * n)

    def build(self) -> RequestTable:
        """The table of every request added so far, in order."""
        return RequestTable.of_lists(list(self._envs), list(self._keys), self._columns)
