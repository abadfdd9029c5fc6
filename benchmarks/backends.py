"""One run on the Ray pool and in-process, alternating: the same records, and what each costs.

    python benchmarks/backends.py [--config experiments/quickstart.yaml] [--set key=value ...]
                                  [--rounds 3] [--json PATH]

Runs `benchmarks/quickstart.py` on the config with `evaluation.backend=ray`, the same with
`ray.local_wave_steps=0` and `ray.driver_share=false` (every wave on the workers, none of it
in the driver) and with
`evaluation.backend=inprocess`, alternating (ray, ray_every_wave, inprocess, ray, ...), each in a fresh process
so both pay for starting Python and loading the compiled kernels. An untimed 2-iteration run
first compiles the kernels if this checkout has not yet. Per backend it reports the median
wall seconds (Ray's start included), seconds in the run's phases (Ray's start excluded) and
env steps/s in them. The records of every run (iterations, envs admitted, transfers, ANNECS,
env steps, the hardest obstacles) must be identical: the script fails if any differ.
Nothing here is a pass/fail test of speed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

from compare_commits import run_script

ROOT = Path(__file__).resolve().parents[1]
# each way's overrides
WAYS = {
    "ray": ["evaluation.backend=ray"],
    "ray_every_wave": ["evaluation.backend=ray", "ray.local_wave_steps=0", "ray.driver_share=false"],
    "inprocess": ["evaluation.backend=inprocess"],
}
TIMINGS = ("wall_seconds", "phase_seconds", "env_steps_per_s")
# the other keys of a measurement are the run's records
NOT_RECORDS = (*TIMINGS, "overrides", "throughput", "full_collections", "full_collection_seconds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "quickstart.yaml")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="config override (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    common = ["--config", str(args.config)] + [a for s in args.sets for a in ("--set", s)]
    run_script("quickstart", ROOT, common + ["--set", "iterations=2", "--set", "evaluation.backend=inprocess"])
    runs: dict[str, list[dict]] = {b: [] for b in WAYS}
    for rnd in range(args.rounds):
        for backend, sets in WAYS.items():
            stats = run_script("quickstart", ROOT, common + [a for s in sets for a in ("--set", s)])
            runs[backend].append(stats)
            print(
                f"round {rnd + 1} {backend:>14}: wall {stats['wall_seconds']} s, phases {stats['phase_seconds']} s, "
                f"{stats['env_steps_per_s']:,} env steps/s, ANNECS {stats['annecs']}",
                flush=True,
            )
    records = [{k: v for k, v in r.items() if k not in NOT_RECORDS} for rs in runs.values() for r in rs]
    if any(r != records[0] for r in records):
        raise RuntimeError(f"the runs' records differ: {records}")
    median = {b: {k: statistics.median(r[k] for r in rs) for k in TIMINGS} for b, rs in runs.items()}
    summary = {
        "command": " ".join(["python", "benchmarks/backends.py", *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "overrides": args.sets,
        "rounds": args.rounds,
        "records": records[0],
        "median": median,
        # the same env steps both ways: the ratio of steps/s is the phases' speed-up
        "ray_over_inprocess": {
            "wall_seconds": round(median["ray"]["wall_seconds"] / median["inprocess"]["wall_seconds"], 3),
            "env_steps_per_s": round(median["ray"]["env_steps_per_s"] / median["inprocess"]["env_steps_per_s"], 3),
        },
        # what running the smallest waves in the driver gives
        "ray_over_ray_every_wave": {
            "wall_seconds": round(median["ray"]["wall_seconds"] / median["ray_every_wave"]["wall_seconds"], 3),
            "env_steps_per_s": round(median["ray"]["env_steps_per_s"] / median["ray_every_wave"]["env_steps_per_s"], 3),
        },
        "runs": {b: [{k: r[k] for k in TIMINGS} for r in rs] for b, rs in runs.items()},
    }
    for backend in WAYS:
        m = median[backend]
        print(
            f"median {backend:>14}: wall {m['wall_seconds']} s, phases {m['phase_seconds']} s, "
            f"{m['env_steps_per_s']:,.0f} env steps/s"
        )
    print(
        f"the same records in all {len(WAYS) * args.rounds} runs; ray / inprocess: {summary['ray_over_inprocess']}, "
        f"ray / ray_every_wave: {summary['ray_over_ray_every_wave']}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
