"""A user's own gymnasium env, outside the project: a point that drifts towards a target.

Importing the package registers `usergym/Drift-v0` (tests put tests/usergym on PYTHONPATH);
nothing in `poet/` or `envs/` registers it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ENV_ID = "usergym/Drift-v0"


class DriftEnv(gym.Env):
    """A point on a line pushed by the action and by a constant drift; reward 1 at the target,
    falling off with the distance to it."""

    metadata = {"render_modes": []}

    def __init__(self, drift: float = 0.1, target: float = 1.0, render_mode: str | None = None):
        self.drift, self.target = float(drift), float(target)
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-30.0, 30.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.x = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """A start near the origin, drawn from the env's own seeded generator."""
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-0.5, 0.5))
        return self._obs(), {}

    def step(self, action: Any):
        """One move: the action and the drift push the point; the reward is its closeness to the target."""
        push = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        self.x = float(np.clip(self.x + 0.1 * (push + self.drift), -10.0, 10.0))
        reward = 1.0 - min(abs(self.x - self.target), 2.0)
        return self._obs(), reward, False, False, {}

    def _obs(self) -> np.ndarray:
        return np.array([self.x, self.target - self.x], dtype=np.float32)


# A string entry point, as gymnasium's own envs are registered: the class is found by name.
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:DriftEnv", max_episode_steps=40)
