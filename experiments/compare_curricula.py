"""POET, Enhanced POET, ACCEL, robust PLR and domain randomisation compared on the terrain
family's held-out levels (flat, pits, stumps, rough, combined).

    python experiments/compare_curricula.py [--curricula poet accel robust_plr dr] [--seeds 3]
        [--iterations N] [--config CURRICULUM=YAML ...] [--out DIR] [--json results.json] [--quick]

Each curriculum runs its own config: the quickstart for `poet` and `enhanced_poet`,
`experiments/ued_terrain.yaml` for the others (`--config accel=my.yaml` picks another). Both
configs share the env, policy, evaluation and ES settings and score the held-out levels every
20 iterations, so every run is measured on the same levels; each keeps its own number of
iterations (`--iterations` sets one for all) and so its own budget, which the table shows in
env steps. `--set` overrides apply to every run; `--buffer-size` and `--num-levels` to the
level-buffer curricula only.

Prints a table of the final held-out scores (best agent per level; mean and spread over
seeds) and the env steps each curriculum used, writes every number to `--json`, keeps the
runs in `--out` (default runs/compare_curricula-<date-time>) and puts them side by side
with `poet compare`, one comparison per seed (DIR/compare-s<seed>).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

import poet
from poet.analysis import load_run
from poet.analysis.compare import write_comparison

ROOT = Path(__file__).resolve().parents[1]
CURRICULA = ("poet", "accel", "robust_plr", "dr")
POET_CONFIG = ROOT / "experiments" / "quickstart.yaml"
UED_CONFIG = ROOT / "experiments" / "ued_terrain.yaml"
LEVEL_BUFFER = ("accel", "robust_plr")  # the curricula that take buffer_size and num_levels


def shown(path: str | Path) -> str:
    """A path as the JSON keeps it: relative to the project where it is inside it."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def default_config(curriculum: str) -> Path:
    """The config a curriculum runs by default: the quickstart for the POETs, the UED config for the rest."""
    return POET_CONFIG if curriculum in ("poet", "enhanced_poet") else UED_CONFIG


def overrides(curriculum: str, config: Path, seed: int, args: argparse.Namespace) -> list[str]:
    """The `--set` overrides of one run."""
    sets = [f"curriculum={curriculum}", f"seed={seed}", "checkpoint.every=0"]
    own = (yaml.safe_load(config.read_text()) or {}) if config.is_file() else {}
    options = own.get("curriculum_options") or {}
    if (
        options
        and own.get("curriculum") != curriculum
        and not (own.get("curriculum") in LEVEL_BUFFER and curriculum in LEVEL_BUFFER)
    ):
        sets.append("curriculum_options={}")  # another curriculum's options (dr takes none)
    if args.iterations is not None:
        sets.append(f"iterations={args.iterations}")
    if args.test_every is not None:
        sets.append(f"evaluation.test_every={args.test_every}")
    if curriculum in LEVEL_BUFFER:
        for key, value in (("buffer_size", args.buffer_size), ("num_levels", args.num_levels)):
            if value is not None:
                sets.append(f"curriculum_options.{key}={value}")
    return [*sets, *args.set]


def check(plan: list[tuple[str, Path, list[str]]]) -> None:
    """Every run's config, resolved and checked before the first run starts (one line and exit 2 if bad)."""
    from poet.parts import check_parts

    for curriculum, config, sets in plan:
        try:
            if not config.is_file():
                raise poet.ConfigError(f"--config {curriculum}: {str(config)!r} not found")
            cfg = poet.load_config(config, sets)
            check_parts(cfg)
            if cfg.evaluation.test_every <= 0:
                raise poet.ConfigError(
                    f"{config.name}: evaluation.test_every is 0 (no held-out levels to compare on); give --test-every N"
                )
        except poet.ConfigError as exc:
            print(f"compare_curricula: error: {curriculum}: {exc}", file=sys.stderr)
            sys.exit(2)


def run_one(curriculum: str, seed: int, config: Path, sets: list[str], out: Path) -> dict:
    """One run; its final held-out scores (best active agent per level) and its budget."""
    t0 = time.perf_counter()
    poet.run(config, out=out, overrides=sets, progress=False)
    run = load_run(out)
    last = run.heldout[run.heldout["iteration"] == run.heldout["iteration"].max()]
    trained = run.phases[run.phases["phase"] != "heldout"]  # the held-out evaluation is measurement
    return {
        "curriculum": curriculum,
        "seed": seed,
        "config": shown(config),
        "run_dir": shown(out),
        "seconds": round(time.perf_counter() - t0, 1),
        "iterations": int(run.config["iterations"]),
        "trainer_steps": int(len(run.iterations)),
        "env_steps": int(trained["env_steps"].sum()),
        "levels_seen": int(run.envs["env_id"].nunique()),
        "heldout": {
            str(level): float(score) for level, score in last.groupby("level", sort=False)["score"].max().items()
        },
        "heldout_curve": [
            {"iteration": int(r.iteration), "level": str(r.level), "score": float(r.score)}
            for r in run.heldout.groupby(["iteration", "level"], sort=False)["score"].max().reset_index().itertuples()
        ],
    }


def summarise(runs: list[dict]) -> list[dict]:
    """Per curriculum: mean, min and max over seeds of each level's final score, and the budget used."""
    out = []
    for curriculum in dict.fromkeys(r["curriculum"] for r in runs):
        mine = [r for r in runs if r["curriculum"] == curriculum]
        levels = list(mine[0]["heldout"])
        row = {
            "curriculum": curriculum,
            "seeds": len(mine),
            "iterations": mine[0]["iterations"],
            "env_steps_mean": round(statistics.mean(r["env_steps"] for r in mine)),
            "trainer_steps_mean": statistics.mean(r["trainer_steps"] for r in mine),
        }
        for level in levels:
            values = [r["heldout"][level] for r in mine]
            row[level] = {"mean": statistics.mean(values), "min": min(values), "max": max(values)}
        out.append(row)
    return out


def table(summary: list[dict]) -> str:
    """A markdown table of the summary."""
    levels = [k for k in summary[0] if isinstance(summary[0][k], dict)]
    lines = [
        "| curriculum | " + " | ".join(levels) + " | iterations | trainer steps | env steps |",
        "|---" * (len(levels) + 4) + "|",
    ]
    for row in summary:
        cells = [f"{row[lv]['mean']:.0f} ({row[lv]['min']:.0f} to {row[lv]['max']:.0f})" for lv in levels]
        lines.append(
            f"| {row['curriculum']} | "
            + " | ".join(cells)
            + f" | {row['iterations']} | {row['trainer_steps_mean']:.0f} | {row['env_steps_mean']:,} |"
        )
    return "\n".join(lines)


def _config_arg(text: str) -> tuple[str, Path]:
    curriculum, sep, path = text.partition("=")
    if not sep or not curriculum or not path:
        raise argparse.ArgumentTypeError(f"expected CURRICULUM=YAML, got {text!r}")
    return curriculum, Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--curricula",
        nargs="+",
        default=list(CURRICULA),
        metavar="CURRICULUM",
        help=f"curricula to run (default: {' '.join(CURRICULA)})",
    )
    parser.add_argument(
        "--config",
        type=_config_arg,
        action="append",
        default=[],
        metavar="CURRICULUM=YAML",
        help="the config of one curriculum (default: quickstart for poet and enhanced_poet, "
        "ued_terrain.yaml for the others)",
    )
    parser.add_argument("--iterations", type=int, default=None, help="iterations of every run (default: its config's)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--test-every", type=int, default=None, help="held-out evaluation period (default: the configs')"
    )
    parser.add_argument("--buffer-size", type=int, default=None, help="level buffer of accel and robust_plr")
    parser.add_argument("--num-levels", type=int, default=None, help="levels per cycle of accel and robust_plr")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs and the comparisons")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.seeds, args.test_every, args.buffer_size, args.num_levels = 6, 1, 3, 4, 2
        args.set = [
            "evaluation.backend=inprocess",
            "evaluation.max_steps=60",
            "trainer.es.population=4",
            "env.options.course_length=20",
            *args.set,
        ]
    if args.seeds < 1:
        parser.error(f"--seeds: must be >= 1, got {args.seeds}")
    configs = {curriculum: default_config(curriculum) for curriculum in args.curricula}
    unknown = [c for c, _ in args.config if c not in configs]
    if unknown:
        parser.error(f"--config {unknown[0]}=...: {unknown[0]!r} is not in --curricula")
    configs.update(dict(args.config))
    out = args.out if args.out is not None else Path("runs") / f"compare_curricula-{time.strftime('%Y%m%d-%H%M%S')}"
    plan = [
        (c, configs[c], overrides(c, configs[c], seed, args), seed)
        for seed in range(args.seeds)
        for c in dict.fromkeys(args.curricula)
    ]
    check([(c, config, sets) for c, config, sets, seed in plan if seed == 0])
    t0 = time.perf_counter()
    runs = []
    for curriculum, config, sets, seed in plan:
        runs.append(run_one(curriculum, seed, config, sets, out / f"{curriculum}-s{seed}"))
        print(
            f"{curriculum} seed {seed} ({Path(config).name}): "
            + ", ".join(f"{k} {v:.0f}" for k, v in runs[-1]["heldout"].items())
            + f" ({runs[-1]['seconds']:.0f} s)",
            flush=True,
        )
    summary = summarise(runs)
    print(table(summary))
    print(f"total wall time {time.perf_counter() - t0:.0f} s")
    compared = []
    for seed in range(args.seeds):
        dirs = [out / f"{r['curriculum']}-s{seed}" for r in runs if r["seed"] == seed]
        if len(dirs) >= 2:
            folder = write_comparison(
                dirs, out / f"compare-s{seed}", say=lambda note: print(f"note: {note}", flush=True)
            )
            compared.append(shown(folder))
            print(f"poet compare (seed {seed}): {folder / 'index.html'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "args": {
                        k: (
                            shown(v)
                            if isinstance(v, Path)
                            else [f"{c}={shown(p)}" for c, p in v]
                            if k == "config"
                            else v
                        )
                        for k, v in vars(args).items()
                    },
                    "configs": {c: shown(p) for c, p in configs.items()},
                    "summary": summary,
                    "runs": runs,
                    "compare": compared,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
