"""The torch module of the `mlp` kind, for training code (PPO) and single-env rollouts.

Its parameters are the flat weights of `poet.policies.mlp` in the order of
`torch.nn.utils.parameters_to_vector`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch import nn

from poet.policies.mlp import tanh_into
from poet.policies.spec import PolicySpec


class _Tanh(torch.autograd.Function):
    """tanh on float32 as the compiled forward computes it (`tanh32`, within 0.85 ulp of the
    exact value), with torch's derivative 1 - y^2: the module's numbers then differ from
    the compiled forward's by the order of the matrix sums only, and it costs a third of
    torch's float32 tanh."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = tanh_values(x.detach())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)  # torch's own fused grad * (1 - y^2)


def tanh_values(x: torch.Tensor) -> torch.Tensor:
    """`tanh32` of a float32 CPU tensor that needs no gradient, as a new tensor."""
    x = x.contiguous()
    y = torch.empty_like(x)
    tanh_into(x.numpy().reshape(-1), y.numpy().reshape(-1))
    return y


def tanh(x: torch.Tensor) -> torch.Tensor:
    """The mlp kind's tanh (`_Tanh`) on float32 CPU tensors; torch's own on others."""
    if x.dtype != torch.float32 or x.device.type != "cpu":
        return torch.tanh(x)
    return _Tanh.apply(x)


ACTIVATIONS = {"tanh": tanh, "relu": torch.relu}


class MLPPolicy(nn.Module):
    """The torch module of an mlp policy (used for training code and single-env rollouts)."""

    state_size = 0

    def __init__(self, spec: PolicySpec):
        super().__init__()
        self.spec = spec
        sizes = spec.layer_sizes
        self.layers = nn.ModuleList(nn.Linear(sizes[i], sizes[i + 1]) for i in range(len(sizes) - 1))
        self._act = ACTIVATIONS[spec.activation]

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor | tuple:
        """Raw outputs (pre-squash) for a batch of observations; with a `state` (the kinds'
        contract, `poet.policies.kinds`), the outputs and that (empty) state."""
        raw = self._raw(obs)
        return raw if state is None else (raw, state)

    def _raw(self, obs: torch.Tensor) -> torch.Tensor:
        # iterated, not sliced: a slice of a ModuleList builds a new ModuleList on every call
        *hidden, last = self.layers
        h = obs
        for layer in hidden:
            h = self._act(layer(h))
        return last(h)

    def load_flat(self, flat: np.ndarray) -> None:
        """Copy a flat parameter vector into the module."""
        vec = torch.as_tensor(np.asarray(flat, dtype=np.float32))
        if vec.numel() != self.spec.num_params:
            raise ValueError(f"flat vector has {vec.numel()} values, policy needs {self.spec.num_params}")
        nn.utils.vector_to_parameters(vec, self.parameters())

    def get_flat(self) -> np.ndarray:
        """The module's parameters as a flat float32 vector."""
        return nn.utils.parameters_to_vector(self.parameters()).detach().numpy().astype(np.float32)


@functools.lru_cache(maxsize=64)
def _bounds(spec: PolicySpec, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    # built once per spec: making them every step cost as much as the env step
    return torch.tensor(spec.action_low, dtype=dtype), torch.tensor(spec.action_high, dtype=dtype)


def to_actions(spec: PolicySpec, raw: torch.Tensor) -> np.ndarray:
    """Map raw network outputs to env actions (tanh squashed to bounds, or argmax)."""
    if spec.action_kind == "discrete":
        return raw.argmax(dim=-1).numpy()
    low, high = _bounds(spec, raw.dtype)
    return (low + (torch.tanh(raw) + 1.0) * 0.5 * (high - low)).numpy()
