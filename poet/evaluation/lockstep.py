"""A compiled family's episodes stepped in lock-step, for policies without a compiled forward.

A family's row kernel (`envs.kernel`) steps one row at a time; a policy of a torch kind
(`poet.policies.batched`) wants many rows per network call. So `LOCKSTEP_SLOTS` rows are
live at once: per step, one batched forward for all of them, then one compiled call that
steps each live row with the family's `step` and keeps its tally. When a row ends, the
next row of the batch starts in its slot with a zero recurrent state. A row ends exactly
as in the compiled row loop: when `step` says so, at its step cap, or at a non-finite
reward or observation (the row is then `bad`, that step's reward not added).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np

from envs import EnvParams
from envs.kernel import RowKernel
from poet.errors import WaveInterrupted
from poet.evaluation.slots import STOP_POLL_STEPS

# live rows per network call: rows that share weights then share a call
LOCKSTEP_SLOTS = 16


@functools.lru_cache(maxsize=8)
def _slot_stepper(step: Callable) -> Callable:
    """A compiled loop that steps each live row once with the family's `step` and keeps its
    tally; `ended` per slot. `step` is bound in it as a constant, compiled once per process
    and family: passed as a function-typed argument instead, numba would look its address up
    again on every call, once per step."""

    @numba.njit(error_model="numpy")
    def step_slots(data, rows, actions, states, obs, caps, returns, lengths, bad, ended):  # noqa: ANN001, ANN202
        for k in range(rows.size):
            r = rows[k]
            reward, end = step(data, r, actions[k], states[k], obs[k])
            finite = np.isfinite(reward)
            for j in range(obs.shape[1]):
                finite = finite and np.isfinite(obs[k, j])
            if finite:
                returns[r] += reward
            else:
                bad[r] = True
            lengths[r] += 1
            ended[k] = end or lengths[r] >= caps[r] or not finite

    return step_slots


def step_lockstep(
    kernel: RowKernel,
    params: Sequence[EnvParams],
    seeds: Sequence[int],
    caps: np.ndarray,
    policy: Any,
    should_stop: Callable[[], bool] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row to its end, `LOCKSTEP_SLOTS` at a time (see the module docstring): (returns,
    lengths, bad). `policy` is a batched policy whose `index` gives each row's weights."""
    n = len(params)
    returns, lengths, bad = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    if n == 0:
        return returns, lengths, bad
    data = kernel.batch_data(params, seeds)
    caps = np.ascontiguousarray(caps, dtype=np.int64)
    policy.perturbed_rows()  # before the slots take over the policy's row index
    rows_index = policy.index
    width = min(LOCKSTEP_SLOTS, n)
    states = np.zeros((width, kernel.state_size))
    obs = np.zeros((width, kernel.obs_dim), dtype=np.float32)
    slot_rows = np.arange(width, dtype=np.int64)
    ended = np.zeros(width, dtype=bool)
    step_slots = _slot_stepper(kernel.step)
    for k in range(width):
        kernel.reset(data, k, states[k], obs[k])
        policy.begin(k)
    next_row, t = width, 0
    while slot_rows.size:
        t += 1
        if should_stop is not None and t % STOP_POLL_STEPS == 0 and should_stop():
            raise WaveInterrupted("stop requested during a batch of rollouts")
        policy.index = rows_index[slot_rows]
        actions = np.ascontiguousarray(policy.act(obs), dtype=np.float32)
        step_slots(data, slot_rows, actions, states, obs, caps, returns, lengths, bad, ended)
        if not ended.any():
            continue
        for k in np.flatnonzero(ended).tolist():
            if next_row < n:
                slot_rows[k] = next_row
                kernel.reset(data, next_row, states[k], obs[k])
                policy.begin(k)
                next_row += 1
            else:
                slot_rows[k] = -1
        keep = np.flatnonzero(slot_rows >= 0)
        if keep.size < slot_rows.size:
            slot_rows, states, obs = slot_rows[keep], states[keep], obs[keep]
            ended = ended[keep]
            policy.compact(keep.tolist())
        ended[:] = False
    return returns, lengths, bad
