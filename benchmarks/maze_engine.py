"""Steps per second of the maze engine on one core, with random actions, against the same
episodes stepped through gymnasium's API.

    python benchmarks/maze_engine.py [--steps 2000000] [--env-steps 50000] [--repeats 5] [--json PATH]

Two levels, both dcd's: a DR level of its 60-block uniform space (walls seen through, as in
dcd's training mazes) and FourRooms (walls hide what is behind them, gym-minigrid's view).
Actions are uniform over dcd's 7. Each repeat times, in alternation so machine noise hits
both alike:

* the engine: `envs.maze_core.play`, the whole action sequence in compiled code, a view
  written after every step (what a policy would read);
* the env: `envs.maze.MazeEnv.step`, one gymnasium call per step (resets excluded).

Reports the median steps per second of each and their ratio. Nothing here is a pass/fail
test, and the rate is one core's: no batching across cores or envs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from envs import EnvParams, maze, maze_levels
from envs import maze_core as core

ROOT = Path(__file__).resolve().parents[1]


def levels() -> dict[str, dict]:
    """The two levels timed (fixed draws, so every run times the same mazes), each with a
    start direction."""
    dr = maze_levels.sample(np.random.default_rng(2026), 60, True)
    return {"dr60_uniform": {**dr, "agent_dir": 0}, "FourRooms": maze_levels.maze_episodes("FourRooms", 1)[0]}


def engine_rate(values: dict, actions: np.ndarray) -> float:
    """Steps per second of `play` over `actions`."""
    grid = maze.grid_of(values)
    start = np.array([*values["agent"], values["agent_dir"]], dtype=np.int64)
    obs = np.zeros((len(actions), core.VIEW, core.VIEW, 3), dtype=np.uint8)
    rewards, ends = np.zeros(len(actions)), np.zeros(len(actions), dtype=np.int64)
    t0 = time.perf_counter()
    core.play(grid, start, values["max_steps"], values["see_through_walls"], actions, obs, rewards, ends)
    return len(actions) / (time.perf_counter() - t0)


def env_rate(values: dict, actions: np.ndarray) -> float:
    """Steps per second of `MazeEnv.step` over `actions` (resets not timed)."""
    env = maze.MazeEnv(EnvParams.create(maze.FAMILY, values))
    env.reset(seed=0)
    spent = 0.0
    for a in actions.tolist():
        t0 = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(a)
        spent += time.perf_counter() - t0
        if terminated or truncated:
            env.reset(seed=0)
    return len(actions) / spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2_000_000, help="engine steps per repeat")
    parser.add_argument("--env-steps", type=int, default=50_000, help="gymnasium steps per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "maze_engine.json")
    args = parser.parse_args()
    t_start = time.perf_counter()
    rng = np.random.default_rng(0)
    actions = rng.integers(0, core.N_ACTIONS, args.steps).astype(np.int64)
    results = {}
    for name, values in levels().items():
        engine_rate(values, actions[:1000])  # compile (or load the compiled cache) first
        engine, env = [], []
        for _ in range(args.repeats):
            engine.append(engine_rate(values, actions))
            env.append(env_rate(values, actions[: args.env_steps]))
        results[name] = {
            "see_through_walls": values["see_through_walls"],
            "size": values["size"],
            "engine_steps_per_s": statistics.median(engine),
            "env_steps_per_s": statistics.median(env),
            "engine_over_env": statistics.median(engine) / statistics.median(env),
        }
        print(
            f"{name}: engine {results[name]['engine_steps_per_s']:,.0f} steps/s, "
            f"gymnasium env {results[name]['env_steps_per_s']:,.0f} steps/s",
            flush=True,
        )
    out = {
        "command": f"python benchmarks/maze_engine.py --steps {args.steps} --env-steps {args.env_steps}"
        f" --repeats {args.repeats}",
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "numpy": np.__version__,
        "results": results,
        "wall_seconds": round(time.perf_counter() - t_start, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
