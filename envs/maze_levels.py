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


# ------------------------------------------------------------------ dcd's level spaces
# dcd's editor actions (adversarial.py EDITOR_ACTION_SPACES): "-" a wall, "." empty, "a" the
# agent, "g" the goal. ACCEL's maze config edits with walls_none_goal
# (GoalLastEmptyAdversarialEnv_WNG); the default AdversarialEnv with walls_none_agent_goal.
EDITOR_ACTIONS = {"walls_none": "-.", "walls_none_goal": "-.g", "walls_none_agent_goal": "-.ag"}


def _place(rng: Any, taken: set[tuple[int, int]], size: int) -> tuple[int, int]:
    """minigrid's `place_obj` over the whole grid: (x, y) drawn uniform over it until the cell
    is free (the outer wall is never free)."""
    while True:
        x, y = int(rng.integers(0, size)), int(rng.integers(0, size))
        if 0 < x < size - 1 and 0 < y < size - 1 and (x, y) not in taken:
            return x, y


def sample(rng: Any, blocks: int, variable: bool, size: int = maze.SIZE) -> dict[str, Any]:
    """A random level as dcd's `AdversarialEnv.reset_random` draws it: the goal, the agent's
    start direction (drawn, then left to each reset: the level's `agent_dir` is None, as a
    replayed level's is in dcd), the agent, then the walls, each at a free cell. The walls
    number `blocks // 2` (dcd's "25 blocks" envs: 12), or with `variable` a number drawn
    uniform in [0, blocks) (dcd's "60 blocks uniform" envs, `resample_n_clutter`)."""
    if isinstance(blocks, bool) or not isinstance(blocks, (int, np.integer)) or blocks < (1 if variable else 0):
        raise ValueError(f"blocks must be an int >= {1 if variable else 0}, got {blocks!r}")
    goal = _place(rng, set(), size)
    rng.integers(0, 4)  # the start direction dcd draws here (each reset draws its own)
    agent = _place(rng, {goal}, size)
    count = int(rng.integers(0, blocks)) if variable else blocks // 2
    walls: set[tuple[int, int]] = set()
    for _ in range(count):
        walls.add(_place(rng, {goal, agent} | walls, size))
    return maze.level(walls, goal, agent, size, maze.MAX_STEPS)


def edit(values: Mapping[str, Any], rng: Any, edits: int, actions: str = "walls_none_goal") -> dict[str, Any]:
    """dcd's `mutate_level(num_edits)`: `edits` cells drawn with replacement, their unique set
    (in the order of Python's set, as dcd iterates it) each given an editor action drawn
    uniform, applied in turn; then a goal and an agent placed at a free cell where an edit
    removed them. The start direction is the level's."""
    if actions not in EDITOR_ACTIONS:
        raise ValueError(f"editor actions must be one of {', '.join(EDITOR_ACTIONS)}, got {actions!r}")
    choices = EDITOR_ACTIONS[actions]
    size = int(values["size"])
    inner = size - 2
    locs = list(set(np.asarray(rng.integers(0, inner * inner, edits)).tolist()))
    drawn = np.asarray(rng.integers(0, len(choices), len(locs))).tolist()
    walls = {(int(x), int(y)) for x, y in values["walls"]}
    goal: tuple[int, int] | None = (int(values["goal"][0]), int(values["goal"][1]))
    agent: tuple[int, int] | None = (int(values["agent"][0]), int(values["agent"][1]))
    free = np.ones((inner, inner), dtype=bool)  # [y - 1, x - 1], as dcd's free_mask
    for x, y in walls:
        free[y - 1, x - 1] = False
    free[agent[1] - 1, agent[0] - 1] = free[goal[1] - 1, goal[0] - 1] = False
    for loc, a in zip(locs, drawn):
        cell = (loc % inner + 1, loc // inner + 1)
        walls.discard(cell)  # dcd's _clean_loc
        if cell == goal:
            goal = None
        elif cell == agent:
            agent = None
        action = choices[a]
        if action == "-":
            walls.add(cell)
            free[cell[1] - 1, cell[0] - 1] = False
        elif action == ".":
            free[cell[1] - 1, cell[0] - 1] = True
        elif action == "a":
            if agent is not None:
                free[agent[1] - 1, agent[0] - 1] = True
            # dcd places the agent with place_obj over this one cell: two draws of one value
            agent = (int(rng.integers(cell[0], cell[0] + 1)), int(rng.integers(cell[1], cell[1] + 1)))
            free[cell[1] - 1, cell[0] - 1] = False
        else:
            if goal is not None:
                free[goal[1] - 1, goal[0] - 1] = True
            goal = cell
            free[cell[1] - 1, cell[0] - 1] = False
    if goal is None:
        goal = _free_cell(rng, free)
    if agent is None:
        x, y = _free_cell(rng, free)
        agent = (int(rng.integers(x, x + 1)), int(rng.integers(y, y + 1)))  # placed as above
    return maze.level(
        walls, goal, agent, size, int(values["max_steps"]), values["agent_dir"], values["see_through_walls"]
    )


def _free_cell(rng: Any, free: np.ndarray) -> tuple[int, int]:
    """dcd's `_free_xy_from_mask`: a free cell drawn uniform (`choice` over the free indices),
    then taken from the mask."""
    loc = int(rng.choice(np.flatnonzero(free)))
    x, y = loc % free.shape[1], loc // free.shape[1]
    free[y, x] = False
    return x + 1, y + 1


# ------------------------------------------------------------------ dcd's perfect mazes
def _edges_of(nodes: list, added: list) -> list:
    """`list(g.edges)` of a networkx graph whose nodes were added in `nodes` order, then the
    edges `added` in order: each node's neighbours in the order their edges came, an edge
    given once, from the node met first."""
    adjacency: dict = {node: {} for node in nodes}
    for u, v in added:
        adjacency[u][v] = adjacency[v][u] = None
    out, seen = [], set()
    for node, neighbours in adjacency.items():
        out += [(node, n) for n in neighbours if n not in seen]
        seen.add(node)
    return out


@cache
def _grid_graph_edges(h: int, w: int) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
    """The edges of networkx 2.5's `grid_graph([h, w])` in the order `list(g.edges)` gives
    them, which dcd shuffles: the cartesian product of a path of w nodes with a path of h
    (its edges along the first factor, then along the second), copied by `relabel_nodes`,
    each graph's edges read back by adjacency."""
    nodes = [(u, v) for u in range(w) for v in range(h)]
    added = [((u, x), (u + 1, x)) for u in range(w - 1) for x in range(h)]
    added += [((x, a), (x, a + 1)) for x in range(w) for a in range(h - 1)]
    return tuple(_edges_of(nodes, _edges_of(nodes, added)))


def perfect_maze(rng: Any, size: int) -> dict[str, Any]:
    """A level of dcd's `MSTMazeEnv` (PerfectMazeMedium: size 21): the agent and the goal at
    two distinct corners (`choice(4, 2, replace=False)`), then a maze by Kruskal's algorithm
    over the grid graph's edges in a shuffled order; the agent facing right, T = 2 * size^2."""
    if size < 5 or size % 2 == 0:
        raise ValueError(f"a perfect maze's size must be odd and >= 5, got {size!r}")
    corners = [(1, 1), (size - 2, 1), (1, size - 2), (size - 2, size - 2)]
    a, g = (int(i) for i in rng.choice(range(4), size=(2,), replace=False))
    n = (size - 2) // 2 + 1
    edges = list(_grid_graph_edges(n, n))
    rng.shuffle(edges)
    parent = {node: node for edge in edges for node in edge}

    def root(node: tuple[int, int]) -> tuple[int, int]:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    bit_map = np.ones((size - 2, size - 2), dtype=bool)  # [y, x] as dcd's; node (y, x) at (2y, 2x)
    for y, x in parent:
        bit_map[2 * y, 2 * x] = False
    for u, v in edges:
        ru, rv = root(u), root(v)
        if ru != rv:
            bit_map[u[0] + v[0], u[1] + v[1]] = False  # the wall between the two cells
            parent[ru] = rv
    walls = [[x + 1, y + 1] for y, x in zip(*np.nonzero(bit_map))]
    return maze.level(walls, corners[g], corners[a], size, 2 * size * size, agent_dir=0)


# ------------------------------------------------------------ dcd's gym-minigrid test mazes
def four_rooms(rng: Any) -> dict[str, Any]:
    """A level of dcd's FourRoomsEnv (`fourrooms.py`, on gym-minigrid 1.0.1): a 19 x 19 grid cut
    into four rooms by a wall cross, a door drawn in each of its four arms (in minigrid's
    room order), then the agent at a free cell with a drawn direction and the goal at
    another; walls hide what is behind them, T = 100."""
    size, room = 19, 19 // 2
    walls = {(room, y) for y in range(1, size - 1)} | {(x, room) for x in range(1, size - 1)}
    for j in range(2):
        for i in range(2):
            x_left, y_top = i * room, j * room
            if i == 0:
                walls.discard((x_left + room, int(rng.integers(y_top + 1, y_top + room))))
            if j == 0:
                walls.discard((int(rng.integers(x_left + 1, x_left + room)), y_top + room))
    agent = _place(rng, walls, size)
    direction = int(rng.integers(0, 4))
    goal = _place(rng, walls | {agent}, size)
    return maze.level(walls, goal, agent, size, 100, direction, see_through_walls=False)


def simple_crossing(rng: Any, size: int = 11, crossings: int = 5) -> dict[str, Any]:
    """A level of dcd's SimpleCrossingS11N5Env (`crossing.py`, on gym-minigrid 1.0.1): the agent
    at (1, 1) facing right, the goal at the far corner, `crossings` walls across the grid
    drawn among the even rows and columns, and one opening in each, placed so a path crosses
    them in a drawn order; walls hide what is behind them, T = 4 * size^2."""
    vertical, horizontal = "v", "h"
    rivers = [(vertical, i) for i in range(2, size - 2, 2)] + [(horizontal, j) for j in range(2, size - 2, 2)]
    rng.shuffle(rivers)
    rivers = rivers[:crossings]
    rivers_v = sorted(pos for kind, pos in rivers if kind == vertical)
    rivers_h = sorted(pos for kind, pos in rivers if kind == horizontal)
    walls = {(i, j) for i in range(1, size - 1) for j in rivers_h} | {
        (i, j) for i in rivers_v for j in range(1, size - 1)
    }
    path = [horizontal] * len(rivers_v) + [vertical] * len(rivers_h)
    rng.shuffle(path)
    limits_v, limits_h = [0, *rivers_v, size - 1], [0, *rivers_h, size - 1]
    room_i = room_j = 0
    for kind in path:
        if kind == horizontal:
            i = limits_v[room_i + 1]
            j = int(rng.choice(range(limits_h[room_j] + 1, limits_h[room_j + 1])))
            room_i += 1
        else:
            i = int(rng.choice(range(limits_v[room_i] + 1, limits_v[room_i + 1])))
            j = limits_h[room_j + 1]
            room_j += 1
        walls.discard((i, j))
    return maze.level(walls, (size - 2, size - 2), (1, 1), size, 4 * size * size, 0, see_through_walls=False)


# ---------------------------------------------------------------------- named level sets
EPISODES = 100  # dcd's eval.py --num_episodes
# dcd's zero-shot maze test set (results/minigrid_ood/*.csv), in its files' order
TEST_SET = (
    "SixteenRooms",
    "SixteenRoomsFewerDoors",
    "Labyrinth",
    "Labyrinth2",
    "Maze",
    "Maze2",
    "Maze3",
    "SimpleCrossingS11N5",
    "FourRooms",
    "SmallCorridor",
    "LargeCorridor",
    "PerfectMazeMedium",
)
EXTENDED_SET = ("PerfectMazeLarge", "PerfectMazeXL")  # the larger perfect mazes of dcd's eval.py
PERFECT_SIZES = {"PerfectMazeMedium": 21, "PerfectMazeLarge": 51, "PerfectMazeXL": 101}


def _stream_levels(make: Any, rng: Any, count: int) -> list[dict[str, Any]]:
    """Levels 1 to `count` of an env's stream: the level its constructor built (0) is never
    played, since an evaluation resets the env before its first episode."""
    make(rng)
    return [make(rng) for _ in range(count)]


def maze_episodes(name: str, count: int = EPISODES) -> list[dict[str, Any]]:
    """The levels of `count` episodes of dcd's test maze `name`, episode k's fixed so a run
    scores the same every time (dcd's own draws are not: see Known issues):

    * a fixed layout: the same level each episode;
    * a corridor: the goal drawn from `np.random.RandomState(k)` as dcd's constructor draws it;
    * SimpleCrossingS11N5: the level of gym's seed k (dcd's constructor seeds from the OS);
    * FourRooms and the perfect mazes: levels 1, 2, ... of the stream of the seed dcd's env
      always starts from (minigrid's 1337; MultiGrid's 52), as one dcd env plays them."""
    from envs.dcd_levels import legacy_gym_rng

    if name in PERFECT_SIZES:
        size = PERFECT_SIZES[name]
        return _stream_levels(lambda r: perfect_maze(r, size), legacy_gym_rng(52), count)
    if name == "FourRooms":
        return _stream_levels(four_rooms, legacy_gym_rng(1337), count)
    if name == "SimpleCrossingS11N5":
        return [simple_crossing(legacy_gym_rng(k)) for k in range(count)]
    if "goal" not in layouts().get(name, {"goal": None}):
        return [fixed_maze(name, np.random.RandomState(k)) for k in range(count)]
    return [fixed_maze(name)] * count


def level_sets() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The named sets, each level as the values of its episodes: "dcd-maze" (dcd's 12 test
    mazes) and "dcd-maze-extended" (the larger perfect mazes)."""
    return {
        "dcd-maze": {name: maze_episodes(name) for name in TEST_SET},
        "dcd-maze-extended": {name: maze_episodes(name) for name in EXTENDED_SET},
    }
