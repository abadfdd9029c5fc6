"""Initial weights of any policy kind, drawn from a numpy stream over its parameter shapes.

Each scheme walks the parameters in flat-vector order: a tensor of two or more dimensions
is a weight (its first dimension the outputs, the rest the inputs it reads), a vector a
bias. For the `mlp` kind these are exactly the layers' matrices and biases, so the schemes
give the same numbers as the references they follow.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from poet.policies.spec import PolicySpec, param_shapes


def init_reference(spec: PolicySpec, rng: np.random.Generator, std: float = 0.1) -> np.ndarray:
    """The reference's start: every weight and bias i.i.d. N(0, std) (`Model.get_random_model_params`)."""
    return (rng.standard_normal(spec.num_params) * std).astype(np.float32)


def _per_weight(spec: PolicySpec, weight: Callable[[int, int, bool], np.ndarray]) -> np.ndarray:
    """The flat vector with each weight matrix `weight(rows, cols, is_last)`, drawn in
    parameter order, and zero biases."""
    shapes = param_shapes(spec)
    last = max((i for i, s in enumerate(shapes) if len(s) >= 2), default=-1)  # the output layer's
    parts = [
        weight(shape[0], math.prod(shape[1:]), i == last).ravel() if len(shape) >= 2 else np.zeros(math.prod(shape))
        for i, shape in enumerate(shapes)
    ]
    return np.concatenate(parts).astype(np.float32)


def init_normc(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """Normalised-column Gaussian weights (OpenAI ES), a small last layer, zero biases."""

    def weight(rows: int, cols: int, last: bool) -> np.ndarray:
        w = rng.standard_normal((rows, cols))
        # small last layer: start near zero action
        return w * ((0.01 if last else 1.0) / np.sqrt(np.square(w).sum(axis=1, keepdims=True)))

    return _per_weight(spec, weight)


def orthogonal(rng: np.random.Generator, rows: int, cols: int, gain: float) -> np.ndarray:
    """A (rows, cols) matrix with orthonormal rows or columns times `gain`, built as torch's
    `nn.init.orthogonal_` builds it (QR of a standard Gaussian, each column's sign set by R's
    diagonal), from a numpy stream."""
    a = rng.standard_normal((rows, cols))
    a = a if rows >= cols else a.T
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    return gain * (q if rows >= cols else q.T)


def init_orthogonal(spec: PolicySpec, rng: np.random.Generator, last_gain: float = 1.0) -> np.ndarray:
    """dcd's start (`models/walker_models.py`): orthogonal weights with gain sqrt(2) in the
    hidden layers and `last_gain` in the last (1: the actor's mean head), zero biases."""
    return _per_weight(
        spec, lambda rows, cols, last: orthogonal(rng, rows, cols, last_gain if last else math.sqrt(2.0))
    )


INIT_SCHEMES = {"reference": init_reference, "normc": init_normc, "orthogonal": init_orthogonal}


def init_flat(spec: PolicySpec, rng: np.random.Generator, scheme: str = "reference") -> np.ndarray:
    """Initial weights by scheme name (`policy.init`): "reference", "normc" or "orthogonal"."""
    try:
        return INIT_SCHEMES[scheme](spec, rng)
    except KeyError:
        raise ValueError(f"unknown policy init {scheme!r}; known: {', '.join(INIT_SCHEMES)}") from None
