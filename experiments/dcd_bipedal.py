"""The field's BipedalWalker benchmark: DR, robust PLR and ACCEL as dcd runs them (its PPO,
its 8-D levels), and POET at the same env steps, scored on dcd's test envs beside dcd's own
numbers; on `bipedal` (Box2D) at a fraction of dcd's budget that fits here, on `terrain` at
dcd's whole budget.

    python experiments/dcd_bipedal.py --family bipedal --updates 200 --seeds 0   # 1% of dcd's 20,000 updates
    python experiments/dcd_bipedal.py --family terrain --seeds 0                  # dcd's 20,000 updates
    python experiments/dcd_bipedal.py --quick --results /tmp/dcd                  # a smoke run, elsewhere

1. **DR, robust PLR, ACCEL** on the family with their curricula's defaults, which are dcd's
   BipedalWalker configs (PPO with 16 envs x 2,048 steps an update, dcd's 8-D levels:
   `env.options.level_space: dcd`), each trained for `--updates` PPO updates (dcd: 20,000;
   default here 200 on `bipedal`, 20,000 on `terrain`). robust PLR's exploring cycles train
   nothing, so a run goes on until it has trained that many times (`train_until`).
   Training seed 100 + seed.
2. **POET** (its own defaults: the reference's ES, POET's 5-D levels) on the same family for
   the mean env steps of the UED runs of the same seed (`reproduce_poet.match_env_steps`).
3. **Scores**: every run's final agents on dcd's test suite (`run.score_levels("dcd")`:
   BipedalWalker, Hardcore, Med-Stairs, Med-PitGap, Med-StumpHeight, Med-Roughness, 100
   episodes each, `--episodes`; on `terrain` their analogues, Hardcore aside), the best
   agent per level (a POET population; the UED curricula have one), with dcd's published
   means at 20,000 updates beside the `bipedal` rows.

Each finished run writes its own file, `RESULTS/FAMILY/CURRICULUM-seedS.json` (its updates,
env steps, seconds, code commits and scores), and a run whose file exists is not run again;
an interrupted run resumes from its checkpoint. Then `RESULTS/results.json` gathers every
file there with the per-level means over seeds, the fraction of dcd's budget and dcd's
numbers (RESULTS: `experiments/results/dcd_bipedal`; `--gather` writes only that;
`--quick` only outside `experiments/results/`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import poet
from envs import dcd_levels
from poet.analysis import Run, load_run

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT / "experiments"))
import reproduce_poet as study  # noqa: E402  (match_env_steps, env_steps, phase_seconds, write_json)

UED = ("dr", "robust_plr", "accel")
FAMILIES = ("bipedal", "terrain")
DCD_UPDATES = 20_000  # the budget of dcd's published BipedalWalker numbers
QUICK = {  # a smoke run: short episodes, small PPO rollouts
    "env": {"options": {"max_episode_steps": 60}},
    "evaluation": {"max_steps": 60, "backend": "inprocess"},
    "trainer": {"ppo": {"n_envs": 4, "n_steps": 64, "minibatch_size": 64, "epochs": 1}, "es": {"population": 4}},
    "policy": {"hidden": [8]},
    "curriculum_options": {"buffer_size": 8},
}


def config(curriculum: str, family: str, seed: int, quick: bool) -> dict:
    """One run's config: the curriculum's defaults on `family` (dcd's settings for the UED
    curricula, the reference's for POET), checkpointed every 20 iterations."""
    cfg: dict = {
        "curriculum": curriculum,
        "seed": 100 + seed,
        "progress": False,
        "env": {"family": family},
        "evaluation": {"backend": "inprocess"},
        "checkpoint": {"every": 20},  # a kill loses minutes at most
    }
    if quick:
        cfg.update({k: v for k, v in QUICK.items() if k not in ("curriculum_options", "env")})
        cfg["env"] = {**QUICK["env"], "family": family}
        if curriculum in ("robust_plr", "accel"):
            cfg["curriculum_options"] = dict(QUICK["curriculum_options"])
        if curriculum == "poet":
            cfg["trainer"] = {"es": QUICK["trainer"]["es"]}
            cfg["reproduction"] = {"every": 100}
    return cfg


def trained_updates(run: Run) -> int:
    """How many iterations of the run trained (a PPO update each)."""
    return int(run.iterations["iteration"].nunique())


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
        missing = updates - trained_updates(load_run(out))
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
        "updates": trained_updates(run),
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


def run_seed(family: str, seed: int, args: argparse.Namespace) -> None:
    """The four runs of one seed on `family`, each skipped when its file exists."""
    done = {}
    for curriculum in (*UED, "poet"):
        path = args.results / family / f"{curriculum}-seed{seed}.json"
        if path.exists():
            done[curriculum] = json.loads(path.read_text())
            continue
        t0 = time.perf_counter()
        out = args.out / family / f"{curriculum}-seed{seed}"
        cfg = config(curriculum, family, seed, args.quick)
        if curriculum == "poet":
            asked = {"env_steps_goal": int(np.mean([done[c]["env_steps"] for c in UED]))}
            study.match_env_steps(out, [], asked["env_steps_goal"], 1, config=cfg)
        else:
            asked = {"updates_asked": args.updates}
            train_until(out, cfg, args.updates)
        done[curriculum] = {
            "family": family,
            **record(curriculum, seed, out, args.episodes),
            **asked,
            "wall_seconds_last_call": round(time.perf_counter() - t0, 1),
        }
        study.write_json(path, done[curriculum])
        print(f"{family} {curriculum} seed {seed}: {done[curriculum]['env_steps']:,} env steps; {path}", flush=True)


def gather(results: Path) -> dict:
    """Every run file under `results`, per family, with the per-level means over seeds and
    dcd's published numbers (its 20,000 updates, 10 seeds)."""
    families = {}
    for family in FAMILIES:
        runs = [json.loads(p.read_text()) for p in sorted((results / family).glob("*-seed*.json"))]
        ued = [r for r in runs if r["curriculum"] in UED]
        families[family] = {
            "runs": runs,
            "summary": summary(runs),
            "updates": sorted({r["updates"] for r in ued}),
            "fraction_of_dcd_updates": sorted({r["updates"] / DCD_UPDATES for r in ued}),
        }
    return {
        "command": "python experiments/dcd_bipedal.py (each family's runs: their files' `run_dir` and `starts`)",
        "dcd_updates": DCD_UPDATES,
        "families": families,
        "published": {
            "source": "envs/published/dcd_bipedal8d (20,000 updates, 10 seeds)",
            **dcd_levels.published_results(),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default="bipedal")
    parser.add_argument(
        "--updates", type=int, default=None, help="PPO updates per UED run (default: bipedal 200, terrain 20,000)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--episodes", type=int, default=None, help="episodes per test level (default 100)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "dcd_bipedal")
    parser.add_argument("--results", type=Path, default=RESULTS / "dcd_bipedal")
    parser.add_argument("--quick", action="store_true", help="tiny runs; --results must be outside experiments/results")
    parser.add_argument("--gather", action="store_true", help="only write results.json from the run files there")
    args = parser.parse_args()
    if args.updates is None:
        args.updates = 200 if args.family == "bipedal" else DCD_UPDATES
    if args.quick:
        if args.results.resolve().is_relative_to(RESULTS):
            parser.error("--quick never writes into experiments/results/; give --results elsewhere")
        args.updates, args.episodes = 2, args.episodes or 2
        args.out = args.results / "runs"  # beside the smoke run's files, gone with them
    t0 = time.perf_counter()
    for seed in [] if args.gather else args.seeds:
        run_seed(args.family, seed, args)
    study.write_json(args.results / "results.json", gather(args.results))
    print(f"wrote {args.results / 'results.json'} ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
