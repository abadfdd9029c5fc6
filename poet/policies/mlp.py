"""The `mlp` kind's compiled forward: many episodes, each row with its own weights.

An MLP is described by a `PolicySpec` (sizes, activation, action kind) and its weights are
one flat float32 numpy vector in the order of `torch.nn.utils.parameters_to_vector`. Its
torch module is in `poet.policies.mlp_torch`; this module needs no torch, so an evaluation
worker that only runs MLP rollouts never loads it.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from poet.dense import dense
from poet.policies.spec import PolicySpec

ACTIVATION_CODES = {"tanh": 0, "relu": 1}


# tanh(x) ~ x P(s) / Q(s) with s = x^2 / 81 on [-9, 9] (beyond, tanh rounds to +-1 in float32):
# a rational fit of ours (Lawson iterations on the relative error), evaluated in float64 and
# rounded once, so it is within 0.85 ulp of the exact float32 tanh (numpy's float32 tanh: 1.37;
# tests/test_evaluation.py). A call to libm's tanhf per value cost more than the whole matrix work.
_TANH_P = (0.9999999794508392, 10.838638314030938, 22.934626605942228, 10.952609390504099, 0.5748855241728988)
_TANH_Q = (1.0, 37.83862394423677, 169.77915677927356, 174.61307504525502, 33.47598666920573)


@numba.njit(cache=True, inline="always")
def tanh32(v: np.float32) -> np.float32:
    x = np.float64(v)
    x = 9.0 if x > 9.0 else x  # comparisons, not min/max: NaN stays NaN
    x = -9.0 if x < -9.0 else x
    s = x * x * (1.0 / 81.0)
    num = (((_TANH_P[4] * s + _TANH_P[3]) * s + _TANH_P[2]) * s + _TANH_P[1]) * s + _TANH_P[0]
    den = (((_TANH_Q[4] * s + _TANH_Q[3]) * s + _TANH_Q[2]) * s + _TANH_Q[1]) * s + _TANH_Q[0]
    return np.float32(x * num / den)


@numba.njit(cache=True, error_model="numpy")
def tanh_into(x: np.ndarray, out: np.ndarray) -> None:
    """`tanh32` of every value of a float32 vector, into `out` (the torch module's tanh too)."""
    for i in range(x.size):
        out[i] = tanh32(x[i])


@numba.njit(cache=True, error_model="numpy")
def forward_row(
    w: np.ndarray,
    sizes: np.ndarray,
    activation: int,
    box: bool,
    low: np.ndarray,
    span: np.ndarray,
    h: np.ndarray,
    acc: np.ndarray,
    out: np.ndarray,
) -> None:
    """One row's MLP: reads its observation from `h[:sizes[0]]`, writes its raw outputs (box:
    already squashed to the bounds) to `out`; `h` and `acc` are scratch of `sizes.max()`.

    `w` holds each layer's matrix as (in, out) row-major, then its bias. Each output sums
    its inputs in input order from 0.0 (`poet.dense`: many outputs' sums side by side in
    vectors, no fused multiply-add, no reassociation), so the vector width of the CPU never
    changes a number. `error_model="numpy"`: a division by zero gives inf or NaN as in numpy
    instead of raising, which is what lets the compiler vectorise the loops through `tanh32`
    (its division is never by zero).
    """
    layers, off = sizes.size - 1, 0
    for layer in range(layers):
        fan_in, fan_out = sizes[layer], sizes[layer + 1]
        dense(w, off, fan_in, fan_out, h, acc)
        a = acc[:fan_out]
        off += fan_in * fan_out
        bias = w[off : off + fan_out]
        off += fan_out
        if layer == layers - 1:
            if box:
                for j in range(fan_out):
                    out[j] = low[j] + (tanh32(a[j] + bias[j]) + np.float32(1.0)) * np.float32(0.5) * span[j]
            else:
                for j in range(fan_out):
                    out[j] = a[j] + bias[j]
        elif activation == 0:
            for j in range(fan_out):
                h[j] = tanh32(a[j] + bias[j])
        else:
            for j in range(fan_out):
                v = a[j] + bias[j]
                h[j] = np.float32(0.0) if v < 0.0 else v  # NaN stays NaN


@numba.njit(cache=True, error_model="numpy")
def _forward(
    obs: np.ndarray,
    weights: np.ndarray,
    index: np.ndarray,
    sizes: np.ndarray,
    activation: int,
    box: bool,
    low: np.ndarray,
    span: np.ndarray,
    done: np.ndarray,
) -> np.ndarray:
    """`forward_row` with weights row `index[r]` for every row r not marked `done` (their
    outputs read 0), float32."""
    n = obs.shape[0]
    out = np.zeros((n, sizes[-1]), dtype=np.float32)
    h = np.empty(sizes.max(), dtype=np.float32)
    acc = np.empty(sizes.max(), dtype=np.float32)
    for r in range(n):
        if not done[r]:
            h[: sizes[0]] = obs[r]
            forward_row(weights[index[r]], sizes, activation, box, low, span, h, acc, out[r])
    return out


# Per row: (the noise table, the row's offset into it or -1 for none, sign * sigma as float32).
Perturbations = tuple[np.ndarray, np.ndarray, np.ndarray]


def pack_weights(spec: PolicySpec, flats: np.ndarray) -> np.ndarray:
    """Flat weight rows in the layout `forward_row` reads: the flat layout stores each matrix
    (out, in); the kernel reads it (in, out), then the layer's bias."""
    parts, offset, n = [], 0, flats.shape[0]
    for fan_in, fan_out in zip(spec.layer_sizes[:-1], spec.layer_sizes[1:]):
        w = flats[:, offset : offset + fan_in * fan_out].reshape(n, fan_out, fan_in)
        offset += fan_in * fan_out
        parts += [w.transpose(0, 2, 1).reshape(n, -1), flats[:, offset : offset + fan_out]]
        offset += fan_out
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


@functools.lru_cache(maxsize=64)
def pack_order(spec: PolicySpec) -> np.ndarray:
    """For each position of the packed layout, the flat position it holds (read-only)."""
    order = pack_weights(spec, np.arange(spec.num_params, dtype=np.int64)[None, :])[0]
    order.flags.writeable = False
    return order


class BatchedPolicy:
    """Forward pass for many episodes, each row with its own parameter vector: row r uses
    weights row `index[r]` (by default r), so rows that share a policy share one copy.

    One compiled call per forward (`_forward`) runs every row's MLP on its own, so a row's
    output does not depend on which other rows share the batch: evaluation results stay a
    function of their request only. float32 throughout, deliberately: the weights are stored
    as float32 (the trainers' and the torch module's dtype) and observations arrive as
    float32, so float64 arithmetic would only add conversions and halve the SIMD width without
    bringing the numbers closer to the torch module's (the same floats up to round-off).
    """

    def __init__(
        self,
        spec: PolicySpec,
        flats: np.ndarray,
        index: np.ndarray | None = None,
        perturbations: Perturbations | None = None,
    ):
        self.spec = spec
        flats = np.asarray(flats, dtype=np.float32)
        if flats.ndim != 2 or flats.shape[1] != spec.num_params:
            raise ValueError(f"expected (rows, {spec.num_params}) weights, got {tuple(flats.shape)}")
        self._sizes = np.asarray(spec.layer_sizes, dtype=np.int64)
        self._weights = pack_weights(spec, flats)
        self._box = spec.action_kind == "box"
        self._activation = ACTIVATION_CODES[spec.activation]
        low = spec.action_low if self._box else (0.0,) * spec.act_dim
        high = spec.action_high if self._box else (0.0,) * spec.act_dim
        self._low = np.asarray(low, dtype=np.float32)
        self._span = np.asarray(high, dtype=np.float32) - self._low
        # which weights row each batch row uses (assigned anew where the batch's rows change)
        self.index = np.arange(flats.shape[0]) if index is None else np.asarray(index, dtype=np.int64)
        self.perturbations = perturbations

    def begin(self, k: int) -> None:
        """Row k starts an episode (an MLP keeps no state: nothing to do)."""

    def compact(self, keep: list[int]) -> None:
        """Keep rows `keep` (an MLP keeps no state per row: nothing to do)."""

    def perturbed_rows(self) -> None:
        """Give each perturbed row its own weights row, perturbed now (`act` needs them; the
        terrain kernel instead perturbs each row as it starts it, from `perturbations`)."""
        if self.perturbations is None:
            return
        noise, offsets, scales = self.perturbations
        rows = np.flatnonzero(offsets >= 0)
        order = pack_order(self.spec)
        # perturb()'s formula on the packed layout: theta + scale * noise[offset + flat position]
        moved = self._weights[self.index[rows]] + scales[rows, None] * noise[offsets[rows, None] + order]
        self._weights = np.concatenate([self._weights, moved])
        self.index = self.index.copy()
        self.index[rows] = len(self._weights) - rows.size + np.arange(rows.size)
        self.perturbations = None

    @property
    def packed(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
        """What `forward_row` reads: (weights, one row per distinct weights vector, layer sizes,
        activation code, action low, action span)."""
        return self._weights, self._sizes, self._activation, self._low, self._span

    @property
    def rows(self) -> int:
        """Number of rows (episodes) in the batch."""
        return int(self.index.size)

    def act(self, obs: np.ndarray, done: np.ndarray | None = None) -> np.ndarray:
        """Actions for one observation per row: low + (tanh(raw) + 1) * 0.5 * (high - low), or
        argmax. Rows marked in the bool mask `done` are skipped (a box action reads 0 there)."""
        obs = np.asarray(obs, dtype=np.float32)
        self.perturbed_rows()
        out = _forward(
            obs,
            self._weights,
            self.index,
            self._sizes,
            self._activation,
            self._box,
            self._low,
            self._span,
            np.zeros(obs.shape[0], dtype=bool) if done is None else done,
        )
        return out if self._box else out.argmax(axis=-1)
