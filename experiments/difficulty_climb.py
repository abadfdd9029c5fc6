"""How fast a run's solved envs climb towards the POET paper's difficulty classes.

    python experiments/difficulty_climb.py RUN_DIR [--every 100] [--json OUT]

Reads a terrain or bipedal run (`poet.analysis.load_run`) and reports, per difficulty class
(0 easy .. 3 extremely challenging), the envs created and solved and the first iteration one
was solved; then, every `--every` iterations, the largest value of each criterion among the
envs solved by then (max stump height, max pit gap, roughness: the paper's thresholds are
2.4, 6.0 and 4.5), and the run's throughput per phase.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from envs.terrain import DIFFICULTY_CLASSES, DIFFICULTY_CRITERIA
from poet.analysis import load_run


def climb(run_dir: Path, every: int) -> dict:
    """The report as a dict (see the module docstring)."""
    run = load_run(run_dir)
    envs_t = run.envs
    last = int(run.iterations["iteration"].max()) if len(run.iterations) else -1
    classes = {}
    for level, name in enumerate(DIFFICULTY_CLASSES):
        rows = envs_t[envs_t["difficulty"] == level]
        solved = rows["solved_iteration"].dropna()
        classes[name] = {
            "created": int(len(rows)),
            "solved": int(len(solved)),
            "first_solved_iteration": int(solved.min()) if len(solved) else None,
        }
    criteria = {
        "stump_height": envs_t.get("stump_height_hi"),
        "pit_gap": envs_t.get("pit_gap_hi"),
        "roughness": envs_t.get("roughness"),
    }
    solved_at = envs_t["solved_iteration"]
    over_time = []
    for it in list(range(every - 1, last + 1, every)) + ([last] if last % every != every - 1 else []):
        done = solved_at.notna() & (solved_at <= it)
        row = {"iteration": it, "envs_solved": int(done.sum())}
        for name, column in criteria.items():
            row[f"max_{name}"] = float(column[done].max()) if column is not None and done.any() else None
        over_time.append(row)
    return {
        "run_dir": str(run_dir),
        "iterations": last + 1,
        "criteria": DIFFICULTY_CRITERIA,
        "classes": classes,
        "solved_envs_over_iterations": over_time,
        "throughput": run.throughput().reset_index().to_dict(orient="records"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = climb(args.run_dir, args.every)
    for name, c in report["classes"].items():
        print(
            f"{name:22s}: {c['created']:4d} created, {c['solved']:4d} solved, first solved at "
            f"{c['first_solved_iteration']}"
        )
    for row in report["solved_envs_over_iterations"]:
        print(
            f"iteration {row['iteration']:5d}: {row['envs_solved']:4d} solved; max stump {row['max_stump_height']}, "
            f"max pit gap {row['max_pit_gap']}, roughness {row['max_roughness']}"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
