"""Policies: what a policy is (`PolicySpec`), its kinds, its initial weights, its batched forward.

- `spec`: the spec value (kind, options, the env's spaces), JSON in and out.
- `kinds`: the registry of kinds (`mlp`, `cnn`, `lstm`, `cnn_lstm`, or `package.module:Name`)
  and the contract a kind's torch module keeps.
- `mlp`: the mlp kind's compiled forward, which needs no torch; `mlp_torch` its torch module.
- `batched`: the torch forward of every other kind, many rows at once.
- `init`: initial weights by scheme, for any kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from envs.compiled_cache import drop_stale_cache

# before any of the package's compiled code loads from numba's cache (`poet.dense` and
# `poet.policies.mlp` compile lazily, the evaluator's row loop as it is imported, after this)
drop_stale_cache(Path(__file__).parents[1])

from poet.policies.init import INIT_SCHEMES, init_flat, init_normc, init_orthogonal, init_reference, orthogonal  # noqa: E402
from poet.policies.mlp import ACTIVATION_CODES, BatchedPolicy, Perturbations, forward_row, pack_order, pack_weights  # noqa: E402
from poet.policies.spec import MLP, PolicySpec, param_shapes, spec_for_spaces  # noqa: E402


def batched_policy(
    spec: PolicySpec, flats: np.ndarray, index: np.ndarray | None = None, perturbations: Perturbations | None = None
) -> Any:
    """The batched forward of the spec's kind: the compiled `BatchedPolicy` of an mlp, the torch
    `TorchBatchedPolicy` of any other kind (torch loads then)."""
    if spec.compiled:
        return BatchedPolicy(spec, flats, index, perturbations)
    from poet.policies.batched import TorchBatchedPolicy

    return TorchBatchedPolicy(spec, flats, index, perturbations)


__all__ = [
    "ACTIVATION_CODES",
    "INIT_SCHEMES",
    "MLP",
    "BatchedPolicy",
    "Perturbations",
    "PolicySpec",
    "batched_policy",
    "forward_row",
    "init_flat",
    "init_normc",
    "init_orthogonal",
    "init_reference",
    "orthogonal",
    "pack_order",
    "pack_weights",
    "param_shapes",
    "spec_for_spaces",
]
