"""The rollout core every evaluator runs: a batch of episodes, one row each.

Requests are expanded into rows (one per episode); every row acts with its own weights.

- A family with a row kernel (`row_kernel()`, `envs.kernel`) runs each row to its end in
  turn inside one compiled loop, the policy's forward included (`_kernel_rows`): a row's
  weights then stay in the CPU's nearest cache for its whole episode, and no Python runs
  per step. The family brings only its compiled `reset` and `step`; this loop names none.
- Any other family steps gymnasium envs in `ENV_SLOTS` slots: when a slot's episode ends,
  the next row starts in it at once, so the batched forward stays full until the last
  episodes. Envs come from and go back to an `EnvCache` where the family renews them.

Both give the same numbers for the same episodes (tests/test_evaluation.py). Rows never
interact, so a request's result is the same whatever else shares its batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from gymnasium.wrappers import OrderEnforcing, TimeLimit

from envs import EnvCache, EnvFamily, EnvParams
from envs.kernel import KERNEL_DATA, RESET_SIGNATURE, STEP_SIGNATURE, RowKernel, readonly
from poet.errors import WaveInterrupted
from poet.evaluation.noise import NoiseTable
from poet.evaluation.protocol import EvalError, EvalRequest, EvalResult, Perturbation, PolicyRef
from poet.policies import BatchedPolicy, PolicySpec, forward_row, pack_order
from poet.seeding import episode_seeds

WeightsLookup = Callable[[PolicyRef], np.ndarray]
StopCheck = Callable[[], bool] | None
# slot-loop steps between two looks at a stop request (a look costs well under a microsecond)
STOP_POLL_STEPS = 64
# gymnasium envs stepped together: enough to make the batched forward cheap per row, few enough
# that each env's physics state stays in the CPU caches between its steps (of 1, 4 and 8 at a
# time, 4 ran plain code fastest: benchmarks/eval_pool.py --raw-widths)
ENV_SLOTS = 4
# wrappers that gym.make adds which only count steps or check call order (see direct_step)
_COUNTING_WRAPPERS = (TimeLimit, OrderEnforcing)


def _all_finite(reward_sum: float, obs: np.ndarray) -> bool:
    """Whether a step's rewards (given as their sum) and observations are all finite, in one look
    per step: the sums are finite exactly when every value is (short of an overflow, which only
    sends the caller down its careful path). np.add.reduce: the .sum() method's wrappers cost as
    much as the sum here."""
    return math.isfinite(reward_sum + np.add.reduce(obs, None))


def _finite_rows(rew: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """Per row, whether its reward and whole observation are finite (the careful path)."""
    return np.isfinite(rew) & np.all(np.isfinite(obs), axis=1)


def row_kernel_of(family: EnvFamily, spec: PolicySpec) -> RowKernel | None:
    """The family's row kernel where its episodes run in the compiled loop (a box-action
    policy); None: they run as gymnasium envs in ENV_SLOTS slots."""
    make = getattr(family, "row_kernel", None)
    if make is None or spec.action_kind != "box":
        return None
    kernel = make()
    if (kernel.obs_dim, kernel.act_dim) != (spec.obs_dim, spec.act_dim):
        raise ValueError(
            f"family {family.name!r}: its row kernel has {kernel.obs_dim} observations and {kernel.act_dim} "
            f"actions, its envs {spec.obs_dim} and {spec.act_dim}"
        )
    return kernel


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
    policy: BatchedPolicy


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
        policy = BatchedPolicy(spec, weights[used], index.astype(np.int64), perturbations)
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


_NO_NOISE = np.zeros(0, dtype=np.float32)


def row_perturbations(policy: BatchedPolicy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What `_kernel_rows` reads to perturb each row's weights as it starts the row: (noise,
    offsets, scales, packed order); no perturbation anywhere: offsets all -1."""
    if policy.perturbations is None:
        rows = policy.index.size
        return _NO_NOISE, np.full(rows, -1, dtype=np.int64), np.zeros(rows, dtype=np.float32), pack_order(policy.spec)
    return (*policy.perturbations, pack_order(policy.spec))


# step caps summed over the rows of one compiled call of `_kernel_rows`, between two looks at a
# stop request: a call then lasts a few tens of milliseconds at most, and a chunk of an ES wave
# (rows of a few hundred steps) goes in one or two calls, each of which pays for converting its
# arguments
KERNEL_STEPS_PER_CALL = 65536


def _step_kernel(kernel: RowKernel, batch: Rows, should_stop: StopCheck) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row of a batch to its end through the family's row kernel, the rows of up to
    KERNEL_STEPS_PER_CALL step caps per compiled call: (returns, lengths, bad)."""
    n = batch.caps.size
    out = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)  # returns, lengths, bad
    data = kernel.batch_data(batch.params, batch.seeds)
    functions = kernel.reset, kernel.step, data, kernel.obs_dim, kernel.state_size
    policy = batch.policy
    rows = *policy.packed, policy.index, *row_perturbations(policy), batch.caps
    ends = np.cumsum(batch.caps) // KERNEL_STEPS_PER_CALL  # rows of one call share a value
    stop = 0
    while stop < n:
        first, stop = stop, int(np.searchsorted(ends, ends[stop], side="right"))
        if should_stop is not None and first and should_stop():
            raise WaveInterrupted("stop requested during a batch of rollouts")
        _kernel_rows(*functions, *rows, first, stop, *out)
    return out


_f32, _i64 = numba.types.float32, numba.types.int64
# One signature for every family (their functions are values of fixed types), so the loop is
# compiled once and then loaded from numba's cache, whatever family runs it. The cached loop
# holds its own compiled copy of the policy forward (`forward_row` and `poet.dense`), which
# numba does not see change; `envs.compiled_cache` does.
_KERNEL_ROWS = numba.types.void(
    numba.types.FunctionType(RESET_SIGNATURE),
    numba.types.FunctionType(STEP_SIGNATURE),
    KERNEL_DATA,
    _i64,  # obs_dim
    _i64,  # state_size
    readonly(_f32, 2),  # weights
    readonly(_i64),  # layer sizes
    _i64,  # activation
    readonly(_f32),  # action low
    readonly(_f32),  # action span
    readonly(_i64),  # index
    readonly(_f32),  # noise
    readonly(_i64),  # offsets
    readonly(_f32),  # scales
    readonly(_i64),  # packed order
    readonly(_i64),  # caps
    _i64,  # first
    _i64,  # stop
    numba.types.float64[::1],  # returns
    _i64[::1],  # lengths
    numba.types.boolean[::1],  # bad
)


@numba.njit(_KERNEL_ROWS, cache=True, error_model="numpy")
def _kernel_rows(
    reset: Callable,
    step: Callable,
    data: tuple,
    obs_dim: int,
    state_size: int,
    weights: np.ndarray,
    sizes: np.ndarray,
    activation: int,
    low: np.ndarray,
    span: np.ndarray,
    index: np.ndarray,
    noise: np.ndarray,
    offsets: np.ndarray,
    scales: np.ndarray,
    order: np.ndarray,
    caps: np.ndarray,
    first: int,
    stop: int,
    returns: np.ndarray,
    lengths: np.ndarray,
    bad: np.ndarray,
) -> None:
    """Rows first..stop-1 of a batch, each run to its end: an ES row's weights are perturbed as
    the row starts (`perturb`'s float32 formula on the packed layout, into one scratch row, so
    no perturbed copy per row is ever stored), then per step the row's forward (`forward_row`),
    the family's `step` and the tally. A row ends when `step` says so, at its step cap, or at
    a non-finite reward or observation (then it is `bad` and that step's reward is not added)."""
    obs = np.empty(obs_dim, dtype=np.float32)
    width = sizes.max()
    h, acc = np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32)
    action, state = np.empty(sizes[-1], dtype=np.float32), np.empty(state_size)
    perturbed = np.empty(weights.shape[1], dtype=np.float32)
    for r in range(first, stop):
        w = weights[index[r]]
        if offsets[r] >= 0:
            start, scale = offsets[r], scales[r]
            for j in range(perturbed.size):
                perturbed[j] = w[j] + scale * noise[start + order[j]]
            w = perturbed
        reset(data, r, state, obs)
        while True:
            h[:obs_dim] = obs
            forward_row(w, sizes, activation, True, low, span, h, acc, action)
            reward, ended = step(data, r, action, state, obs)
            finite = np.isfinite(reward)
            for k in range(obs_dim):
                finite = finite and np.isfinite(obs[k])
            if finite:
                returns[r] += reward
            else:
                bad[r] = True
            lengths[r] += 1
            if ended or lengths[r] >= caps[r] or not finite:
                break


def direct_step(env: Any) -> tuple[Callable[[Any], tuple], int | None]:
    """The env's `step` past the gymnasium wrappers that only count and check, and the time
    limit they enforce (None: none).

    `gym.make` puts `TimeLimit` and `OrderEnforcing` around most envs; each costs a Python
    call per step and does nothing a slot loop needs. The slot loop resets through them
    (which is all OrderEnforcing checks) and ends an episode at the time limit itself, so
    stepping past them changes no result. Any other wrapper stops the unwrapping there.
    """
    limit, layer = None, env
    while type(layer) in _COUNTING_WRAPPERS:
        if type(layer) is TimeLimit:
            limit = int(layer._max_episode_steps) if limit is None else min(limit, int(layer._max_episode_steps))
        layer = layer.env
    return layer.step, limit


class _Slots:
    """The live episodes of `step_slots`, one per slot, as per-slot lists in slot order: each
    slot's env, the env's step function, its row, return so far, last reward, steps so far and
    the steps it may take; `obs` holds their observations. The per-step work is plain Python
    on these lists (a numpy call on a handful of values costs more than the arithmetic)."""

    def __init__(self, family: EnvFamily, batch: Rows, env_cache: EnvCache | None):
        self.params, self.seeds, self.caps_arr = batch.params, batch.seeds, batch.caps
        self.env_cache = env_cache
        self.take = family.make_env if env_cache is None else env_cache.take
        self.envs: list[Any] = []
        self.steps: list[Callable[[Any], tuple]] = []
        self.rows: list[int] = []
        self.rets: list[float] = []
        self.rews: list[float] = []
        self.lens: list[int] = []
        self.caps: list[int] = []
        self.lists = (self.envs, self.steps, self.rows, self.rets, self.rews, self.lens, self.caps)
        self.obs = np.zeros((min(ENV_SLOTS, len(self.params)), batch.policy.spec.obs_dim), dtype=np.float32)
        self.flat_obs = True  # observations come as (obs_dim,) vectors: stored as they are, no reshaping
        self.next_row = 0

    def start(self, k: int) -> None:
        """Row `next_row` into slot k (k == len(envs): a new slot)."""
        row, self.next_row = self.next_row, self.next_row + 1
        env = self.take(self.params[row])
        step, limit = direct_step(env)
        cap = int(self.caps_arr[row]) if limit is None else min(int(self.caps_arr[row]), limit)
        if k == len(self.envs):
            for values in self.lists:
                values.append(None)
        self.envs[k], self.steps[k], self.rows[k] = env, step, row
        self.rets[k], self.rews[k], self.lens[k], self.caps[k] = 0.0, 0.0, 0, cap
        first = env.reset(seed=int(self.seeds[row]))[0]
        self.flat_obs = self.flat_obs and np.ndim(first) == 1
        self.obs[k] = np.asarray(first, dtype=np.float32).ravel()

    def finish(self, k: int, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Slot k's episode is over: its outcome into the row's entries, its env back to the cache."""
        row = self.rows[k]
        returns[row], lengths[row] = self.rets[k], self.lens[k]
        env, self.envs[k] = self.envs[k], None
        if self.env_cache is None:
            env.close()
        else:
            self.env_cache.give_back(self.params[row], env)

    def step(self, actions: np.ndarray) -> list[int]:
        """Every slot one step with its action; returns the slots whose episode ended."""
        obs, rews, rets, lens, caps, flat_obs = self.obs, self.rews, self.rets, self.lens, self.caps, self.flat_obs
        ended = []
        for k, step in enumerate(self.steps):
            o, r, term, trunc, _ = step(actions[k])
            obs[k] = o if flat_obs else np.asarray(o, dtype=np.float32).ravel()
            rews[k] = r = float(r)  # returns add in float64, as in the compiled row loop (r may be float32)
            rets[k] += r
            lens[k] += 1
            if term or trunc or lens[k] >= caps[k]:
                ended.append(k)
        return ended

    def drop_empty(self) -> None:
        """Forget the slots left empty (no row was left to start in them)."""
        keep = [k for k in range(len(self.envs)) if self.envs[k] is not None]
        if len(keep) < len(self.envs):
            for values in self.lists:
                values[:] = [values[k] for k in keep]
            self.obs = self.obs[keep]

    def close(self) -> None:
        """Close the envs in use (their state is unknown)."""
        for env in self.envs:
            if env is not None:
                env.close()


def step_slots(
    family: EnvFamily, batch: Rows, should_stop: StopCheck, env_cache: EnvCache | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows through ENV_SLOTS gymnasium envs, each slot starting the next row when its episode ends.

    An episode ends at termination, truncation, its step cap (or the env's time limit) or a
    non-finite value (the row is then `bad`), exactly as in the compiled row loop. Envs of
    finished episodes go back to `env_cache`; if anything raises, the envs in use are closed
    instead (their state is unknown). Numpy does the policy forward and one finiteness check
    of all observations per step. `env_cache` is anything with `take(params)` and
    `give_back(params, env)` (the renderer's records frames); None: `family.make_env`, closed
    after use.
    """
    policy = batch.policy
    policy.perturbed_rows()  # before the slots take over the policy's row index
    n = len(batch.params)
    returns, lengths, bad = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    slots, t = _Slots(family, batch, env_cache), 0
    try:
        while len(slots.envs) < slots.obs.shape[0]:
            slots.start(len(slots.envs))
        rows_index = policy.index  # each row's weights; the policy's index follows the slots' rows
        policy.index = rows_index[slots.rows]
        while slots.envs:
            t += 1
            if should_stop is not None and t % STOP_POLL_STEPS == 0 and should_stop():
                raise WaveInterrupted("stop requested during a batch of rollouts")
            ended = slots.step(policy.act(slots.obs))
            if not _all_finite(sum(slots.rews), slots.obs):  # rare: find the rows at fault
                for k in np.flatnonzero(~_finite_rows(np.array(slots.rews, dtype=np.float64), slots.obs)).tolist():
                    bad[slots.rows[k]] = True
                    if k not in ended:
                        ended.append(k)
                ended.sort()
            if ended:
                for k in ended:
                    slots.finish(k, returns, lengths)
                    if slots.next_row < n:
                        slots.start(k)
                slots.drop_empty()
                policy.index = rows_index[slots.rows]
        return returns, lengths, bad
    except BaseException:
        slots.close()
        raise


def _batches(rows: np.ndarray, batch_rows: int) -> list[tuple[int, int]]:
    """Requests first..stop-1 per batch, of at most `batch_rows` episodes (a request is never
    split); `rows[i]` is request i's episodes."""
    out, first, total = [], 0, 0
    for i, n in enumerate(rows.tolist()):
        if i > first and total + n > batch_rows:
            out.append((first, i))
            first, total = i, 0
        total += n
    if first < rows.size:
        out.append((first, int(rows.size)))
    return out


Packed = tuple[np.ndarray, np.ndarray, list[tuple[int, EvalError]]]


def run_table(
    family: EnvFamily,
    spec: PolicySpec,
    table: RequestTable,
    weights: np.ndarray,
    noise: NoiseTable | None,
    batch_rows: int = 4096,
    should_stop: StopCheck = None,
    env_cache: EnvCache | None = None,
    tally: RolloutTally | None = None,
) -> Packed:
    """Evaluate a table of requests whose policies' weights are the rows of `weights`:
    (returns, lengths) of every request's episodes, concatenated in request order, and
    [(request, error)]. A request whose env raises or gives non-finite values gets an
    error (NaN returns, zero lengths). `should_stop` is polled as the batches step: when it
    turns true, WaveInterrupted is raised. Gymnasium envs are taken from and given back to
    `env_cache` where the family renews them. `tally`, if given, is added what the batches
    simulated."""
    tally = RolloutTally() if tally is None else tally
    # outside any batch: a perturbation beyond the noise table is a caller bug, not an env failure
    check_perturbations(table.offset, spec.num_params, noise)
    rows = table.rows()
    reps = np.where(rows == 1, table.episodes, 1)  # a pinned course's one episode stands for all
    ends = np.cumsum(table.episodes)  # request i's episodes are entries starts[i]..ends[i]-1
    starts = ends - table.episodes
    total = int(ends[-1]) if ends.size else 0
    returns, lengths = np.full(total, np.nan), np.zeros(total, dtype=np.int64)
    errors: list[tuple[int, EvalError]] = []
    kernel = row_kernel_of(family, spec)
    batches = _batches(rows, batch_rows)
    while batches:
        first, stop = batches.pop(0)
        try:
            batch = table.batch(first, stop, rows, spec, weights, noise)
            if kernel is None:
                row_returns, row_lengths, bad = step_slots(family, batch, should_stop, env_cache)
            else:
                row_returns, row_lengths, bad = _step_kernel(kernel, batch, should_stop)
        except WaveInterrupted:
            raise
        except Exception as exc:  # an env raised: find the culprit by running the requests alone, next
            if stop - first == 1:
                errors.append((first, table.error(first, f"{type(exc).__name__}: {exc}")))
            else:
                batches[:0] = [(i, i + 1) for i in range(first, stop)]
            continue
        row_reps = np.repeat(reps[first:stop], rows[first:stop])
        returns[starts[first] : ends[stop - 1]] = np.repeat(row_returns, row_reps)
        lengths[starts[first] : ends[stop - 1]] = np.repeat(row_lengths, row_reps)
        if bad.any():  # almost never: one look for the whole batch
            row = 0
            for i in range(first, stop):
                end = row + int(rows[i])
                if bad[row:end].any():
                    errors.append((i, table.error(i, "the env returned a non-finite reward or observation")))
                    returns[starts[i] : ends[i]], lengths[starts[i] : ends[i]] = np.nan, 0
                    row_lengths[row:end] = 0  # an error reports no steps
                row = end
        if row_lengths.size:
            tally.steps += int(row_lengths.sum())
            tally.longest = max(tally.longest, int(row_lengths.max()))
    errors.sort(key=lambda e: e[0])
    return returns, lengths, errors


def results_of(packed: Packed, episodes: Sequence[int]) -> list[EvalResult]:
    """One result per request from `run_table`'s packed output (request i has `episodes[i]`
    entries). A result's arrays are read-only views of the packed arrays: no request's
    numbers can be changed through another's, and a wave of thousands of requests makes no
    copy per request."""
    returns, lengths, errors = packed
    returns.setflags(write=False)
    lengths.setflags(write=False)
    bounds = np.cumsum([0, *episodes]).tolist()
    out = [EvalResult(returns[a:b], lengths[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    for i, err in errors:
        out[i] = EvalResult(returns=out[i].returns, lengths=out[i].lengths, error=err)
    return out


def run_requests(
    family: EnvFamily,
    spec: PolicySpec,
    requests: Sequence[EvalRequest],
    lookup: WeightsLookup,
    noise: NoiseTable | None,
    batch_rows: int = 4096,
    should_stop: StopCheck = None,
    env_cache: EnvCache | None = None,
    tally: RolloutTally | None = None,
) -> list[EvalResult]:
    """`run_table` on `requests`, whose weights `lookup` gives: one result per request."""
    table = RequestTable.of(requests)
    # outside any batch: a missing policy is a caller bug, not an env failure
    weights = [lookup(PolicyRef(key)) for key in table.keys]
    stacked = np.stack(weights) if weights else np.zeros((0, spec.num_params), dtype=np.float32)
    packed = run_table(family, spec, table, stacked, noise, batch_rows, should_stop, env_cache, tally)
    return results_of(packed, table.episodes.tolist())
