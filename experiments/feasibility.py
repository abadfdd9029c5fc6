"""Can the terrain family host the POET paper's classes? Its runner's limits, and each class's courses cleared.

The POET paper classes an env by three criteria: max stump height >= 2.4, max pit gap >= 6.0,
roughness >= 4.5 (`envs.terrain.DIFFICULTY_CRITERIA`). If no agent could clear courses at
those values, "POET does not reach the class" would say nothing about POET. Two controllers
read the course itself:

- the planner (`envs.terrain_planner`): a beam search over the runner's own compiled core,
  full drive, every jump strength of 0, 0.5 and 1 tried on every grounded step;
- the scripted controller: full drive, one full jump at a fixed lead before each stump (the
  best of a few leads per course kind), at a pit's edge and before a wall.

    python experiments/feasibility.py [--seeds 100] [--beam 1024] [--json experiments/results/feasibility.json]
    python experiments/feasibility.py --quick --json /tmp/feasibility.json    # 10 seeds, no sweep

1. **Limits.** The runner's limit for a pit (its width) and a stump (its height), on level
   ground as POET's generator places them: the smallest size the planner clears on none of
   `--seeds` course seeds (bisection to 0.1 m and 0.01 m); the same for roughness (the
   family's units). The family's units are set from these (envs/terrain.py): a pit-gap or
   stump-height domain maximum is the runner's limit, so the paper's threshold sits at the
   same fraction of the runner's reach as of POET's range (pits 6/8, stumps 2.4/5).
2. **Courses.** Every non-empty subset of the three criteria at three levels: at the
   threshold (every obstacle exactly at it), typical ranges of the class (pits 0.8-6, stumps
   0.2-2.4, roughness 4.5) and the domain maxima (pits 8, stumps 5, roughness 10); `--seeds`
   course seeds each, with the obstacle sizes the courses realise (metres) and their ground.
3. **Roughness's scale.** The planner at the threshold of pits + roughness and at the
   roughness maximum, with roughness scaled up toward its limit (why it stays in metres).
4. **Stairs and dcd's named levels.** The share of `--seeds` courses the planner clears
   with stairs of each step height of `STAIR_HEIGHTS` (up to 8 steps, up or down, as dcd's
   High-Stairs draws them); then every level of the family's named sets (`TerrainFamily.level_sets`: dcd's test
   suite, its extended set with XChal, POET-Rose) on its first `--seeds` episodes' courses.

Writes one JSON (`--json`; `--quick` needs one outside experiments/results/).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

from envs import EnvParams, dcd_levels, terrain
from envs.terrain import PIT_SCALE, RES, STAIR_SCALE, STUMP_SCALE, Course, TerrainBatch
from envs.terrain_core import DT, WALL
from envs.terrain_planner import JUMP_STRENGTHS, limit, plan

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
COURSE_LENGTH, MAX_STEPS = 80.0, 2000
CRITERIA = ("roughness", "pit_gap", "stump_height")
LEVELS = {
    "threshold": {"roughness": 4.5, "pit_gap": (6.0, 6.0), "stump_height": (2.4, 2.4)},
    "typical": {"roughness": 4.5, "pit_gap": (0.8, 6.0), "stump_height": (0.2, 2.4)},
    "maximum": {
        "roughness": terrain.ROUGH_MAX,
        "pit_gap": (terrain.PIT_MAX,) * 2,
        "stump_height": (terrain.STUMP_MAX,) * 2,
    },
}
STUMP_LEADS = (1.0, 1.5, 2.0, 2.5, 3.0)  # metres before a stump at which the scripted controller jumps
ROUGHNESS_SCALES = (1.0, 2.0, 3.0, 4.0)  # roughness multiplied by these in part 3
STAIR_HEIGHTS = (1.0, 2.0, 3.0, 4.0, 5.0)  # stair step heights of part 4, in the stumps' units


def course(roughness: float, pit_gap: tuple, stump_height: tuple, seed: int) -> Course:
    """A course of the family's generator in its units, also beyond its validated range."""
    return terrain.course_from_values(float(roughness), tuple(pit_gap), tuple(stump_height), int(seed), COURSE_LENGTH)


def clear_rate(values: dict, seeds: int, beam: int) -> int:
    """How many of `seeds` course seeds the planner clears."""
    return sum(plan(course(**values, seed=s), MAX_STEPS, beam)[0] for s in range(seeds))


def clears_any(values: dict, seeds: int, beam: int) -> bool:
    """Whether the planner clears any of `seeds` course seeds."""
    return any(plan(course(**values, seed=s), MAX_STEPS, beam)[0] for s in range(seeds))


# ------------------------------------------------------------------ the scripted controller
def scripted(c: Course, stump_lead: float) -> bool:
    """Full drive; a full jump `stump_lead` m before a stump, at a pit's edge, before a wall."""
    env = TerrainBatch([c], MAX_STEPS)
    env.reset()
    stumps = sorted(x0 for kind, x0, _ in c.obstacles if kind == "stump")
    for _ in range(MAX_STEPS):
        x, vx = float(env.x[0]), float(env._state[0, 2])
        jump = False
        if env.grounded[0]:
            cell, next_cell = int(x / RES), min(int((x + DT * max(vx, 1.0)) / RES) + 1, c.n_cells - 1)
            ahead = [x0 for x0 in stumps if x0 > x - RES]
            jump = bool(ahead) and ahead[0] - x <= stump_lead
            jump = jump or bool(c.pit[cell + 1 : next_cell + 1].any())
            jump = jump or c.height[cell + 1 : next_cell + 1].max(initial=-np.inf) - float(env.y[0]) > WALL
        _, _, terminated, truncated = env.step(np.array([[1.0, 1.0 if jump else -1.0]]))
        if terminated[0] or truncated[0]:
            break
    return float(env.x[0]) >= c.course_length


# ---------------------------------------------------------------------------- the parts
def measure_limits(seeds: int, beam: int) -> dict:
    """Part 1: the smallest pit width, stump height (m) and roughness the planner never clears."""

    def pits(metres: float) -> bool:
        return clears_any({"roughness": 0.0, "pit_gap": (metres / PIT_SCALE,) * 2, "stump_height": ()}, seeds, beam)

    def stumps(metres: float) -> bool:
        return clears_any({"roughness": 0.0, "pit_gap": (), "stump_height": (metres / STUMP_SCALE,) * 2}, seeds, beam)

    def rough(units: float) -> bool:
        return clears_any({"roughness": units, "pit_gap": (), "stump_height": ()}, seeds, beam)

    pit_m, stump_m = limit(pits, 3.0, 9.0, 0.1), limit(stumps, 1.0, 2.0, 0.01)
    rough_units = limit(rough, 5.0, 80.0, 0.5)
    return {
        "pit_width_m": pit_m,
        "stump_height_m": stump_m,
        "roughness": rough_units,
        "units": {"pit_gap_m": PIT_SCALE, "stump_height_m": STUMP_SCALE, "roughness_m": terrain.ROUGH_GAIN},
        "domain_max_in_m": {"pit_gap": terrain.PIT_MAX * PIT_SCALE, "stump_height": terrain.STUMP_MAX * STUMP_SCALE},
        "threshold_over_limit": {
            "pit_gap": terrain.DIFFICULTY_CRITERIA["pit_gap"] * PIT_SCALE / pit_m,
            "stump_height": terrain.DIFFICULTY_CRITERIA["stump_height"] * STUMP_SCALE / stump_m,
            "roughness": terrain.DIFFICULTY_CRITERIA["roughness"] / rough_units,
        },
        "poet_threshold_over_max": {"pit_gap": 6.0 / 8.0, "stump_height": 2.4 / 5.0, "roughness": 4.5 / 10.0},
    }


def realised(courses: list[Course]) -> dict:
    """What the courses hold, in metres: obstacle sizes and the ground's height and slope."""
    pits = [size for c in courses for kind, _, size in c.obstacles if kind == "pit"]
    stumps = [size for c in courses for kind, _, size in c.obstacles if kind == "stump"]
    ground = np.concatenate([c.base[: int(COURSE_LENGTH / RES)] for c in courses])
    slope = np.concatenate([np.abs(c.slope[: int(COURSE_LENGTH / RES)]) for c in courses])

    def summary(sizes: list[float]) -> dict | None:
        return {"n": len(sizes), "min": min(sizes), "mean": float(np.mean(sizes)), "max": max(sizes)} if sizes else None

    return {
        "pit_width_m": summary(pits),
        "stump_height_m": summary(stumps),
        "ground_height_sd_m": float(ground.std()),
        "slope_abs_p95": float(np.quantile(slope, 0.95)),
    }


def course_kinds(seeds: int, beam: int) -> list[dict]:
    """Part 2: every non-empty subset of the criteria at each level, both controllers."""
    rows = []
    for level, at in LEVELS.items():
        for k in range(1, 4):
            for subset in itertools.combinations(CRITERIA, k):
                values = {
                    "roughness": at["roughness"] if "roughness" in subset else 0.0,
                    "pit_gap": at["pit_gap"] if "pit_gap" in subset else (),
                    "stump_height": at["stump_height"] if "stump_height" in subset else (),
                }
                courses = [course(**values, seed=s) for s in range(seeds)]
                planner = sum(plan(c, MAX_STEPS, beam)[0] for c in courses)
                leads = STUMP_LEADS if values["stump_height"] else (STUMP_LEADS[0],)
                by_lead = {lead: sum(scripted(c, lead) for c in courses) for lead in leads}
                best_lead = max(by_lead, key=lambda lead: (by_lead[lead], -lead))
                rows.append(
                    {
                        "level": level,
                        "criteria": list(subset),
                        "class": len(subset),
                        "params": {key: list(v) if isinstance(v, tuple) else v for key, v in values.items()},
                        "seeds": seeds,
                        "planner_cleared": planner,
                        "scripted_cleared": by_lead[best_lead],
                        "scripted_stump_lead_m": best_lead if values["stump_height"] else None,
                        "realised": realised(courses),
                    }
                )
                print(
                    f"{level:9s} {'+'.join(subset):34s} planner {planner:3d}/{seeds}  scripted {by_lead[best_lead]:3d}/{seeds}"
                )
    return rows


def roughness_scale(seeds: int, beam: int) -> list[dict]:
    """Part 3: roughness scaled toward its limit, at the threshold of pits + roughness and at its maximum."""
    at = LEVELS["threshold"]
    rows = []
    for scale in ROUGHNESS_SCALES:
        rows.append(
            {
                "roughness_m_per_unit": terrain.ROUGH_GAIN * scale,
                "pits_and_roughness_at_threshold": clear_rate(
                    {"roughness": at["roughness"] * scale, "pit_gap": at["pit_gap"], "stump_height": ()}, seeds, beam
                ),
                "roughness_at_maximum": clear_rate(
                    {"roughness": terrain.ROUGH_MAX * scale, "pit_gap": (), "stump_height": ()}, seeds, beam
                ),
                "seeds": seeds,
            }
        )
    return rows


def stairs_and_named_levels(seeds: int, beam: int) -> dict:
    """Part 4: the stairs' limit and every named level's share of courses the planner clears."""
    family = terrain.TerrainFamily(course_length=COURSE_LENGTH)

    # a course holds several staircases, each up or down, so no step height is cleared on
    # none of the courses: the share cleared per height, not a limit
    out: dict = {"stair_width_m": terrain.STAIR_WIDTH, "stairs": [], "sets": {}}
    for units in STAIR_HEIGHTS:
        level = EnvParams.create("terrain", dcd_levels.level(stair_height=(units, units), stair_steps=9))
        cleared = sum(plan(family.course(level, s), MAX_STEPS, beam)[0] for s in range(seeds))
        out["stairs"].append(
            {"stair_height": units, "step_m": units * STAIR_SCALE, "seeds": seeds, "planner_cleared": int(cleared)}
        )
        print(f"stairs {units:.1f} ({units * STAIR_SCALE:.2f} m), up to 8 steps: planner {cleared:3d}/{seeds}")
    for name, levels in family.level_sets().items():
        out["sets"][name] = {}
        for level, episodes in levels.items():
            cleared = sum(plan(family.course(env, env.course_seed), MAX_STEPS, beam)[0] for env in episodes[:seeds])
            out["sets"][name][level] = {"courses": min(seeds, len(episodes)), "planner_cleared": int(cleared)}
            print(f"{name:12s} {level:18s} planner {cleared:3d}/{min(seeds, len(episodes))}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--beam", type=int, default=1024)
    parser.add_argument("--json", type=Path, default=None, help="default: experiments/results/feasibility.json")
    parser.add_argument(
        "--quick", action="store_true", help="10 seeds, no roughness sweep; needs --json outside results"
    )
    args = parser.parse_args()
    if args.quick:
        if args.json is None or args.json.resolve().is_relative_to(RESULTS):
            parser.error("--quick writes only where --json says, outside experiments/results/")
        args.seeds = 10
    out_path = args.json or RESULTS / "feasibility.json"
    t0 = time.perf_counter()
    out: dict = {
        "command": "python experiments/feasibility.py"
        + (" --quick" if args.quick else "")
        + (f" --seeds {args.seeds}" if args.seeds != 100 and not args.quick else "")
        + (f" --beam {args.beam}" if args.beam != 1024 else ""),
        "planner": {"beam": args.beam, "jump_strengths": list(JUMP_STRENGTHS), "drive": 1.0},
        "course_length_m": COURSE_LENGTH,
        "max_steps": MAX_STEPS,
    }
    t = time.perf_counter()
    out["limits"] = measure_limits(args.seeds, args.beam)
    out["limits"]["wall_seconds"] = round(time.perf_counter() - t, 1)
    print("limits:", {k: v for k, v in out["limits"].items() if k in ("pit_width_m", "stump_height_m", "roughness")})
    t = time.perf_counter()
    out["courses"] = course_kinds(args.seeds, args.beam)
    out["courses_wall_seconds"] = round(time.perf_counter() - t, 1)
    if not args.quick:
        t = time.perf_counter()
        out["roughness_scale"] = roughness_scale(args.seeds, args.beam)
        out["roughness_scale_wall_seconds"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    out["stairs_and_named_levels"] = stairs_and_named_levels(args.seeds, args.beam)
    out["stairs_and_named_levels_wall_seconds"] = round(time.perf_counter() - t, 1)
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {out_path} ({out['wall_seconds']} s)")


if __name__ == "__main__":
    main()
