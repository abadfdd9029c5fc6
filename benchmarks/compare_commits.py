"""A benchmark's env steps/s at an earlier commit and at this tree, interleaved.

    python benchmarks/compare_commits.py --base REV [--script quickstart|ppo_alone] [--rounds 2]
        [--json out.json] [-- script args]

Checks REV out into a temporary git worktree and runs `benchmarks/quickstart.py` (the
whole quickstart) or `benchmarks/ppo_alone.py` (PPO alone on one env; e.g.
`-- --family bipedal --preset zoo --iterations 3`) alternately
from it and from this tree (base, this, base, this, ...), each in a fresh process whose
PYTHONPATH puts that tree first (Ray's local workers inherit it), so both see the same
machine and the same load over time; a short untimed run from each tree first compiles its
kernels. Prints each run and the median of each side; nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# per script: the arguments of its short warm-up run, and its env steps/s and wall seconds from its JSON
SCRIPTS = {
    "quickstart": (["--set", "iterations=2"], lambda r: (r["env_steps_per_s"], r["wall_seconds"])),
    "ppo_alone": (
        ["--iterations", "1"],
        lambda r: (r["curve"][-1]["env_steps"] / r["curve"][-1]["seconds"], r["curve"][-1]["seconds"]),
    ),
}


def run_script(script: str, tree: Path, extra: list[str]) -> dict:
    """One run of `benchmarks/<script>.py` from `tree`'s code; returns its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        env = os.environ | {"PYTHONPATH": str(tree)}
        subprocess.run(
            [sys.executable, str(tree / "benchmarks" / f"{script}.py"), "--json", str(out), *extra],
            cwd=tree,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--script", choices=sorted(SCRIPTS), default="quickstart")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("extra", nargs="*", help="arguments for the script (after --)")
    args = parser.parse_args()
    base_rev = subprocess.run(
        ["git", "rev-parse", args.base], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    head_rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    runs: dict[str, list[dict]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), base_rev], cwd=ROOT, check=True)
        try:
            # a short untimed run from each tree first: a fresh worktree compiles its numba
            # kernels on first use (cache=True writes them into that tree), which no round should pay
            warm_up, measure = SCRIPTS[args.script]
            for tree in (base_tree, ROOT):
                run_script(args.script, tree, [*args.extra, *warm_up])
            for rnd in range(args.rounds):
                for side, tree in (("base", base_tree), ("this", ROOT)):
                    stats = run_script(args.script, tree, args.extra)
                    stats["env_steps_per_s"], stats["wall_seconds"] = measure(stats)
                    runs[side].append(stats)
                    print(
                        f"round {rnd + 1} {side}: {stats['env_steps_per_s']:,.0f} env steps/s, "
                        f"wall {stats['wall_seconds']:.1f}s",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)
    median = {side: statistics.median(r["env_steps_per_s"] for r in rs) for side, rs in runs.items()}
    wall = {side: statistics.median(r["wall_seconds"] for r in rs) for side, rs in runs.items()}
    summary = {
        "script": args.script,
        "args": args.extra,
        "base": base_rev,
        "this": head_rev,
        "rounds": args.rounds,
        "median_env_steps_per_s": median,
        "median_wall_seconds": wall,
        "speedup_env_steps_per_s": round(median["this"] / median["base"], 3),
        "runs": runs,
    }
    print(
        f"median env steps/s: base {median['base']:,.0f}, this {median['this']:,.0f} "
        f"({summary['speedup_env_steps_per_s']:.2f}x); median wall {wall['base']}s vs {wall['this']}s"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
