"""dcd's partially observed maze: a level's values, its grid, and a gymnasium env stepped by the
compiled rules of `envs.maze_core`.

A level's values:

* `size`: the grid's side, its outer wall included (dcd's training mazes: 15);
* `walls`: the [x, y] cells inside the outer wall that hold a wall (x to the right, y down,
  both from 1 to size - 2, as dcd's grid coordinates);
* `goal` and `agent`: the [x, y] cells of the goal and of the agent's start;
* `agent_dir`: the start direction (0 right, 1 down, 2 left, 3 up), or None: drawn at each
  reset from the episode's seed, as dcd's `AdversarialEnv.reset` draws it for every training
  level (its fixed test mazes start facing right, 0);
* `max_steps`: T, the episode's step limit and the scale of its reward 1 - 0.9 * t / T
  (dcd: 250 for training levels, 2 * size^2 for its test mazes);
* `see_through_walls`: whether walls leave the cells behind them in view (dcd's MultiGrid
  mazes: true; its gym-minigrid test mazes, FourRooms and SimpleCrossing: false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs import maze_core as core
from envs.base import EnvParamError, EnvParams

FAMILY = "maze"
SIZE = 15  # dcd's training mazes
MAX_STEPS = 250  # dcd's AdversarialEnv


def level(
    walls: list[list[int]] | tuple = (),
    goal: tuple[int, int] = (SIZE - 2, SIZE - 2),
    agent: tuple[int, int] = (1, 1),
    size: int = SIZE,
    max_steps: int = MAX_STEPS,
    agent_dir: int | None = None,
    see_through_walls: bool = True,
) -> dict[str, Any]:
    """A level's values (walls sorted, so equal levels have equal values)."""
    return {
        "see_through_walls": bool(see_through_walls),
        "size": int(size),
        "walls": sorted([int(x), int(y)] for x, y in walls),
        "goal": [int(goal[0]), int(goal[1])],
        "agent": [int(agent[0]), int(agent[1])],
        "agent_dir": None if agent_dir is None else int(agent_dir),
        "max_steps": int(max_steps),
    }


def problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for every value that does not make a maze."""
    want = {"size", "walls", "goal", "agent", "agent_dir", "max_steps", "see_through_walls"}
    if set(values) != want:
        return [("values", f"a maze level has exactly {sorted(want)}, got {sorted(values)}")]
    size = values["size"]
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 3:
        return [("size", f"must be an int >= 3, got {size!r}")]
    found = []

    def inside(cell: Any) -> bool:
        return (
            isinstance(cell, (list, tuple))
            and len(cell) == 2
            and all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 1 <= c <= size - 2 for c in cell)
        )

    walls = values["walls"]
    if not isinstance(walls, (list, tuple)) or not all(inside(c) for c in walls):
        found.append(("walls", f"must be [x, y] cells with x and y in [1, {size - 2}]"))
        walls = []
    for name in ("goal", "agent"):
        if not inside(values[name]):
            found.append((name, f"must be an [x, y] cell with x and y in [1, {size - 2}], got {values[name]!r}"))
        elif [*values[name]] in [[*c] for c in walls]:
            found.append((name, f"{values[name]!r} is a wall"))
    if inside(values["goal"]) and inside(values["agent"]) and [*values["goal"]] == [*values["agent"]]:
        found.append(("agent", "the agent starts on the goal"))
    d = values["agent_dir"]
    if d is not None and (isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d <= 3):
        found.append(("agent_dir", f"must be None or 0-3, got {d!r}"))
    if not isinstance(values["see_through_walls"], (bool, np.bool_)):
        found.append(("see_through_walls", f"must be true or false, got {values['see_through_walls']!r}"))
    t = values["max_steps"]
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        found.append(("max_steps", f"must be a positive int, got {t!r}"))
    return found


def validate_level(params: EnvParams) -> None:
    """An EnvParamError naming the first bad field of a maze level."""
    for name, problem in problems(params.values):
        raise EnvParamError(FAMILY, name, problem)


def grid_of(values: Mapping[str, Any]) -> np.ndarray:
    """The level's (size, size) grid of minigrid object codes, indexed [x, y]: the outer wall,
    the walls, the goal (the agent is kept beside the grid)."""
    size = int(values["size"])
    grid = np.full((size, size), core.EMPTY, dtype=np.uint8)
    grid[0, :] = grid[-1, :] = grid[:, 0] = grid[:, -1] = core.WALL
    for x, y in values["walls"]:
        grid[x, y] = core.WALL
    gx, gy = values["goal"]
    grid[gx, gy] = core.GOAL
    return grid


AGENT = 10  # minigrid's OBJECT_TO_IDX["agent"]: dcd's level encoding holds the agent, its id 0 and direction


def encoding(values: Mapping[str, Any], direction: int) -> np.ndarray:
    """dcd's level encoding (`AdversarialEnv.encoding`, `grid.encode()`): the (size, size, 3)
    array of every cell's (object, colour, state) indexed [x, y], the agent at its start
    facing `direction`."""
    grid = grid_of(values)
    out = np.zeros((*grid.shape, 3), dtype=np.uint8)
    out[:, :, 0] = grid
    out[:, :, 1] = np.where(grid == core.WALL, core.WALL_COLOUR, np.where(grid == core.GOAL, core.GOAL_COLOUR, 0))
    ax, ay = values["agent"]
    out[ax, ay] = (AGENT, 0, direction)
    return out


class MazeEnv(gym.Env):
    """One maze level as dcd's env plays it: observations {"image": the 5 x 5 x 3 view,
    "direction": [0-3]}, 7 discrete actions, terminated at the goal, truncated at T."""

    metadata = {"render_modes": []}

    def __init__(self, params: EnvParams):
        validate_level(params)
        self.params = params
        self.grid = grid_of(params.values)
        self.max_steps = int(params.values["max_steps"])
        self.see_through = bool(params.values["see_through_walls"])
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (core.VIEW, core.VIEW, 3), np.uint8),
                "direction": spaces.Box(0, 3, (1,), np.uint8),
            }
        )
        self.action_space = spaces.Discrete(core.N_ACTIONS)
        self.state = np.zeros(4, dtype=np.int64)  # x, y, direction, steps taken

    def _obs(self) -> dict[str, np.ndarray]:
        image = np.empty((core.VIEW, core.VIEW, 3), dtype=np.uint8)
        x, y, direction = (int(v) for v in self.state[:3])
        core.view(self.grid, x, y, direction, self.see_through, image)
        return {"image": image, "direction": np.array([self.state[2]], dtype=np.uint8)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        v = self.params.values
        direction = v["agent_dir"] if v["agent_dir"] is not None else int(self.np_random.integers(4))
        self.state[:] = (v["agent"][0], v["agent"][1], direction, 0)
        return self._obs(), {}

    def step(self, action: int) -> tuple[dict, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an int in [0, {core.N_ACTIONS}), got {action!r}")
        reward, at_goal, out_of_time = core.step(self.grid, self.state, int(action), self.max_steps)
        return self._obs(), reward, at_goal, out_of_time and not at_goal, {}
