"""The rollout core every evaluator runs: many episodes stepped together.

Requests are expanded into rows (one per episode), and one batched policy forward per
step gives every row its action from its own weights.

- A family with a batched path (`make_batch`) steps all rows of a batch in lock-step.
  The terrain family's batch instead runs each row to its end in turn inside one compiled
  loop, policy included (`_terrain_rows`): a row's weights then stay in the CPU's nearest
  cache for its whole episode, where a lock-step streams every row's weights once per step.
  Both give the same numbers (tests/test_evaluation.py).
- Any other family steps gymnasium envs in `ENV_SLOTS` slots: when a slot's episode ends,
  the next row starts in it at once, so the forward stays full until the last episodes
  (a lock-step batch would run its last, longest episodes with one live row). Envs come
  from and go back to an `EnvCache` where the family renews them.

Rows never interact, so a request's result is the same whatever else shares its batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from gymnasium.wrappers import OrderEnforcing, TimeLimit

from envs import EnvCache, EnvFamily, EnvParams, terrain_core
from envs.terrain import TerrainBatch
from poet.errors import WaveInterrupted
from poet.evaluation.noise import NoiseTable
from poet.evaluation.protocol import EvalError, EvalRequest, EvalResult, PolicyRef
from poet.policies import BatchedPolicy, PolicySpec, forward_row, pack_order
from poet.seeding import episode_seeds

WeightsLookup = Callable[[PolicyRef], np.ndarray]
StopCheck = Callable[[], bool] | None
# lock-step iterations between two looks at a stop request (a look costs well under a microsecond)
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


def steps_in_slots(family: EnvFamily) -> bool:
    """Whether the family's episodes run as gymnasium envs in ENV_SLOTS slots (no batched path)."""
    return not hasattr(family, "make_batch")


def request_theta(req: EvalRequest, lookup: WeightsLookup, noise: NoiseTable | None) -> np.ndarray:
    """The flat weights a request's policy holds, after checking that its ES perturbation (if
    any) lies in the noise table; the rows apply it (`Rows.of`)."""
    theta = lookup(req.policy)
    p = req.perturbation
    if p is not None:
        if noise is None:
            raise ValueError("an ES perturbation was requested but this evaluator has no noise table")
        noise.get(int(p.offset), theta.size)  # raises IndexError outside the table
    return theta


def error_result(req: EvalRequest, message: str) -> EvalResult:
    """A result that carries an error with the request's identity."""
    err = EvalError(message=message, env_json=req.env.to_json(), tag=req.tag, seed=req.seed)
    return EvalResult(returns=np.full(req.episodes, np.nan), lengths=np.zeros(req.episodes, dtype=np.int64), error=err)


def row_seeds(req: EvalRequest) -> list[int]:
    """The reset seeds of the distinct episodes a request needs.

    An env pinned to one course (`course_seed`) gives the same episode every time, since
    policies and seeded envs are deterministic: it is run once and its outcome stands for
    all `req.episodes` (the reference runs them all; the numbers are the same).
    """
    if req.env.course_seed is not None:
        return [req.env.course_seed]
    return episode_seeds(req.seed, req.episodes)


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

    @classmethod
    def of(
        cls, spec: PolicySpec, reqs: Sequence[EvalRequest], thetas: Sequence[np.ndarray], noise: NoiseTable | None
    ) -> Rows:
        """The rows of every distinct episode of `reqs`, whose policies' weights are `thetas`
        (one per request); an ES request's row carries its perturbation, applied where the row
        runs (`BatchedPolicy.perturbations`), not materialised here."""
        params, seeds, caps, index, offsets, scales = [], [], [], [], [], []
        # one copy of each distinct weights vector (requests of one policy share its array): a
        # chunk's rows then read a few policies' weights instead of a copy per row
        distinct: dict[int, int] = {}
        for req, theta in zip(reqs, thetas):
            rs = row_seeds(req)
            k = len(rs)
            params += [req.env] * k
            seeds += rs
            caps += [req.max_steps] * k
            index += [distinct.setdefault(id(theta), len(distinct))] * k
            p = req.perturbation
            offsets += [-1 if p is None else p.offset] * k
            scales += [0.0 if p is None else p.sign * p.sigma] * k
        unique = list({id(t): t for t in thetas}.values())  # in order of first use, as `distinct`
        offset_arr = np.asarray(offsets, dtype=np.int64)
        perturbations = None
        if noise is not None and offset_arr.size and offset_arr.max() >= 0:
            perturbations = noise.noise, offset_arr, np.asarray(scales, dtype=np.float64).astype(np.float32)
        policy = BatchedPolicy(spec, np.stack(unique), np.asarray(index, dtype=np.int64), perturbations)
        return cls(params, seeds, np.asarray(caps, dtype=np.int64), policy)


@numba.njit(cache=True)
def _tally(
    rewards: np.ndarray,
    obs: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    caps: np.ndarray,
    returns: np.ndarray,
    lengths: np.ndarray,
    done: np.ndarray,
    bad: np.ndarray,
) -> bool:
    """Add one lock-step to every row not yet done; returns whether all rows are done.

    A row ends at termination, truncation, its step cap or a non-finite reward or observation
    (then it is `bad` and that step's reward is not added)."""
    all_done = True
    for r in range(returns.size):
        if done[r]:
            continue
        finite = np.isfinite(rewards[r])
        for k in range(obs.shape[1]):
            finite = finite and np.isfinite(obs[r, k])
        if finite:
            returns[r] += rewards[r]
        else:
            bad[r] = True
        lengths[r] += 1
        done[r] = terminated[r] or truncated[r] or lengths[r] >= caps[r] or not finite
        all_done = all_done and done[r]
    return all_done


def _step_batch(family: EnvFamily, batch: Rows, should_stop: StopCheck) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All rows in lock-step through the family's batched path: three compiled calls per step
    (the policy's forward, the family's step when it is compiled, the tally)."""
    n = len(batch.params)
    env = family.make_batch(batch.params, batch.seeds, int(batch.caps.max()))
    try:
        if _runs_terrain_core(env) and batch.policy.spec.action_kind == "box":
            return _step_terrain_rows(env, batch, should_stop)
        batch.policy.perturbed_rows()
        obs = env.reset()
        state = batch.caps, np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        _, returns, lengths, done, bad = state
        t, all_done = 0, False
        while not all_done:
            t += 1
            if should_stop is not None and t % STOP_POLL_STEPS == 0 and should_stop():
                raise WaveInterrupted("stop requested during a batch of rollouts")
            obs, rew, term, trunc = env.step(batch.policy.act(obs, done))
            all_done = _tally(
                np.asarray(rew, dtype=np.float64), obs.reshape(n, -1), np.asarray(term), np.asarray(trunc), *state
            )
        return returns, lengths, bad
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def _runs_terrain_core(env: Any) -> bool:
    """Whether `env` is a terrain batch that steps with the compiled core: not a subclass, and
    not one whose `step` was replaced (a wrapper's step must run as it is)."""
    return type(env) is TerrainBatch and "step" not in vars(env)


_NO_NOISE = np.zeros(0, dtype=np.float32)


def row_perturbations(policy: BatchedPolicy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What `_terrain_rows` reads to perturb each row's weights as it starts the row: (noise,
    offsets, scales, packed order); no perturbation anywhere: offsets all -1."""
    if policy.perturbations is None:
        rows = policy.index.size
        return _NO_NOISE, np.full(rows, -1, dtype=np.int64), np.zeros(rows, dtype=np.float32), pack_order(policy.spec)
    return (*policy.perturbations, pack_order(policy.spec))


# step caps summed over the rows of one compiled call of `_terrain_rows`, between two looks at a
# stop request: a call then lasts a few tens of milliseconds at most, and a chunk of an ES wave
# (rows of a few hundred steps) goes in one or two calls, each of which pays for converting its
# arguments
TERRAIN_STEPS_PER_CALL = 65536


def _step_terrain_rows(
    env: TerrainBatch, batch: Rows, should_stop: StopCheck
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_step_batch` for a terrain batch: each row to its end in turn, the rows of up to
    TERRAIN_STEPS_PER_CALL step caps per compiled call."""
    n = batch.caps.size
    out = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)  # returns, lengths, bad
    course = env.table, env.bases, env.max_cell, env.course_length, env.progress_scale
    perturbations = row_perturbations(batch.policy)
    ends = np.cumsum(batch.caps) // TERRAIN_STEPS_PER_CALL  # rows of one call share a value
    stop = 0
    while stop < n:
        first, stop = stop, int(np.searchsorted(ends, ends[stop], side="right"))
        if should_stop is not None and first and should_stop():
            raise WaveInterrupted("stop requested during a batch of rollouts")
        policy = batch.policy
        _terrain_rows(*course, *policy.packed, policy.index, *perturbations, batch.caps, first, stop, *out)
    return out


@numba.njit(cache=True, error_model="numpy")
def _terrain_rows(
    table: np.ndarray,
    bases: np.ndarray,
    max_cell: int,
    course_length: float,
    progress_scale: float,
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
    """Rows first..stop-1 of a terrain batch, each run to its end: an ES row's weights are
    perturbed as the row starts (`perturb`'s float32 formula on the packed layout, into one
    scratch row, so no perturbed copy per row is ever stored), then per step the row's forward
    (`forward_row`), the physics (`terrain_core.step_row`, then `observe_row`) and the tally,
    each as its lock-step counterpart does it (`_forward`, `terrain_core.step_rows`, `_tally`).
    Arrays come one per argument: taken from tuples inside the kernel, they ran the loop 3-4%
    slower."""
    obs = np.empty(terrain_core.OBS_DIM, dtype=np.float32)
    width = sizes.max()
    h, acc = np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32)
    action, state = np.empty(sizes[-1], dtype=np.float32), np.empty(4)
    perturbed = np.empty(weights.shape[1], dtype=np.float32)
    for r in range(first, stop):
        w = weights[index[r]]
        if offsets[r] >= 0:
            start, scale = offsets[r], scales[r]
            for j in range(perturbed.size):
                perturbed[j] = w[j] + scale * noise[start + order[j]]
            w = perturbed
        base = bases[r]
        state[:] = 0.0
        grounded, cell = True, 0
        terrain_core.observe_row(table, base, state, grounded, cell, obs)
        while True:
            h[: obs.size] = obs
            forward_row(w, sizes, activation, True, low, span, h, acc, action)
            reward, fell, finished, cell, grounded = terrain_core.step_row(
                table,
                base,
                max_cell,
                course_length,
                progress_scale,
                np.float64(action[0]),
                np.float64(action[1]),
                state,
                grounded,
                cell,
            )
            terrain_core.observe_row(table, base, state, grounded, cell, obs)
            finite = np.isfinite(reward)
            for k in range(obs.size):
                finite = finite and np.isfinite(obs[k])
            if finite:
                returns[r] += reward
            else:
                bad[r] = True
            lengths[r] += 1
            if fell or finished or lengths[r] >= caps[r] or not finite:
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


def _step_slots(
    family: EnvFamily, batch: Rows, should_stop: StopCheck, env_cache: EnvCache | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows through ENV_SLOTS gymnasium envs, each slot starting the next row when its episode ends.

    An episode ends at termination, truncation, its step cap (or the env's time limit) or a
    non-finite value (the row is then `bad`), exactly as in a lock-step batch. Envs of
    finished episodes go back to `env_cache`; if anything raises, the envs in use are closed
    instead (their state is unknown).

    The per-step work is plain Python on per-slot lists (a numpy call on a handful of values
    costs more than the arithmetic); numpy does the policy forward and one finiteness check
    of all observations per step.
    """
    params, seeds, caps_arr, policy = batch.params, batch.seeds, batch.caps, batch.policy
    policy.perturbed_rows()  # before the slots take over the policy's row index
    n = len(params)
    returns, lengths, bad = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    take = family.make_env if env_cache is None else env_cache.take
    # per live slot, in slot order: its env, the env's step function, its row, return so
    # far, last reward, steps so far and the steps it may take; obs holds their observations
    envs: list[Any] = []
    steps: list[Callable[[Any], tuple]] = []
    rows: list[int] = []
    rets: list[float] = []
    rews: list[float] = []
    lens: list[int] = []
    caps: list[int] = []
    slot_lists = (envs, steps, rows, rets, rews, lens, caps)
    obs = np.zeros((min(ENV_SLOTS, n), policy.spec.obs_dim), dtype=np.float32)
    flat_obs = True  # observations come as (obs_dim,) vectors: stored as they are, no reshaping
    next_row, t = 0, 0

    def start(k: int) -> None:
        """Row `next_row` into slot k (k == len(envs): a new slot)."""
        nonlocal next_row, flat_obs
        row, next_row = next_row, next_row + 1
        env = take(params[row])
        step, limit = direct_step(env)
        cap = int(caps_arr[row]) if limit is None else min(int(caps_arr[row]), limit)
        if k == len(envs):
            for values in slot_lists:
                values.append(None)
        envs[k], steps[k], rows[k], rets[k], rews[k], lens[k], caps[k] = env, step, row, 0.0, 0.0, 0, cap
        first = env.reset(seed=int(seeds[row]))[0]
        flat_obs = flat_obs and np.ndim(first) == 1
        obs[k] = np.asarray(first, dtype=np.float32).ravel()

    def finish(k: int) -> None:
        row = rows[k]
        returns[row], lengths[row] = rets[k], lens[k]
        env, envs[k] = envs[k], None
        if env_cache is None:
            env.close()
        else:
            env_cache.give_back(params[row], env)

    try:
        while len(envs) < obs.shape[0]:
            start(len(envs))
        rows_index = policy.index  # each row's weights; the policy's index follows the slots' rows
        policy.index = rows_index[rows]
        while envs:
            t += 1
            if should_stop is not None and t % STOP_POLL_STEPS == 0 and should_stop():
                raise WaveInterrupted("stop requested during a batch of rollouts")
            actions = policy.act(obs)
            ended = []
            for k, step in enumerate(steps):
                o, r, term, trunc, _ = step(actions[k])
                obs[k] = o if flat_obs else np.asarray(o, dtype=np.float32).ravel()
                rews[k] = r = float(r)  # returns add in float64, as in a lock-step batch (r may be float32)
                rets[k] += r
                lens[k] += 1
                if term or trunc or lens[k] >= caps[k]:
                    ended.append(k)
            if not _all_finite(sum(rews), obs):  # rare: find the rows at fault
                for k in np.flatnonzero(~_finite_rows(np.array(rews, dtype=np.float64), obs)).tolist():
                    bad[rows[k]] = True
                    if k not in ended:
                        ended.append(k)
                ended.sort()
            if ended:
                for k in ended:
                    finish(k)
                    if next_row < n:
                        start(k)
                keep = [k for k in range(len(envs)) if envs[k] is not None]
                if len(keep) < len(envs):
                    for values in slot_lists:
                        values[:] = [values[k] for k in keep]
                    obs = obs[keep]
                policy.index = rows_index[rows]
        return returns, lengths, bad
    except BaseException:
        for env in envs:
            if env is not None:
                env.close()
        raise


def _batches(reqs: Sequence[EvalRequest], batch_rows: int) -> list[list[int]]:
    """Split request indices into batches of at most `batch_rows` episodes (a request is never split)."""
    out, cur, rows = [], [], 0
    for i, r in enumerate(reqs):
        n = r.rows
        if cur and rows + n > batch_rows:
            out.append(cur)
            cur, rows = [], 0
        cur.append(i)
        rows += n
    if cur:
        out.append(cur)
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
    """Evaluate requests; a request whose env raises or gives non-finite values gets an error result.
    `should_stop` is polled as the batches step: when it turns true, WaveInterrupted is raised.
    Gymnasium envs are taken from and given back to `env_cache` where the family renews them.
    `tally`, if given, is added what the batches simulated."""
    results: list[EvalResult | None] = [None] * len(requests)
    tally = RolloutTally() if tally is None else tally
    batches = _batches(requests, batch_rows)
    while batches:
        idx = batches.pop(0)
        reqs = [requests[i] for i in idx]
        # Outside the try: a missing policy or noise table is a caller bug, not an env failure.
        thetas = [request_theta(r, lookup, noise) for r in reqs]
        try:
            batch = Rows.of(spec, reqs, thetas, noise)
            if steps_in_slots(family):
                returns, lengths, bad = _step_slots(family, batch, should_stop, env_cache)
            else:
                returns, lengths, bad = _step_batch(family, batch, should_stop)
        except WaveInterrupted:
            raise
        except Exception as exc:  # an env raised: find the culprit by running the requests alone, next
            if len(idx) == 1:
                results[idx[0]] = error_result(reqs[0], f"{type(exc).__name__}: {exc}")
            else:
                batches[:0] = [[i] for i in idx]
            continue
        any_bad = bool(bad.any())  # almost never: one look for the whole batch
        row = 0
        for i, r in zip(idx, reqs):
            end = row + r.rows
            if any_bad and bad[row:end].any():
                results[i] = error_result(r, "the env returned a non-finite reward or observation")
                lengths[row:end] = 0  # an error reports no steps
            elif r.episodes == r.rows:  # copies: a result must not share memory with its neighbours
                results[i] = EvalResult(returns=returns[row:end].copy(), lengths=lengths[row:end].copy())
            else:  # a pinned course: its one episode stands for all of the request's episodes
                reps = r.episodes // r.rows
                results[i] = EvalResult(returns=returns[row:end].repeat(reps), lengths=lengths[row:end].repeat(reps))
            row = end
        if lengths.size:
            tally.steps += int(lengths.sum())
            tally.longest = max(tally.longest, int(lengths.max()))
    return results  # type: ignore[return-value]
