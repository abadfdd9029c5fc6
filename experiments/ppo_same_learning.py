"""Does PPO learn the same with its compiled rollouts? ACCEL with dcd's PPO on
`experiments/ued_terrain.yaml` at several seeds, from this tree and from an earlier commit.

    python experiments/ppo_same_learning.py --before REV [--seeds 3] [--json PATH]

The compiled rollouts draw the reset seeds and the action noise from streams of their own
(the gymnasium rollouts of REV drew both from the job's one generator, interleaved), so a
run's numbers change: the same learning can only be shown over seeds. Each side runs
`experiments/compare_curricula.py --curricula accel` (in this process's Python, REV's code
first on the PYTHONPATH for the earlier side, from a temporary git worktree) and the script
prints each held-out level's final score (best agent; mean, min and max over seeds) for
both, whether this tree's mean lies within REV's spread (min to max over its seeds), and an
exact two-sided permutation test of the difference of the means per level, a seed the unit
(every split of the 2 x `--seeds` runs; the smallest p it can give is 2 / C(2n, n)), Holm
over the five levels.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import study_stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("flat", "pits", "stumps", "rough", "combined")


def run_side(tree: Path, seeds: int, out: Path) -> dict:
    """compare_curricula's ACCEL runs with `tree`'s code; its JSON."""
    env = os.environ | {"PYTHONPATH": str(tree)}
    json_path = out / "compare.json"
    cmd = [sys.executable, str(ROOT / "experiments" / "compare_curricula.py"), "--curricula", "accel"]
    cmd += ["--seeds", str(seeds), "--set", "evaluation.backend=inprocess", "--out", str(out / "runs")]
    subprocess.run([*cmd, "--json", str(json_path)], cwd=tree, env=env, check=True)
    return json.loads(json_path.read_text())


def permutation_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided p of |mean(a) - mean(b)| over every split of the pooled values into groups of their sizes."""
    pooled, n = np.array(a + b), len(a)
    observed = abs(np.mean(a) - np.mean(b))
    total = pooled.sum()
    splits = [pooled[list(idx)].sum() for idx in itertools.combinations(range(len(pooled)), n)]
    diffs = np.abs(np.array(splits) / n - (total - np.array(splits)) / len(b))
    return float(np.mean(diffs >= observed - 1e-9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision to compare with")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        before_tree = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before_tree), args.before], cwd=ROOT, check=True)
        try:
            sides = {
                "before": run_side(before_tree, args.seeds, Path(tmp) / "b"),
                "this": run_side(ROOT, args.seeds, Path(tmp) / "t"),
            }
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before_tree)], cwd=ROOT, check=True)
    summary = {side: result["summary"][0] for side, result in sides.items()}
    within = {
        level: summary["before"][level]["min"] <= summary["this"][level]["mean"] <= summary["before"][level]["max"]
        for level in LEVELS
    }
    scores = {
        side: {level: [run["heldout"][level] for run in result["runs"]] for level in LEVELS}
        for side, result in sides.items()
    }
    p = [permutation_p(scores["before"][level], scores["this"][level]) for level in LEVELS]
    tests = {level: {"p": p_level, "p_holm": p_holm} for level, p_level, p_holm in zip(LEVELS, p, study_stats.holm(p))}
    min_p = 2 / math.comb(2 * args.seeds, args.seeds)
    print(f"{'level':10s} {'before: mean (min to max)':>30s} {'this tree: mean (min to max)':>30s}  within  p  (Holm)")
    for level in LEVELS:
        cells = [f"{s[level]['mean']:.1f} ({s[level]['min']:.1f} to {s[level]['max']:.1f})" for s in summary.values()]
        t = tests[level]
        print(f"{level:10s} {cells[0]:>30s} {cells[1]:>30s}  {within[level]!s:6s}  {t['p']:.3f} ({t['p_holm']:.3f})")
    print(f"(the smallest p this design can give: {min_p:.2g})")
    seconds = {side: [run["seconds"] for run in result["runs"]] for side, result in sides.items()}
    print("seconds per run: " + ", ".join(f"{side} {s}" for side, s in seconds.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out = {
            "before": args.before,
            "seeds": args.seeds,
            "summary": summary,
            "this_mean_within_before_spread": within,
            "scores": scores,
            "permutation_tests": tests,
            "min_attainable_p": min_p,
            "seconds_per_run": seconds,
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "runs": {side: result["runs"] for side, result in sides.items()},
        }
        args.json.write_text(json.dumps(out, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
