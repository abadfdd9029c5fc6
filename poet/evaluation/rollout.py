"""The rollout core every evaluator runs: a table of requests, its episodes one row each.

Requests are expanded into rows (one per episode; `poet.evaluation.requests`); every row
acts with its own weights. `run_table` cuts a table into batches and runs each batch's rows
on one of three paths:

- A family with a row kernel (`row_kernel()`, `envs.kernel`) runs each row to its end in
  turn inside one compiled loop, the policy's forward included
  (`poet.evaluation.row_loop`): a row's weights then stay in the CPU's nearest cache for
  its whole episode, and no Python runs per step. The family brings only its compiled
  `reset` and `step`; this loop names none.
- A policy without a compiled forward (a torch kind: `PolicySpec.compiled` is false) steps
  a row-kernel family's rows in lock-step instead, one batched forward per step
  (`poet.evaluation.lockstep`).
- Any other family steps gymnasium envs in `ENV_SLOTS` slots (`TORCH_SLOTS` for a torch
  kind; `poet.evaluation.slots`): when a slot's episode ends, the next row starts in it at
  once, so the batched forward stays full until the last episodes. Envs come from and go
  back to an `EnvCache` where the family renews them. A recurrent policy's state is per
  slot, zero at each start.

The compiled row loop and the slot loop give the same numbers for the same episodes
(tests/test_evaluation.py), as do lock-step and slots for a torch kind
(tests/test_policies.py). Rows never interact, so a request's result is the same whatever
else shares its batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from envs import EnvCache, EnvFamily
from poet.errors import WaveInterrupted
from poet.evaluation.lockstep import step_lockstep
from poet.evaluation.noise import NoiseTable
from poet.evaluation.protocol import EvalError, EvalRequest, EvalResult, PolicyRef
from poet.evaluation.requests import RequestTable, RolloutTally, StopCheck, check_perturbations
from poet.evaluation.row_loop import _step_kernel, row_kernel_of
from poet.evaluation.slots import step_slots
from poet.policies import PolicySpec

WeightsLookup = Callable[[PolicyRef], np.ndarray]


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
            elif spec.compiled:
                row_returns, row_lengths, bad = _step_kernel(kernel, batch, should_stop)
            else:
                row_returns, row_lengths, bad = step_lockstep(
                    kernel, batch.params, batch.seeds, batch.caps, batch.policy, should_stop
                )
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
