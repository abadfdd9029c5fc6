"""The maze env is dcd's, step for step.

tests/data/dcd_maze_golden.json holds numbers made outside this project by dcd's own code
(facebookresearch/dcd @72991be `envs/multigrid`, on gym 0.15.7 and gym-minigrid 1.0.1): its
DR levels (25 and 60 blocks), levels edited by its `mutate_level`, and its fixed test mazes,
each with an action sequence (random, or half random and half a shortest path to the goal)
and what dcd's env returned: every observation (image and direction, as one sha256 over the
episode), every reward and every end. The last observation of an episode that reached the
goal is left out: dcd's env respawns the agent at a random cell there.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs import EnvParams, maze
from envs import maze_core as core
from tests.conftest import ROOT

GOLDEN = json.loads((ROOT / "tests" / "data" / "dcd_maze_golden.json").read_text())
LEVELS = GOLDEN["levels"]


def params_of(entry: dict) -> EnvParams:
    values = maze.level(
        walls=entry["walls"],
        goal=entry["goal"],
        agent=entry["agent"],
        size=entry["size"],
        max_steps=entry["max_steps"],
        agent_dir=entry["agent_dir"],
        see_through_walls=entry.get("see_through_walls", True),  # dcd's MultiGrid levels see through
    )
    return EnvParams.create(maze.FAMILY, values)


def obs_bytes(obs: dict) -> bytes:
    return obs["image"].astype(np.uint8).tobytes() + bytes([int(obs["direction"][0])])


def test_the_golden_file_covers_what_it_claims():
    kinds = {e["kind"] for e in LEVELS}
    assert {"dr25", "dr60", "accel_edit", "MazeEnv", "LargeCorridorEnv"} <= kinds
    assert len(LEVELS) >= 120
    assert sum(e["reached_goal"] for e in LEVELS) >= 20
    assert sum(not e["reached_goal"] and len(e["actions"]) == e["max_steps"] for e in LEVELS) >= 20


def test_the_constants_are_minigrids():
    c = GOLDEN["constants"]
    assert (c["OBJECT_TO_IDX"]["empty"], c["OBJECT_TO_IDX"]["wall"], c["OBJECT_TO_IDX"]["goal"]) == (
        core.EMPTY,
        core.WALL,
        core.GOAL,
    )
    assert c["OBJECT_TO_IDX"]["agent"] == maze.AGENT
    assert (c["COLOR_TO_IDX"]["grey"], c["COLOR_TO_IDX"]["green"]) == (core.WALL_COLOUR, core.GOAL_COLOUR)
    assert [tuple(v) for v in c["DIR_TO_VEC"]] == list(zip(core.DIR_DX.tolist(), core.DIR_DY.tolist()))
    assert len(c["Actions"]) == core.N_ACTIONS
    assert [c["Actions"][n] for n in ("left", "right", "forward")] == [core.LEFT, core.RIGHT, core.FORWARD]


@pytest.mark.parametrize("index", range(len(LEVELS)), ids=[f"{i}-{e['kind']}" for i, e in enumerate(LEVELS)])
def test_an_episode_is_dcds_step_for_step(index):
    entry = LEVELS[index]
    params = params_of(entry)
    assert (
        hashlib.sha256(maze.encoding(params.values, entry["agent_dir"]).tobytes()).hexdigest()
        == (entry["encoding_sha256"])
    ), "the level's encoding"
    env = maze.MazeEnv(params)
    obs, _ = env.reset(seed=0)
    seen = [obs_bytes(obs)]
    rewards, dones = [], []
    for t, action in enumerate(entry["actions"]):
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(reward)
        dones.append(terminated or truncated)
        if not terminated:
            seen.append(obs_bytes(obs))
        if terminated or truncated:
            assert t == len(entry["actions"]) - 1
    assert rewards == entry["rewards"] and dones == entry["dones"]
    assert terminated == entry["reached_goal"]
    if "obs_types" in entry:  # a readable first difference before the hash
        ours = [b[:75:3].hex()[1::2] + ":" + str(b[75]) for b in seen]
        assert ours == entry["obs_types"]
    assert hashlib.sha256(b"".join(seen)).hexdigest() == entry["obs_sha256"]


def test_the_env_passes_gymnasiums_check_and_draws_its_start_direction_from_the_seed():
    params = params_of(next(e for e in LEVELS if e["kind"] == "dr25"))
    check_env(maze.MazeEnv(params), skip_render_check=True)
    free = EnvParams.create(maze.FAMILY, {**params.values, "agent_dir": None})
    dirs = {int(maze.MazeEnv(free).reset(seed=s)[0]["direction"][0]) for s in range(40)}
    assert dirs == {0, 1, 2, 3}
    assert maze.MazeEnv(free).reset(seed=3)[0]["direction"] == maze.MazeEnv(free).reset(seed=3)[0]["direction"]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"size": 2}, "size"),
        ({"walls": [[0, 3]]}, "walls"),
        ({"goal": [1, 1], "agent": [1, 1]}, "agent"),
        ({"walls": [[2, 2]], "goal": [2, 2]}, "goal"),
        ({"agent_dir": 4}, "agent_dir"),
        ({"max_steps": 0}, "max_steps"),
    ],
)
def test_a_bad_level_names_its_field(change, field):
    values = {**maze.level(), **change}
    with pytest.raises(ValueError, match=f"maze.*{field}"):
        maze.MazeEnv(EnvParams.create(maze.FAMILY, values))


FIXED = [e for e in LEVELS if "bit_map" in e]


@pytest.mark.parametrize("entry", FIXED, ids=[e["kind"] for e in FIXED])
def test_a_fixed_maze_is_the_one_dcds_class_builds(entry):
    from envs import maze_levels

    (name,) = [n for n, v in maze_levels.layouts().items() if v["class"] == entry["kind"]]
    assert maze_levels.layouts()[name]["gym_id"] == entry["gym_ids"][0] == f"MultiGrid-{name}-v0"
    values = maze_levels.fixed_maze(name, np.random.RandomState(entry["params"]["np_random_seed_before_ctor"]))
    assert values == params_of(entry).values  # walls, goal (the corridors': drawn as dcd draws it), start, T
    assert values["agent_dir"] == 0 and values["max_steps"] == 2 * values["size"] ** 2


def test_every_fixed_maze_has_a_path_and_the_corridors_goals_are_dcds_candidates():
    from envs import maze_levels

    rng = np.random.RandomState(0)
    for name in maze_levels.layouts():
        for _ in range(5):
            values = maze_levels.fixed_maze(name, rng)
            maze.validate_level(EnvParams.create(maze.FAMILY, values))
            assert maze_levels.shortest_path(values) is not None, name
    goals = {tuple(maze_levels.fixed_maze("SmallCorridor", rng)["goal"]) for _ in range(200)}
    assert goals == {(c, r) for r in (6, 8) for c in (3, 5, 7, 9, 11)}
    with pytest.raises(ValueError, match="unknown maze 'Maze9'; dcd's fixed mazes: Maze, Maze2"):
        maze_levels.fixed_maze("Maze9")
    with pytest.raises(ValueError, match="draws its goal: give an rng"):
        maze_levels.fixed_maze("LargeCorridor")


def test_the_shortest_path_counts_moves_and_sees_walls():
    from envs import maze_levels

    open_level = maze.level(goal=(13, 13), agent=(1, 1))
    assert maze_levels.shortest_path(open_level) == 24
    cut = maze.level(walls=[[x, 7] for x in range(1, 14)], goal=(13, 13), agent=(1, 1))
    assert maze_levels.shortest_path(cut) is None


MINIGRID = json.loads((ROOT / "tests" / "data" / "dcd_minigrid_mazes_golden.json").read_text())["levels"]


def _minigrid_levels() -> list[dict]:
    """This project's FourRooms levels along the seed-1337 stream and its SimpleCrossing level
    of each seed, in the golden file's order."""
    from envs import dcd_levels, maze_levels

    out, stream = [], dcd_levels.legacy_gym_rng(1337)
    for entry in MINIGRID:
        if entry["kind"] == "FourRooms":
            out.append(maze_levels.four_rooms(stream))
        else:
            out.append(maze_levels.simple_crossing(dcd_levels.legacy_gym_rng(entry["stream"]["seed"])))
    return out


@pytest.mark.parametrize("index", range(len(MINIGRID)), ids=[f"{i}-{e['kind']}" for i, e in enumerate(MINIGRID)])
def test_a_minigrid_test_maze_is_dcds_level_and_episode(index):
    entry, values = MINIGRID[index], _minigrid_levels()[index]
    fields = ("walls", "goal", "agent", "agent_dir", "size", "max_steps", "see_through_walls")
    assert {k: values[k] for k in fields} == {k: entry[k] for k in fields}
    env = maze.MazeEnv(EnvParams.create(maze.FAMILY, values))
    obs, _ = env.reset(seed=0)
    seen, rewards, dones = [obs_bytes(obs)], [], []
    for action in entry["actions"]:
        obs, reward, terminated, truncated, _ = env.step(action)
        seen.append(obs_bytes(obs))  # minigrid moves the agent onto the goal: every view counts
        rewards.append(reward)
        dones.append(terminated or truncated)
    assert rewards == entry["rewards"] and dones == entry["dones"] and terminated == entry["reached_goal"]
    if "obs_vis" in entry:  # a readable first difference: which cells the walls hide
        assert ["".join("1" if b[3 * k] else "0" for k in range(25)) for b in seen] == entry["obs_vis"]
    assert hashlib.sha256(b"".join(seen)).hexdigest() == entry["obs_sha256"]


def test_the_compiled_player_steps_as_the_env_does_across_episode_ends():
    for entry in (LEVELS[1], MINIGRID[1]):  # an episode that reaches the goal; an occluded one
        params = params_of(entry)
        actions = np.array(entry["actions"] * 3, dtype=np.int64)  # three episodes in a row
        env, direction = maze.MazeEnv(params), entry["agent_dir"]
        obs, _ = env.reset(seed=0)
        want_obs, want_rewards, want_ends = [], [], []
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(int(a))
            want_obs.append(obs["image"])
            want_rewards.append(reward)
            want_ends.append(1 if terminated else (2 if truncated else 0))
            if terminated or truncated:
                env.reset(seed=0)
        v = params.values
        start = np.array([*v["agent"], direction], dtype=np.int64)
        got_obs = np.zeros((len(actions), core.VIEW, core.VIEW, 3), dtype=np.uint8)
        got_rewards, got_ends = np.zeros(len(actions)), np.zeros(len(actions), dtype=np.int64)
        ended = core.play(
            maze.grid_of(v), start, v["max_steps"], v["see_through_walls"], actions, got_obs, got_rewards, got_ends
        )
        assert ended == 3 and got_ends.tolist() == want_ends and got_rewards.tolist() == want_rewards
        assert np.array_equal(got_obs, np.stack(want_obs))
