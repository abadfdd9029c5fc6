"""Enhanced POET's claim: ANNECS of original POET on `terrain` against Enhanced POET on `terrain_cppn`.

    python experiments/annecs_poet_vs_enhanced.py [--iterations 2500] [--seeds 0 1] [--out runs/annecs]
                                                  [--json OUT/annecs.json] [--figure OUT/annecs.png] [--quick]

Both arms run `experiments/reproduce_poet.yaml` with the paper's structure where it fits
(capacity 20, a transfer every 25 iterations as in the reference's scripts, and a
reproduction at every transfer: see `STRUCTURE`), the same iterations and seeds: original
POET (`curriculum=poet`) on the terrain family, whose mutations move POET's three obstacle groups, and Enhanced POET (`curriculum=enhanced_poet`)
on `terrain_cppn`, whose grounds are the reference's CPPNs, on the same runner and core.
ANNECS is counted as the Enhanced POET paper defines it (`run.annecs`) and, for Enhanced
POET, as the reference code counts it (`run.annecs_reference`). Runs are resumable: a run
directory that exists is resumed to `--iterations` (a finished one costs nothing).

`experiments/reproduce_poet.py` runs these arms as part of its study (its `annecs.png`); this
script runs them alone, for other lengths and seeds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from matplotlib.figure import Figure

import poet
from poet.analysis import load_run

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "reproduce_poet.yaml"
# The reference reproduces right after a transfer, every `adjust_interval` (8) transfers, and
# admits 1 child: at most 250 admissions in its 50,000 iterations. This study reproduces at
# every transfer and admits up to 2 (the YAML's): at most 240 in 3,000 iterations.
STRUCTURE = ["reproduction.capacity=20", "transfer.every=25", "reproduction.every=25"]
ARMS = {"poet": ("poet", "terrain"), "enhanced_poet": ("enhanced_poet", "terrain_cppn")}
QUICK = [
    "env.options={course_length: 20.0, max_episode_steps: 150}",
    "trainer.es.population=8",
    "evaluation.backend=inprocess",
    "evaluation.eval_episodes=1",
    "reproduction.every=4",
    "transfer.every=3",
]


def run_arm(arm: str, seed: int, iterations: int, out: Path, quick: bool) -> dict:
    """Run (or resume) one arm at one seed, with the run's progress bar and phase lines unless
    `quick`; its ANNECS curves and cost."""
    curriculum, family = ARMS[arm]
    run_dir = out / f"{arm}-seed{seed}"
    t0 = time.perf_counter()
    if (run_dir / "checkpoints").is_dir():
        poet.resume(run_dir, iterations=iterations, progress=not quick)
    else:
        sets = [
            f"seed={seed}",
            f"iterations={iterations}",
            f"curriculum={curriculum}",
            f"env.family={family}",
            *(QUICK if quick else STRUCTURE),
        ]
        poet.run(CONFIG, out=run_dir, overrides=sets, progress=not quick)
    run = load_run(run_dir)
    annecs = run.annecs
    entry = {
        "arm": arm,
        "curriculum": curriculum,
        "family": family,
        "seed": seed,
        "run_dir": str(run_dir),
        "iterations": int(len(annecs)),
        "annecs": int(annecs.iloc[-1]) if len(annecs) else 0,
        "annecs_curve": [int(v) for v in annecs.to_numpy()],
        "envs_created": int(len(run.envs)),
        "wall_seconds_this_call": round(time.perf_counter() - t0, 1),
    }
    if curriculum == "enhanced_poet":
        ref = run.annecs_reference
        entry["annecs_reference"] = int(ref.iloc[-1]) if len(ref) else 0
        entry["annecs_reference_curve"] = [int(v) for v in ref.to_numpy()]
    return entry


def figure(runs: list[dict], path: Path) -> None:
    """ANNECS over iterations, every run; Enhanced POET's reference counter dashed."""
    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.add_subplot()
    colors = {"poet": "tab:blue", "enhanced_poet": "tab:purple"}
    for r in runs:
        label = f"{'POET on terrain' if r['arm'] == 'poet' else 'Enhanced POET on terrain_cppn'}, seed {r['seed']}"
        ax.plot(r["annecs_curve"], color=colors[r["arm"]], alpha=0.6 + 0.4 * (r["seed"] % 2), label=label)
        if "annecs_reference_curve" in r:
            ax.plot(
                r["annecs_reference_curve"],
                color=colors[r["arm"]],
                ls="--",
                lw=1,
                alpha=0.6 + 0.4 * (r["seed"] % 2),
                label=f"  its reference-code counter, seed {r['seed']}",
            )
    ax.set(xlabel="iteration", ylabel="ANNECS", title="ANNECS: original POET against Enhanced POET")
    ax.legend(fontsize="small", loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=Path("runs/annecs"))
    parser.add_argument("--json", type=Path, help="default: OUT/annecs.json")
    parser.add_argument("--figure", type=Path, help="default: OUT/annecs.png")
    parser.add_argument("--quick", action="store_true", help="tiny runs that check the outputs' structure")
    args = parser.parse_args()
    args.json = args.json or args.out / "annecs.json"
    args.figure = args.figure or args.out / "annecs.png"
    t0 = time.perf_counter()
    runs = []
    for seed in args.seeds:
        for arm in ARMS:
            runs.append(run_arm(arm, seed, args.iterations, args.out, args.quick))
            r = runs[-1]
            print(
                f"{arm:14s} seed {seed}: ANNECS {r['annecs']}"
                + (f" ({r['annecs_reference']} as the reference code counts)" if "annecs_reference" in r else "")
                + f", {r['envs_created']} envs created, {r['wall_seconds_this_call']} s",
                flush=True,
            )
    figure(runs, args.figure)
    command = (
        "python experiments/annecs_poet_vs_enhanced.py"
        + (" --quick" if args.quick else "")
        + f" --iterations {args.iterations} --seeds {' '.join(map(str, args.seeds))}"
    )
    result = {
        "command": command,
        "config": str(CONFIG.relative_to(ROOT)),
        "overrides": QUICK if args.quick else STRUCTURE,
        "runs": runs,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json} and {args.figure} ({result['wall_seconds']} s)")


if __name__ == "__main__":
    main()
