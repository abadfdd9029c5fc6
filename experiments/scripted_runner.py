"""Can the terrain family express the POET paper's hard classes? A scripted runner on courses at each criterion.

The POET paper classes an env by three criteria: max stump height >= 2.4, max pit gap >= 6.0,
roughness >= 4.5 (`envs.terrain.DIFFICULTY_CRITERIA`). A family whose courses at those values
no agent can clear cannot host POET's "challenging" envs at all, whatever the algorithm. This
script drives the terrain runner with a privileged controller that reads the course itself
(where the next pit or stump starts, the ground ahead) and looks for the best jump timing for
each course kind, then reports the share of course seeds it finishes.

    python experiments/scripted_runner.py [--seeds 100] [--json experiments/results/scripted_runner.json]

The controller always drives forward at full power and jumps, when on the ground, at a lead
distance before the next obstacle (pits: the last step before the edge; stumps: a searched
lead) or when the ground within the next step rises by more than a wall (`WALL`) or falls
into a pit. A course is cleared when the episode ends by reaching the finish line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from envs.base import EnvParams
from envs.terrain import RES, TerrainBatch, TerrainFamily, difficulty
from envs.terrain_core import DT, GRAVITY, JUMP_SPEED, WALL

ROOT = Path(__file__).resolve().parents[1]
FAMILY = TerrainFamily(course_length=80.0, max_episode_steps=2000)

# One course kind per criterion at its threshold, then each pair of them, then all three.
COURSES = {
    "stumps 2.4": {"roughness": 0.0, "pit_gap": [], "stump_height": [2.4, 2.4]},
    "pit gap 6.0": {"roughness": 0.0, "pit_gap": [6.0, 6.0], "stump_height": []},
    "roughness 4.5": {"roughness": 4.5, "pit_gap": [], "stump_height": []},
    "stumps + pits": {"roughness": 0.0, "pit_gap": [6.0, 6.0], "stump_height": [2.4, 2.4]},
    "stumps + roughness": {"roughness": 4.5, "pit_gap": [], "stump_height": [2.4, 2.4]},
    "pits + roughness": {"roughness": 4.5, "pit_gap": [6.0, 6.0], "stump_height": []},
    "all three": {"roughness": 4.5, "pit_gap": [6.0, 6.0], "stump_height": [2.4, 2.4]},
}
STUMP_LEADS = (1.5, 2.0, 2.5, 3.0)  # metres before a stump at which to jump (searched)


def run_episode(params: EnvParams, seed: int, stump_lead: float) -> tuple[bool, float, float]:
    """One episode of the scripted controller; returns (finished, return, x reached)."""
    course = FAMILY.course(params, seed)
    env = TerrainBatch([course], FAMILY.max_episode_steps)
    env.reset()
    starts = sorted((x0, kind) for kind, x0, _ in course.obstacles)
    total = 0.0
    for _ in range(FAMILY.max_episode_steps):
        x, vx = float(env.x[0]), float(env._state[0, 2])
        jump = False
        if env.grounded[0]:
            ahead = [(x0, kind) for x0, kind in starts if x0 > x - RES]
            nxt = ahead[0] if ahead else None
            next_x = x + DT * max(vx, 1.0)
            cell, next_cell = int(x / RES), min(int(next_x / RES) + 1, course.n_cells - 1)
            if nxt is not None and nxt[1] == "stump" and nxt[0] - x <= stump_lead:
                jump = True
            # the last step before a pit edge, or a wall in the next step
            jump = jump or bool(course.pit[cell + 1 : next_cell + 1].any())
            rise = course.height[cell + 1 : next_cell + 1].max(initial=-np.inf) - float(env.y[0])
            jump = jump or rise > WALL
        _, reward, terminated, truncated = env.step(np.array([[1.0, 1.0 if jump else -1.0]]))
        total += float(reward[0])
        if terminated[0] or truncated[0]:
            break
    x = float(env.x[0])
    return x >= course.course_length, total, x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--json", type=Path, default=ROOT / "experiments" / "results" / "scripted_runner.json")
    args = parser.parse_args()
    t0 = time.perf_counter()
    apex = JUMP_SPEED**2 / (2 * GRAVITY)
    air = 2 * JUMP_SPEED / GRAVITY
    results = {}
    for name, values in COURSES.items():
        params = EnvParams.create("terrain", values)
        best = None
        for lead in STUMP_LEADS if values["stump_height"] else (0.0,):
            runs = [run_episode(params, seed, lead) for seed in range(args.seeds)]
            cleared = sum(r[0] for r in runs)
            entry = {
                "stump_lead_m": lead,
                "cleared": cleared,
                "seeds": args.seeds,
                "mean_return": round(float(np.mean([r[1] for r in runs])), 1),
                "mean_distance_m": round(float(np.mean([r[2] for r in runs])), 1),
            }
            if best is None or cleared > best["cleared"]:
                best = entry
        results[name] = {"params": values, "difficulty": difficulty(values), **best}
        print(
            f"{name:18s} (class {difficulty(values)}): cleared {best['cleared']}/{args.seeds} course seeds, "
            f"mean return {best['mean_return']}, mean distance {best['mean_distance_m']} m"
            + (f", stump lead {best['stump_lead_m']} m" if values["stump_height"] else "")
        )
    out = {
        "command": "python experiments/scripted_runner.py" + (f" --seeds {args.seeds}" if args.seeds != 100 else ""),
        "physics": {
            "jump_apex_m": apex,
            "air_time_s": air,
            "top_speed_m_s": 8.0,
            "longest_jump_from_flat_m": round(8.0 * air, 2),
        },
        "courses": results,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.json} ({out['wall_seconds']} s)")


if __name__ == "__main__":
    main()
