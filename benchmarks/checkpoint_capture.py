"""What a run pays each iteration to keep its boundary's copy, for a checkpoint it may need.

    python benchmarks/checkpoint_capture.py CHECKPOINT [--repeats 10]

A run copies its state out of the live objects after every iteration (`checkpoint.capture`),
so that a stop mid-iteration still writes the last boundary. Loads the checkpoint folder
`CHECKPOINT` (for example `runs/reproduce/poet-seed0/checkpoints/ckpt-000007075`) and times
`capture` on its state: prints the pairs it holds and the best of `--repeats` times. Nothing
here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import time
import types
from pathlib import Path

from poet.runtime import checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    snapshot = checkpoint.load(args.checkpoint)
    # what capture reads: the run's state, and the record tables' row counts (none here)
    ctx = types.SimpleNamespace(state=snapshot.state, records=types.SimpleNamespace(row_counts=dict))
    pop = snapshot.state.population
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        checkpoint.capture(ctx)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    scores = sum(len(p.scores) for p in pop.all_pairs)
    print(
        f"iteration {snapshot.iteration}: {len(pop.active)} active and {len(pop.archive)} archived pairs, "
        f"{scores:,} scores; capture {min(times) * 1e3:.1f} ms (best of {args.repeats})"
    )


if __name__ == "__main__":
    main()
