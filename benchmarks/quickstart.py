"""Measure the quickstart: wall time and what POET achieved, as the docs' benchmarks page shows it.

    python benchmarks/quickstart.py [--config experiments/quickstart.yaml] [--set key=value ...]
                                    [--raw-limit] [--json out.json]

Prints one table and optionally writes JSON. Nothing here is a pass/fail test.

`--raw-limit` also measures the limit for the run's own work: it records every wave the
pool evaluated (each request's weights, perturbation, env, seed and step cap) and replays
the same waves with plain code (no Ray, no framework: W spawned processes, each wave's
episodes dealt round-robin, each process stepping its share in one batch with the same
compiled kernels as the run, the processes meeting at a barrier between waves as the run's
waves follow one another). It prints the pool's time inside its waves, the replay's, and their
ratio; the replay must take exactly the run's env steps. The replay runs again on W plain
Ray actors, each holding its shares of every wave and every weights vector from the start,
one call per actor per wave (Ray's floor for the run's waves, `raw_ray_*`), and on the numpy
terrain core the family had before it was compiled, with a batched numpy MLP (the previous
limit, `raw_numpy_*`). The run's share leaves out the recorder's own work.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import poet
from poet.analysis import load_run

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_pool import raw_rows, ray_session  # noqa: E402  (plain code, no framework)


class WaveRecorder:
    """Patches the pool's `evaluate` to keep every wave: its wall time and, per request, what
    plain code needs to run the same episodes."""

    def __init__(self) -> None:
        self.waves: list[list[tuple]] = []  # per wave: (weights key, perturbation, env, seed, step cap) per episode
        self.seconds: list[float] = []
        self.own_seconds = 0.0  # the recorder's own work inside the run's phases (not the run's)
        self.weights: dict[str, np.ndarray] = {}
        self.noise: np.ndarray | None = None
        self.family_args: tuple[str, dict] | None = None

    def __enter__(self) -> WaveRecorder:
        import ray

        from poet.evaluation.ray_pool import RayEvaluator
        from poet.evaluation.requests import row_seeds

        self._cls, self._original = RayEvaluator, RayEvaluator.evaluate
        recorder, original = self, RayEvaluator.evaluate

        def evaluate(pool, requests):
            start = time.perf_counter()
            if recorder.noise is None and pool._noise_ref is not None:
                recorder.noise = np.asarray(ray.get(pool._noise_ref))
            rows = []
            for r in requests:
                if r.policy.key not in recorder.weights:
                    recorder.weights[r.policy.key] = np.array(pool.policies.get(r.policy.key))
                p = r.perturbation
                pert = None if p is None else (int(p.offset), float(p.sigma), int(p.sign))
                rows.extend((r.policy.key, pert, r.env, seed, r.max_steps) for seed in row_seeds(r))
            t0 = time.perf_counter()
            out = original(pool, requests)
            end = time.perf_counter()
            recorder.seconds.append(end - t0)
            recorder.waves.append(rows)
            recorder.own_seconds += (t0 - start) + (time.perf_counter() - end)
            return out

        RayEvaluator.evaluate = evaluate
        return self

    def __exit__(self, *exc) -> None:
        self._cls.evaluate = self._original


def replay_wave(
    family: Any, spec: Any, weights: dict[str, np.ndarray], noise: np.ndarray | None, rows: list[tuple], core: str
) -> int:
    """One process's share of a wave in one batch (`eval_pool.raw_rows` with `core`); its steps."""
    if not rows:
        return 0
    distinct: dict[tuple, int] = {}  # each distinct weights vector once, rows read it by index
    flats, index = [], []
    for key, pert, _, _, _ in rows:
        if (key, pert) not in distinct:
            distinct[key, pert] = len(flats)
            theta = weights[key]
            if pert is not None:
                offset, sigma, sign = pert
                theta = (theta + np.float32(sign * sigma) * noise[offset : offset + theta.size]).astype(np.float32)
            flats.append(theta)
        index.append(distinct[key, pert])
    return raw_rows(
        family,
        spec,
        [r[2] for r in rows],
        [r[3] for r in rows],
        np.stack(flats),
        np.array([r[4] for r in rows]),
        core,
        np.array(index),
    )


def replay_process(
    family_args: tuple[str, dict],
    spec: Any,
    weights: dict[str, np.ndarray],
    noise: np.ndarray | None,
    waves: list[list[tuple]],
    core: str,
    barrier: Any,
    results: Any,
) -> None:
    """One plain process: its share of every wave (`replay_wave`), meeting the others between waves."""
    from envs import make_family

    family = make_family(*family_args)
    barrier.wait()
    t0, steps = time.monotonic(), 0
    for rows in waves:
        steps += replay_wave(family, spec, weights, noise, rows, core)
        barrier.wait()  # the run's next wave starts when this one is done everywhere
    results.put((steps, time.monotonic() - t0))


def replay(
    recorder: WaveRecorder, family_args: tuple[str, dict], spec: Any, workers: int, core: str = "compiled"
) -> dict:
    """Wall time and steps of the recorded waves run by `workers` plain processes."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(
            target=replay_process,
            args=(
                family_args,
                spec,
                recorder.weights,
                recorder.noise,
                [w[i::workers] for w in recorder.waves],
                core,
                barrier,
                results,
            ),
        )
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    reports = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    return {"steps": sum(r[0] for r in reports), "seconds": max(r[1] for r in reports)}


class ReplayActor:
    """`replay_wave` in a plain Ray actor that holds its share of every wave and every weights
    vector from the start: a call names the wave, nothing else travels."""

    def __init__(self, family_args: tuple[str, dict], spec: Any, weights: dict, noise: Any, waves: list[list[tuple]]):
        from envs import make_family

        self.family = make_family(*family_args)
        self.spec, self.weights, self.noise, self.waves = spec, weights, noise, waves

    def ready(self) -> bool:
        return True

    def run(self, wave: int) -> int:
        return replay_wave(self.family, self.spec, self.weights, self.noise, self.waves[wave], "compiled")


def replay_on_ray(recorder: WaveRecorder, family_args: tuple[str, dict], spec: Any, workers: int) -> dict:
    """The replay's plain code on `workers` plain Ray actors on a new local Ray, one call per
    actor per wave, the next wave sent when all are back: the floor Ray sets for the run's
    waves, with the same shares as the plain processes and nothing travelling but the wave's
    number."""
    import ray

    with ray_session(workers):
        weights, noise = ray.put(recorder.weights), ray.put(recorder.noise)
        cls = ray.remote(num_cpus=1)(ReplayActor)
        actors = [
            cls.remote(family_args, spec, weights, noise, [w[i::workers] for w in recorder.waves])
            for i in range(workers)
        ]
        # made, not yet run: the first wave loads the compiled kernels, as in the processes and the run
        ray.get([actor.ready.remote() for actor in actors])
        t0, steps = time.perf_counter(), 0
        for wave in range(len(recorder.waves)):
            steps += sum(ray.get([actor.run.remote(wave) for actor in actors]))
        return {"steps": steps, "seconds": time.perf_counter() - t0}


class FullCollections:
    """Counts Python's full garbage collections (generation 2) while active, and their time."""

    def __init__(self) -> None:
        self.count, self.seconds, self._start = 0, 0.0, 0.0

    def _note(self, phase: str, info: dict) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._note)


def measure(config: Path, seed: int | None, sets: list[str] = (), recorder: WaveRecorder | None = None) -> dict:
    """Run the config once in a scratch directory and summarise it."""
    overrides = ([f"seed={seed}"] if seed is not None else []) + list(sets)
    with tempfile.TemporaryDirectory() as tmp, FullCollections() as collections:
        t0 = time.perf_counter()
        if recorder is not None:
            with recorder:
                result = poet.run(config, out=Path(tmp) / "run", overrides=overrides, progress=False)
        else:
            result = poet.run(config, out=Path(tmp) / "run", overrides=overrides, progress=False)
        seconds = time.perf_counter() - t0
        run = load_run(result.run_dir)
    first = run.iterations[run.iterations["pair_id"] == "p0"]
    solved_at = first[first["score"] >= 230]["iteration"]
    children = run.envs[run.envs["parent_env_id"].notna()]
    throughput = run.throughput()
    return {
        # relative to the checkout where it lies inside it: the JSON names no machine's paths
        "config": str(Path(config).resolve().relative_to(ROOT))
        if Path(config).resolve().is_relative_to(ROOT)
        else str(config),
        "overrides": list(sets),
        "iterations": int(run.iterations["iteration"].max()) + 1,
        "wall_seconds": round(seconds, 1),
        "flat_course_solved_at_iteration": int(solved_at.iloc[0]) if len(solved_at) else None,
        "envs_admitted": int(len(children)),
        "transfers_accepted": int(run.transfers["accepted"].sum()),
        "transfer_attempts": int(len(run.transfers)),
        "annecs": int(run.annecs.iloc[-1]),
        # from the run's own records: every phase's env steps and wall time (Ray start-up excluded)
        "env_steps": int(throughput.loc["all", "env_steps"]),
        "phase_seconds": round(float(throughput.loc["all", "seconds"]), 1),
        "env_steps_per_s": round(float(throughput.loc["all", "steps_per_second"])),
        "throughput": [  # per phase, and "all"
            {
                "phase": phase,
                "seconds": round(r.seconds, 1),
                "env_steps": int(r.env_steps),
                "steps_per_second": round(r.steps_per_second, 1),
            }
            for phase, r in throughput.iterrows()
        ],
        # inside poet.run, Ray's start included: the driver's pauses for full garbage collections
        "full_collections": collections.count,
        "full_collection_seconds": round(collections.seconds, 2),
        "max_roughness": float(run.envs["roughness"].max()),
        "max_pit_gap_hi": float(run.envs["pit_gap_hi"].max()),
        "max_stump_height_hi": float(run.envs["stump_height_hi"].max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "quickstart.yaml")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override, as `poet run --set` (repeatable)",
    )
    parser.add_argument(
        "--raw-limit",
        action="store_true",
        help="also replay the run's waves with plain code (the limit for the same work)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    # what is loaded now lives as long as the script: frozen, as `poet.run` freezes a run's
    # before its loop, so that no full collection walks it during the run or a replay
    gc.freeze()
    recorder = WaveRecorder() if args.raw_limit else None
    stats = measure(args.config, args.seed, args.sets, recorder)
    if recorder is not None:
        from poet.config import load_config
        from poet.parts import check_parts

        cfg = load_config(args.config, overrides=([f"seed={args.seed}"] if args.seed is not None else []) + args.sets)
        parts = check_parts(cfg)
        workers = cfg.ray.workers or mp.cpu_count()
        limit = replay(recorder, (cfg.env.family, cfg.env.options), parts.spec, workers)
        pool_seconds = sum(recorder.seconds)
        pool_steps = sum(len(w) for w in recorder.waves)
        stats.update(
            {
                "waves": len(recorder.waves),
                "pool_seconds_in_waves": round(pool_seconds, 2),
                "raw_seconds_same_waves": round(limit["seconds"], 2),
                "raw_steps_same_waves": limit["steps"],
                "raw_same_waves_steps_per_s": round(limit["steps"] / limit["seconds"]),
                "pool_share_of_raw_same_waves": round(limit["seconds"] / pool_seconds, 3),
                # the run's phases without the recorder's own work in them
                "recorder_seconds": round(recorder.own_seconds, 2),
                "run_share_of_raw_same_waves": round(
                    limit["seconds"] / (stats["env_steps"] / stats["env_steps_per_s"] - recorder.own_seconds), 3
                ),
                "episodes_replayed": pool_steps,
            }
        )
        floor = replay_on_ray(recorder, (cfg.env.family, cfg.env.options), parts.spec, workers)
        stats.update(
            {
                "raw_ray_seconds_same_waves": round(floor["seconds"], 2),
                "raw_ray_share_of_raw_same_waves": round(limit["seconds"] / floor["seconds"], 3),
                "pool_share_of_raw_ray_same_waves": round(floor["seconds"] / pool_seconds, 3),
            }
        )
        if floor["steps"] != limit["steps"]:
            raise RuntimeError(f"the replay on Ray took {floor['steps']} steps, the plain one {limit['steps']}")
        if cfg.env.family == "terrain":  # the numpy core it had before it was compiled
            numpy_limit = replay(recorder, (cfg.env.family, cfg.env.options), parts.spec, workers, "numpy")
            stats.update(
                {
                    "raw_numpy_seconds_same_waves": round(numpy_limit["seconds"], 2),
                    "raw_numpy_same_waves_steps_per_s": round(numpy_limit["steps"] / numpy_limit["seconds"]),
                    "pool_vs_raw_numpy_same_waves": round(numpy_limit["seconds"] / pool_seconds, 3),
                }
            )
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
