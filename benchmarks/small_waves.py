"""Small waves: in the driver or on the workers, by wave size.

    python benchmarks/small_waves.py [--workers 2] [--waves 40] [--repeats 5] [--json PATH]

Waves of 2 to 128 requests, each 3 episodes of a 400-step cap on one of 8 pinned terrain
courses (as a run scores its agents after an ES step), 40-40 tanh policies, three ways,
interleaved: the Ray pool with every wave on its workers (`local_wave_steps=0`,
`driver_share=False`), the same pool with its default rule (waves expected to take at most
`ray.local_wave_steps` env steps run in the driver, and on one machine the driver takes one
worker's share of a bigger wave), and one process (`InProcessEvaluator`). Median milliseconds per wave of
`repeats` spans of `waves` waves each; every way gives the same results. This is how
`ray.local_wave_steps`'s default was chosen. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import eval_pool as ep  # noqa: E402  (the same policies, envs and Ray session as the main benchmark)

from poet.evaluation import EvalRequest, InProcessEvaluator  # noqa: E402
from poet.evaluation.ray_pool import LOCAL_WAVE_STEPS, RayEvaluator  # noqa: E402

SIZES = (2, 4, 8, 16, 32, 64, 128)
EPISODES, CAP = 3, 400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--waves", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "small_waves.json")
    args = parser.parse_args()
    t0 = time.perf_counter()
    setup = ep.make_setup("terrain", ep.Sizes())
    with ep.ray_session(args.workers):
        pool = ep.open_pool(setup, args.workers)
        ways: dict[str, RayEvaluator | InProcessEvaluator] = {
            "workers": pool,
            "pool": pool,
            "one_process": InProcessEvaluator(setup.family, setup.spec),
        }
        # the same pool both ways, its rule (`local_wave_steps`, `driver_share`) switched span by span
        rules = {"workers": (0, False), "pool": (LOCAL_WAVE_STEPS, pool.driver_share)}
        refs = {name: [ev.put(w) for w in setup.policies] for name, ev in ways.items()}

        def use(name: str) -> RayEvaluator | InProcessEvaluator:
            if name in rules:
                pool.local_wave_steps, pool.driver_share = rules[name]
            return ways[name]

        def wave(name: str, n: int, base: int) -> list[EvalRequest]:
            p, e = len(setup.policies), len(setup.envs)
            return [EvalRequest(refs[name][i % p], setup.envs[i % e], EPISODES, base + i, CAP) for i in range(n)]

        for name in ways:  # not timed: kernels loaded, episode lengths seen
            use(name).evaluate(wave(name, max(SIZES), 1))
        rows = []
        for n in SIZES:
            ms: dict[str, list[float]] = {name: [] for name in ways}
            steps, answers = {}, {}
            for rep in range(args.repeats):
                for name in ways:
                    ev = use(name)
                    before, start = ev.env_steps, time.perf_counter()
                    for k in range(args.waves):
                        out = ev.evaluate(wave(name, n, 10**6 * rep + 1000 * k))
                    ms[name].append(1e3 * (time.perf_counter() - start) / args.waves)
                    steps[name] = (ev.env_steps - before) // args.waves
                    answers[name] = [(r.returns.tolist(), r.lengths.tolist()) for r in out]
            if len({json.dumps(a) for a in answers.values()}) != 1 or len(set(steps.values())) != 1:
                raise RuntimeError(f"the ways disagree on waves of {n} requests")
            median = {name: round(statistics.median(v), 3) for name, v in ms.items()}
            row = {"requests": n, "env_steps": steps["pool"], "ms_median": median, "ms": ms}
            rows.append(row)
            print(
                f"{n:>4} requests, {steps['pool']:>6} env steps: " + ", ".join(f"{k} {v} ms" for k, v in median.items())
            )
        for ev in ways.values():
            ev.close()
    out = {
        "command": " ".join(["python", "benchmarks/small_waves.py", *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "workers": args.workers,
        "waves": args.waves,
        "repeats": args.repeats,
        "local_wave_steps": LOCAL_WAVE_STEPS,
        "rows": rows,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json} ({out['wall_s']} s)")


if __name__ == "__main__":
    main()
