"""The compiled row loop: a batch's rows run to their ends, each in turn, through a family's row kernel.

A family with a row kernel (`row_kernel()`, `envs.kernel`) runs each row to its end in turn
inside one compiled loop, the policy's forward included (`_kernel_rows`): a row's weights
then stay in the CPU's nearest cache for its whole episode, and no Python runs per step.
The family brings only its compiled `reset` and `step`; this loop names none.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from envs import EnvFamily
from envs.kernel import KERNEL_DATA, RESET_SIGNATURE, STEP_SIGNATURE, RowKernel, readonly
from poet.errors import WaveInterrupted
from poet.evaluation.requests import Rows, StopCheck
from poet.policies import BatchedPolicy, PolicySpec, forward_row, pack_order


def row_kernel_of(family: EnvFamily, spec: PolicySpec) -> RowKernel | None:
    """The family's row kernel where its episodes run in compiled code (a box-action policy:
    in the compiled row loop, or in lock-step for a torch kind); None: they run as gymnasium
    envs in slots."""
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
