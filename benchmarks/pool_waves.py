"""Where a terrain wave's time goes in the pool: how far apart its chunks end, and whether finer chunks help.

    python benchmarks/pool_waves.py [--workers 2] [--waves 300] [--json benchmarks/results/pool_waves.json]

The same ES-shaped terrain waves as `eval_pool.py` (32 policies x 8 envs, 400-step cap), one
`evaluate` call per wave on a warm pool, every chunk on a worker (`driver_share` off: on one
machine the pool's default has the driver run one worker's share, which part 4 times too).
The measurements:

1. Chunk speeds. Each wave goes in one chunk per worker with nearly equal env steps; each
   chunk's own seconds (as its worker timed it) over its env steps give the worker's speed
   in that wave. Reported: the wave's wall time split into the slower chunk and the rest
   (dispatch and results), how much slower the slower chunk ran per step than the faster
   (median over waves), and how alike that ratio is from one wave to the next (the lag-1
   correlation of its logarithm: near 0, the next wave's speeds cannot be told from this
   one's; near 1, they can).
2. Chunks per worker, interleaved. The pool's default (one chunk per worker) against 2 and
   4 chunks per worker (`ray.chunks_per_worker`), switched wave by wave on one pool so that
   a machine whose speed drifts affects each setting alike: env steps per second of each.

3. The time around the chunk that ends last, split. Each worker notes when its call starts
   and ends (the clock is the machine's, shared by all processes) and the driver when it
   sends each call and when it takes each answer: medians of the driver's work until that
   chunk's call is sent (planning the wave, packing and sending it and the chunks before
   it), Ray's delivery of the call (from sending to the worker starting it), the call and
   its part beyond the rollouts (unpacking the chunk, packing the results), Ray's return of
   the answer (from the worker's end to the driver taking it) and the driver's work after it.
4. The driver's work, interleaved. `evaluate` against the same waves' chunks planned and
   packed before the clock starts, then only sent to the same workers and awaited: what
   the pool would gain if its per-wave work in the driver (the table, the plan, packing
   the chunks, building the results) cost nothing; and, in the same turns, `evaluate` with
   the driver running one worker's share (`driver_share` on, the default on one machine).

Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import ray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import eval_pool as ep  # noqa: E402  (the same setup, waves and pool as the main benchmark)

from poet.evaluation import ray_pool  # noqa: E402
from poet.evaluation.requests import RequestTable  # noqa: E402

SETTINGS = (None, 2, 4)  # chunks per worker; None: the pool's own plan (one per worker for terrain)


def chunk_speeds(pool, setup, refs, waves: int) -> dict:
    """Part 1: per wave, the chunks' (env steps, seconds) as their workers report them."""
    chunks: list[tuple[float, float]] = []
    observe = pool.deadlines.observe

    def record(kind: str, seconds: float, work: float) -> None:
        chunks.append((work, seconds))  # work: env steps plus lock-step iterations
        observe(kind, seconds, work)

    pool.deadlines.observe = record  # every finished chunk passes here with its worker's timing
    try:
        ratios, slowest, walls = [], [], []
        for k in range(waves):
            chunks.clear()
            requests = ep.matrix_requests(setup, refs, 10**7 + 1000 * k)
            t0 = time.perf_counter()
            pool.evaluate(requests)
            walls.append(time.perf_counter() - t0)
            per_step = [s / n for n, s in chunks]
            ratios.append(max(per_step) / min(per_step))
            slowest.append(max(s for _, s in chunks))
    finally:
        pool.deadlines.observe = observe
    logs = np.log(ratios)
    return {
        "waves": waves,
        "wave_ms_median": round(1e3 * statistics.median(walls), 2),
        "slower_chunk_ms_median": round(1e3 * statistics.median(slowest), 2),
        "rest_of_wave_ms_median": round(1e3 * statistics.median(w - s for w, s in zip(walls, slowest)), 2),
        "slower_over_faster_per_step_median": round(float(np.median(ratios)), 3),
        "slower_over_faster_per_step_p90": round(float(np.percentile(ratios, 90)), 3),
        "log_ratio_lag1_correlation": round(float(np.corrcoef(logs[:-1], logs[1:])[0, 1]), 3),
    }


def chunks_per_worker(pool, setup, refs, waves: int) -> dict:
    """Part 2: env steps per second of each setting, the settings taking turns wave by wave."""
    totals = {s: [0.0, 0] for s in SETTINGS}
    for k in range(waves * len(SETTINGS)):
        setting = SETTINGS[k % len(SETTINGS)]
        pool.chunks_per_worker = setting
        requests = ep.matrix_requests(setup, refs, 2 * 10**7 + 1000 * k)
        t0 = time.perf_counter()
        results = pool.evaluate(requests)
        totals[setting][0] += time.perf_counter() - t0
        totals[setting][1] += sum(int(r.lengths.sum()) for r in results)
    pool.chunks_per_worker = None
    rates = {("default" if s is None else f"{s}_per_worker"): round(n / t) for s, (t, n) in totals.items()}
    return {
        "waves_each": waves,
        "steps_per_s": rates,
        "over_default": {k: round(v / rates["default"], 3) for k, v in rates.items()},
    }


def driver_work(pool, setup, refs, waves: int) -> dict:
    """Part 4: env steps per second of `evaluate` and of its calls alone, wave by wave in turn."""
    totals = {"evaluate": [0.0, 0], "calls_alone": [0.0, 0], "driver_share": [0.0, 0]}
    for k in range(waves):
        for way, share in (("evaluate", False), ("driver_share", True)):
            pool.driver_share = share
            requests = ep.matrix_requests(setup, refs, 4 * 10**7 + 3000 * k + 2000 * share)
            t0 = time.perf_counter()
            results = pool.evaluate(requests)
            totals[way][0] += time.perf_counter() - t0
            totals[way][1] += sum(int(r.lengths.sum()) for r in results)
        pool.driver_share = False
        wave = RequestTable.of(ep.matrix_requests(setup, refs, 4 * 10**7 + 3000 * k + 1000))
        chunks = pool._plan(wave, wave.rows(), pool.episode_lengths.costs(wave))
        packed = [ray_pool.pack_chunk(wave, chunk, pool.policies) for chunk in chunks]
        t0 = time.perf_counter()
        answers = ray.get([w.actor.run.remote(head, *parts) for w, (head, parts) in zip(pool.workers, packed)])
        totals["calls_alone"][0] += time.perf_counter() - t0
        totals["calls_alone"][1] += sum(int(pickle.loads(a)[0][1].sum()) for a in answers)
    rates = {k: round(n / t) for k, (t, n) in totals.items()}
    return {
        "waves_each": waves,
        "steps_per_s": rates,
        "calls_alone_over_evaluate": round(rates["calls_alone"] / rates["evaluate"], 3),
        "driver_share_over_evaluate": round(rates["driver_share"] / rates["evaluate"], 3),
    }


class StampedWorker(ray_pool.RolloutWorker):
    """The pool's worker, noting when each chunk call starts and ends (machine clock)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[float, float]] = []

    def run(self, head: bytes, *weights: bytes) -> bytes:
        started = time.time()
        out = super().run(head, *weights)
        self.calls.append((started, time.time()))
        return out

    def take_calls(self) -> list[tuple[float, float]]:
        calls, self.calls = self.calls, []
        return calls


def wave_timeline(pool, setup, refs, waves: int) -> dict:
    """Part 3: the driver's and the workers' time stamps of each wave, as medians in ms (a pool
    of `StampedWorker`s, one chunk per worker)."""
    sent: dict[int, float] = {}  # worker -> when its call was sent
    answers: list[float] = []  # when the driver took each answer, in order
    rollouts: list[float] = []  # each answer's rollout seconds, as its worker timed them
    submit, unpack, observe = pool._submit, ray_pool.results_of, pool.deadlines.observe

    def stamped_submit(wi, *wave_and_chunk):
        ref = submit(wi, *wave_and_chunk)
        sent[wi] = time.time()
        return ref

    def stamped_unpack(packed, episodes):
        answers.append(time.time())
        return unpack(packed, episodes)

    def stamped_observe(kind, seconds, work):
        rollouts.append(seconds)
        observe(kind, seconds, work)

    pool._submit, ray_pool.results_of, pool.deadlines.observe = stamped_submit, stamped_unpack, stamped_observe
    names = ("wave", "driver_before_call", "ray_to_worker", "call", "call_beyond_rollouts", "ray_back", "driver_after")
    parts: dict[str, list[float]] = {k: [] for k in names}
    try:
        for k in range(waves):
            sent.clear()
            answers.clear()
            rollouts.clear()
            began = time.time()
            pool.evaluate(ep.matrix_requests(setup, refs, 3 * 10**7 + 1000 * k))
            ended = time.time()
            calls = {wi: ray.get(w.actor.take_calls.remote()) for wi, w in enumerate(pool.workers)}
            if sorted(sent) != sorted(wi for wi, c in calls.items() if len(c) == 1) or len(answers) != len(sent):
                continue  # not one call per worker (a re-run chunk): no clean timeline
            last = max(sent, key=lambda wi: calls[wi][0][1])  # the worker that ended last ends the wave
            sending, (start, end) = sent[last], calls[last][0]
            parts["wave"].append(ended - began)
            parts["driver_before_call"].append(sending - began)
            parts["ray_to_worker"].append(start - sending)
            parts["call"].append(end - start)
            parts["call_beyond_rollouts"].append(end - start - rollouts[-1])
            parts["ray_back"].append(answers[-1] - end)
            parts["driver_after"].append(ended - answers[-1])
    finally:
        pool._submit, ray_pool.results_of, pool.deadlines.observe = submit, unpack, observe
    return {
        "waves": len(parts["wave"]),
        "ms_median": {k: round(1e3 * statistics.median(v), 3) for k, v in parts.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--waves", type=int, default=300)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "pool_waves.json")
    args = parser.parse_args()
    t0 = time.perf_counter()
    setup = ep.make_setup("terrain", ep.Sizes())
    with ep.ray_session(args.workers):
        pool = ep.open_pool(setup, args.workers)
        pool.driver_share = False  # every chunk on a worker (part 4 switches it on in turns)
        try:
            refs = [pool.put(w) for w in setup.policies]
            pool.evaluate(ep.matrix_requests(setup, refs, 1))  # warm-up, not counted
            speeds = chunk_speeds(pool, setup, refs, args.waves)
            print(
                f"chunk speeds over {args.waves} waves: wave {speeds['wave_ms_median']} ms, of which the slower chunk "
                f"{speeds['slower_chunk_ms_median']} ms and the rest {speeds['rest_of_wave_ms_median']} ms (medians); "
                f"slower / faster chunk per env step: median {speeds['slower_over_faster_per_step_median']}, "
                f"90th percentile {speeds['slower_over_faster_per_step_p90']}; lag-1 correlation of its log "
                f"{speeds['log_ratio_lag1_correlation']}"
            )
            chunking = chunks_per_worker(pool, setup, refs, args.waves)
            print(
                "chunks per worker, interleaved: "
                + ", ".join(
                    f"{k} {v:,} steps/s ({chunking['over_default'][k]:.3f}x)"
                    for k, v in chunking["steps_per_s"].items()
                )
            )
            driver = driver_work(pool, setup, refs, args.waves)
            print(
                f"the driver's work, interleaved: evaluate {driver['steps_per_s']['evaluate']:,} steps/s, its calls "
                f"alone {driver['steps_per_s']['calls_alone']:,} steps/s ({driver['calls_alone_over_evaluate']:.3f}x), "
                f"with the driver's share {driver['steps_per_s']['driver_share']:,} steps/s "
                f"({driver['driver_share_over_evaluate']:.3f}x)"
            )
        finally:
            pool.close()
        plain_worker, ray_pool.RolloutWorker = ray_pool.RolloutWorker, StampedWorker  # part 3's pool
        try:
            pool = ep.open_pool(setup, args.workers)
        finally:
            ray_pool.RolloutWorker = plain_worker
        pool.driver_share = False
        try:
            refs = [pool.put(w) for w in setup.policies]
            pool.evaluate(ep.matrix_requests(setup, refs, 1))  # warm-up, not counted
            ray.get([w.actor.take_calls.remote() for w in pool.workers])
            timeline = wave_timeline(pool, setup, refs, args.waves)
            ms = timeline["ms_median"]
            print(
                f"a wave's time line over {timeline['waves']} waves (medians, ms): wave {ms['wave']}; before the "
                f"last-ending chunk's call is sent {ms['driver_before_call']}, Ray's delivery to its worker "
                f"{ms['ray_to_worker']}, the call {ms['call']} (of which beyond its rollouts "
                f"{ms['call_beyond_rollouts']}), Ray's return {ms['ray_back']}, the driver after it {ms['driver_after']}"
            )
        finally:
            pool.close()
    out = {
        "command": f"python benchmarks/pool_waves.py --workers {args.workers} --waves {args.waves}",
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "matrix": {"policies": len(setup.policies), "envs": len(setup.envs), "max_steps": setup.max_steps},
        "chunk_speeds": speeds,
        "chunks_per_worker": chunking,
        "wave_timeline": timeline,
        "driver_work": driver,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.json} ({out['wall_seconds']} s)")


if __name__ == "__main__":
    main()
