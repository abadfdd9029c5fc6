"""The maze's level spaces draw as dcd's do, draw for draw.

tests/data/dcd_maze_levels_golden.json holds what dcd's own code made outside this project
(facebookresearch/dcd @72991be `envs/multigrid/adversarial.py`, gym 0.15.7, gym-minigrid
1.0.1): levels from `reset_random` of its 25-block DR env, its 60-block uniform env and
ACCEL's empty start, and levels from three `mutate_level(5)` in a row on them; each with the
log of every random draw the op made (dcd's env stream and numpy's global one, in call order).

`Replay` answers this project's ops with those draws, checking that each call is the one dcd
made (the function, its bounds, its size), so a level equal to dcd's means the same draws in
the same order and the same rules.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from envs import EnvParams, maze, maze_levels
from tests.conftest import ROOT

GOLDEN = json.loads((ROOT / "tests" / "data" / "dcd_maze_levels_golden.json").read_text())
CASES = GOLDEN["cases"]
SPACES = {  # dcd's env class -> (blocks, variable)
    "GoalLastFewerBlocksAdversarialEnv": (25, False),
    "GoalLastVariableBlocksAdversarialEnv": (60, True),
    "GoalLastEmptyAdversarialEnv_WNG": (0, False),
}
EDITORS = {
    "GoalLastFewerBlocksAdversarialEnv": "walls_none_agent_goal",
    "GoalLastEmptyAdversarialEnv_WNG": "walls_none_goal",
}


class Replay:
    """dcd's logged draws, handed out in order to a caller that must make the same calls."""

    def __init__(self, log: list):
        self.log = list(log)

    def _next(self, fn: str, args: list):
        assert self.log, f"a draw dcd did not make: {fn}{args}"
        _, logged_fn, logged_args, result = self.log.pop(0)
        assert (fn, args) == (logged_fn, logged_args), f"dcd drew {logged_fn}{logged_args} here, not {fn}{args}"
        return np.asarray(result) if isinstance(result, list) else result

    def integers(self, low, high, size=None):
        return self._next("randint", [low, high] + ([size] if size is not None else []))

    def choice(self, a):
        return self._next("choice", [np.asarray(a).tolist()])


def values_of(entry: dict) -> dict:
    return {k: entry[k] for k in ("walls", "goal", "agent")}


def test_the_classes_are_the_spaces_dcds_configs_train_on():
    for name, (blocks, variable) in SPACES.items():
        assert GOLDEN["n_clutter"][name] == [blocks, variable]
    for name, editor in EDITORS.items():
        assert GOLDEN["editor_actions"][name] == list(maze_levels.EDITOR_ACTIONS[editor])


@pytest.mark.parametrize("case", ["dr25", "dr60_variable", "accel_start"])
def test_a_random_level_is_dcds_reset_random(case):
    for entry in CASES[case]:
        blocks, variable = SPACES[entry["class"]]
        replay = Replay(entry["log"])
        level = maze_levels.sample(replay, blocks, variable)
        assert replay.log == [], "draws dcd made that this did not"
        assert {k: level[k] for k in ("walls", "goal", "agent")} == values_of(entry)
        assert level["agent_dir"] is None and level["max_steps"] == 250 and level["size"] == 15
        maze.validate_level(EnvParams.create(maze.FAMILY, level))


def test_an_edit_is_dcds_mutate_level():
    by_source = {(c, i): e for c in ("dr25", "accel_start") for i, e in enumerate(CASES[c])}
    edited = 0
    for entry in CASES["accel_edit"]:
        if entry["edit_index"] == 0:
            before = by_source[(entry["source_case"], entry["source_index"])]
        level = maze.level(before["walls"], before["goal"], before["agent"], agent_dir=before["agent_dir"])
        replay = Replay(entry["log"])
        after = maze_levels.edit(level, replay, entry["num_edits"], EDITORS[entry["class"]])
        assert replay.log == [], "draws dcd made that this did not"
        assert {k: after[k] for k in ("walls", "goal", "agent")} == values_of(entry)
        assert after["agent_dir"] == before["agent_dir"]  # dcd's edits keep the start direction
        edited += after != level
        before = entry
    assert edited > 150


def test_the_spaces_with_numpys_generator_give_valid_levels_of_dcds_sizes():
    rng = np.random.default_rng(0)
    counts = [len(maze_levels.sample(rng, 60, True)["walls"]) for _ in range(300)]
    assert min(counts) == 0 and max(counts) == 59
    assert {len(maze_levels.sample(rng, 25, False)["walls"]) for _ in range(20)} == {12}
    level = maze_levels.sample(rng, 0, False)
    for _ in range(50):
        level = maze_levels.edit(level, rng, 5)
        maze.validate_level(EnvParams.create(maze.FAMILY, level))
    with pytest.raises(ValueError, match="blocks must be an int >= 1, got 0"):
        maze_levels.sample(rng, 0, True)
    with pytest.raises(ValueError, match="editor actions must be one of walls_none, walls_none_goal"):
        maze_levels.edit(level, rng, 5, "walls")


PERFECT = json.loads((ROOT / "tests" / "data" / "dcd_perfect_maze_golden.json").read_text())["classes"]


def test_the_grid_graphs_edges_come_in_networkxs_order():
    edges = PERFECT["PerfectMazeSmall"]["edges"]
    assert [[list(u), list(v)] for u, v in maze_levels._grid_graph_edges(5, 5)] == edges


@pytest.mark.parametrize("name", sorted(PERFECT))
def test_a_perfect_maze_is_dcds_from_its_seed_52_stream(name):
    """dcd's MSTMazeEnv reseeds every instance with MultiGridEnv's default seed 52 (gym's
    seeding), so each instance's first maze is the same and its later resets go on the stream."""
    from envs import dcd_levels

    entry = PERFECT[name]
    assert entry["first_level_same_across_instances"]
    rng = dcd_levels.legacy_gym_rng(52)
    for want in entry["levels"]:
        level = maze_levels.perfect_maze(rng, entry["size"])
        assert level["max_steps"] == entry["max_steps"] and level["agent_dir"] == want["agent_dir"] == 0
        assert (level["goal"], level["agent"], len(level["walls"])) == (want["goal"], want["agent"], want["n_walls"])
        text = json.dumps(level["walls"], separators=(",", ":"))
        assert hashlib.sha256(text.encode()).hexdigest() == want["walls_sha256"]
        assert maze_levels.shortest_path(level) is not None  # a perfect maze joins every cell


def test_dcds_test_set_is_its_twelve_mazes_each_episode_fixed_and_solvable():
    sets = {"dcd-maze": {name: maze_levels.maze_episodes(name) for name in maze_levels.TEST_SET}}
    published = ["SixteenRooms", "SixteenRoomsFewerDoors", "Labyrinth", "Labyrinth2", "Maze", "Maze2", "Maze3"]
    published += ["SimpleCrossingS11N5", "FourRooms", "SmallCorridor", "LargeCorridor", "PerfectMazeMedium"]
    assert list(sets["dcd-maze"]) == published  # the rows of dcd's results/minigrid_ood CSVs
    for name, episodes in sets["dcd-maze"].items():
        assert len(episodes) == maze_levels.EPISODES == 100
        assert episodes == maze_levels.maze_episodes(name), "the same episodes every time"
        for values in episodes:
            maze.validate_level(EnvParams.create(maze.FAMILY, values))
            assert maze_levels.shortest_path(values) is not None, name
    distinct = {name: len({json.dumps(v, sort_keys=True) for v in e}) for name, e in sets["dcd-maze"].items()}
    assert distinct["Maze"] == 1 and distinct["SmallCorridor"] == 10 and distinct["LargeCorridor"] == 16
    assert distinct["FourRooms"] == distinct["PerfectMazeMedium"] == 100
    assert distinct["SimpleCrossingS11N5"] == 99  # two seeds of 100 draw the same crossing


@pytest.mark.slow
def test_the_extended_set_is_dcds_larger_perfect_mazes_each_solvable():
    sets = maze_levels.level_sets()
    assert list(sets) == ["dcd-maze", "dcd-maze-extended"]
    assert list(sets["dcd-maze-extended"]) == ["PerfectMazeLarge", "PerfectMazeXL"]
    for name, episodes in sets["dcd-maze-extended"].items():
        assert {v["size"] for v in episodes} == {maze_levels.PERFECT_SIZES[name]}
        assert all(maze_levels.shortest_path(v) is not None for v in episodes)
