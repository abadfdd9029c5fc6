"""Measure the quickstart: wall time and what POET achieved, as quoted in the README.

    python benchmarks/quickstart.py [--config experiments/quickstart.yaml] [--set key=value ...] [--json out.json]

Prints one table and optionally writes JSON. Nothing here is a pass/fail test.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import poet
from poet.analysis import load_run

ROOT = Path(__file__).resolve().parents[1]


def measure(config: Path, seed: int | None, sets: list[str] = ()) -> dict:
    """Run the config once in a scratch directory and summarise it."""
    overrides = ([f"seed={seed}"] if seed is not None else []) + list(sets)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = poet.run(config, out=Path(tmp) / "run", overrides=overrides, progress=False)
        seconds = time.perf_counter() - t0
        run = load_run(result.run_dir)
    first = run.iterations[run.iterations["pair_id"] == "p0"]
    solved_at = first[first["score"] >= 230]["iteration"]
    children = run.envs[run.envs["parent_env_id"].notna()]
    return {
        "config": str(config),
        "overrides": list(sets),
        "iterations": int(run.iterations["iteration"].max()) + 1,
        "wall_seconds": round(seconds, 1),
        "flat_course_solved_at_iteration": int(solved_at.iloc[0]) if len(solved_at) else None,
        "envs_admitted": int(len(children)),
        "transfers_accepted": int(run.transfers["accepted"].sum()),
        "transfer_attempts": int(len(run.transfers)),
        "annecs": int(run.annecs.iloc[-1]),
        # from the run's own records: every phase's env steps and wall time (Ray start-up excluded)
        "env_steps": int(run.throughput().loc["all", "env_steps"]),
        "phase_seconds": round(float(run.throughput().loc["all", "seconds"]), 1),
        "env_steps_per_s": round(float(run.throughput().loc["all", "steps_per_second"])),
        "max_roughness": float(run.envs["roughness"].max()),
        "max_pit_gap_hi": float(run.envs["pit_gap_hi"].max()),
        "max_stump_height_hi": float(run.envs["stump_height_hi"].max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "quickstart.yaml")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, as `poet run --set` (repeatable)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    stats = measure(args.config, args.seed, args.sets)
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
