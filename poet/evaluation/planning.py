"""How the pool cuts a wave into chunks, and how long each chunk or job may run.

The rule: a family with a row kernel gets one chunk per worker (`ray.chunks_per_worker`
sets another number), each an equal share of the wave's cost with the requests of a policy
kept together; gymnasium envs stepped a few at a time get chunks that shrink as the wave
goes, requests dealt costliest first. A request costs its rows times the mean episode
length seen on its env (its step cap until one is seen). Results never
depend on any of this (a result is a function of its request only); only how busy the
workers stay does.
"""

from __future__ import annotations

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


def plan_chunks(
    requests: Sequence[EvalRequest], n_chunks: int, max_rows: int, cost: Sequence[float] | None = None
) -> list[list[int]]:
    """Request indices cut into `n_chunks` chunks of balanced cost (more where `max_rows`
    cuts), costliest chunk first.

    Requests are lined up by policy (policies in the order of their first request, each
    policy's requests in submission order), and the line is cut into consecutive chunks of
    about an equal share of the cost (`cost`, by default rows x step cap): a request goes to
    the chunk whose share holds the midpoint of its cost, or to a new chunk when its rows
    would take the current one past `max_rows` (a request is never split). So a chunk
    carries the weights of few policies: a wave's calls carry fewer bytes, and a worker
    runs each policy's episodes one after another.
    """
    cost = _costs(requests, cost)
    share = sum(cost) / max(1, n_chunks)
    first: dict = {}
    for r in requests:
        first.setdefault(r.policy, len(first))
    chunks: list[list[int]] = []
    loads: list[float] = []
    done = rows = band = 0
    for i in sorted(range(len(requests)), key=lambda i: first[requests[i].policy]):
        band_i = min(n_chunks - 1, int((done + cost[i] / 2) // share)) if share > 0 else 0
        if not chunks or band_i != band or rows + requests[i].rows > max_rows:
            chunks.append([])
            loads.append(0.0)
            band, rows = band_i, 0
        chunks[-1].append(i)
        loads[-1] += cost[i]
        rows += requests[i].rows
        done += cost[i]
    by_cost = sorted(range(len(chunks)), key=lambda c: -loads[c])
    return [chunks[c] for c in by_cost]


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
