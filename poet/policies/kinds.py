"""Policy kinds: the registry, the contract a kind's network keeps, and building one from a spec.

A kind is a `torch.nn.Module` class (`policy.kind` names a registered one or a user's
`package.module:Name`) that keeps this contract:

- `Options`: a dataclass of the kind's options, each typed with a default (`policy.options`
  in the config; an unknown option is an error naming it). Optional: without it the kind
  takes no options. A `check() -> [(field, problem)]` method on it is called if present.
- `state_size`: floats of recurrent state per episode, an int (0: feed-forward). The state
  starts at zero at every episode start.
- `__init__(obs_shape, n_outputs, options)`: the network for observations of `obs_shape`
  (a Box's shape) and `n_outputs` outputs: for a Box action space the pre-squash actions
  (squashed by tanh to the bounds), for a Discrete one the logits (the evaluators take the
  argmax). It may raise ValueError for options the observations do not allow.
- `forward(obs, state) -> (outputs, state)`: a batch of observations `(B, *obs_shape)` and
  states `(B, state_size)`, float32; each row's outputs depend on that row alone.

The weights of every kind are one flat float32 vector, `parameters_to_vector`'s order. The
`mlp` kind takes its options from `policy.hidden` and `policy.activation` and its forward
is compiled (`poet.policies.mlp`); its torch module is for training code.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Protocol, runtime_checkable

from poet.plugins import import_named
from poet.policies.spec import MLP, PolicySpec

# name -> the module class, as `package.module:Name` (imported when used: torch loads then).
POLICY_KINDS: dict[str, str] = {
    MLP: "poet.policies.mlp_torch:MLPPolicy",
    "cnn": "poet.policies.cnn:CNNPolicy",
    "lstm": "poet.policies.lstm:LSTMPolicy",
    "cnn_lstm": "poet.policies.cnn_lstm:CNNLSTMPolicy",
}


@runtime_checkable
class PolicyNet(Protocol):
    """What a policy kind's module gives (see the module docstring)."""

    state_size: int

    def forward(self, obs: Any, state: Any) -> tuple[Any, Any]:
        """Outputs and next state for a batch of observations and states."""
        ...


@functools.lru_cache(maxsize=32)
def resolve_kind(name: str) -> type:
    """The module class of a registered kind or of `package.module:Name`; ValueError saying what is wrong."""
    path = POLICY_KINDS.get(name, name)
    if ":" not in path:
        raise ValueError(
            f"unknown policy kind {name!r}; registered: {', '.join(POLICY_KINDS)}, "
            "or name your own torch module as 'package.module:Name'"
        )
    cls = import_named(path, "policy kind")
    import torch

    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ValueError(f"policy kind {name!r} is not a torch.nn.Module subclass (docs/policies.md)")
    return cls


def options_class(cls: type) -> type | None:
    """A kind's `Options` dataclass (None: it takes no options)."""
    options = getattr(cls, "Options", None)
    return options if options is not None and dataclasses.is_dataclass(options) else None


def build_module(spec: PolicySpec) -> PolicyNet:
    """A fresh torch module of the spec's kind (its weights as torch initialises them)."""
    cls = resolve_kind(spec.kind)
    if spec.compiled:
        return cls(spec)
    options_cls = options_class(cls)
    options = options_cls(**spec.options_dict()) if options_cls is not None else None
    module = cls(spec.shape, spec.act_dim, options)
    if not isinstance(getattr(module, "state_size", None), int) or module.state_size < 0:
        raise ValueError(
            f"policy kind {spec.kind!r} declares no `state_size` (an int: floats of recurrent state per "
            "episode, 0 for a feed-forward network; docs/policies.md)"
        )
    return module
