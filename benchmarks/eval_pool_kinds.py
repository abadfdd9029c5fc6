"""Evaluation throughput of the torch policy kinds: the Ray pool against plain batched torch code.

    python benchmarks/eval_pool_kinds.py --workers 2 [--kinds cnn,lstm,cnn_lstm,cartpole_lstm] [--repeats 5]
                                         [--json PATH] [--quick]

One row per built-in torch kind (`cnn`, `lstm`, `cnn_lstm`: each kind's defaults, so the lstm
and cnn_lstm have 256 units, on terrain's flat 22-d observations, which the convolutions read
in 1-D), and `cartpole_<kind>`: that kind on the cartpole family (gymnasium envs, discrete
actions). The mlp's rows are benchmarks/eval_pool.py's. Each row's work is an ES-shaped wave:
one theta (`init_flat(..., "orthogonal")`, dcd's start), P perturbations (P/2 mirrored pairs,
theta +- sigma * noise[offset:offset+dim], fresh offsets every wave, one shared noise table)
each on E envs (terrain: the initial course and mutated children, each pinned to one course,
as POET runs them; cartpole: the initial physics and mutated children, a fresh episode seed
per request), one episode per request, at most `max_steps` steps. With W workers it is done:

- raw:  the limit, as the best plain code does the same work: W plain processes
        (multiprocessing, spawn), no Ray and no framework evaluation code, each given an equal
        share of every wave's episodes (round robin). A process computes its perturbations'
        weights up front (theta + float32(sign * sigma) * noise[offset:offset+dim], the pool's
        float32 formula), then steps its episodes in lock-step, `SLOTS` (16) live rows at a
        time, with one batched torch forward per step: `torch.func.vmap` of
        `torch.func.functional_call` of the kind's module over the slots' own stacked weights,
        torch on one thread; a finished row's slot takes the next row at once (its weights
        copied into the slot, its recurrent state zeroed). The forward always has 16 rows (the
        last rows padded with whatever the empty slots hold), as the pool's does: torch's CPU
        convolution picks another method for another number of rows, so fewer rows would give
        other floats and, some steps later, other episodes. Terrain rows are stepped with the
        family's own compiled kernels (`kernel.reset` called from Python as each row starts;
        `kernel.step` for all live rows in one call per step of a small numba loop of this
        script's, `live_stepper`, compiled in each process with the family's `step` bound in
        it, as the pool's lock-step loop binds it);
        cartpole's with the gymnasium envs themselves, one env per slot reused (renewed by the
        family) from episode to episode, stepped past the wrappers that only count steps and
        check call order, the time limit applied here. Throughput is the sum over processes of
        steps / own wall time: raw gets perfect load balance for free, and no process waits
        for another between waves.
- pool: `RayEvaluator(family, spec, noise, workers=W, local_wave_steps=0).evaluate(requests)`,
        one call per wave, after a warm-up wave of the same shape (the raw processes run their
        share of one too). No wave runs wholly in the driver (`local_wave_steps=0`, as in
        eval_pool.py); on this one machine the driver takes one worker's share of a terrain
        wave (`driver_share`), so W processes roll out, as for raw.

Both ways run exactly the same episodes: the script checks that every wave took the same env
steps both ways and that the returns agree to float round-off (`returns_max_abs_diff`; they
are bit-identical where the forward is). Each way is measured `repeats` times, interleaved
(raw of every row, then the pool of every row in one Ray instance, then raw again, ...), each
time on fresh perturbations and seeds so that no way profits from a cache warmed earlier; the
table shows medians and the JSON every repetition. Raw runs with no Ray running. Before each
timed span the script waits for the machine to be quiet, and during it reads the CPU time of
its own process tree and of the whole machine from /proc (eval_pool.py's helpers), so the
load of other programs is on record.

Then the pool's worker memory with LSTM-256 policies (295,010 parameters, 1.2 MB each), on the
lstm row's pool after its last timed waves (one pool start fewer; a pool of its own without
that row): after a warm-up, waves of the same shape (R requests of one short episode each on
one env) that differ only in the number of distinct policies registered, 10 versus 1000 (1.2
GB of weights); weights are released after each wave. Reported per worker: resident memory
after each wave (after `malloc_trim`), split into private pages and the node's object store
mapped in (shared: Ray keeps a chunk's weights beyond its inline budget there, one store per
node), and its peak, against the weights' bytes (1000 x num_params x 4), summed over the
workers too: whether a node holds the weights about once, or once per worker. The driver's
resident memory and peak are on record as well (it holds every registered policy).

Nothing here is a pass/fail test; targets are printed next to the numbers.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch

import envs
from envs import EnvParams
from poet.evaluation import EvalRequest, NoiseTable, Perturbation
from poet.evaluation.ray_pool import LOCAL_WAVE_STEPS, RayEvaluator
from poet.evaluation.requests import simulated_steps
from poet.policies import PolicySpec, init_flat, spec_for_spaces
from poet.policies.kinds import build_module
from poet.seeding import Seeds, episode_seeds

sys.path.insert(0, str(Path(__file__).resolve().parent))
# eval_pool.py's machinery: quiet-machine waits, CPU accounting, a private Ray, worker memory
from eval_pool import SETTLE_MAX_WAIT, CpuWatch, Measurement, check, machine_info, ray_session, settle, worker_memory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGETS = {"pool_vs_raw": 0.8}
TERRAIN_KINDS = ("cnn", "lstm", "cnn_lstm")
DEFAULT_ROWS = "cnn,lstm,cnn_lstm,cartpole_lstm"
SLOTS = 16  # live rows per batched forward, as the pool's lock-step (LOCKSTEP_SLOTS, TORCH_SLOTS)
SIGMA = 0.02
NOISE_SPARE = 10**6  # noise table floats beyond the policy's size (where offsets may start)


@dataclass
class Sizes:
    """How big each part is: (perturbations P, envs E, step cap) per family."""

    terrain: tuple[int, int, int] = (16, 4, 200)  # 64 episodes of <= 200 steps: a few seconds a wave
    cartpole: tuple[int, int, int] = (32, 4, 500)  # random LSTMs balance ~10-60 steps
    waves: int = 3  # consecutive waves per timed span
    repeats: int = 5
    memory_requests: int = 1000  # rows of each memory wave (one episode per request)
    memory_policies: tuple[int, int] = (10, 1000)
    memory_max_steps: int = 20

    @classmethod
    def quick(cls) -> Sizes:
        """A smoke run: seconds per row."""
        return cls(
            terrain=(4, 2, 30),
            cartpole=(4, 2, 60),
            waves=1,
            repeats=1,
            memory_requests=40,
            memory_policies=(2, 20),
            memory_max_steps=5,
        )


@dataclass
class Setup:
    """One row's work: the family, the kind's spec, theta, the noise table and the envs."""

    name: str
    family: Any
    spec: PolicySpec
    theta: np.ndarray
    noise: np.ndarray
    envs: list[EnvParams]
    perturbations: int
    max_steps: int


def make_setup(name: str, sizes: Sizes) -> Setup:
    """Row `name`: a torch kind on terrain, or `cartpole_<kind>`."""
    gym_row = name.startswith("cartpole_")
    kind = name.removeprefix("cartpole_")
    if kind not in TERRAIN_KINDS:
        raise ValueError(f"unknown row {name!r}: a torch kind ({', '.join(TERRAIN_KINDS)}) or cartpole_<kind>")
    family = envs.make_family("cartpole" if gym_row else "terrain")
    n_pert, n_envs, max_steps = sizes.cartpole if gym_row else sizes.terrain
    if n_pert % 2:
        raise ValueError("perturbations come in mirrored pairs: P must be even")
    params, rng = [family.initial()], np.random.default_rng(7)
    while len(params) < n_envs:
        params.append(family.mutate(params[-1], rng))
    if not gym_row:  # as POET runs them: every episode on an env runs that env's one course
        params = [p.with_course_seed(1000 + i) for i, p in enumerate(params)]
    probe = family.make_env(params[0])
    spec = spec_for_spaces(probe.observation_space, probe.action_space, (), "", kind, {})  # the kind's defaults
    probe.close()
    theta = init_flat(spec, np.random.default_rng(1), "orthogonal")
    noise = NoiseTable(Seeds(7).sequence("noise"), spec.num_params + NOISE_SPARE).noise
    return Setup(name, family, spec, theta, noise, params, n_pert, max_steps)


# ================================================================== a wave, both ways
Wave = tuple[list[tuple[int, int]], list[tuple[int, int, int]]]  # ([(offset, sign)] per perturbation, episodes)


def make_wave(setup: Setup, seed: int) -> Wave:
    """Fresh mirrored perturbations and seeds: episodes (perturbation, env, env seed) in request order."""
    rng = np.random.default_rng([seed, setup.spec.num_params])
    offsets = rng.integers(0, setup.noise.size - setup.spec.num_params + 1, setup.perturbations // 2)
    perts = [(int(o), s) for o in offsets for s in (1, -1)]
    episodes = []
    for p in range(len(perts)):
        for e, env in enumerate(setup.envs):
            request_seed = seed + p * len(setup.envs) + e
            env_seed = env.course_seed if env.course_seed is not None else episode_seeds(request_seed, 1)[0]
            episodes.append((p, e, env_seed))
    return perts, episodes


def wave_requests(setup: Setup, ref: Any, seed: int) -> list[EvalRequest]:
    """The pool's requests for `make_wave(setup, seed)`, in its episodes' order."""
    perts, _ = make_wave(setup, seed)
    return [
        EvalRequest(ref, env, 1, seed + p * len(setup.envs) + e, setup.max_steps, Perturbation(off, SIGMA, sign))
        for p, (off, sign) in enumerate(perts)
        for e, env in enumerate(setup.envs)
    ]


def share(wave: Wave, i: int, workers: int) -> Wave:
    """Process i's round-robin share of a wave's episodes."""
    return wave[0], wave[1][i::workers]


# ========================================================================= plain code
@functools.lru_cache(maxsize=4)
def live_stepper(step: Any) -> Callable:
    """A numba loop that steps every live slot's row with the family's compiled `step`, bound
    when the loop compiles (once per process and family; the data's types are fixed by
    `envs.kernel`), as the pool's lock-step loop binds it: numba resolves a function-typed
    argument's address on every call from Python."""

    @numba.njit
    def step_live(
        data: tuple,
        rows: np.ndarray,
        actions: np.ndarray,
        states: np.ndarray,
        obs: np.ndarray,
        cap: int,
        returns: np.ndarray,
        lengths: np.ndarray,
        ended: np.ndarray,
    ) -> None:
        for k in range(rows.size):
            r = rows[k]
            if r < 0:  # an empty slot
                continue
            reward, end = step(data, r, actions[k], states[k], obs[k])
            returns[r] += reward
            lengths[r] += 1
            ended[k] = end or lengths[r] >= cap

    return step_live


class SlotForward:
    """The kind's module for SLOTS rows at once, each slot with its own weights and state:
    `torch.func.vmap` of `torch.func.functional_call` over the slots' stacked weights."""

    def __init__(self, spec: PolicySpec):
        self.spec = spec
        module = build_module(spec).eval()
        self.names = [n for n, _ in module.named_parameters()]
        self.shapes = [tuple(p.shape) for p in module.parameters()]
        self.bounds = np.cumsum([0] + [int(np.prod(s)) for s in self.shapes]).tolist()

        def one(params: dict[str, torch.Tensor], obs: torch.Tensor, state: torch.Tensor) -> tuple:
            out, next_state = torch.func.functional_call(module, params, (obs.unsqueeze(0), state.unsqueeze(0)))
            return out[0], next_state[0]

        self.batched = torch.func.vmap(one)
        self.stacked = {n: torch.zeros(SLOTS, *s) for n, s in zip(self.names, self.shapes)}
        self.state = torch.zeros(SLOTS, spec.state_size)
        self.low = np.asarray(spec.action_low, dtype=np.float32)
        self.span = np.asarray(spec.action_high, dtype=np.float32) - self.low

    def load(self, k: int, flat: np.ndarray) -> None:
        """Slot k starts an episode with weights `flat`: copied in, its state zero."""
        w = torch.from_numpy(flat)
        for name, shape, a, b in zip(self.names, self.shapes, self.bounds[:-1], self.bounds[1:]):
            self.stacked[name][k] = w[a:b].view(shape)
        self.state[k] = 0.0

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions of every slot for its observation, advancing the states (box: tanh to the
        bounds in float32; discrete: argmax)."""
        y, self.state = self.batched(self.stacked, torch.from_numpy(obs), self.state)
        raw = y.numpy()
        if self.spec.action_kind == "discrete":
            return raw.argmax(axis=-1)
        return self.low + (np.tanh(raw) + np.float32(1.0)) * np.float32(0.5) * self.span


class PlainRunner:
    """A raw process's plain code: a share of a wave in -> (steps, returns, lengths)."""

    def __init__(self, setup: Setup):
        torch.set_num_threads(1)
        self.setup = setup
        self.forward = SlotForward(setup.spec)
        self.kernel = setup.family.row_kernel() if hasattr(setup.family, "row_kernel") else None
        self.idle: dict[int, list[Any]] = {}  # cartpole: used envs per env index, for the next episodes
        self.renew = getattr(setup.family, "renew", None)

    def weights(self, perts: list[tuple[int, int]], used: set[int]) -> dict[int, np.ndarray]:
        """theta + float32(sign * sigma) * noise[offset:offset+dim] of the perturbations used, up front."""
        dim, theta, noise = self.setup.spec.num_params, self.setup.theta, self.setup.noise
        return {p: theta + np.float32(perts[p][1] * SIGMA) * noise[perts[p][0] : perts[p][0] + dim] for p in used}

    def __call__(self, wave: Wave) -> tuple[int, np.ndarray, np.ndarray]:
        perts, episodes = wave
        weights = self.weights(perts, {p for p, _, _ in episodes})
        with torch.no_grad():
            if self.kernel is not None:
                return self.terrain(weights, episodes)
            return self.gym(weights, episodes)

    def terrain(self, weights: dict[int, np.ndarray], episodes: list[tuple[int, int, int]]) -> tuple:
        kernel, fwd, n, step_live = self.kernel, self.forward, len(episodes), live_stepper(self.kernel.step)
        data = kernel.batch_data([self.setup.envs[e] for _, e, _ in episodes], [s for _, _, s in episodes])
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        rows = np.full(SLOTS, -1, dtype=np.int64)
        states = np.zeros((SLOTS, kernel.state_size))
        obs = np.zeros((SLOTS, kernel.obs_dim), dtype=np.float32)
        ended = np.zeros(SLOTS, dtype=bool)
        next_row, live = 0, 0

        def start(k: int) -> None:
            nonlocal next_row
            rows[k], next_row = next_row, next_row + 1
            kernel.reset(data, rows[k], states[k], obs[k])
            fwd.load(k, weights[episodes[rows[k]][0]])

        for k in range(min(SLOTS, n)):
            start(k)
            live += 1
        while live:
            actions = np.ascontiguousarray(fwd.act(obs), dtype=np.float32)
            step_live(data, rows, actions, states, obs, self.setup.max_steps, returns, lengths, ended)
            if ended.any():
                for k in np.flatnonzero(ended).tolist():
                    if next_row < n:
                        start(k)
                    else:
                        rows[k] = -1
                        live -= 1
                ended[:] = False
        return int(lengths.sum()), returns, lengths

    def gym(self, weights: dict[int, np.ndarray], episodes: list[tuple[int, int, int]]) -> tuple:
        fwd, n, family = self.forward, len(episodes), self.setup.family
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        obs = np.zeros((SLOTS, self.setup.spec.obs_dim), dtype=np.float32)
        slots: list[list[Any] | None] = [None] * SLOTS  # [env, its own step, row, env index, cap]
        next_row, live = 0, 0

        def start(k: int) -> None:
            nonlocal next_row
            row, next_row = next_row, next_row + 1
            p, e, seed = episodes[row]
            idle = self.idle.setdefault(e, [])
            env = idle.pop() if idle else family.make_env(self.setup.envs[e])
            obs[k] = env.reset(seed=seed)[0]
            limit = env.spec.max_episode_steps if env.spec is not None else None
            slots[k] = [env, env.unwrapped.step, row, e, min(self.setup.max_steps, limit or self.setup.max_steps)]
            fwd.load(k, weights[p])

        for k in range(min(SLOTS, n)):
            start(k)
            live += 1
        while live:
            actions = fwd.act(obs)
            for k, slot in enumerate(slots):
                if slot is None:
                    continue
                o, reward, terminated, truncated, _ = slot[1](actions[k])
                obs[k] = o
                row = slot[2]
                returns[row] += float(reward)
                lengths[row] += 1
                if terminated or truncated or lengths[row] >= slot[4]:
                    env = slot[0]
                    if self.renew is not None and self.renew(env):
                        self.idle[slot[3]].append(env)
                    else:
                        env.close()
                    if next_row < n:
                        start(k)
                    else:
                        slots[k] = None
                        live -= 1
        return int(lengths.sum()), returns, lengths


RawJob = tuple[Setup, Wave, list[Wave]]  # a row's setup, warm-up wave and timed waves


def raw_process(index: int, jobs: list[RawJob], workers: int, barrier: Any, results: Any) -> None:
    """Body of raw process `index`, for every row in turn: its share of the row's warm-up wave,
    wait for the others, its share of every timed wave, report, wait until the parent has read
    the CPU counters."""
    for setup, warmup, waves in jobs:
        run = PlainRunner(setup)
        run(share(warmup, index, workers))  # not counted: compiles, first torch calls, envs built
        barrier.wait()
        t0, cpu0, steps, outcomes = time.monotonic(), time.process_time(), 0, []
        for wave in waves:
            wave_steps, returns, lengths = run(share(wave, index, workers))
            steps += wave_steps
            outcomes.append((wave_steps, returns, lengths))
        results.put((steps, t0, time.monotonic(), time.process_time() - cpu0, outcomes, index))
        barrier.wait()
        del run


def measure_raw(jobs: list[RawJob], workers: int) -> list[tuple[Measurement, list[dict]]]:
    """W spawned processes that run every row's job in turn, each with a round-robin share of
    every wave (one start of the processes for all rows: each start imports torch anew). Per
    row: steps/s summed over processes, and each wave's steps, returns and lengths, in the
    wave's episode order."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=raw_process, args=(i, jobs, workers, barrier, results)) for i in range(workers)]
    for proc in procs:
        proc.start()
    out = []
    for _, _, waves in jobs:
        quiet = settle()  # the processes are warm and blocked on the barrier
        barrier.wait()
        watch = CpuWatch()
        reports = [results.get() for _ in procs]
        cpu = watch.stop()
        barrier.wait()  # the processes go on to the next row
        out.append(raw_measurement(reports, waves, workers, cpu | quiet))
    for proc in procs:
        proc.join()
    return out


def raw_measurement(
    reports: list[tuple], waves: list[Wave], workers: int, cpu: dict[str, float]
) -> tuple[Measurement, list[dict]]:
    """One row's raw measurement from its processes' reports."""
    steps = sum(r[0] for r in reports)
    wall = max(r[2] for r in reports) - min(r[1] for r in reports)
    rate = sum(r[0] / (r[2] - r[1]) for r in reports)
    per_wave = []
    for w, (_, episodes) in enumerate(waves):
        returns, lengths = np.zeros(len(episodes)), np.zeros(len(episodes), dtype=np.int64)
        for report in reports:  # in the order the processes finished: each says whose share it ran
            _, share_returns, share_lengths = report[4][w]
            i = report[5]
            returns[i::workers], lengths[i::workers] = share_returns, share_lengths
        per_wave.append({"steps": int(lengths.sum()), "returns": returns, "lengths": lengths})
    rollout_cores = sum(r[3] for r in reports) / wall
    cpu["background_cores"] = round(max(0.0, cpu["script_cores"] - rollout_cores), 3)  # the parent, queues
    return Measurement(steps, wall, rate, cpu, {"wall_steps_per_s": steps / wall}), per_wave


def measure_pool(
    setup: Setup, warmup_seed: int, seeds: list[int], workers: int, after: Callable[[RayEvaluator], Any] | None = None
) -> tuple[Measurement, list[dict], Any]:
    """`evaluate` of one wave per seed, back to back, on a pool that has run a warm-up wave of
    the same shape; also each wave's steps, returns and lengths, in request order, and what
    `after` (if given) returns from the same pool afterwards (the memory waves: one pool start
    fewer)."""
    pool = RayEvaluator(
        setup.family, setup.spec, NoiseTable.from_array(setup.noise), workers=workers, local_wave_steps=0
    )
    try:
        ref = pool.put(setup.theta)
        check(pool.evaluate(wave_requests(setup, ref, warmup_seed)))  # not counted
        waves = [wave_requests(setup, ref, seed) for seed in seeds]
        shares0, local0 = pool.driver_shares, pool.local_waves
        quiet = settle()
        watch = CpuWatch()
        t0 = time.perf_counter()
        results = [pool.evaluate(requests) for requests in waves]
        seconds = time.perf_counter() - t0
        cpu = watch.stop()
        per_wave = []
        for requests, wave in zip(waves, results):
            check(wave)
            per_wave.append(
                {
                    "steps": simulated_steps(requests, wave),
                    "returns": np.array([float(r.returns[0]) for r in wave]),
                    "lengths": np.array([int(r.lengths[0]) for r in wave]),
                }
            )
        steps = sum(w["steps"] for w in per_wave)
        extra = {"driver_shares": pool.driver_shares - shares0, "local_waves": pool.local_waves - local0}
        return Measurement(steps, seconds, steps / seconds, cpu | quiet, extra), per_wave, after and after(pool)
    finally:
        pool.close()


def compare(raw: list[dict], pool: list[dict]) -> dict[str, Any]:
    """Both ways' waves: the same steps (asserted), returns equal up to float round-off."""
    for w, (a, b) in enumerate(zip(raw, pool)):
        if a["steps"] != b["steps"] or not np.array_equal(a["lengths"], b["lengths"]):
            raise AssertionError(
                f"wave {w}: raw took {a['steps']} env steps, the pool {b['steps']}: not the same episodes"
            )
    diff = max(float(np.max(np.abs(a["returns"] - b["returns"]), initial=0.0)) for a, b in zip(raw, pool))
    scale = max(float(np.max(np.abs(a["returns"]), initial=0.0)) for a in raw)
    if diff > 1e-6 * max(1.0, scale):
        raise AssertionError(f"returns differ by {diff} (largest return {scale}): not the same episodes")
    return {"same_steps": True, "steps_per_wave": [a["steps"] for a in raw], "returns_max_abs_diff": diff}


# ================================================================================ memory
def _own_memory() -> dict[str, float]:
    """This process's resident memory now (after malloc_trim) and at peak, in MB."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
    now = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    return {"rss_mb": round(now, 1), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def memory_wave(pool: RayEvaluator, setup: Setup, sizes: Sizes, distinct: int, seed: int) -> dict[str, Any]:
    """`memory_requests` one-episode requests on the first env, cycling over `distinct` fresh
    policies (theta moved along distinct noise slices), released afterwards. Each worker's
    memory and the driver's after the wave."""
    rng = np.random.default_rng(seed)
    dim = setup.spec.num_params
    offsets = rng.integers(0, setup.noise.size - dim + 1, distinct)
    refs = [pool.put(setup.theta + np.float32(0.05) * setup.noise[o : o + dim]) for o in offsets.tolist()]
    requests = [
        EvalRequest(refs[i % distinct], setup.envs[0], 1, seed + i, sizes.memory_max_steps)
        for i in range(sizes.memory_requests)
    ]
    check(pool.evaluate(requests))
    pool.release(refs)
    return {"workers": worker_memory(pool), "driver": _own_memory()}


def measure_memory(setup: Setup, sizes: Sizes, workers: int, pool: RayEvaluator | None = None) -> dict[str, Any]:
    """Worker RSS after waves that differ only in the number of distinct LSTM-256 policies, on
    `pool` (the lstm row's, after its timed waves) or on a pool opened here."""
    few, many = sizes.memory_policies
    own = pool is None
    if pool is None:
        pool = RayEvaluator(setup.family, setup.spec, None, workers=workers, local_wave_steps=0)
    try:
        shares0 = pool.driver_shares
        memory_wave(pool, setup, sizes, few, 2 * 10**6)  # warm-up: steady state for this wave shape
        after_few = memory_wave(pool, setup, sizes, few, 3 * 10**6)
        after_many = memory_wave(pool, setup, sizes, many, 4 * 10**6)
        after_many_again = memory_wave(pool, setup, sizes, many, 5 * 10**6)
        driver_shares = pool.driver_shares - shares0
    finally:
        if own:
            pool.close()
    weights_mb = many * setup.spec.num_params * 4 / 2**20
    growth = [round(b["rss_mb"] - a["rss_mb"], 1) for a, b in zip(after_few["workers"], after_many["workers"])]
    peak_growth = [
        round(b["peak_rss_mb"] - a["peak_rss_mb"], 1) for a, b in zip(after_few["workers"], after_many["workers"])
    ]
    return {
        "kind": "lstm",
        "policy_params": setup.spec.num_params,
        "policies": [few, many],
        "rows": sizes.memory_requests,
        "max_steps": sizes.memory_max_steps,
        "weights_mb": round(weights_mb, 1),  # `many` x num_params x 4 bytes
        "worker_rss_mb_10": [m["rss_mb"] for m in after_few["workers"]],
        "worker_rss_mb_1000": [m["rss_mb"] for m in after_many["workers"]],
        "worker_rss_growth_mb": growth,
        "worker_peak_rss_growth_mb": peak_growth,
        "workers_peak_growth_over_weights": round(sum(peak_growth) / weights_mb, 3),
        # where the growth lies: private memory, or the node's object store mapped in (shared)
        **{
            f"worker_{part}_growth_mb": [
                round(b.get(f"rss{part}_mb", 0.0) - a.get(f"rss{part}_mb", 0.0), 1)
                for a, b in zip(after_few["workers"], after_many["workers"])
            ]
            for part in ("anon", "shmem")
        },
        "driver_rss_mb_10": after_few["driver"]["rss_mb"],
        "driver_rss_mb_1000": after_many["driver"]["rss_mb"],
        "driver_peak_rss_growth_mb": round(after_many["driver"]["peak_rss_mb"] - after_few["driver"]["peak_rss_mb"], 1),
        "driver_shares": driver_shares,
        "per_worker_after_10": after_few["workers"],
        "per_worker_after_1000": after_many["workers"],
        "per_worker_after_1000_second_wave": after_many_again["workers"],
    }


# ================================================================================ driver
def benchmark(rows: list[str], sizes: Sizes, workers: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Interleaved repetitions of raw and the pool for every row, then the memory waves."""
    setups = {name: make_setup(name, sizes) for name in rows}
    runs: dict[str, dict[str, list[Measurement]]] = {name: {"raw": [], "pool": []} for name in rows}
    checks: dict[str, list[dict]] = {name: [] for name in rows}
    memory: dict[str, Any] = {}
    t0 = time.perf_counter()
    for rep in range(sizes.repeats):
        # fresh perturbations and seeds every wave and repetition; the warm-up wave beyond the timed ones
        seeds = [10**6 * (rep + 1) + 10**4 * w for w in range(sizes.waves)]
        warmup_seed = 10**6 * (rep + 1) + 10**4 * sizes.waves
        jobs = [
            (setup, make_wave(setup, warmup_seed), [make_wave(setup, s) for s in seeds]) for setup in setups.values()
        ]
        raw_waves = {}
        for name, (m, per_wave) in zip(setups, measure_raw(jobs, workers)):  # no Ray running
            runs[name]["raw"].append(m)
            raw_waves[name] = per_wave
        log(f"  [rep {rep + 1}/{sizes.repeats}] raw done at {time.perf_counter() - t0:.0f}s")
        with ray_session(workers):
            for name, setup in setups.items():
                last = rep == sizes.repeats - 1
                after = functools.partial(measure_memory, setup, sizes, workers) if last and name == "lstm" else None
                m, pool_waves, mem = measure_pool(setup, warmup_seed, seeds, workers, after)
                memory = mem or memory
                runs[name]["pool"].append(m)
                checks[name].append(compare(raw_waves[name], pool_waves))
                raw_m = runs[name]["raw"][-1]
                log(
                    f"  [{name} rep {rep + 1}/{sizes.repeats}] raw {raw_m.steps_per_s:,.0f} steps/s, pool "
                    f"{m.steps_per_s:,.0f} steps/s ({m.steps} steps each way, pool / raw "
                    f"{m.steps_per_s / raw_m.steps_per_s:.2f}, other load {raw_m.cpu['other_cores']:.2f} / "
                    f"{m.cpu['other_cores']:.2f} cores; at {time.perf_counter() - t0:.0f}s)"
                )
            if rep == sizes.repeats - 1 and not memory:  # no lstm row: the memory waves on a pool of their own
                memory = measure_memory(make_setup("lstm", sizes), sizes, workers)
                log(f"  memory waves done at {time.perf_counter() - t0:.0f}s")
    out: dict[str, Any] = {}
    for name, setup in setups.items():
        raw, pool = runs[name]["raw"], runs[name]["pool"]
        median_raw = statistics.median(m.steps_per_s for m in raw)
        median_pool = statistics.median(m.steps_per_s for m in pool)
        per_wave_steps = checks[name][0]["steps_per_wave"]
        out[name] = {
            "family": setup.family.name,
            "kind": setup.spec.kind,
            "policy_params": setup.spec.num_params,
            "state_size": setup.spec.state_size,
            "raw_steps_per_s": round(median_raw, 1),
            "pool_steps_per_s": round(median_pool, 1),
            "pool_vs_raw": round(median_pool / median_raw, 3),
            "pool_vs_raw_per_repeat": [round(p.steps_per_s / r.steps_per_s, 3) for p, r in zip(pool, raw)],
            "raw_steps_per_s_per_repeat": [round(m.steps_per_s, 1) for m in raw],
            "pool_steps_per_s_per_repeat": [round(m.steps_per_s, 1) for m in pool],
            "same_steps": all(c["same_steps"] for c in checks[name]),
            "returns_max_abs_diff": max(c["returns_max_abs_diff"] for c in checks[name]),
            "wave_seconds_raw": round(statistics.median(m.seconds for m in raw) / sizes.waves, 3),
            # what the pool's default (`LOCAL_WAVE_STEPS`) would do with such a wave: run it in
            # the driver alone when its expected steps are at most that
            "wave_steps_first_repeat": per_wave_steps,
            "wave_would_run_in_driver_by_default": bool(max(per_wave_steps) <= LOCAL_WAVE_STEPS),
            "max_other_load_cores": max(m.cpu["other_cores"] for m in raw + pool),
            "matrix": {
                "perturbations": setup.perturbations,
                "envs": len(setup.envs),
                "episodes_per_request": 1,
                "max_steps": setup.max_steps,
                "waves_per_timed_span": sizes.waves,
                "sigma": SIGMA,
                "noise_size": int(setup.noise.size),
                "options": setup.spec.options_dict(),
            },
            "runs": {"raw": [asdict(m) for m in raw], "pool": [asdict(m) for m in pool]},
            "checks": checks[name],
        }
    return {"rows": out, "memory": memory}


def print_table(result: dict[str, Any], quick: bool) -> None:
    """One row per kind, the target, then the memory row."""
    rows = result["rows"]
    cols = ["row", "params", "raw", "pool", "pool/raw", "per repeat", "steps/wave", "same eps"]
    table = [
        [
            name,
            f"{r['policy_params']:,}",
            f"{r['raw_steps_per_s']:,.0f}",
            f"{r['pool_steps_per_s']:,.0f}",
            f"{r['pool_vs_raw']:.2f}",
            " ".join(f"{x:.2f}" for x in r["pool_vs_raw_per_repeat"]),
            f"{statistics.median(r['wave_steps_first_repeat']):,.0f}",
            "yes" if r["same_steps"] else "NO",
        ]
        for name, r in rows.items()
    ]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print("env steps/s over all workers (median over repeats); pool / raw per repetition")
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for t in table:
        print("  ".join(v.rjust(w) for v, w in zip(t, widths)))
    target = TARGETS["pool_vs_raw"]
    for name, r in rows.items():
        ok = ">=" if r["pool_vs_raw"] >= target else "<"
        print(
            f"{name}: pool / raw limit {r['pool_vs_raw']:.2f} {ok} {target} (target: at least {target}); "
            f"returns differ by at most {r['returns_max_abs_diff']:.2g}"
        )
    mem = result["memory"]
    if mem:
        few, many = mem["policies"]
        print(
            f"memory ({mem['kind']}, {mem['policy_params']:,} params; {mem['rows']} rows per wave): worker RSS "
            f"after {few} policies {mem['worker_rss_mb_10']} MB, after {many} {mem['worker_rss_mb_1000']} MB "
            f"(growth {mem['worker_rss_growth_mb']} MB per worker: private {mem['worker_anon_growth_mb']}, the "
            f"node's object store mapped in {mem['worker_shmem_growth_mb']}); peak growth {mem['worker_peak_rss_growth_mb']} MB "
            f"per worker, summed {sum(mem['worker_peak_rss_growth_mb']):.0f} MB = "
            f"{mem['workers_peak_growth_over_weights']:.2f} x the weights ({many} x {mem['policy_params']:,} x 4 B = "
            f"{mem['weights_mb']:.0f} MB; the driver ran {mem['driver_shares']} shares itself, its peak grew "
            f"{mem['driver_peak_rss_growth_mb']:.0f} MB)"
        )
    if quick:
        print("(--quick: smoke-test sizes; the targets are meant for full-size runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--kinds", default=DEFAULT_ROWS, help=f"rows: torch kinds on terrain, cartpole_<kind> (default {DEFAULT_ROWS})"
    )
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (default 5, quick 1)")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the results (default benchmarks/results/eval_pool_kinds.json; a --quick run "
        "writes only where asked, never into benchmarks/results/)",
    )
    args = parser.parse_args()
    if args.quick and args.json is not None and args.json.resolve().is_relative_to(RESULTS.resolve()):
        parser.error("--quick never writes into benchmarks/results/ (smoke sizes are not results): pick another --json")
    if args.json is None and not args.quick:
        args.json = RESULTS / "eval_pool_kinds.json"
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.quick:
        SETTLE_MAX_WAIT["seconds"] = 0.0
    if args.repeats:
        sizes.repeats = args.repeats
    rows = [n.strip() for n in args.kinds.split(",") if n.strip()]
    for name in rows:  # an unknown row fails now, not after minutes
        if name.removeprefix("cartpole_") not in TERRAIN_KINDS:
            parser.error(f"unknown row {name!r}: a torch kind ({', '.join(TERRAIN_KINDS)}) or cartpole_<kind>")
    t0 = time.perf_counter()
    log = functools.partial(print, flush=True)
    gc.freeze()  # the long-lived objects (torch, Ray) out of the collector's walks inside timed spans
    info = machine_info(args.workers)
    result = benchmark(rows, sizes, args.workers, log)
    info["load_average_at_end"] = os.getloadavg()
    info["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print_table(result, args.quick)
    print(f"total wall time {info['wall_seconds']:.0f}s")
    if args.json is None:
        print("results not written (--quick without --json)")
        return
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "wall_seconds": info["wall_seconds"],
        "machine": info,
        "sizes": asdict(sizes),
        "slots": SLOTS,
        "targets": TARGETS,
        **result,
    }
    args.json.write_text(json.dumps(payload, indent=2, default=_plain))
    print(f"wrote {args.json}")


def _plain(value: Any) -> Any:
    """numpy values in the JSON as plain numbers and lists."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else float(value)


if __name__ == "__main__":
    main()
