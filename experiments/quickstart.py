"""Quickstart as a script: run POET on the fast terrain family, then look at the result.

    python experiments/quickstart.py --out runs/quickstart-script

Read top to bottom: load the config, run, load the record tables, print a summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import poet
from poet.analysis import load_run

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="run directory (default: runs/quickstart-<time>)")
    parser.add_argument("--iterations", type=int, default=None)
    args = parser.parse_args()

    # 1. The same YAML `make run` uses; overrides go through the same validation as `--set`.
    overrides = [f"iterations={args.iterations}"] if args.iterations is not None else []
    result = poet.run(HERE / "quickstart.yaml", out=args.out, overrides=overrides)

    # 2. Everything a run writes is read back as pandas DataFrames.
    run = load_run(result.run_dir)
    children = run.envs[run.envs["parent_env_id"].notna()]
    print(f"envs admitted after the initial one: {len(children)}")
    print(f"transfers accepted: {int(run.transfers['accepted'].sum())} of {len(run.transfers)} attempts")
    print(f"ANNECS at the end: {int(run.annecs.iloc[-1])}")

    # 3. The last score of every pair, with its env's parameters.
    last = run.iterations.sort_values("iteration").groupby("pair_id").tail(1)
    table = last.merge(run.envs, on=["env_id"], suffixes=("", "_env"))
    cols = ["pair_id", "score", "roughness", "pit_gap_lo", "pit_gap_hi", "stump_height_lo", "stump_height_hi"]
    print(table[cols].to_string(index=False))


if __name__ == "__main__":
    main()
