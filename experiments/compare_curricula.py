"""ACCEL, robust PLR and domain randomisation with the same budget, compared on the terrain
family's held-out levels (flat, pits, stumps, rough, combined).

    python experiments/compare_curricula.py [--iterations 150] [--seeds 3] [--json results.json] [--quick]

Every run is the quickstart config (terrain, ES, 40-40 tanh policy, 400-step cap) with the
curriculum swapped, the same number of iterations (at most one trainer step each) and the
held-out evaluation every `--test-every` iterations. The level buffer is scaled to the
budget (`--buffer-size`, default 200 instead of dcd's 1000, so that replay starts within
the run). Prints a table of the final held-out scores (mean and spread over seeds) and the
env steps each curriculum used, and writes every number to the JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import poet
from poet.analysis import load_run

ROOT = Path(__file__).resolve().parents[1]
CURRICULA = ("accel", "robust_plr", "dr")


def run_one(curriculum: str, seed: int, args: argparse.Namespace, out: Path) -> dict:
    """One run; its final held-out scores (best active agent per level) and its budget."""
    sets = [f"curriculum={curriculum}", f"seed={seed}", f"iterations={args.iterations}",
            f"evaluation.test_every={args.test_every}", "checkpoint.every=0", *args.set]
    if curriculum in ("accel", "robust_plr"):
        sets.append(f"curriculum_options={{buffer_size: {args.buffer_size}, new_levels: {args.new_levels}}}")
    t0 = time.perf_counter()
    poet.run(args.config, out=out, overrides=sets, progress=False)
    run = load_run(out)
    last = run.heldout[run.heldout["iteration"] == run.heldout["iteration"].max()]
    return {
        "curriculum": curriculum, "seed": seed, "seconds": round(time.perf_counter() - t0, 1),
        "trainer_steps": int(len(run.iterations)), "env_steps": int(run.phases["env_steps"].sum()),
        "levels_seen": int(run.envs["env_id"].nunique()),
        "heldout": {str(level): float(score) for level, score in last.groupby("level", sort=False)["score"].max().items()},
        "heldout_curve": [{"iteration": int(r.iteration), "level": str(r.level), "score": float(r.score)}
                          for r in run.heldout.groupby(["iteration", "level"], sort=False)["score"].max()
                          .reset_index().itertuples()],
    }


def summarise(runs: list[dict]) -> list[dict]:
    """Per curriculum: mean, min and max over seeds of each level's final score, and the budget used."""
    out = []
    for curriculum in dict.fromkeys(r["curriculum"] for r in runs):
        mine = [r for r in runs if r["curriculum"] == curriculum]
        levels = list(mine[0]["heldout"])
        row = {"curriculum": curriculum, "seeds": len(mine),
               "env_steps_mean": round(statistics.mean(r["env_steps"] for r in mine)),
               "trainer_steps_mean": statistics.mean(r["trainer_steps"] for r in mine)}
        for level in levels:
            values = [r["heldout"][level] for r in mine]
            row[level] = {"mean": statistics.mean(values), "min": min(values), "max": max(values)}
        out.append(row)
    return out


def table(summary: list[dict]) -> str:
    """A markdown table of the summary."""
    levels = [k for k in summary[0] if isinstance(summary[0][k], dict)]
    lines = ["| curriculum | " + " | ".join(levels) + " | trainer steps | env steps |",
             "|---" * (len(levels) + 3) + "|"]
    for row in summary:
        cells = [f"{row[lv]['mean']:.0f} ({row[lv]['min']:.0f} to {row[lv]['max']:.0f})" for lv in levels]
        lines.append(f"| {row['curriculum']} | " + " | ".join(cells)
                     + f" | {row['trainer_steps_mean']:.0f} | {row['env_steps_mean']:,} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "quickstart.yaml")
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--test-every", type=int, default=25)
    parser.add_argument("--buffer-size", type=int, default=200)
    parser.add_argument("--new-levels", type=int, default=16)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.seeds, args.test_every, args.buffer_size, args.new_levels = 6, 1, 3, 4, 2
        args.set = ["evaluation.backend=inprocess", "evaluation.max_steps=60", "trainer.es.population=4",
                    "env.options.course_length=20", *args.set]
    t0 = time.perf_counter()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            for curriculum in CURRICULA:
                runs.append(run_one(curriculum, seed, args, Path(tmp) / f"{curriculum}-{seed}"))
                print(f"{curriculum} seed {seed}: " + ", ".join(f"{k} {v:.0f}" for k, v in runs[-1]["heldout"].items())
                      + f" ({runs[-1]['seconds']:.0f} s)", flush=True)
    summary = summarise(runs)
    print(table(summary))
    print(f"total wall time {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v)
                                                  for k, v in vars(args).items()},
                                         "summary": summary, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
