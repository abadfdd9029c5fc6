"""The field's BipedalWalker benchmark at a budget that fits here: DR, robust PLR and ACCEL
as dcd runs them (its PPO, its 8-D levels), and POET at the same env steps, scored on dcd's
test envs beside dcd's own numbers.

    python experiments/dcd_bipedal.py --updates 200 --seeds 0 1 2    # 1% of dcd's 20,000 updates
    python experiments/dcd_bipedal.py --quick --json /tmp/dcd.json    # a smoke run, elsewhere

1. **DR, robust PLR, ACCEL** on `bipedal` with their curricula's defaults, which are dcd's
   BipedalWalker configs (PPO with 16 envs x 2,048 steps an update, dcd's 8-D levels:
   `env.options.level_space: dcd`), each trained for `--updates` PPO updates (dcd: 20,000).
   robust PLR's exploring cycles train nothing, so a run goes on until it has trained that
   many times (`train_until`). Training seed 100 + seed.
2. **POET** (its own defaults: the reference's ES) on `bipedal`, POET's 5-D levels, for
   the mean env steps of the UED runs of the same seed (`reproduce_poet.match_env_steps`).
3. **Scores**: every run's final agents on dcd's test suite (`run.score_levels("dcd")`:
   BipedalWalker, Hardcore, Med-Stairs, Med-PitGap, Med-StumpHeight, Med-Roughness; 100
   episodes each, `--episodes`), the best agent per level (a POET population; the UED
   curricula have one), with dcd's published means at 20,000 updates beside.

Runs are resumable (run again). The JSON (`--json`, default
`experiments/results/dcd_bipedal.json`) holds every run's updates, env steps, seconds, code
commits and scores, the fraction of dcd's budget, and dcd's numbers; `--quick` writes only
outside `experiments/results/`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import poet
from envs import dcd_levels
from poet.analysis import load_run

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT / "experiments"))
import reproduce_poet as study  # noqa: E402  (match_env_steps, env_steps, phase_seconds)

UED = ("dr", "robust_plr", "accel")
DCD_UPDATES = 20_000  # the budget of dcd's published BipedalWalker numbers
QUICK = {  # a smoke run: short episodes, small PPO rollouts
    "env": {"family": "bipedal", "options": {"max_episode_steps": 60}},
    "evaluation": {"max_steps": 60, "backend": "inprocess"},
    "trainer": {"ppo": {"n_envs": 4, "n_steps": 64, "minibatch_size": 64, "epochs": 1}, "es": {"population": 4}},
    "policy": {"hidden": [8]},
    "curriculum_options": {"buffer_size": 8},
}


def config(curriculum: str, seed: int, quick: bool) -> dict:
    """One run's config: the curriculum's defaults on `bipedal` (dcd's settings for the UED
    curricula, the reference's for POET), checkpoints only at the end."""
    cfg: dict = {
        "curriculum": curriculum,
        "seed": 100 + seed,
        "progress": False,
        "env": {"family": "bipedal"},
        "evaluation": {"backend": "inprocess"},
        "checkpoint": {"every": 0},
    }
    if quick:
        cfg.update({k: v for k, v in QUICK.items() if k != "curriculum_options"})
        if curriculum in ("robust_plr", "accel"):
            cfg["curriculum_options"] = dict(QUICK["curriculum_options"])
        if curriculum == "poet":
            cfg["trainer"] = {"es": QUICK["trainer"]["es"]}
            cfg["reproduction"] = {"every": 100}
    return cfg


def trained_updates(out: Path) -> int:
    """How many iterations of the run trained (a PPO update each)."""
    return int(load_run(out).iterations["iteration"].nunique())


def train_until(out: Path, cfg: dict, updates: int) -> None:
    """Run `cfg` into `out` until it has trained `updates` times: `updates` iterations, then
    as many more as it still lacks, until none (each target follows from the run's records,
    so a run interrupted and started again reaches the same iteration)."""
    target = updates
    while True:
        if (out / "checkpoints").is_dir():
            poet.resume(out, iterations=target, progress=False)
        else:
            poet.run({**cfg, "iterations": target}, out=out, progress=False)
        missing = updates - trained_updates(out)
        if missing <= 0:
            return
        target += missing


def record(curriculum: str, seed: int, out: Path, episodes: int | None) -> dict:
    """A finished run's numbers and its final agents' scores on dcd's suite."""
    run = load_run(out)
    rows = run.score_levels("dcd", episodes=episodes).to_dict(orient="records")
    return {
        "curriculum": curriculum,
        "seed": seed,
        "run_dir": str(out.relative_to(ROOT) if out.is_relative_to(ROOT) else out),
        "updates": trained_updates(out),
        "iterations": int(run.phases["iteration"].max()) + 1,
        "env_steps": study.env_steps(run),
        "seconds": study.phase_seconds(run),
        "starts": json.loads((out / "run.json").read_text()).get("starts", []),
        "scores": rows,
    }


def summary(runs: list[dict]) -> dict:
    """Per curriculum and level, the mean over seeds of the solved rate and of the return."""
    out: dict = {}
    for r in runs:
        for row in r["scores"]:
            out.setdefault(r["curriculum"], {}).setdefault(row["level"], []).append(row)
    return {
        c: {
            level: {
                "seeds": len(rows),
                "solved_rate": float(np.mean([x["solved_rate"] for x in rows])),
                "mean_return": float(np.mean([x["mean_return"] for x in rows])),
            }
            for level, rows in levels.items()
        }
        for c, levels in out.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200, help="PPO updates per UED run (dcd: 20,000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--episodes", type=int, default=None, help="episodes per test level (default 100)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "dcd_bipedal")
    parser.add_argument("--json", type=Path, default=RESULTS / "dcd_bipedal.json")
    parser.add_argument("--quick", action="store_true", help="tiny runs; --json must be outside experiments/results")
    args = parser.parse_args()
    if args.quick:
        if args.json.resolve().is_relative_to(RESULTS):
            parser.error("--quick never writes into experiments/results/; give --json elsewhere")
        args.updates, args.episodes = 2, args.episodes or 2
        args.out = Path(tempfile.mkdtemp(prefix="dcd_bipedal-quick-"))
    t0 = time.perf_counter()
    runs = []
    for seed in args.seeds:
        mine = []
        for curriculum in UED:
            out = args.out / f"{curriculum}-seed{seed}"
            train_until(out, config(curriculum, seed, args.quick), args.updates)
            mine.append(record(curriculum, seed, out, args.episodes))
            print(
                f"{curriculum} seed {seed}: {mine[-1]['updates']} updates, {mine[-1]['env_steps']:,} env steps",
                flush=True,
            )
        goal = int(np.mean([r["env_steps"] for r in mine]))
        out = args.out / f"poet-seed{seed}"
        study.match_env_steps(out, [], goal, 1, config=config("poet", seed, args.quick))
        mine.append(record("poet", seed, out, args.episodes))
        print(f"poet seed {seed}: {mine[-1]['env_steps']:,} env steps (goal {goal:,})", flush=True)
        runs += mine
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "command": "python experiments/dcd_bipedal.py"
        + (" --quick" if args.quick else f" --updates {args.updates} --seeds {' '.join(map(str, args.seeds))}"),
        "commit": commit,
        "updates": args.updates,
        "fraction_of_dcd_updates": args.updates / DCD_UPDATES,
        "episodes": args.episodes or len(dcd_levels.COURSE_SEEDS),
        "runs": runs,
        "summary": summary(runs),
        "published": {
            "source": "envs/published/dcd_bipedal8d (20,000 updates, 10 seeds)",
            **dcd_levels.published_results(),
        },
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json} ({result['wall_seconds']} s)")


if __name__ == "__main__":
    main()
