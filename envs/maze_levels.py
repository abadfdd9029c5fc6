"""dcd's fixed test mazes (`envs/multigrid/maze.py`) as maze levels, read from the layouts
shipped in `envs/published/dcd_mazes/` (their source named there).

Each maze starts the agent facing right (dcd's `place_agent_at_pos` draws no direction) and
has dcd's step limit, 2 * size^2. The two corridors draw their goal as dcd's constructors do,
a row and then a column, each uniform among dcd's candidates (`np.random.choice`).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from envs import maze
from envs.maze_core import WALL

LAYOUTS = Path(__file__).resolve().parent / "published" / "dcd_mazes" / "layouts.json"


@cache
def layouts() -> dict[str, dict[str, Any]]:
    """The shipped layouts, by maze name (`Maze`, `Maze2`, ..., dcd's gym ids without
    `MultiGrid-` and `-v0`)."""
    return json.loads(LAYOUTS.read_text())["layouts"]


def fixed_maze(name: str, rng: Any = None) -> dict[str, Any]:
    """The level values of dcd's maze `name`; a corridor's goal is drawn from `rng` (anything
    with numpy's `choice`), which the other mazes do not need."""
    known = layouts()
    if name not in known:
        raise ValueError(f"unknown maze {name!r}; dcd's fixed mazes: {', '.join(known)}")
    entry = known[name]
    walls = [[x + 1, y + 1] for y, row in enumerate(entry["bit_map"]) for x, bit in enumerate(row) if bit == "1"]
    if "goal" in entry:
        goal = entry["goal"]
    else:
        if rng is None:
            raise ValueError(f"maze {name!r} draws its goal: give an rng")
        row = int(rng.choice(entry["goal_rows"]))
        goal = [int(rng.choice(entry["goal_cols"])), row]
    return maze.level(walls, goal, entry["start"], entry["size"], entry["max_steps"], agent_dir=0)


def shortest_path(values: Mapping[str, Any]) -> int | None:
    """Moves from the agent's start to the goal through open cells, as dcd's
    `compute_shortest_path` counts them (4-neighbour steps, turns not counted); None when no
    path exists."""
    grid = maze.grid_of(values)
    start, goal = tuple(values["agent"]), tuple(values["goal"])
    seen = np.zeros(grid.shape, dtype=bool)
    seen[start] = True
    queue = deque([(start, 0)])
    while queue:
        (x, y), d = queue.popleft()
        if (x, y) == goal:
            return d
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nx, ny = x + dx, y + dy
            if not seen[nx, ny] and grid[nx, ny] != WALL:
                seen[nx, ny] = True
                queue.append(((nx, ny), d + 1))
    return None
