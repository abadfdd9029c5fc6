"""CartPole whose physical constants are constructor arguments, so POET can evolve them.

gymnasium's CartPoleEnv hard-codes gravity, masses, pole length and force in its
constructor; this subclass takes them as keyword arguments and is registered with
gymnasium as `poet/CartPolePhysics-v1`. With `observe_velocities=False` the observation is
the cart's position and the pole's angle alone: a partially observed task, which a policy
solves only by remembering (a recurrent policy kind) what a feed-forward one cannot see.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "poet/CartPolePhysics-v1"
ENTRY_POINT = "envs.cartpole_physics:CartPolePhysicsEnv"
MAX_EPISODE_STEPS = 500
OBSERVED = (0, 2)  # cart position and pole angle: what is left without the velocities


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
        observe_velocities: bool = True,
    ):
        super().__init__(sutton_barto_reward=sutton_barto_reward, render_mode=render_mode)
        if not isinstance(observe_velocities, bool):
            raise ValueError(
                f"CartPolePhysicsEnv: observe_velocities must be true or false, got {observe_velocities!r}"
            )
        self.observe_velocities = observe_velocities
        if not observe_velocities:
            full = self.observation_space
            self.observation_space = gym.spaces.Box(
                full.low[list(OBSERVED)], full.high[list(OBSERVED)], dtype=np.float32
            )
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

    def _observe(self, obs: np.ndarray) -> np.ndarray:
        return obs if self.observe_velocities else obs[list(OBSERVED)]

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """gymnasium's step; without velocities, the observation keeps position and angle only."""
        obs, reward, terminated, truncated, info = super().step(action)
        return self._observe(obs), reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """gymnasium's reset; without velocities, the observation keeps position and angle only."""
        obs, info = super().reset(seed=seed, options=options)
        return self._observe(obs), info


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
