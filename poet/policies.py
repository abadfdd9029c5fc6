"""Torch MLP policies with flat parameter vectors, and a batched forward for evaluation.

A policy is described by a `PolicySpec` (sizes, activation, action kind) and its weights
are one flat float32 numpy vector in the order of `torch.nn.utils.parameters_to_vector`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


@dataclass(frozen=True)
class PolicySpec:
    """Architecture of an MLP policy. `action_kind` is 'box' (tanh, scaled to bounds) or 'discrete' (argmax)."""

    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = (40, 40)
    activation: str = "tanh"
    action_kind: str = "box"
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @property
    def layer_sizes(self) -> list[int]:
        """Input, hidden and output sizes."""
        return [self.obs_dim, *self.hidden, self.act_dim]

    @property
    def num_params(self) -> int:
        """Length of the flat parameter vector."""
        sizes = self.layer_sizes
        return sum(sizes[i] * sizes[i + 1] + sizes[i + 1] for i in range(len(sizes) - 1))

    def to_dict(self) -> dict:
        """Plain JSON-ready form."""
        return {
            "obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden": list(self.hidden),
            "activation": self.activation, "action_kind": self.action_kind,
            "action_low": list(self.action_low), "action_high": list(self.action_high),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "PolicySpec":
        """Inverse of to_dict."""
        return cls(
            obs_dim=int(d["obs_dim"]), act_dim=int(d["act_dim"]), hidden=tuple(int(h) for h in d["hidden"]),
            activation=str(d["activation"]), action_kind=str(d["action_kind"]),
            action_low=tuple(float(x) for x in d["action_low"]), action_high=tuple(float(x) for x in d["action_high"]),
        )


def spec_for_spaces(observation_space: gym.Space, action_space: gym.Space, hidden: tuple[int, ...], activation: str) -> PolicySpec:
    """The policy spec that fits an env's spaces."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    obs_dim = int(np.prod(observation_space.shape))
    if isinstance(action_space, gym.spaces.Discrete):
        return PolicySpec(obs_dim, int(action_space.n), tuple(hidden), activation, "discrete")
    if isinstance(action_space, gym.spaces.Box):
        low = np.broadcast_to(action_space.low, action_space.shape).ravel()
        high = np.broadcast_to(action_space.high, action_space.shape).ravel()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError("Box action spaces need finite bounds for a tanh policy")
        return PolicySpec(obs_dim, int(low.size), tuple(hidden), activation, "box",
                          tuple(float(x) for x in low), tuple(float(x) for x in high))
    raise ValueError(f"unsupported action space {action_space}")


class MLPPolicy(nn.Module):
    """The torch module of a policy (used for training code and single-env rollouts)."""

    def __init__(self, spec: PolicySpec):
        super().__init__()
        self.spec = spec
        sizes = spec.layer_sizes
        self.layers = nn.ModuleList(nn.Linear(sizes[i], sizes[i + 1]) for i in range(len(sizes) - 1))
        self._act = ACTIVATIONS[spec.activation]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw outputs (pre-squash) for a batch of observations."""
        h = obs
        for layer in self.layers[:-1]:
            h = self._act(layer(h))
        return self.layers[-1](h)

    def load_flat(self, flat: np.ndarray) -> None:
        """Copy a flat parameter vector into the module."""
        vec = torch.as_tensor(np.asarray(flat, dtype=np.float32))
        if vec.numel() != self.spec.num_params:
            raise ValueError(f"flat vector has {vec.numel()} values, policy needs {self.spec.num_params}")
        nn.utils.vector_to_parameters(vec, self.parameters())

    def get_flat(self) -> np.ndarray:
        """The module's parameters as a flat float32 vector."""
        return nn.utils.parameters_to_vector(self.parameters()).detach().numpy().astype(np.float32)


def init_reference(spec: PolicySpec, rng: np.random.Generator, std: float = 0.1) -> np.ndarray:
    """The reference's start: every weight and bias i.i.d. N(0, std) (`Model.get_random_model_params`)."""
    return (rng.standard_normal(spec.num_params) * std).astype(np.float32)


def init_normc(spec: PolicySpec, rng: np.random.Generator) -> np.ndarray:
    """Normalised-column Gaussian weights (OpenAI ES), a small last layer, zero biases."""
    parts = []
    sizes = spec.layer_sizes
    for i in range(len(sizes) - 1):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        std = 0.01 if i == len(sizes) - 2 else 1.0  # small last layer: start near zero action
        w = rng.standard_normal((fan_out, fan_in))
        w *= std / np.sqrt(np.square(w).sum(axis=1, keepdims=True))
        parts.extend([w.ravel(), np.zeros(fan_out)])
    return np.concatenate(parts).astype(np.float32)


INIT_SCHEMES = {"reference": init_reference, "normc": init_normc}


def init_flat(spec: PolicySpec, rng: np.random.Generator, scheme: str = "reference") -> np.ndarray:
    """Initial weights by scheme name (`policy.init`): "reference" (default) or "normc"."""
    try:
        return INIT_SCHEMES[scheme](spec, rng)
    except KeyError:
        raise ValueError(f"unknown policy init {scheme!r}; known: {', '.join(INIT_SCHEMES)}") from None


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


NUMPY_ACTIVATIONS = {"tanh": np.tanh, "relu": lambda h, out: np.maximum(h, 0.0, out=out)}


class BatchedPolicy:
    """Forward pass for many episodes, each row with its own parameter vector (numpy).

    Every row is computed as its own vector-matrix product (`np.matmul` over a stack of
    (1, in) x (in, out) products), so a row's output does not depend on which other rows
    share the batch: evaluation results stay a function of their request only. numpy
    rather than torch: at these sizes torch's per-call overhead cost more than the
    arithmetic (the same floats as `MLPPolicy` up to round-off).
    """

    def __init__(self, spec: PolicySpec, flats: np.ndarray):
        self.spec = spec
        flats = np.ascontiguousarray(flats, dtype=np.float32)
        if flats.ndim != 2 or flats.shape[1] != spec.num_params:
            raise ValueError(f"expected (rows, {spec.num_params}) weights, got {tuple(flats.shape)}")
        self._act = NUMPY_ACTIVATIONS[spec.activation]
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        sizes, offset, n = spec.layer_sizes, 0, flats.shape[0]
        for i in range(len(sizes) - 1):
            fan_in, fan_out = sizes[i], sizes[i + 1]
            w = flats[:, offset:offset + fan_in * fan_out].reshape(n, fan_out, fan_in)
            offset += fan_in * fan_out
            b = flats[:, offset:offset + fan_out].reshape(n, 1, fan_out)
            offset += fan_out
            self.weights.append(np.ascontiguousarray(w.transpose(0, 2, 1)))  # (n, in, out)
            self.biases.append(np.ascontiguousarray(b))
        if spec.action_kind == "box":
            self._low = np.asarray(spec.action_low, dtype=np.float32)
            self._range = np.asarray(spec.action_high, dtype=np.float32) - self._low

    def select(self, rows: np.ndarray) -> "BatchedPolicy":
        """A copy with only some rows (used when episodes finish)."""
        out = object.__new__(BatchedPolicy)
        out.spec, out._act = self.spec, self._act
        out.weights = [w[rows] for w in self.weights]
        out.biases = [b[rows] for b in self.biases]
        if self.spec.action_kind == "box":
            out._low, out._range = self._low, self._range
        return out

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions for one observation per row: low + (tanh(raw) + 1) * 0.5 * (high - low), or argmax."""
        h = np.ascontiguousarray(obs, dtype=np.float32)[:, None, :]
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = np.matmul(h, w)
            h += b
            if i < last:
                self._act(h, out=h)
        raw = h[:, 0, :]
        if self.spec.action_kind == "discrete":
            return raw.argmax(axis=-1)
        np.tanh(raw, out=raw)
        raw += 1.0
        raw *= 0.5
        raw *= self._range
        raw += self._low
        return raw
