"""A family's compiled episode: the row kernel an evaluator runs its fast path with.

A family with a row kernel (its optional `row_kernel()`) has its episodes stepped inside
one compiled loop of the evaluator's, policy included, one row (episode) to its end at a
time; a family without one runs as gymnasium envs. The family gives three things:

- `data(params, seeds)`: what its two compiled functions read for a batch of episodes, one
  row per (params, seed), as `KernelData`: a float64 table (2-D), int64 values and float64
  values, laid out as the family likes (e.g. courses end to end and each row's offset).
- `reset(data, row, state, obs)`: starts row `row`'s episode: writes its state (float64,
  `state_size` entries, the family's own layout) and its first observation (float32,
  `obs_dim` entries) in place.
- `step(data, row, action, state, obs) -> (reward, ended)`: one step of the row with a
  float32 action of `act_dim` entries, updating `state` and `obs` in place; `ended` when the
  episode terminates (the evaluator ends it at its step cap itself).

Both functions are compiled with `row_reset` and `row_step` (fixed signatures, so that the
evaluator's loop takes them as function values and is compiled once per process, then
cached on disk). They must be deterministic in (params, seed) and read nothing but their
arguments: a row's numbers never depend on the other rows of its batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numba import types

from envs.base import EnvParams


def readonly(dtype: types.Type, ndim: int = 1) -> types.Array:
    """A C-contiguous array type, read-only in a signature: the evaluator passes arrays it may
    not write (Ray's shared memory), and a writable array converts to it."""
    return types.Array(dtype, ndim, "C", readonly=True)


KernelData = tuple[np.ndarray, np.ndarray, np.ndarray]
KERNEL_DATA = types.Tuple((readonly(types.float64, 2), readonly(types.int64), readonly(types.float64)))
RESET_SIGNATURE = types.void(KERNEL_DATA, types.int64, types.float64[::1], types.float32[::1])
STEP_SIGNATURE = types.Tuple((types.float64, types.boolean))(
    KERNEL_DATA, types.int64, types.float32[::1], types.float64[::1], types.float32[::1]
)


def row_reset(fn: Callable) -> Any:
    """Compile a family's `reset(data, row, state, obs)` for its row kernel."""
    return numba.njit(RESET_SIGNATURE, cache=True)(fn)


def row_step(fn: Callable) -> Any:
    """Compile a family's `step(data, row, action, state, obs) -> (reward, ended)` for its row kernel."""
    return numba.njit(STEP_SIGNATURE, cache=True)(fn)


@dataclass(frozen=True)
class RowKernel:
    """What a family's `row_kernel()` returns (see the module's docstring)."""

    obs_dim: int
    act_dim: int
    state_size: int
    data: Callable[[Sequence[EnvParams], Sequence[int]], KernelData]
    reset: Any  # compiled by row_reset
    step: Any  # compiled by row_step

    def batch_data(self, params: Sequence[EnvParams], seeds: Sequence[int]) -> KernelData:
        """The family's data for these rows, checked: three C-contiguous arrays of the kernel's types."""
        if len(params) != len(seeds):
            raise ValueError(f"got {len(params)} params but {len(seeds)} seeds")
        table, ints, floats = self.data(params, seeds)
        return (
            np.ascontiguousarray(table, dtype=np.float64),
            np.ascontiguousarray(ints, dtype=np.int64),
            np.ascontiguousarray(floats, dtype=np.float64),
        )
