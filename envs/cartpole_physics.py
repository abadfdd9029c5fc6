"""CartPole whose physical constants are constructor arguments, so POET can evolve them.

gymnasium's CartPoleEnv hard-codes gravity, masses, pole length and force in its
constructor; this subclass takes them as keyword arguments and is registered with
gymnasium as `poet/CartPolePhysics-v1`.
"""

from __future__ import annotations

import math
import numbers

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "poet/CartPolePhysics-v1"
ENTRY_POINT = "envs.cartpole_physics:CartPolePhysicsEnv"
MAX_EPISODE_STEPS = 500


class CartPolePhysicsEnv(CartPoleEnv):
    """gymnasium's CartPole with gravity, masscart, masspole, length and force_mag as kwargs."""

    def __init__(
        self,
        gravity: float = 9.8,
        masscart: float = 1.0,
        masspole: float = 0.1,
        length: float = 0.5,
        force_mag: float = 10.0,
        render_mode: str | None = None,
        sutton_barto_reward: bool = False,
    ):
        super().__init__(sutton_barto_reward=sutton_barto_reward, render_mode=render_mode)
        constants = {
            "gravity": gravity,
            "masscart": masscart,
            "masspole": masspole,
            "length": length,
            "force_mag": force_mag,
        }
        for name, value in constants.items():
            _check_positive(name, value)
            setattr(self, name, float(value))
        # The parent derives these from its own defaults; recompute them from ours.
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length


def _check_positive(name: str, value: float) -> None:
    """Reject constants that would make the dynamics meaningless (zero mass, negative length)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"CartPolePhysicsEnv: {name} must be a finite number > 0, got {value!r}")


def register() -> None:
    """Register `poet/CartPolePhysics-v1` with gymnasium (idempotent)."""
    if ENV_ID in gym.registry:
        return
    gym.register(id=ENV_ID, entry_point=ENTRY_POINT, max_episode_steps=MAX_EPISODE_STEPS, reward_threshold=475.0)


register()
