"""What the framework's rollout code costs on one pool chunk, against plain code, in one process.

    python benchmarks/chunk_cost.py [--chunks 40] [--repeats 5] [--json PATH]

A pool worker runs a chunk with `RolloutWorker.run`: the pickled table of requests in
(`RequestTable`), rows expanded from it, one batch through the family (`run_table`), the
packed results pickled out. This script takes the chunks the pool would send one worker for
`eval_pool.py`'s terrain waves (the first of each wave's two), packs them as the pool does
(`pack_chunk`, untimed: the driver's part) and runs them, in this one process with no Ray,
two ways, interleaved:

- framework: `RolloutWorker.run` on each packed chunk, as a worker runs it;
- plain:     `eval_pool.raw_rows` on the same rows (the raw limit's code: one row-kernel
             batch, the same compiled kernels).

It prints the median milliseconds per chunk of each and writes JSON. Nothing here is a
pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import eval_pool as ep  # noqa: E402  (the same setup and waves as the main benchmark)

from poet.evaluation.inprocess import InProcessEvaluator  # noqa: E402
from poet.evaluation.planning import plan_chunks  # noqa: E402
from poet.evaluation.ray_pool import RolloutWorker, pack_chunk  # noqa: E402
from poet.evaluation.requests import RequestTable, row_seeds  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "chunk_cost.json")
    args = parser.parse_args()
    t0 = time.perf_counter()
    setup = ep.make_setup("terrain", ep.Sizes())
    store = InProcessEvaluator(setup.family, setup.spec, None)
    refs = [store.put(w) for w in setup.policies]
    worker = RolloutWorker(setup.family, setup.spec.to_dict(), None, 4096)

    chunks = []
    for k in range(args.chunks):
        wave = ep.matrix_requests(setup, refs, 1000 + k)
        table = RequestTable.of(wave)
        rows = table.rows()
        chunk = plan_chunks(table.policy, rows, rows * table.max_steps, 2, 4096)[0]
        chunks.append(([wave[i] for i in chunk], pack_chunk(table, chunk, store.policies)))
    rows = []
    for reqs, _ in chunks:
        params, seeds, caps, index = [], [], [], []
        position: dict[str, int] = {}  # each policy's weights once, rows read them by index
        for r in reqs:
            for seed in row_seeds(r):
                params.append(r.env)
                seeds.append(seed)
                caps.append(r.max_steps)
                index.append(position.setdefault(r.policy.key, len(position)))
        flats = np.stack([store.policies.get(k) for k in position])
        rows.append((params, seeds, flats, np.asarray(caps), np.asarray(index)))
    packed = [chunk for _, chunk in chunks]

    def framework() -> None:
        for head, weights in packed:
            worker.run(head, *weights)

    def plain() -> None:
        for params, seeds, flats, caps, index in rows:
            ep.raw_rows(setup.family, setup.spec, params, seeds, flats, caps, "compiled", index)

    framework()  # warm-up: compiled kernels, courses
    plain()
    seconds: dict[str, list[float]] = {"framework": [], "plain": []}
    for _ in range(args.repeats):
        for name, way in (("framework", framework), ("plain", plain)):
            start = time.perf_counter()
            way()
            seconds[name].append(time.perf_counter() - start)
    chunk_ms = {k: round(1e3 * statistics.median(v) / args.chunks, 3) for k, v in seconds.items()}
    ratio = round(chunk_ms["framework"] / chunk_ms["plain"], 3)
    print(
        f"median ms per chunk ({len(rows[0][0])} rows): framework {chunk_ms['framework']}, plain {chunk_ms['plain']}; "
        f"framework / plain {ratio}"
    )
    out = {
        "command": " ".join(["python", "benchmarks/chunk_cost.py", *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "chunks": args.chunks,
        "repeats": args.repeats,
        "rows_per_chunk": len(rows[0][0]),
        "chunk_ms_median": chunk_ms,
        "framework_over_plain": ratio,
        "seconds": {k: [round(x, 4) for x in v] for k, v in seconds.items()},
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json} ({out['wall_s']} s)")


if __name__ == "__main__":
    main()
