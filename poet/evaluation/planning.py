"""How the pool cuts a wave into chunks, and how long each chunk or job may run.

The rule (`plan_wave`): a family with a row kernel, or a policy whose forward runs in torch,
gets one chunk per worker (`ray.chunks_per_worker` sets another number), each an equal
share of the wave's cost with the requests of a policy kept together; gymnasium envs
stepped a few at a time with the compiled forward get chunks that shrink as the wave goes,
requests dealt costliest first. A request costs its rows times the mean episode
length seen on its env (its step cap until one is seen). Results never
depend on any of this (a result is a function of its request only); only how busy the
workers stay does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from envs import EnvParams
from poet.evaluation.requests import RequestTable
from poet.evaluation.slots import ENV_SLOTS

# the fewest episodes in a chunk of gymnasium envs (stepped ENV_SLOTS at a time): smaller last
# chunks balance a wave's end better but each costs a round trip (on waves of 64 gymnasium walker
# episodes in benchmarks/eval_pool.py, 8 beat both smaller and larger minimums)
MIN_SLOT_CHUNK_ROWS = 2 * ENV_SLOTS


@dataclass
class EpisodeLengths:
    """Mean episode length per env seen in results (recent waves weigh more): what planning
    charges a request per row instead of its step cap.

    Episodes on the same env last alike from one wave to the next (an ES wave perturbs the
    same agents on the same envs), while they differ a lot between envs: a chunk of hard
    envs ends sooner than one of easy ones with the same step caps.
    """

    weight: float = 0.5  # of the newest wave's mean
    max_envs: int = 100_000  # the oldest are forgotten beyond this
    means: dict[EnvParams, float] = field(default_factory=dict)

    def lengths(self, table: RequestTable) -> np.ndarray:
        """How long each request's episodes are expected to last (never above its step cap),
        each env looked up once."""
        seen = np.array([self.means.get(env, np.inf) for env in table.envs], dtype=np.float64)
        return np.minimum(table.max_steps.astype(np.float64), seen[table.env]) if len(table) else np.zeros(0)

    def costs(self, table: RequestTable) -> np.ndarray:
        """Env steps each request is expected to take: its distinct episodes x `lengths`."""
        return table.rows() * self.lengths(table)

    def observe(
        self,
        table: RequestTable,
        lengths: np.ndarray,
        failed: Sequence[int] = (),
        answered: Sequence[int] | None = None,
    ) -> None:
        """Answers to requests `answered` of a table (all of them if None; a chunk's, in the
        pool): their episodes' `lengths` concatenated in that order, and `failed`, the positions
        in it of the requests that gave an error. One update per env, in the order of its first
        request, of the mean of its distinct episodes."""
        idx = np.arange(len(table)) if answered is None else np.asarray(answered, dtype=np.int64)
        if not idx.size:
            return
        episodes, rows, env = table.episodes[idx], table.rows()[idx], table.env[idx]
        ok = episodes > 0
        ok[list(failed)] = False
        if not ok.any():
            return
        # each request's first entry (a request without episodes points anywhere: it is not ok)
        starts = np.minimum(np.cumsum(episodes) - episodes, lengths.size - 1)
        totals = np.where(rows == 1, lengths[starts], np.add.reduceat(lengths, starts))  # pinned: one episode
        env, totals, rows = env[ok], totals[ok], rows[ok]
        steps = np.bincount(env, weights=totals, minlength=len(table.envs))
        counts = np.bincount(env, weights=rows, minlength=len(table.envs))
        order, first = np.unique(env, return_index=True)
        for e in order[np.argsort(first)].tolist():
            key = table.envs[e]
            old = self.means.pop(key, None)  # re-inserted last: dict order is the age
            mean = float(steps[e] / counts[e])
            self.means[key] = mean if old is None else (1 - self.weight) * old + self.weight * mean
        while len(self.means) > self.max_envs:
            del self.means[next(iter(self.means))]


def plan_chunks(
    policy: np.ndarray, rows: np.ndarray, cost: np.ndarray, n_chunks: int, max_rows: int
) -> list[list[int]]:
    """Request indices cut into `n_chunks` chunks of balanced cost (more where `max_rows`
    cuts), costliest chunk first; request i has policy number `policy[i]` (numbered in the
    order of first appearance), `rows[i]` distinct episodes and costs `cost[i]`.

    Requests are lined up by policy (each policy's requests in submission order), and the
    line is cut into consecutive chunks of about an equal share of the cost: a request goes to
    the chunk whose share holds the midpoint of its cost, or to a new chunk when its rows
    would take the current one past `max_rows` (a request is never split). So a chunk
    carries the weights of few policies: a wave's calls carry fewer bytes, and a worker
    runs each policy's episodes one after another.
    """
    if not len(policy):
        return []
    order = np.argsort(policy, kind="stable")
    cost = np.asarray(cost, dtype=np.float64)[order]
    rows = np.asarray(rows, dtype=np.int64)[order]
    share = cost.sum() / max(1, n_chunks)
    before = np.concatenate(([0.0], np.cumsum(cost)[:-1]))  # the cost lined up before each request
    band = np.minimum(n_chunks - 1, (before + cost / 2) // share) if share > 0 else np.zeros(cost.size)
    # a band is one chunk unless its rows pass max_rows: then it is cut where they would
    starts = [0, *(np.flatnonzero(np.diff(band)) + 1).tolist(), cost.size]
    chunks: list[np.ndarray] = []
    for a, b in zip(starts[:-1], starts[1:]):
        if rows[a:b].sum() <= max_rows:
            chunks.append(np.arange(a, b))
            continue
        first, total = a, 0
        for i in range(a, b):
            if i > first and total + rows[i] > max_rows:
                chunks.append(np.arange(first, i))
                first, total = i, 0
            total += int(rows[i])
        chunks.append(np.arange(first, b))
    loads = [cost[c].sum() for c in chunks]
    by_cost = sorted(range(len(chunks)), key=lambda c: -loads[c])
    return [order[chunks[c]].tolist() for c in by_cost]


def plan_guided(rows: np.ndarray, cost: np.ndarray, workers: int, min_rows: int, max_rows: int) -> list[list[int]]:
    """Request indices cut into chunks that shrink as the wave goes (guided self-scheduling);
    request i has `rows[i]` distinct episodes and costs `cost[i]`.

    Requests go costliest first (ties in submission order); each chunk takes
    requests until it holds 1/(2W) of the cost still unplanned and at least `min_rows` rows
    (or until `max_rows`). Early chunks are big, so workers step many episodes together; the
    last ones are small, so the wave ends with the workers finishing close together even
    though no one knows beforehand how long each episode runs.
    """
    cost, rows = np.asarray(cost, dtype=np.float64).tolist(), np.asarray(rows, dtype=np.int64).tolist()
    order = sorted(range(len(cost)), key=lambda i: -cost[i])
    remaining = sum(cost)
    chunks: list[list[int]] = []
    chunk: list[int] = []
    chunk_cost = chunk_rows = 0
    for i in order:
        if chunk and chunk_rows + rows[i] > max_rows:
            chunks.append(chunk)
            remaining -= chunk_cost
            chunk, chunk_cost, chunk_rows = [], 0, 0
        chunk.append(i)
        chunk_cost += cost[i]
        chunk_rows += rows[i]
        if chunk_rows >= min_rows and chunk_cost >= remaining / (2 * workers):
            chunks.append(chunk)
            remaining -= chunk_cost
            chunk, chunk_cost, chunk_rows = [], 0, 0
    if chunk:
        chunks.append(chunk)
    return chunks


def plan_wave(
    wave: RequestTable,
    rows: np.ndarray,
    cost: np.ndarray,
    workers: int,
    max_rows: int,
    shrinking: bool,
    chunks_per_worker: int | None = None,
) -> list[list[int]]:
    """The pool's chunks of a wave (the rule above) for `workers` workers: request i has
    `rows[i]` distinct episodes and costs `cost[i]`; `shrinking`: its episodes run as
    gymnasium envs in slots with the compiled forward (each step's cost is its live envs');
    `chunks_per_worker` (None: the rule's own number) sets how many chunks of balanced cost
    each worker gets."""
    if chunks_per_worker is not None:
        return plan_chunks(wave.policy, rows, cost, workers * chunks_per_worker, max_rows)
    if shrinking:
        # gymnasium envs stepped ENV_SLOTS at a time: chunks shrinking towards the end of
        # the wave, down to MIN_SLOT_CHUNK_ROWS episodes.
        return plan_guided(rows, cost, workers, MIN_SLOT_CHUNK_ROWS, max_rows)
    # a row kernel, or a torch kind's network call (one fixed-shape call per step for every
    # live row, however few): one chunk of balanced cost per worker. Rows are nearly free in
    # a batch, and each more chunk adds a round trip and, for a torch kind, a tail of steps
    # whose calls run mostly padding.
    return plan_chunks(wave.policy, rows, cost, workers, max_rows)


@dataclass
class Deadlines:
    """How long a chunk or job may run once its worker starts it.

    `seconds` fixes one deadline for everything. Unset, a unit gets `factor` times its work
    at the rate measured for its kind ("chunk" or "job": seconds per unit of work over the
    units of that kind finished so far, recent ones weighing more), never less than `floor`.
    A chunk's work is its env steps at its step caps (an upper bound: most episodes end
    sooner) plus its longest episode's steps; a job's, its cost in env steps. Before a unit
    of its kind is timed, PRIOR_STEP_SECONDS per unit of work stands in.
    """

    seconds: float | None = None
    floor: float = 60.0
    factor: float = 10.0
    decay: float = 0.9  # of the older units' weight, at each new one
    PRIOR_STEP_SECONDS = 2e-3  # slower than any family here; only until the first unit is timed
    _sums: dict[str, list[float]] = field(default_factory=dict, init=False)  # kind -> [seconds, work]

    def observe(self, kind: str, seconds: float, work: float) -> None:
        """A unit of `kind` did `work` in `seconds`."""
        if seconds > 0 and work > 0:
            old = self._sums.get(kind, [0.0, 0.0])
            self._sums[kind] = [self.decay * old[0] + seconds, self.decay * old[1] + work]

    def rate(self, kind: str) -> float:
        """Seconds per unit of work measured for `kind` (the prior until one is timed)."""
        sums = self._sums.get(kind)
        return sums[0] / sums[1] if sums else self.PRIOR_STEP_SECONDS

    def budget(self, kind: str, work: float) -> float:
        """The deadline of a unit of `kind` with `work` to do."""
        if self.seconds is not None:
            return float(self.seconds)
        return max(self.floor, self.factor * self.rate(kind) * work)
