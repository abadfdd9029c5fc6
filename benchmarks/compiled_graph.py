"""Ray Compiled Graphs and a driver share against plain actor tasks for the pool's terrain waves.

    python benchmarks/compiled_graph.py [--workers 2] [--waves 40] [--repeats 5] [--json PATH]

The pool sends each wave's chunks as Ray actor tasks. Ray's low-latency path for a fixed
pattern of calls is a compiled graph (`ray.dag`, `experimental_compile`): the driver writes
each call's input into a channel the actor reads, with no task submission per call. A
terrain wave is such a pattern: one chunk per worker, every wave. This script sends the
same chunks (the pool's own plan and packing of `eval_pool.py`'s ES-shaped waves) four
ways, interleaved, on one local Ray:

- tasks:    one `run_chunk.remote(chunk)` per worker and wave, then `ray.get` of all;
- compiled: the same calls as a compiled graph, `ray.get(graph.execute(*chunks))`;
- driver:   the driver runs the first chunk itself (the same worker code, in this process)
            while W - 1 actors run the others: one call fewer per wave, and the driver's
            share hides the others' round trip (W rollout processes, as for the others);
- pool:     `RayEvaluator.evaluate(requests)` on the same requests (its own workers; on one
            machine the driver takes one worker's share by default, as in `driver`).

The chunk argument is identical for tasks and compiled (one tuple: the pickled requests and
the weights' byte strings), so their difference is the call path alone. Prints the median
wave time of each and writes JSON. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import eval_pool as ep  # noqa: E402  (the same setup and waves as the main benchmark)

from poet.evaluation.planning import plan_chunks  # noqa: E402
from poet.evaluation.ray_pool import RayEvaluator, RolloutWorker, pack_chunk  # noqa: E402
from poet.evaluation.requests import RequestTable  # noqa: E402

WAIT_S = 300  # the longest any one call may take before the script gives up


class ChunkWorker(RolloutWorker):
    """The pool's worker, taking a chunk as one argument (what a graph's input node passes on)."""

    def run_chunk(self, chunk: tuple[bytes, list[bytes]]) -> bytes:
        head, parts = chunk
        return self.run(head, *parts)


def packed_chunks(pool: RayEvaluator, requests: list, workers: int) -> list[tuple[bytes, list[bytes]]]:
    """The wave's chunks as the pool plans and packs them, one per worker."""
    wave = RequestTable.of(requests)
    rows = wave.rows()
    return [
        pack_chunk(wave, chunk, pool.policies)
        for chunk in plan_chunks(wave.policy, rows, rows * wave.max_steps, workers, pool.batch_rows)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--waves", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "compiled_graph.json")
    args = parser.parse_args()
    import ray
    from ray.dag import InputNode, MultiOutputNode

    t0 = time.perf_counter()
    seconds: dict[str, list[float]] = {"tasks": [], "compiled": [], "driver": [], "pool": []}
    with ep.ray_session(args.workers):
        setup = ep.make_setup("terrain", ep.Sizes())
        pool = RayEvaluator(setup.family, setup.spec, noise=None, workers=args.workers, local_wave_steps=0)
        # no CPUs of their own: the pool holds them all, and only one of the three ways runs at a time
        actors = [
            ray.remote(num_cpus=0)(ChunkWorker).remote(setup.family, setup.spec.to_dict(), None, pool.batch_rows)
            for _ in range(args.workers)
        ]
        graph: Any = None
        try:
            refs = [pool.put(w) for w in setup.policies]
            requests = [ep.matrix_requests(setup, refs, 1000 + k) for k in range(args.waves)]
            chunks = [packed_chunks(pool, r, args.workers) for r in requests]
            ray.get([a.run_chunk.remote(c) for a, c in zip(actors, chunks[0])], timeout=WAIT_S)  # warm-up
            local = ChunkWorker(setup.family, setup.spec.to_dict(), None, pool.batch_rows)
            local.run_chunk(chunks[0][0])
            pool.evaluate(requests[0])
            with InputNode() as inp:
                graph = MultiOutputNode([a.run_chunk.bind(inp[i]) for i, a in enumerate(actors)])
            graph = graph.experimental_compile()
            # a graph's get waits 10 s by default; a loaded machine's first call can take longer
            ray.get(graph.execute(*chunks[0]), timeout=WAIT_S)

            def tasks() -> None:
                for wave in chunks:
                    ray.get([a.run_chunk.remote(c) for a, c in zip(actors, wave)])

            def compiled() -> None:
                for wave in chunks:
                    ray.get(graph.execute(*wave), timeout=WAIT_S)

            def driver() -> None:
                for wave in chunks:
                    refs = [a.run_chunk.remote(c) for a, c in zip(actors[1:], wave[1:])]
                    local.run_chunk(wave[0])
                    ray.get(refs)

            def pooled() -> None:
                for wave in requests:
                    pool.evaluate(wave)

            for rep in range(args.repeats):
                for name, way in (("tasks", tasks), ("compiled", compiled), ("driver", driver), ("pool", pooled)):
                    start = time.perf_counter()
                    way()
                    seconds[name].append(time.perf_counter() - start)
                print(
                    f"  [rep {rep + 1}/{args.repeats}] "
                    + "  ".join(f"{k} {1e3 * v[-1] / args.waves:.2f} ms/wave" for k, v in seconds.items()),
                    flush=True,
                )
        finally:
            if graph is not None:
                graph.teardown()
            pool.close()
    wave_ms = {k: round(1e3 * statistics.median(v) / args.waves, 2) for k, v in seconds.items()}
    print(
        "median ms per wave: "
        + ", ".join(f"{k} {v}" for k, v in wave_ms.items())
        + f"; compiled / tasks {wave_ms['compiled'] / wave_ms['tasks']:.3f}"
        + f", driver / tasks {wave_ms['driver'] / wave_ms['tasks']:.3f}"
    )
    out = {
        "command": " ".join(["python", "benchmarks/compiled_graph.py", *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "ray": ray.__version__},
        "workers": args.workers,
        "waves": args.waves,
        "repeats": args.repeats,
        "wave_ms_median": wave_ms,
        "compiled_over_tasks": round(wave_ms["compiled"] / wave_ms["tasks"], 3),
        "driver_over_tasks": round(wave_ms["driver"] / wave_ms["tasks"], 3),
        "seconds": {k: [round(x, 4) for x in v] for k, v in seconds.items()},
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json} ({out['wall_s']} s)")


if __name__ == "__main__":
    main()
