"""How the pool cuts a wave into chunks: which requests go together, and how many chunks.

Results never depend on any of this (a result is a function of its request only); only
how busy the workers stay does.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from envs import EnvParams
from poet.evaluation.protocol import EvalRequest, EvalResult


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

    def length(self, req: EvalRequest) -> float:
        """How long the request's episodes are expected to last."""
        return min(float(req.max_steps), self.means.get(req.env, float(req.max_steps)))

    def cost(self, req: EvalRequest) -> float:
        """Env steps the request is expected to take."""
        return self.expected([req])[1][0]

    def expected(self, requests: Sequence[EvalRequest]) -> tuple[list[float], list[float]]:
        """Per request, its expected episode length (`length`) and env steps (rows x length),
        each length looked up once."""
        lengths = [self.length(r) for r in requests]
        return lengths, [r.rows * n for r, n in zip(requests, lengths)]

    def observe(self, requests: Sequence[EvalRequest], results: Sequence[EvalResult]) -> None:
        """Answered requests (a chunk's): one update per env of the mean of its episodes."""
        seen: dict[EnvParams, list[int]] = {}
        for req, res in zip(requests, results):
            if res.error is not None or res.lengths.size == 0:
                continue
            total = int(res.lengths[0]) if req.rows == 1 else int(res.lengths[: req.rows].sum())
            acc = seen.get(req.env)
            if acc is None:
                seen[req.env] = [total, req.rows]
            else:
                acc[0] += total
                acc[1] += req.rows
        for env, (total, rows) in seen.items():
            old = self.means.pop(env, None)  # re-inserted last: dict order is the age
            mean = total / rows
            self.means[env] = mean if old is None else (1 - self.weight) * old + self.weight * mean
        while len(self.means) > self.max_envs:
            del self.means[next(iter(self.means))]


def _costs(requests: Sequence[EvalRequest], cost: Sequence[float] | None) -> Sequence[float]:
    return [r.rows * r.max_steps for r in requests] if cost is None else cost


# how much costlier than request by request a plan that keeps each policy's requests
# together may make the costliest chunk, and still be preferred
POLICY_GROUPING_TOLERANCE = 0.01


def _lpt(
    units: list[list[int]], unit_cost: list[float], unit_rows: list[int], n_chunks: int, max_rows: int
) -> tuple[list[list[int]], float]:
    """Units (lists of request indices) packed by longest processing time first; returns the
    chunks, costliest first, and the cost of the costliest."""
    order = sorted(range(len(units)), key=lambda u: -unit_cost[u])  # stable: ties keep submission order
    chunks: list[list[int]] = []
    loads: list[tuple[float, int]] = []  # (cost, rows) per chunk
    heap: list[tuple[float, int]] = []  # (cost, chunk index): the cheapest chunk on top
    for u in order:
        rows = unit_rows[u]
        if len(chunks) < n_chunks:  # the costliest units seed the chunks
            target = None
        else:
            full = []
            while heap and loads[heap[0][1]][1] + rows > max_rows:
                full.append(heapq.heappop(heap))  # no room for this unit: look further
            target = heapq.heappop(heap)[1] if heap else None
            for item in full:
                heapq.heappush(heap, item)
        if target is None:
            chunks.append(list(units[u]))
            loads.append((unit_cost[u], rows))
            heapq.heappush(heap, (unit_cost[u], len(chunks) - 1))
        else:
            chunks[target].extend(units[u])
            loads[target] = (loads[target][0] + unit_cost[u], loads[target][1] + rows)
            heapq.heappush(heap, (loads[target][0], target))
    by_cost = sorted(range(len(chunks)), key=lambda c: -loads[c][0])
    return [chunks[c] for c in by_cost], (loads[by_cost[0]][0] if chunks else 0.0)


def plan_chunks(
    requests: Sequence[EvalRequest], n_chunks: int, max_rows: int, cost: Sequence[float] | None = None
) -> list[list[int]]:
    """Request indices packed into at most `n_chunks` chunks of balanced cost, costliest chunk first.

    Longest processing time first: requests by cost (`cost`, by default rows x step cap), each into the chunk
    with the least cost so far that has room for its rows (`max_rows`; a request is never
    split, and one bigger than `max_rows` gets a chunk of its own). Within a chunk the
    requests keep that order.

    The requests of one policy are first packed as one unit, and that plan is taken when
    its costliest chunk is within POLICY_GROUPING_TOLERANCE of the request-by-request
    plan's: each chunk then carries fewer policies' weights (a wave of P policies on E envs
    sends each worker P / W weight sets instead of all P).
    """
    if not requests:
        return []
    cost = _costs(requests, cost)
    rows = [r.rows for r in requests]
    grouped = None
    groups: dict[object, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(r.policy.key if r.policy is not None else ("request", i), []).append(i)
    units = list(groups.values())
    unit_rows = [sum(rows[i] for i in u) for u in units]
    if len(units) < len(requests) and max(unit_rows) <= max_rows:
        grouped, grouped_worst = _lpt(units, [sum(cost[i] for i in u) for u in units], unit_rows, n_chunks, max_rows)
        # no plan's costliest chunk is below this: as good as request by request, without running it
        floor = max(sum(cost) / n_chunks, max(cost))
        if grouped_worst <= floor * (1 + POLICY_GROUPING_TOLERANCE):
            return grouped
    singles, worst = _lpt([[i] for i in range(len(requests))], list(cost), rows, n_chunks, max_rows)
    if grouped is not None and grouped_worst <= worst * (1 + POLICY_GROUPING_TOLERANCE):
        return grouped
    return singles


def plan_guided(
    requests: Sequence[EvalRequest], workers: int, min_rows: int, max_rows: int, cost: Sequence[float] | None = None
) -> list[list[int]]:
    """Request indices cut into chunks that shrink as the wave goes (guided self-scheduling).

    Requests go costliest first (`cost`, by default rows x step cap; ties in submission order); each chunk takes
    requests until it holds 1/(2W) of the cost still unplanned and at least `min_rows` rows
    (or until `max_rows`). Early chunks are big, so workers step many episodes together; the
    last ones are small, so the wave ends with the workers finishing close together even
    though no one knows beforehand how long each episode runs.
    """
    cost = _costs(requests, cost)
    order = sorted(range(len(requests)), key=lambda i: -cost[i])
    remaining = sum(cost)
    chunks: list[list[int]] = []
    chunk: list[int] = []
    chunk_cost = chunk_rows = 0
    for i in order:
        if chunk and chunk_rows + requests[i].rows > max_rows:
            chunks.append(chunk)
            remaining -= chunk_cost
            chunk, chunk_cost, chunk_rows = [], 0, 0
        chunk.append(i)
        chunk_cost += cost[i]
        chunk_rows += requests[i].rows
        if chunk_rows >= min_rows and chunk_cost >= remaining / (2 * workers):
            chunks.append(chunk)
            remaining -= chunk_cost
            chunk, chunk_cost, chunk_rows = [], 0, 0
    if chunk:
        chunks.append(chunk)
    return chunks


@dataclass
class StepCostModel:
    """Seconds a chunk takes: a per lock-step iteration (policy forward, bookkeeping) plus
    b per row-step (each episode's env step), fitted by least squares over finished chunks
    (recent ones weigh more). The pool's deadlines start from its predictions.
    """

    decay: float = 0.9
    sums: list[float] = None  # type: ignore[assignment]  # [LL, LT, TT, Ls, Ts]

    def __post_init__(self) -> None:
        if self.sums is None:
            self.sums = [0.0] * 5

    def observe(self, iterations: float, row_steps: float, seconds: float) -> None:
        """One finished chunk: its lock-step iterations, env steps and seconds."""
        if iterations <= 0 or seconds <= 0:
            return
        new = [
            iterations * iterations,
            iterations * row_steps,
            row_steps * row_steps,
            iterations * seconds,
            row_steps * seconds,
        ]
        self.sums = [self.decay * old + x for old, x in zip(self.sums, new)]

    def spread(self) -> float:
        """1 - r^2 of the chunks' (iterations, env steps) seen, recent ones weighing more: 0 when
        all chunks had one shape (env steps per iteration), which leaves a and b apart unknown."""
        ll, lt, tt = self.sums[:3]
        return (ll * tt - lt * lt) / max(ll * tt, 1e-300)

    def coefficients(self) -> tuple[float, float] | None:
        """(a, b), or None until the chunks seen pin both down."""
        ll, lt, tt, ls, ts = self.sums
        det = ll * tt - lt * lt
        if self.spread() <= 1e-9:
            return None
        a = (ls * tt - ts * lt) / det
        b = (ts * ll - ls * lt) / det
        if a <= 0 or b <= 0:
            return None  # the chunks seen so far do not tell the two costs apart
        return a, b

    def predict(self, iterations: float, row_steps: float) -> float | None:
        """Seconds a chunk of that many lock-step iterations and env steps should take (None until measured)."""
        ab = self.coefficients()
        return None if ab is None else ab[0] * iterations + ab[1] * row_steps
