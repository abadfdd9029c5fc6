"""Do a run's agents solve their env's params, or only their env's one course?

    python experiments/course_generalisation.py RUN_DIR [--envs 5] [--courses 20] [--json OUT]

POET pins every env to one course (the reference's `stochastic=False`), and a child env gets a
course of its own, so the minimal criterion scores the parent's agent on a course it has never
seen. For the `--envs` roughest solved envs of a terrain run, the pair's agent (newest
checkpoint) is scored on `--courses` fresh courses of its env's params, and of the same params
with roughness raised to the paper's criterion (4.5) and beyond: how many it solves, and on how
many it scores below the minimal criterion's lower bound (those children would be refused).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from envs import EnvParams
from poet.analysis import load_run
from poet.analysis.render import load_agents
from poet.evaluation import EvalRequest, InProcessEvaluator

ROUGHNESS = (4.5, 5.1)  # the paper's criterion, and one mutation step's most beyond it


def generalisation(run_dir: Path, n_envs: int, n_courses: int) -> dict:
    """The report as a dict (see the module docstring)."""
    run = load_run(run_dir)
    threshold, mc_lower = float(run.config["solved_threshold"]), float(run.config["reproduction"]["mc_lower"])
    max_steps = int(run.config["evaluation"]["max_steps"])
    parts, snapshot = load_agents(run_dir)
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    pairs = {p.pair_id: p for p in [*snapshot.state.population.active, *snapshot.state.population.archive]}
    solved = run.envs[run.envs["solved_iteration"].notna()].sort_values(["roughness", "env_id"], ascending=False)
    rows = []
    for env in solved.head(n_envs).itertuples():
        params = EnvParams.from_json(env.params_json)
        policy = evaluator.put(pairs[env.pair_id].theta)
        own = evaluator.evaluate([EvalRequest(policy, params, 1, 0, max_steps, tag="own")])[0].mean
        entry = {"env_id": env.env_id, "params": params.values, "own_course_score": float(own), "fresh_courses": []}
        for roughness in (float(params.values["roughness"]), *ROUGHNESS):
            values = {**params.values, "roughness": roughness}
            requests = [
                EvalRequest(
                    policy, EnvParams.create(params.family, values, course_seed=10_000 + k), 1, 0, max_steps, tag=str(k)
                )
                for k in range(n_courses)
            ]
            scores = np.array([r.mean for r in evaluator.evaluate(requests)])
            entry["fresh_courses"].append(
                {
                    "roughness": roughness,
                    "courses": n_courses,
                    "solved": int((scores >= threshold).sum()),
                    "below_mc": int((scores < mc_lower).sum()),
                    "median": float(np.median(scores)),
                }
            )
        rows.append(entry)
    return {"run_dir": str(run_dir), "solved_threshold": threshold, "mc_lower": mc_lower, "envs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--envs", type=int, default=5)
    parser.add_argument("--courses", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    t0 = time.perf_counter()
    report = {
        "command": " ".join(["python experiments/course_generalisation.py", *sys.argv[1:]]),
        **generalisation(args.run_dir, args.envs, args.courses),
    }
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    for env in report["envs"]:
        cells = ", ".join(
            f"roughness {c['roughness']:g}: {c['solved']}/{c['courses']} solved, {c['below_mc']} below the MC"
            for c in env["fresh_courses"]
        )
        print(f"{env['env_id'][:8]} (own course {env['own_course_score']:.0f}): {cells}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
