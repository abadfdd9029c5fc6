"""What a policy is, as a value: its kind, its options and the env's spaces (`PolicySpec`).

A spec is frozen, hashable and plain JSON (`to_dict`), so it travels to workers, into
`run.json` and back without pickling code: a worker rebuilds the network from it, importing
a user's kind by its `package.module:Name`. Whatever the kind, a policy's weights are one
flat float32 vector in the order of `torch.nn.utils.parameters_to_vector`.

The `mlp` kind (POET's and dcd's walker policy) is described by its own fields (`hidden`,
`activation`) and needs no torch: its forward is compiled (`poet.policies.mlp`). Every other
kind keeps its options in `options` and is a torch module (`poet.policies.kinds`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

MLP = "mlp"


def frozen_value(value: Any) -> Any:
    """A JSON value with its lists as tuples and its mappings as sorted item tuples (hashable)."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), frozen_value(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(frozen_value(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class PolicySpec:
    """A policy's architecture. `action_kind` is 'box' (outputs squashed by tanh to the bounds)
    or 'discrete' (argmax of the outputs); `act_dim` is the number of outputs.

    `hidden` and `activation` describe the `mlp` kind; another kind's options are in `options`
    (sorted (name, value) pairs, the values frozen) and its observations' shape in `obs_shape`.
    """

    obs_dim: int
    act_dim: int
    hidden: tuple[int, ...] = (40, 40)
    activation: str = "tanh"
    action_kind: str = "box"
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    kind: str = MLP
    options: tuple[tuple[str, Any], ...] = ()
    obs_shape: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one observation (flat `(obs_dim,)` unless `obs_shape` says otherwise)."""
        return self.obs_shape or (self.obs_dim,)

    @property
    def compiled(self) -> bool:
        """Whether the policy has a compiled forward (`poet.policies.mlp`); other kinds run in torch."""
        return self.kind == MLP

    @property
    def layer_sizes(self) -> list[int]:
        """The mlp kind's input, hidden and output sizes."""
        if not self.compiled:
            raise AttributeError(f"policy kind {self.kind!r} has no MLP layer sizes")
        return [self.obs_dim, *self.hidden, self.act_dim]

    @property
    def num_params(self) -> int:
        """Length of the flat parameter vector."""
        return sum(math.prod(shape) for shape in param_shapes(self))

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per episode (0: feed-forward); it starts at zero."""
        return 0 if self.compiled else _kind_facts(self)[1]

    def options_dict(self) -> dict[str, Any]:
        """The kind's options as plain JSON values."""
        return {k: _plain(v) for k, v in self.options}

    def to_dict(self) -> dict:
        """Plain JSON-ready form."""
        out: dict[str, Any] = {
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "action_kind": self.action_kind,
            "action_low": list(self.action_low),
            "action_high": list(self.action_high),
        }
        if not self.compiled or self.obs_shape:
            out.update(kind=self.kind, options=self.options_dict(), obs_shape=list(self.obs_shape))
        return out

    @classmethod
    def from_dict(cls, d: dict) -> PolicySpec:
        """Inverse of to_dict (a dict without a kind, as older runs wrote it: an mlp)."""
        return cls(
            obs_dim=int(d["obs_dim"]),
            act_dim=int(d["act_dim"]),
            hidden=tuple(int(h) for h in d["hidden"]),
            activation=str(d["activation"]),
            action_kind=str(d["action_kind"]),
            action_low=tuple(float(x) for x in d["action_low"]),
            action_high=tuple(float(x) for x in d["action_high"]),
            kind=str(d.get("kind", MLP)),
            options=frozen_value(dict(d.get("options", {}))),
            obs_shape=tuple(int(x) for x in d.get("obs_shape", ())),
        )


def param_shapes(spec: PolicySpec) -> list[tuple[int, ...]]:
    """The shape of each parameter tensor, in flat-vector order (`parameters_to_vector`)."""
    if spec.compiled:
        sizes = spec.layer_sizes
        out: list[tuple[int, ...]] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            out += [(fan_out, fan_in), (fan_out,)]
        return out
    return list(_kind_facts(spec)[0])


@functools.lru_cache(maxsize=64)
def _kind_facts(spec: PolicySpec) -> tuple[tuple[tuple[int, ...], ...], int]:
    # the network is built once per spec and process to read its shapes (torch loads here)
    from poet.policies.kinds import build_module

    module = build_module(spec)
    return tuple(tuple(p.shape) for p in module.parameters()), int(module.state_size)


def action_fields(action_space: gym.Space) -> tuple[int, str, tuple[float, ...], tuple[float, ...]]:
    """(outputs, action kind, low, high) of a policy acting in `action_space`."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n), "discrete", (), ()
    if isinstance(action_space, gym.spaces.Box):
        low = np.broadcast_to(action_space.low, action_space.shape).ravel()
        high = np.broadcast_to(action_space.high, action_space.shape).ravel()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError("Box action spaces need finite bounds for a tanh policy")
        return int(low.size), "box", tuple(float(x) for x in low), tuple(float(x) for x in high)
    raise ValueError(f"unsupported action space {action_space}")


def spec_for_spaces(
    observation_space: gym.Space,
    action_space: gym.Space,
    hidden: tuple[int, ...],
    activation: str,
    kind: str = MLP,
    options: dict[str, Any] | None = None,
) -> PolicySpec:
    """The policy spec that fits an env's spaces: an mlp of `hidden` and `activation`, or a
    policy of `kind` with `options` (already checked against the kind's `Options`)."""
    from poet.policies.mlp import ACTIVATION_CODES

    if kind == MLP and activation not in ACTIVATION_CODES:
        raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATION_CODES)}")
    if not isinstance(observation_space, gym.spaces.Box):
        raise ValueError(f"policies read Box observations, got {observation_space}")
    shape = tuple(int(s) for s in observation_space.shape)
    outputs, action_kind, low, high = action_fields(action_space)
    if kind == MLP:
        return PolicySpec(int(np.prod(shape)), outputs, tuple(hidden), activation, action_kind, low, high)
    # a kind's own options are its whole description: the mlp fields stay empty
    return PolicySpec(
        int(np.prod(shape)), outputs, (), "", action_kind, low, high, kind, frozen_value(dict(options or {})), shape
    )
