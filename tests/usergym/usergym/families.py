"""The user's family factory: `env.family: usergym.families:make_family` returns a plain
GymFamily (no subclass) over the env id that importing `usergym` registers."""

from __future__ import annotations

from typing import Any

from envs.generic import GymFamily
from usergym import ENV_ID

SPEC: dict[str, Any] = {
    "name": "drift",
    "env_id": ENV_ID,
    "params": {
        "drift": {"initial": 0.1, "low": -0.5, "high": 0.5, "step": 0.2},
        "target": {"initial": 1.0, "low": -2.0, "high": 2.0, "step": 0.5},
    },
    "scores": {"solved": 30.0, "reproduce": 5.0, "mc_lower": 1.0, "mc_upper": 39.0},
}


def make_family(**overrides: Any) -> GymFamily:
    """The factory a config names; `env.options` override the spec's top-level keys."""
    return GymFamily({**SPEC, **overrides})
