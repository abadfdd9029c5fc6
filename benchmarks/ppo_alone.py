"""PPO alone (no POET) on one env of a family: the return it reaches for a budget of env steps.

    python benchmarks/ppo_alone.py --family lunar_lander --iterations 70 \
        --json benchmarks/results/ppo_lunar_lander.json
    python benchmarks/ppo_alone.py --family terrain --iterations 20 --preset default

Runs the framework's PPO trainer through the in-process evaluator exactly as a POET run
drives one pair: one `step` per iteration, the starting agent scored every
`--eval-every` iterations on `--eval-episodes` fresh episodes (the deterministic policy,
as POET scores agents). Prints one line per scored iteration and writes JSON.
The `zoo` preset is the usual PPO setting for LunarLanderContinuous (16 envs x 1024
steps, minibatches of 64, 4 epochs, gamma 0.999, GAE lambda 0.98, entropy 0.01).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

import envs
from poet.evaluation import EvalRequest, InProcessEvaluator
from poet.policies import init_flat, spec_for_spaces
from poet.trainers import PPOOptions, PPOTrainer, TrainerContext, TrainTask

PRESETS = {
    "default": {},
    "zoo": {
        "n_envs": 16,
        "n_steps": 1024,
        "epochs": 4,
        "minibatch_size": 64,
        "gamma": 0.999,
        "gae_lambda": 0.98,
        "ent_coef": 0.01,
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="lunar_lander")
    ap.add_argument("--iterations", type=int, default=70)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="zoo")
    ap.add_argument("--max-steps", type=int, default=1000, help="episode cap")
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    family = envs.make_family(args.family)
    params = family.initial()
    probe = family.make_env(params)
    spec = spec_for_spaces(probe.observation_space, probe.action_space, (40, 40), "tanh")
    probe.close()
    options = PPOOptions(**PRESETS[args.preset])
    trainer = PPOTrainer(options, TrainerContext(spec=spec, max_steps=args.max_steps))
    evaluator = InProcessEvaluator(family, spec)
    theta = init_flat(spec, np.random.default_rng(args.seed), "normc")
    state = trainer.init_state(theta)
    curve, start = [], time.perf_counter()

    def score(it: int, theta: np.ndarray, env_steps: int) -> None:
        ref = evaluator.put(theta)
        result = evaluator.evaluate([EvalRequest(ref, params, args.eval_episodes, 10_000 + it, args.max_steps)])[0]
        evaluator.release([ref])
        seconds = time.perf_counter() - start
        curve.append(
            {
                "iteration": it,
                "env_steps": env_steps,
                "seconds": round(seconds, 1),
                "score": round(result.mean, 2),
                "score_std": round(float(np.std(result.returns)), 2),
            }
        )
        print(f"iteration {it:4d}  env steps {env_steps:9d}  {seconds:7.1f} s  score {result.mean:8.2f}", flush=True)

    for it in range(args.iterations):
        if it % args.eval_every == 0:
            score(it, theta, int(state["env_steps"]))
        (step,) = trainer.step([TrainTask("p0", theta, params, state, seed=args.seed * 100_003 + it)], evaluator)
        theta, state = step.theta, step.state
    score(args.iterations, theta, int(state["env_steps"]))
    best = max(curve, key=lambda c: c["score"])
    print(
        f"best score {best['score']:.2f} at iteration {best['iteration']} ({best['env_steps']} env steps); "
        f"final {curve[-1]['score']:.2f} after {curve[-1]['env_steps']} env steps, {curve[-1]['seconds']:.0f} s"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "family": args.family,
                    "params": params.to_dict(),
                    "preset": args.preset,
                    "options": asdict(options),
                    "max_steps": args.max_steps,
                    "eval_episodes": args.eval_episodes,
                    "seed": args.seed,
                    "final_score": curve[-1]["score"],
                    "best": best,
                    "curve": curve,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
