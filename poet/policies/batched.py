"""The forward of a torch policy kind for many episodes at once, each row with its own weights
and its own recurrent state: what the evaluators step every kind without a compiled forward with.

Every network call has exactly `FORWARD_ROWS` rows (padded), so a row's numbers never depend
on how many other rows share its call or which: torch's CPU kernels may pick another method
for another shape, never for another row of the same shape (tests/test_policies.py pins it
per kind). Two ways, one per network, chosen once (`forward_of`):

- batched over weights: one call runs every row with its own weights (`torch.func.vmap` of
  the module), each position's weights kept until its row changes;
- per weights: for a module torch.func cannot batch (a cell without a batching rule, such as
  `nn.GRUCell`), one call per distinct weights among the rows.

torch runs on one thread here, so a Ray worker of one core and a driver of many give the
same floats.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from poet.policies.kinds import build_module
from poet.policies.spec import PolicySpec

# rows of every network call (a fixed shape: see the module docstring)
FORWARD_ROWS = 16


@functools.lru_cache(maxsize=16)
def shared_module(spec: PolicySpec) -> Any:
    """One module per architecture and process; its own parameters are never used (each call
    passes a row's weights), so any number of policies share it."""
    module = build_module(spec)
    module.eval()
    return module


@functools.lru_cache(maxsize=16)
def forward_of(spec: PolicySpec) -> Callable | None:
    """The module batched over weights (`params` with a leading row axis, obs, state) -> (out,
    state), or None where torch.func cannot batch it (then each distinct weights has its call)."""
    module = shared_module(spec)

    def one(params: dict[str, torch.Tensor], obs: torch.Tensor, state: torch.Tensor) -> tuple:
        out, next_state = torch.func.functional_call(module, params, (obs.unsqueeze(0), state.unsqueeze(0)))
        return out[0], next_state[0]

    batched = torch.func.vmap(one)
    params = {n: p.detach().unsqueeze(0).expand(FORWARD_ROWS, *p.shape) for n, p in module.named_parameters()}
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batched(params, torch.zeros(FORWARD_ROWS, *spec.shape), torch.zeros(FORWARD_ROWS, int(module.state_size)))
    except Exception:  # noqa: BLE001 - an op without a batching rule, data-dependent control flow, ...
        return None
    # an op without a batching rule runs row by row behind a warning: one call per weights is faster
    return None if any("batching rule" in str(w.message) for w in caught) else batched


def squash(spec: PolicySpec, raw: np.ndarray) -> np.ndarray:
    """Env actions from raw outputs: low + (tanh(raw) + 1) * 0.5 * (high - low) in float32, or argmax."""
    if spec.action_kind == "discrete":
        return raw.argmax(axis=-1)
    low = np.asarray(spec.action_low, dtype=np.float32)
    span = np.asarray(spec.action_high, dtype=np.float32) - low
    return low + (np.tanh(raw) + np.float32(1.0)) * np.float32(0.5) * span


class TorchBatchedPolicy:
    """Forward for many episodes of a torch kind: row r uses weights row `index[r]`.

    The same interface as the mlp's `BatchedPolicy`, plus recurrent state per row of the
    caller's batch: `begin(k)` starts row k afresh (state zero), `compact(keep)` keeps the
    rows `keep` in that order (a slot loop's live episodes).
    """

    def __init__(
        self,
        spec: PolicySpec,
        flats: np.ndarray,
        index: np.ndarray | None = None,
        perturbations: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ):
        self.spec = spec
        flats = np.asarray(flats, dtype=np.float32)
        if flats.ndim != 2 or flats.shape[1] != spec.num_params:
            raise ValueError(f"expected (rows, {spec.num_params}) weights, got {tuple(flats.shape)}")
        # torch takes views of writable arrays only (the pool's weights may be read-only)
        self._weights = flats if flats.flags.writeable else flats.copy()
        self.index = np.arange(flats.shape[0]) if index is None else np.asarray(index, dtype=np.int64)
        self.perturbations = perturbations
        self._module = shared_module(spec)
        self._names = [name for name, _ in self._module.named_parameters()]
        self._shapes = [tuple(p.shape) for p in self._module.parameters()]
        self._sizes = [int(np.prod(s)) for s in self._shapes]
        self._params: dict[int, dict[str, torch.Tensor]] = {}
        self.state = np.zeros((0, spec.state_size), dtype=np.float32)
        self._forward = forward_of(spec)
        self._stacked: dict[str, torch.Tensor] | None = None  # each position's weights, batched calls
        self._stacked_rows = np.zeros(0, dtype=np.int64)  # the weights row at each position
        # a call's inputs, kept from call to call: the rows past a call's own keep what an
        # earlier call left there (a row's numbers never depend on another row's)
        self._x = torch.zeros(FORWARD_ROWS, *spec.shape)
        self._s = torch.zeros(FORWARD_ROWS, spec.state_size)

    @property
    def rows(self) -> int:
        """Number of rows (episodes) in the batch."""
        return int(self.index.size)

    def perturbed_rows(self) -> None:
        """Give each perturbed row a weights row: theta + scale * noise[offset:offset + dim] in
        float32, made once per distinct (weights, offset, scale), so the rows of one
        perturbation on several envs share it."""
        if self.perturbations is None:
            return
        noise, offsets, scales = self.perturbations
        rows = np.flatnonzero(offsets >= 0)
        dim = self.spec.num_params
        bits = np.asarray(scales[rows], dtype=np.float32).view(np.int32).astype(np.int64)  # a scale's exact value
        keys = np.stack([self.index[rows], offsets[rows], bits], axis=1)
        distinct, which = np.unique(keys, axis=0, return_inverse=True)
        moved = np.empty((len(distinct), dim), dtype=np.float32)
        for j, (w, offset, _) in enumerate(distinct.tolist()):
            row = rows[np.argmax(which == j)]
            moved[j] = self._weights[w] + scales[row] * noise[offset : offset + dim]
        self.index = self.index.copy()
        self.index[rows] = len(self._weights) + which.ravel()
        self._weights = np.concatenate([self._weights, moved])
        self.perturbations = None
        self._params.clear()
        self._stacked = None

    def begin(self, k: int) -> None:
        """Row k starts an episode: its state is zero (rows up to k exist afterwards)."""
        if k >= self.state.shape[0]:
            grown = np.zeros((k + 1, self.state.shape[1]), dtype=np.float32)
            grown[: self.state.shape[0]] = self.state
            self.state = grown
        self.state[k] = 0.0

    def compact(self, keep: list[int]) -> None:
        """Keep the states of rows `keep`, in that order."""
        self.state = self.state[keep]

    def _weights_of(self, row: int) -> dict[str, torch.Tensor]:
        params = self._params.get(row)
        if params is None:
            flat = torch.from_numpy(self._weights[row])  # a view: the tensors hold no copy
            tensors = torch.split(flat, self._sizes)
            params = {n: t.view(s) for n, t, s in zip(self._names, tensors, self._shapes)}
            self._params[row] = params
        return params

    def raw(self, obs: np.ndarray) -> np.ndarray:
        """Raw outputs for one observation per row (rows 0..n-1), advancing their states."""
        n = obs.shape[0]
        obs = np.asarray(obs, dtype=np.float32).reshape(n, *self.spec.shape)
        if self.state.shape[0] < n:
            self.begin(n - 1)
        out = np.empty((n, self.spec.act_dim), dtype=np.float32)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                if self._forward is None:
                    index = self.index[:n]
                    for w in np.unique(index).tolist():
                        rows = np.flatnonzero(index == w)
                        for first in range(0, rows.size, FORWARD_ROWS):
                            self._call_one(w, rows[first : first + FORWARD_ROWS], obs, out)
                else:
                    for first in range(0, n, FORWARD_ROWS):
                        self._call_batched(slice(first, min(n, first + FORWARD_ROWS)), obs, out)
        finally:
            torch.set_num_threads(threads)
        return out

    def _padded(self, rows: np.ndarray | slice, obs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x, s = obs[rows], self.state[rows]
        self._x.numpy()[: len(x)] = x
        self._s.numpy()[: len(s)] = s
        return self._x, self._s

    def _keep(self, rows: np.ndarray | slice, m: int, out: np.ndarray, y: torch.Tensor, s_next: torch.Tensor) -> None:
        out[rows] = y[:m].numpy()
        if self.state.shape[1]:
            self.state[rows] = s_next[:m].numpy()

    def _call_one(self, w: int, rows: np.ndarray, obs: np.ndarray, out: np.ndarray) -> None:
        """Rows that share weights row `w`, in one call of the module."""
        y, s_next = torch.func.functional_call(self._module, self._weights_of(w), self._padded(rows, obs))
        self._keep(rows, rows.size, out, y, s_next)

    def _call_batched(self, rows: slice, obs: np.ndarray, out: np.ndarray) -> None:
        """Rows `rows` (up to FORWARD_ROWS), each with its own weights, in one batched call; the
        weights at each position are copied in only where its row's weights changed."""
        if self._stacked is None:
            self._stacked = {n: torch.zeros(FORWARD_ROWS, *s) for n, s in zip(self._names, self._shapes)}
            self._stacked_rows = np.full(FORWARD_ROWS, -1, dtype=np.int64)
        index = self.index[rows]
        for k in np.flatnonzero(self._stacked_rows[: index.size] != index).tolist():
            for name, tensor in self._weights_of(int(index[k])).items():
                self._stacked[name][k] = tensor
            self._stacked_rows[k] = index[k]
        y, s_next = self._forward(self._stacked, *self._padded(rows, obs))
        self._keep(rows, index.size, out, y, s_next)

    def act(self, obs: np.ndarray, done: np.ndarray | None = None) -> np.ndarray:
        """Actions for one observation per row (`squash`); rows marked in `done` read 0."""
        self.perturbed_rows()
        actions = squash(self.spec, self.raw(obs))
        if done is not None:
            actions[done] = 0
        return actions
