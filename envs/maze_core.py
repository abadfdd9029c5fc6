"""The maze's rules, compiled: dcd's single-agent MultiGrid maze (`envs/multigrid/multigrid.py`
on gym-minigrid 1.0.1, as `adversarial.py` and `maze.py` use it), one step and one view at a
time, with no Python per step.

A grid is a (size, size) uint8 array of minigrid's object codes indexed [x, y], x to the right
and y down, its outer ring walls. The agent is not in the grid: its position and direction are
kept beside it. The rules, as dcd's env applies them with one agent:

* actions: 0 turn left, 1 turn right, 2 forward, and 3-6 (pickup, drop, toggle, done), which
  change nothing in a maze (nothing to carry; walls and goals do not toggle);
* forward into a wall stays; forward onto the goal ends the episode with the reward
  1 - 0.9 * t / T (t the steps so far, this one included; T the level's step limit); the
  episode also ends when t reaches T, with reward 0;
* the view: the 5 x 5 cells ahead of the agent, the agent at the middle of the bottom row
  facing up, cells outside the grid seen as walls, the agent's own cell seen as empty. Each
  cell is encoded as minigrid's (object, colour, state): empty (1, 0, 0), wall (2, 5, 0),
  goal (8, 1, 0). dcd's MultiGrid mazes see through walls (`see_through_walls=True`); its
  two gym-minigrid test mazes (FourRooms, SimpleCrossing) do not: there a cell hidden behind
  walls, by minigrid's `process_vis`, reads unseen (0, 0, 0).

The step rules of the two kinds of env differ only where an episode ends at the goal: dcd's
MultiGrid env takes the agent off the grid and respawns it at a random cell, minigrid's moves
it onto the goal; here the agent moves onto the goal in both, so the last observation of an
episode that reached the goal is minigrid's and not dcd's MultiGrid's (which nothing learns
from: the episode is over).

The constants live here, beside the kernels, because numba freezes module globals into the
compiled code and its cache is keyed on this file.
"""

from __future__ import annotations

import numba
import numpy as np

# minigrid 1.0.1's OBJECT_TO_IDX and COLOR_TO_IDX for the objects of a maze
UNSEEN, EMPTY, WALL, GOAL = 0, 1, 2, 8
WALL_COLOUR, GOAL_COLOUR = 5, 1  # grey, green
VIEW = 5  # dcd's agent_view_size
N_ACTIONS = 7  # dcd's MultiGridEnv.Actions: left, right, forward, pickup, drop, toggle, done
LEFT, RIGHT, FORWARD = 0, 1, 2
# minigrid's DIR_TO_VEC: 0 right, 1 down, 2 left, 3 up
DIR_DX = np.array([1, 0, -1, 0], dtype=np.int64)
DIR_DY = np.array([0, 1, 0, -1], dtype=np.int64)


@numba.njit(cache=True)
def _visible(cells: np.ndarray) -> np.ndarray:
    """minigrid 1.0.1's `process_vis` on a turned view, the agent at (2, 4): sight spreads
    from the agent row by row away from it, sideways and forward, and stops at a wall."""
    mask = np.zeros((VIEW, VIEW), dtype=np.bool_)
    mask[VIEW // 2, VIEW - 1] = True
    for j in range(VIEW - 1, -1, -1):
        for i in range(VIEW - 1):
            if mask[i, j] and cells[i, j] != WALL:
                mask[i + 1, j] = True
                if j > 0:
                    mask[i + 1, j - 1] = True
                    mask[i, j - 1] = True
        for i in range(VIEW - 1, 0, -1):
            if mask[i, j] and cells[i, j] != WALL:
                mask[i - 1, j] = True
                if j > 0:
                    mask[i - 1, j - 1] = True
                    mask[i, j - 1] = True
    return mask


@numba.njit(cache=True)
def view(grid: np.ndarray, x: int, y: int, direction: int, see_through: bool, out: np.ndarray) -> None:
    """The agent's 5 x 5 x 3 view from (x, y) facing `direction`, into `out` ([i, j, channel]
    as dcd's `gen_obs` returns it): minigrid's slice of the grid, rotated left direction + 1
    times, hidden cells found (unless `see_through`), the agent's cell emptied, then encoded."""
    size = grid.shape[0]
    half = VIEW // 2
    if direction == 0:
        top_x, top_y = x, y - half
    elif direction == 1:
        top_x, top_y = x - half, y
    elif direction == 2:
        top_x, top_y = x - VIEW + 1, y - half
    else:
        top_x, top_y = x - half, y - VIEW + 1
    cells = np.empty((VIEW, VIEW), dtype=np.uint8)
    for i in range(VIEW):
        for j in range(VIEW):
            gx, gy = top_x + i, top_y + j
            if 0 <= gx < size and 0 <= gy < size:
                cells[i, j] = grid[gx, gy]
            else:
                cells[i, j] = WALL
    turned = np.empty((VIEW, VIEW), dtype=np.uint8)
    for _ in range(direction + 1):  # minigrid's rotate_left: new[j, n - 1 - i] = old[i, j]
        for i in range(VIEW):
            for j in range(VIEW):
                turned[j, VIEW - 1 - i] = cells[i, j]
        cells[:, :] = turned
    seen = np.ones((VIEW, VIEW), dtype=np.bool_) if see_through else _visible(cells)
    cells[half, VIEW - 1] = EMPTY  # the agent's own cell (gen_obs_grid sets it to None)
    for i in range(VIEW):
        for j in range(VIEW):
            code = cells[i, j] if seen[i, j] else UNSEEN
            out[i, j, 0] = code
            out[i, j, 1] = WALL_COLOUR if code == WALL else (GOAL_COLOUR if code == GOAL else 0)
            out[i, j, 2] = 0


@numba.njit(cache=True)
def step(grid: np.ndarray, state: np.ndarray, action: int, max_steps: int) -> tuple[float, bool, bool]:
    """One step of dcd's env: `state` = [x, y, direction, t] changed in place; returns
    (reward, reached the goal, out of time)."""
    x, y, d = state[0], state[1], state[2]
    state[3] += 1
    reward = 0.0
    at_goal = False
    if action == LEFT:
        state[2] = (d + 3) % 4
    elif action == RIGHT:
        state[2] = (d + 1) % 4
    elif action == FORWARD:
        fx, fy = x + DIR_DX[d], y + DIR_DY[d]
        ahead = grid[fx, fy]
        if ahead == GOAL:
            at_goal = True
            reward = 1.0 - 0.9 * (state[3] / max_steps)
            state[0], state[1] = fx, fy
        elif ahead != WALL:
            state[0], state[1] = fx, fy
    return reward, at_goal, state[3] >= max_steps


@numba.njit(cache=True)
def play(
    grid: np.ndarray,
    start: np.ndarray,
    max_steps: int,
    see_through: bool,
    actions: np.ndarray,
    obs: np.ndarray,
    rewards: np.ndarray,
    ends: np.ndarray,
) -> int:
    """`actions` stepped in turn from `start` = [x, y, direction], the view after each step
    into `obs[t]`, its reward into `rewards[t]` and how it ended into `ends[t]` (0 going on,
    1 at the goal, 2 out of time), back at `start` after each end; returns the episodes
    ended. All in compiled code: the engine alone, without gymnasium's per-step Python."""
    state = np.zeros(4, dtype=np.int64)
    state[:3] = start
    ended = 0
    for t in range(actions.shape[0]):
        reward, at_goal, out_of_time = step(grid, state, actions[t], max_steps)
        rewards[t] = reward
        view(grid, state[0], state[1], state[2], see_through, obs[t])
        ends[t] = 1 if at_goal else (2 if out_of_time else 0)
        if at_goal or out_of_time:
            ended += 1
            state[:3] = start
            state[3] = 0
    return ended
