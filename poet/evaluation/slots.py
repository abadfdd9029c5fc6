"""The gymnasium slot loop: a batch's rows stepped as gymnasium envs, a few slots at a time.

A family without a row kernel (or a policy without box actions) steps gymnasium envs in
`ENV_SLOTS` slots (`TORCH_SLOTS` for a torch kind): when a slot's episode ends, the next
row starts in it at once, so the batched forward stays full until the last episodes. Envs
come from and go back to an `EnvCache` where the family renews them. A recurrent policy's
state is per slot, zero at each start.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.wrappers import OrderEnforcing, TimeLimit

from envs import EnvCache, EnvFamily
from poet.errors import WaveInterrupted
from poet.evaluation.requests import Rows, StopCheck

# slot-loop steps between two looks at a stop request (a look costs well under a microsecond)
STOP_POLL_STEPS = 64
# gymnasium envs stepped together: enough to make the batched forward cheap per row, few enough
# that each env's physics state stays in the CPU caches between its steps (of 1, 4 and 8 at a
# time, 4 ran plain code fastest: benchmarks/eval_pool.py --raw-widths)
ENV_SLOTS = 4
# the same for a torch kind, whose network call costs more than the rows it runs: rows that
# share weights share a call
TORCH_SLOTS = 16
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
        spec = batch.policy.spec
        slots = ENV_SLOTS if spec.compiled else TORCH_SLOTS
        self.policy = batch.policy
        self.obs = np.zeros((min(slots, len(self.params)), spec.obs_dim), dtype=np.float32)
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
        self.policy.begin(k)
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
            self.policy.compact(keep)

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
