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

from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np

from envs import EnvParams
from envs.kernel import KERNEL_DATA, RESET_SIGNATURE, STEP_SIGNATURE, RowKernel
from poet.errors import WaveInterrupted
from poet.evaluation.slots import STOP_POLL_STEPS

# live rows per network call: rows that share weights then share a call
LOCKSTEP_SLOTS = 16

_f32, _i64, _f64 = numba.types.float32, numba.types.int64, numba.types.float64
_STEP_SLOTS = numba.types.void(
    numba.types.FunctionType(STEP_SIGNATURE),
    KERNEL_DATA,
    _i64[::1],  # the batch row in each slot
    _f32[:, ::1],  # actions
    _f64[:, ::1],  # states
    _f32[:, ::1],  # observations
    _i64[::1],  # caps
    _f64[::1],  # returns
    _i64[::1],  # lengths
    numba.types.boolean[::1],  # bad
    numba.types.boolean[::1],  # ended (per slot)
)


@numba.njit(_STEP_SLOTS, cache=True, error_model="numpy")
def _step_slots(
    step: Callable,
    data: tuple,
    rows: np.ndarray,
    actions: np.ndarray,
    states: np.ndarray,
    obs: np.ndarray,
    caps: np.ndarray,
    returns: np.ndarray,
    lengths: np.ndarray,
    bad: np.ndarray,
    ended: np.ndarray,
) -> None:
    """Each slot's row one step with its action, its tally kept; `ended` per slot."""
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


_RESET_ROW = numba.types.void(numba.types.FunctionType(RESET_SIGNATURE), KERNEL_DATA, _i64, _f64[::1], _f32[::1])


@numba.njit(_RESET_ROW, cache=True)
def _reset_row(reset: Callable, data: tuple, row: int, state: np.ndarray, obs: np.ndarray) -> None:
    reset(data, row, state, obs)


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
    for k in range(width):
        _reset_row(kernel.reset, data, k, states[k], obs[k])
        policy.begin(k)
    next_row, t = width, 0
    while slot_rows.size:
        t += 1
        if should_stop is not None and t % STOP_POLL_STEPS == 0 and should_stop():
            raise WaveInterrupted("stop requested during a batch of rollouts")
        policy.index = rows_index[slot_rows]
        actions = np.ascontiguousarray(policy.act(obs), dtype=np.float32)
        _step_slots(kernel.step, data, slot_rows, actions, states, obs, caps, returns, lengths, bad, ended)
        if not ended.any():
            continue
        for k in np.flatnonzero(ended).tolist():
            if next_row < n:
                slot_rows[k] = next_row
                _reset_row(kernel.reset, data, next_row, states[k], obs[k])
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
