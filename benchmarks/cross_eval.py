"""A cross-evaluation of many agents on many envs: the Ray pool against one process, alternating.

    python benchmarks/cross_eval.py RUN_DIR [--agents 100] [--envs 100] [--workers 2]
                                    [--rounds 3] [--json PATH]

Takes the newest `--agents` agents of the run's newest checkpoint (active and archived) and
its newest `--envs` envs, and scores every agent on every env as the run scores
(`poet.analysis.agents.score`: one batched wave), on a local Ray pool of `--workers` and in
this process, alternating, `--rounds` times each, nothing cached: each time a first wave on
a fresh evaluator (what one `Run.cross_eval` call costs, the pool's start included) and the
same wave again on the warm one. Reports per backend and wave the median wall seconds, env
steps and env steps per second; the scores must be identical
between backends and rounds (the script fails otherwise). The pool's rate is set beside the
pool's own benchmark rate for terrain waves (`benchmarks/results/eval_pool.json`), measured
in another run. Nothing here is a pass/fail test of speed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from poet.analysis import load_run
from poet.analysis.agents import resolve_envs, scorer
from poet.scoring import ScoreCache

ROOT = Path(__file__).resolve().parents[1]
POOL_BENCHMARK = ROOT / "benchmarks" / "results" / "eval_pool.json"


def two_waves(run, agents, params, backend: str, workers: int) -> tuple[np.ndarray, list[dict]]:
    """Scores of every agent on every env, and the wall seconds and env steps of two waves:
    the first on a fresh evaluator (as one `Run.cross_eval` call runs), then the same again
    on the warm one (nothing cached)."""
    jobs = [(a.theta, env) for a in agents for env in params]
    timings = []
    with scorer(run, backend, workers) as s:
        for _ in range(2):
            s.cache, before = ScoreCache(), int(s.evaluator.env_steps)
            start = time.perf_counter()
            scores = s.score(jobs)
            seconds = time.perf_counter() - start
            steps = int(s.evaluator.env_steps) - before
            timings.append({"seconds": seconds, "env_steps": steps, "env_steps_per_s": steps / seconds})
    return scores, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--envs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    run = load_run(args.run_dir)
    agents = run.agents()[-args.agents :]
    params = resolve_envs(run, list(run.envs["env_id"])[-args.envs :])
    print(f"{len(agents)} agents x {len(params)} envs = {len(agents) * len(params):,} scores per wave")
    two_waves(run, agents[:2], params[:2], "inprocess", args.workers)  # compiles the kernels, untimed
    measured: dict[str, list[dict]] = {f"{b}_{w}": [] for b in ("ray", "inprocess") for w in ("first", "warm")}
    reference = None
    for round_ in range(args.rounds):
        for backend in ("ray", "inprocess"):
            scores, timings = two_waves(run, agents, params, backend, args.workers)
            if reference is None:
                reference = scores
            if not np.array_equal(scores, reference, equal_nan=True):
                raise SystemExit(f"round {round_}, {backend}: the scores differ from the first wave's")
            for wave, t in zip(("first", "warm"), timings):
                measured[f"{backend}_{wave}"].append(t)
                print(
                    f"round {round_} {backend:9s} {wave:5s}: {t['seconds']:6.2f} s, {t['env_steps']:,} env steps, "
                    f"{t['env_steps_per_s']:,.0f} steps/s"
                )
    median = {
        name: {key: statistics.median(m[key] for m in rows) for key in rows[0]} for name, rows in measured.items()
    }
    pool_rate = json.loads(POOL_BENCHMARK.read_text())["envs"]["terrain"]["pool_steps_per_s"]
    result = {
        "command": "python benchmarks/cross_eval.py "
        + " ".join(
            [str(args.run_dir), f"--agents {args.agents}", f"--envs {args.envs}", f"--workers {args.workers}"]
            + [f"--rounds {args.rounds}"]
        ),
        "machine": {"platform": platform.platform(), "cpus": __import__("os").cpu_count()},
        "agents": len(agents),
        "envs": len(params),
        "scores_per_wave": len(agents) * len(params),
        "median": median,
        "ray_over_inprocess_warm": median["ray_warm"]["env_steps_per_s"] / median["inprocess_warm"]["env_steps_per_s"],
        "pool_benchmark_steps_per_s": pool_rate,
        "ray_warm_over_pool_benchmark": median["ray_warm"]["env_steps_per_s"] / pool_rate,
        "rounds": measured,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
