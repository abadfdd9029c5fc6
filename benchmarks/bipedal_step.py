"""Cost of stepping the `bipedal` family against gymnasium's BipedalWalker-v3.

    python benchmarks/bipedal_step.py [--steps 2000] [--repeats 7] [--json PATH]

Both envs take the same random actions (resetting when an episode ends); the two are
timed in alternation, repeat after repeat, so machine noise hits both alike. Reports the
median microseconds per step and the ratio family / v3 for a flat course and for a course
with roughness, pits and stumps. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import envs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def time_steps(env: gym.Env, actions: np.ndarray, seed: int) -> float:
    """Microseconds per step over the whole action sequence (resets excluded)."""
    env.reset(seed=seed)
    spent = 0.0
    for a in actions:
        t0 = time.perf_counter()
        _, _, term, trunc, _ = env.step(a)
        spent += time.perf_counter() - t0
        if term or trunc:
            env.reset()
    return spent / len(actions) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "bipedal_step.json")
    args = parser.parse_args()
    family = envs.make_family("bipedal")
    hard = family.initial().replace(roughness=2.0, pit_gap=[0.0, 2.0], stump_height=[0.0, 1.0])
    contenders = {
        "BipedalWalker-v3": gym.make("BipedalWalker-v3").unwrapped,
        "bipedal (flat)": family.make_env(family.initial()),
        "bipedal (rough, pits, stumps)": family.make_env(hard),
    }
    actions = np.random.default_rng(0).uniform(-1, 1, size=(args.steps, 4)).astype(np.float32)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for rep in range(args.repeats):
        for name, env in contenders.items():
            times[name].append(time_steps(env, actions, seed=rep))
    base = statistics.median(times["BipedalWalker-v3"])
    results = {
        name: {"us_per_step": round(statistics.median(t), 1), "ratio_to_v3": round(statistics.median(t) / base, 3)}
        for name, t in times.items()
    }
    width = max(map(len, results))
    for name, r in results.items():
        print(f"{name:<{width}}  {r['us_per_step']:8.1f} us/step  x{r['ratio_to_v3']:.3f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"steps": args.steps, "repeats": args.repeats, "results": results}, indent=2))


if __name__ == "__main__":
    main()
