"""Does recurrence do its job? PPO on CartPole with its two velocities hidden, `lstm` against `mlp`.

    python experiments/partial_cartpole.py [--kinds mlp lstm] [--seeds 3] [--updates 300]
        [--out DIR] [--json PATH] [--quick]

The shipped `cartpole` family with `observe_velocities: false` shows the policy the cart's
position and the pole's angle only: a feed-forward policy cannot tell which way the pole
falls, a recurrent one can work it out from two observations. Each (kind, seed) is one
`poet run` of the `direct` curriculum (one agent, one env: gymnasium's CartPole physics)
trained by PPO for `--updates` updates of 8 envs x 128 steps, the same options and budget for
both kinds (raw observations: a torch kind takes no normaliser; per-episode starts). The
final agent is then scored on 100 held-out episodes, their reset seeds from a stream no
training episode draws from; the task counts as solved at gymnasium's CartPole threshold,
a mean return of 475 or more.

Resumable: every run directory is kept in `--out` (default runs/partial_cartpole); a run that
is already complete is read, not rerun, and an unfinished one is resumed from its checkpoint.
The JSON is rewritten after every run, so a stop loses nothing computed. `--quick` (a few
updates, one seed) is a smoke test: it writes only where `--json` says, never to the
committed results.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import poet
from envs import EnvParams
from poet.analysis import load_run
from poet.analysis.render import load_agents
from poet.evaluation import EvalRequest, InProcessEvaluator
from poet.seeding import Seeds

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results" / "partial_cartpole.json"
SOLVED = 475.0  # gymnasium's reward_threshold for CartPole-v1
HELD_OUT_EPISODES = 100
MAX_STEPS = 500
KIND_OPTIONS = {"mlp": None, "lstm": {"hidden": 64, "head": []}}
PPO = {
    "n_envs": 8,
    "n_steps": 128,
    "epochs": 4,
    "minibatch_size": 256,
    "lr": 0.001,
    "ent_coef": 0.01,
    "normalize_obs": False,
    "value_hidden": [64, 64],
}


def config(kind: str, seed: int, updates: int) -> dict:
    """One run's config: `direct` PPO on partially observed CartPole, one update per iteration."""
    policy = {"kind": kind, "hidden": [64, 64], "init": "orthogonal"}
    if KIND_OPTIONS[kind] is not None:
        policy["options"] = KIND_OPTIONS[kind]
    return {
        "curriculum": "direct",
        "seed": seed,
        "iterations": updates,
        "progress": False,
        "env": {"family": "cartpole", "options": {"kwargs": {"observe_velocities": False}}},
        "policy": policy,
        "evaluation": {"backend": "inprocess", "max_steps": MAX_STEPS, "eval_episodes": 1, "course": "per_episode"},
        "trainer": {"name": "ppo", "ppo": PPO},
        "checkpoint": {"every": 20, "keep": 2},
    }


def train(kind: str, seed: int, updates: int, out: Path) -> tuple[Path, float]:
    """The run directory of (kind, seed), run or resumed to `updates` updates; the seconds it took here."""
    run_dir = out / f"{kind}-s{seed}"
    t0 = time.perf_counter()
    if (run_dir / "run.json").is_file():
        done = load_run(run_dir).iterations
        if done.empty or int(done["iteration"].max()) < updates - 1:
            poet.resume(run_dir, iterations=updates, progress=False)
    else:
        poet.run(config(kind, seed, updates), out=run_dir, progress=False)
    return run_dir, time.perf_counter() - t0


def held_out(run_dir: Path) -> dict:
    """The newest agent on HELD_OUT_EPISODES episodes whose seeds no training episode uses."""
    parts, snapshot = load_agents(run_dir)
    (pair,) = snapshot.state.population.active
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    env = EnvParams.create(parts.family.name, dict(pair.env.values))  # per-episode starts
    seed = int(Seeds(int(load_run(run_dir).config["seed"])).rng("held-out episodes").integers(0, 2**31 - 1))
    result = evaluator.evaluate([EvalRequest(evaluator.put(pair.theta), env, HELD_OUT_EPISODES, seed, MAX_STEPS)])[0]
    if not result.ok:
        raise RuntimeError(f"{run_dir}: {result.error.describe()}")
    returns = np.asarray(result.returns, dtype=float)
    return {
        "iteration": int(snapshot.iteration),
        "episodes": int(returns.size),
        "mean_return": float(returns.mean()),
        "min_return": float(returns.min()),
        "solved": bool(returns.mean() >= SOLVED),
    }


def summary(results: list[dict]) -> dict:
    """Per kind: the seeds that solved the task, and the spread of the held-out mean returns."""
    out = {}
    for kind in sorted({r["kind"] for r in results}):
        rows = [r for r in results if r["kind"] == kind]
        means = [r["held_out"]["mean_return"] for r in rows]
        out[kind] = {
            "seeds": len(rows),
            "solved": sum(r["held_out"]["solved"] for r in rows),
            "mean_return_mean": float(np.mean(means)),
            "mean_return_min": float(np.min(means)),
            "mean_return_max": float(np.max(means)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", default=list(KIND_OPTIONS), choices=list(KIND_OPTIONS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "partial_cartpole")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke test: 5 updates, 1 seed")
    args = parser.parse_args(argv)
    if args.quick:
        if args.json is None or args.json.resolve() == RESULTS:
            parser.error("--quick writes only where --json says, never to the committed results")
        args.seeds, args.updates = 1, 5
    json_path = args.json or RESULTS
    started = time.perf_counter()
    results = []
    for seed in range(args.seeds):
        for kind in args.kinds:
            run_dir, seconds = train(kind, seed, args.updates, args.out)
            row = {"kind": kind, "seed": seed, "run_dir": str(run_dir.name), "train_seconds_here": round(seconds, 1)}
            row["held_out"] = held_out(run_dir)
            results.append(row)
            print(
                f"{kind:5s} seed {seed}: held-out mean return {row['held_out']['mean_return']:.1f} "
                f"(min {row['held_out']['min_return']:.0f}) over {HELD_OUT_EPISODES} episodes"
                f"{' (solved)' if row['held_out']['solved'] else ''}",
                flush=True,
            )
            payload = {
                "command": "python experiments/partial_cartpole.py " + " ".join(sys.argv[1:] if argv is None else argv),
                "budget": {
                    "ppo_updates": args.updates,
                    "env_steps_per_update": PPO["n_envs"] * PPO["n_steps"],
                    "env_steps": args.updates * PPO["n_envs"] * PPO["n_steps"],
                },
                "task": "cartpole, observe_velocities: false (cart position and pole angle only)",
                "solved_at": SOLVED,
                "held_out_episodes": HELD_OUT_EPISODES,
                "ppo": PPO,
                "kinds": {k: KIND_OPTIONS[k] for k in args.kinds},
                "runs": results,
                "summary": summary(results),
                "wall_seconds": round(time.perf_counter() - started, 1),
                "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
            }
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(payload, indent=2) + "\n")
    for kind, s in summary(results).items():
        print(
            f"{kind}: solved in {s['solved']} of {s['seeds']} seeds (held-out mean return {s['mean_return_min']:.1f}-{s['mean_return_max']:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
