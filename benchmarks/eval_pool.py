"""Evaluation throughput and worker memory: the Ray pool against plain processes and naive Ray tasks.

    python benchmarks/eval_pool.py --workers 2 [--envs terrain,bipedal,bipedal_family] [--quick] [--json PATH]
    python benchmarks/eval_pool.py --raw-widths [--json PATH]

For each env the same matrix of P policies x E envs x n episodes (one EvalRequest per
(policy, env)), shaped like an ES wave (terrain: 32 perturbations x 8 envs, each env pinned
to one course as POET runs them; terrain_fresh: the same on a new course every episode, as
ACCEL, PLR, DR and held-out scoring run them; BipedalWalker: a population of 64), is
evaluated these ways, with W workers:

- engine: the engine alone in one process, no policy: actions drawn at random once and
         cycled through (terrain: the compiled physics and observation of the pool's kernel;
         a new course per episode is built here too; gymnasium: `env.step` one episode at a
         time). Reported per core, with raw's rate per core (`rollout_steps_per_s_per_core`):
         with the pool's rate, the three numbers peers publish.
- raw:   the limit, as the best plain code does the same work: W plain processes
         (multiprocessing, spawn), no Ray and no framework code, each given an equal share
         of the episodes. A family with a row kernel (`row_kernel`, e.g. terrain) steps all
         of a process's episodes in one batch with a batched numpy MLP (each row its own
         weights, finished rows dropped as the loop goes); plain gymnasium envs are stepped
         RAW_SLOTS (4) at a time per process with one batched numpy forward per step, each
         env reused and renewed before its next episode (the fastest of 1, 4 and 8 at a
         time: `--raw-widths` times them in one process). Throughput is the sum over
         processes of steps / own wall time, i.e. raw gets perfect load balance for free,
         and no process waits for another between waves. The terrain family's batch runs
         as the pool runs it: each row to its end in one compiled loop with the compiled
         forward (the same kernels).
- raw_numpy, raw_lockstep (terrain): the same raw processes with the numpy core the family
         had before it was compiled and a batched numpy forward (the previous limit), and with
         the compiled kernels in lock-step (three compiled calls per step) instead of each
         row to its end in one compiled call as the pool runs terrain.
         Also reported, from the same run: raw as an ES loop would be, waiting for every
         process to finish a wave before the next (per wave, the longest process's time).
- raw_ray: the raw processes' plain code in W plain Ray actors that hold the matrix, each
         wave dealt in shares of equal steps (known from the warm-up wave) sent as one actor
         call per worker, the next wave sent when all are back: the floor Ray itself sets for
         waves (no framework code, no weights travelling).
- raw_ray_weights: the same, each call also carrying its share's weights (float32 bytes in
         parts under Ray's inline limit), as a run must send new weights every wave: plain
         code on Ray doing the pool's work.
- pool:  `RayEvaluator(..., workers=W).evaluate(requests)`, one call per wave, after a
         warm-up wave of the same shape (raw processes run their share of one too). A
         family with a row kernel (terrain) has the driver run one worker's share of each
         wave on this one machine, as the pool does by default (`driver_share`): W
         processes roll out, as for the others.
- naive: one `@ray.remote` task per episode that rebuilds the policy module and the env from
         weights passed by value, as in ../shared/context/user-report-parallel-rollouts.txt.
- evotorch: with the `bench` extra installed (`pip install -e .[bench]`), on BipedalWalker-v3,
         EvoTorch's GymNE + PGPE on the same network, step cap, population and workers, sampling
         the same weight distribution (i.i.d. N(0, 0.1)).

All ways run exactly the same episodes (same weights, env params and episode seeds, so the
same step counts up to float round-off in the policy forward). Each is measured `repeats`
times, interleaved (raw, raw_ray, raw_ray_weights, pool, naive, raw, ...), each time on fresh episode seeds so
that no way profits from a cache warmed by an earlier repetition; the table shows medians.
Raw runs with no Ray running; the others share one Ray instance per repetition.
Before each timed span the script waits for the machine to be quiet, and during it reads from
/proc the CPU time of its own process tree and of the whole machine, so the load of other
programs is on record.

Then the pool's worker memory: after a warm-up, two waves of identical shape (R requests of
one short episode each on one env, fresh seeds per request) that differ only in the number of
distinct policies, 10 versus 1000; weights are released after each wave.

Ray starts with num_cpus=W. The pool's actors hold one CPU each for their lifetime, so the pool
is created for its measurement and closed before naive tasks run (else they never schedule).
Nothing here is a pass/fail test; targets are printed next to the numbers.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numba
import numpy as np
import torch

from envs import EnvFamily, EnvParams, make_family, terrain_core
from envs.base import EnvParamError
from envs.generic import renew_gym_env
from envs.terrain import TerrainFamily
from poet.evaluation.protocol import EvalRequest, PolicyRef
from poet.evaluation.ray_pool import INLINE_PART_BYTES, RayEvaluator
from poet.evaluation.requests import Rows, simulated_steps
from poet.evaluation.row_loop import _step_kernel
from poet.policies import BatchedPolicy, PolicySpec, init_flat, spec_for_spaces
from poet.policies.mlp_torch import MLPPolicy
from poet.seeding import episode_seeds

ROOT = Path(__file__).resolve().parents[1]
# the numpy core before compilation, frozen in tests/test_terrain_core.py (imported where it
# runs: a Ray actor that unpickles this script's functions has no tests/ on its path)
sys.path.insert(0, str(ROOT / "tests"))

TARGETS = {
    "efficiency": {"terrain": 0.75, "terrain_fresh": 0.7, "bipedal": 0.97},
    "speedup_vs_naive_terrain": 5.0,
    "pool_vs_raw_numpy_terrain": 2.0,
    "rss_growth_1000_vs_10": 0.10,
    "pool_vs_evotorch": 1.5,
}
HIDDEN, ACTIVATION = (40, 40), "tanh"
EVOTORCH_NETWORK = "Linear(obs_length, 40) >> Tanh() >> Linear(40, 40) >> Tanh() >> Linear(40, act_length) >> Tanh()"


# =============================================================================== the envs
class BipedalFamily:
    """gymnasium's BipedalWalker-v3 as a one-env family: no params, no `row_kernel`, so the
    pool steps it as gymnasium envs in slots, reusing each worker's envs as the generic
    gymnasium family does (`renew`: a new Box2D world before each reset)."""

    name = "bipedal_walker_v3"

    def initial(self) -> EnvParams:
        return EnvParams.create(self.name, {})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        return params

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> gym.Env:
        # as the generic gymnasium family builds envs: no passive checker on every episode's env
        return gym.make("BipedalWalker-v3", render_mode=render_mode, disable_env_checker=True)

    def renew(self, env: gym.Env) -> bool:
        return renew_gym_env(env)

    def features(self, params: EnvParams) -> np.ndarray:
        return np.zeros(0)

    def validate(self, params: EnvParams) -> None:
        if params.family != self.name or params.values:
            raise EnvParamError(self.name, "params", "this family has exactly one env, with no params")

    def flat(self, params: EnvParams) -> dict[str, float]:
        return {}


@dataclass
class Sizes:
    """How big each part of the benchmark is: per env, (policies P, envs E, episodes n)."""

    shapes: dict[str, tuple[int, int, int]] = field(
        default_factory=lambda: {
            "terrain": (32, 8, 1),  # an ES wave: 32 perturbations on each of 8 envs
            "terrain_fresh": (32, 8, 1),  # the same on a new course every episode
            "bipedal": (64, 1, 1),  # an ES population of 64 on BipedalWalker-v3
            "bipedal_family": (16, 4, 1),
        }
    )
    bipedal_max_steps: int = 400
    terrain_max_steps: int | None = 400
    waves: int = 10  # consecutive waves per timed span, as a run sends them
    # terrain's waves take about 70 ms: 40 of them make a span of seconds, long enough that
    # the machine's noise averages out (10 gave shares 3% apart from one run to the next)
    terrain_waves: int | None = 40
    repeats: int = 5  # the shares move by a few percent between repetitions: the median of 5 steadies them
    memory_requests: int = 1000  # rows of each memory wave (one episode per request)
    memory_policies: tuple[int, int] = (10, 1000)
    memory_max_steps: int = 50

    @classmethod
    def quick(cls) -> Sizes:
        """A smoke run: seconds per env instead of minutes."""
        return cls(
            shapes={
                "terrain": (4, 2, 2),
                "terrain_fresh": (4, 2, 2),
                "bipedal": (4, 1, 2),
                "bipedal_family": (2, 2, 1),
            },
            bipedal_max_steps=100,
            terrain_max_steps=100,
            waves=2,
            terrain_waves=None,
            repeats=1,
            memory_max_steps=10,
        )

    def waves_for(self, name: str) -> int:
        """Consecutive waves per timed span for env `name`."""
        return self.terrain_waves if name.startswith("terrain") and self.terrain_waves else self.waves


@dataclass
class Setup:
    """One env's benchmark matrix."""

    name: str
    family: Any  # an EnvFamily; BipedalFamily is defined here, so Ray sends it by value
    spec: PolicySpec
    policies: list[np.ndarray]
    envs: list[EnvParams]
    episodes: int
    max_steps: int


def random_policies(spec: PolicySpec, count: int, seed: int) -> list[np.ndarray]:
    """Distinct policies, every weight i.i.d. N(0, 0.1): where POET's ES starts (the reference's
    initialisation), and the distribution EvoTorch's PGPE samples with stdev 0.1 around 0."""
    return [init_flat(spec, np.random.default_rng([seed, i]), "reference") for i in range(count)]


def make_setup(name: str, sizes: Sizes) -> Setup:
    """The matrix for `terrain` (initial params and mutated children) or `bipedal`."""
    n_policies, n_envs, episodes = sizes.shapes[name] if name in sizes.shapes else (0, 0, 0)
    if name in ("terrain", "terrain_fresh"):
        family: EnvFamily = TerrainFamily()
        envs, rng = [family.initial()], np.random.default_rng(7)
        while len(envs) < n_envs:
            envs.append(family.mutate(envs[-1], rng))
        max_steps = sizes.terrain_max_steps or family.max_episode_steps
    elif name == "bipedal":
        family = BipedalFamily()
        envs = [family.initial()] * n_envs  # one env: E copies keep the matrix shape
        max_steps = sizes.bipedal_max_steps
    elif name == "bipedal_family":
        # POET's parameterised walker (envs/bipedal.py): the initial course and mutated children.
        family = make_family("bipedal")
        envs, rng = [family.initial()], np.random.default_rng(7)
        while len(envs) < n_envs:
            envs.append(family.mutate(envs[-1], rng))
        max_steps = sizes.bipedal_max_steps
    else:
        raise ValueError(f"unknown env {name!r} (known: terrain, terrain_fresh, bipedal, bipedal_family)")
    probe = family.make_env(envs[0])
    spec = spec_for_spaces(probe.observation_space, probe.action_space, HIDDEN, ACTIVATION)
    probe.close()
    if name != "terrain_fresh":  # as POET runs them: every episode on an env runs that env's one course
        envs = [env.with_course_seed(1000 + i) for i, env in enumerate(envs)]
    return Setup(name, family, spec, random_policies(spec, n_policies, seed=1), envs, episodes, max_steps)


# ============================================================ one episode, the plain way
Episode = tuple[int, int, int]  # (policy index, env index, env seed)


def matrix_requests(setup: Setup, refs: Sequence[PolicyRef], seed_base: int) -> list[EvalRequest]:
    """One request per (policy, env) with n episodes; request seeds start at `seed_base`."""
    return [
        EvalRequest(refs[p], env, setup.episodes, seed_base + p * len(setup.envs) + e, setup.max_steps)
        for p in range(len(setup.policies))
        for e, env in enumerate(setup.envs)
    ]


def matrix_episodes(setup: Setup, seed_base: int) -> list[Episode]:
    """The episodes of `matrix_requests`, with the same env seeds the pool uses."""
    out = []
    for p in range(len(setup.policies)):
        for e, env in enumerate(setup.envs):
            if env.course_seed is not None:  # a pinned course: its episodes are all the same one
                out.append((p, e, env.course_seed))
                continue
            out.extend((p, e, s) for s in episode_seeds(seed_base + p * len(setup.envs) + e, setup.episodes))
    return out


def run_episode(
    env: gym.Env, policy: MLPPolicy, low: np.ndarray, high: np.ndarray, seed: int, max_steps: int
) -> tuple[float, int]:
    """One episode: one observation through the torch module per step, tanh-squashed to the bounds."""
    obs, _ = env.reset(seed=seed)
    ret, steps = 0.0, 0
    with torch.no_grad():
        while steps < max_steps:
            raw = policy(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            obs, reward, terminated, truncated, _ = env.step(low + (np.tanh(raw) + 1.0) * 0.5 * (high - low))
            ret += float(reward)
            steps += 1
            if terminated or truncated:
                break
    return ret, steps


def numpy_layers(spec: PolicySpec, flats: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-row (weights (rows, in, out), biases (rows, out)) of flat vectors (rows, P), float32."""
    flats = np.atleast_2d(np.asarray(flats, dtype=np.float32))
    sizes, offset, layers = spec.layer_sizes, 0, []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = flats[:, offset : offset + fan_in * fan_out].reshape(-1, fan_out, fan_in).transpose(0, 2, 1)
        offset += fan_in * fan_out
        layers.append((np.ascontiguousarray(w), np.ascontiguousarray(flats[:, offset : offset + fan_out])))
        offset += fan_out
    return layers


def numpy_forward(
    layers: list[tuple[np.ndarray, np.ndarray]], obs: np.ndarray, low: np.ndarray, high: np.ndarray
) -> np.ndarray:
    """Actions of every row from its own weights: tanh hidden layers, tanh squashed to the bounds."""
    h = np.asarray(obs, dtype=np.float32)[:, None, :]
    for i, (w, b) in enumerate(layers):
        h = np.matmul(h, w)
        h += b[:, None, :]
        if i < len(layers) - 1:
            np.tanh(h, out=h)
    a = h[:, 0, :]  # in place: no temporaries per step
    np.tanh(a, out=a)
    a += 1.0
    a *= 0.5
    a *= high - low
    a += low
    return a


# walkers a raw process steps together with one batched forward: of 1, 4 and 8, timed in one
# process on the benchmark's BipedalWalker-v3 waves (`--raw-widths`), 4 is the fastest
RAW_SLOTS = 4
RAW_WIDTHS = (1, 4, 8)


def stack_layers(layers: list[list[tuple[np.ndarray, np.ndarray]]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One-row `numpy_layers` of several policies, stacked into one batch (a row per policy)."""
    return [
        (np.concatenate([ls[i][0] for ls in layers]), np.concatenate([ls[i][1] for ls in layers]))
        for i in range(len(layers[0]))
    ]


def raw_slots(
    envs: list[list[gym.Env]],
    episodes: list[Episode],
    layers: list[list[tuple[np.ndarray, np.ndarray]]],
    low: np.ndarray,
    high: np.ndarray,
    max_steps: int,
    renew: Callable[[gym.Env], Any] | None,
    width: int = RAW_SLOTS,
) -> int:
    """A process's episodes through `width` reused gymnasium envs per env params (`envs[e][k]`),
    one batched numpy forward per step; when an episode ends, the next starts in its slot at once.
    Returns the steps taken.

    `renew` (the family's, where it has one) readies an env so that its next episode is exactly a
    new env's, the one the pool runs. Steps go to the env itself, past the TimeLimit and
    OrderEnforcing that gym.make puts around it (they only count steps and check that reset came
    first; the benchmark's envs have no other wrapper), with the time limit applied here.
    """
    todo = episodes[::-1]
    obs = np.zeros((min(width, len(episodes)), envs[0][0].observation_space.shape[0]), np.float32)
    slots: list[list[Any]] = []  # per slot: [env's own step, policy index, steps left, return]
    steps = 0

    def start(k: int) -> None:
        p, e, seed = todo.pop()
        env = envs[e][k]
        if renew is not None:
            renew(env)
        obs[k] = env.reset(seed=seed)[0]
        limit = env.spec.max_episode_steps if env.spec is not None else None
        slot = [env.unwrapped.step, p, min(max_steps, limit or max_steps), 0.0]
        if k < len(slots):
            slots[k] = slot
        else:
            slots.append(slot)

    for k in range(len(obs)):
        start(k)
    batch = stack_layers([layers[slot[1]] for slot in slots])
    while slots:
        actions = numpy_forward(batch, obs, low, high)
        ended = []
        for k, slot in enumerate(slots):
            o, reward, terminated, truncated, _ = slot[0](actions[k])
            obs[k] = o
            slot[3] += float(reward)  # the return is what an evaluation is for: plain code sums it too
            slot[2] -= 1
            steps += 1
            if terminated or truncated or not slot[2]:
                ended.append(k)
        if ended:
            for k in reversed(ended):  # from the back, so that removing a slot moves no other ended one
                if todo:
                    start(k)
                else:
                    del slots[k]
                    obs = np.delete(obs, k, axis=0)
            if slots:
                batch = stack_layers([layers[slot[1]] for slot in slots])
    return steps


def raw_walkers(setup: Setup, copies: int) -> Callable[..., int]:
    """Plain code for a gymnasium family: `run(episodes, width=RAW_SLOTS)` steps them with
    `raw_slots` on envs built once here (`copies` per env params, reused from call to call),
    with the weights `setup.policies` holds at the call."""
    low, high = action_bounds(setup.spec)
    envs = [[setup.family.make_env(p) for _ in range(copies)] for p in setup.envs]
    sources = list(setup.policies)
    layers = [numpy_layers(setup.spec, w) for w in sources]
    renew = getattr(setup.family, "renew", None)

    def run(episodes: list[Episode], width: int = RAW_SLOTS) -> int:
        for p, w in enumerate(setup.policies):  # weights sent since (plain code on Ray): their layers anew
            if w is not sources[p]:
                sources[p], layers[p] = w, numpy_layers(setup.spec, w)
        return raw_slots(envs, episodes, layers, low, high, setup.max_steps, renew, width)

    return run


def raw_batch(setup: Setup, episodes: list[Episode], low: np.ndarray, high: np.ndarray, core: str = "compiled") -> int:
    """All `episodes` in one batch (`raw_rows`); returns the steps taken."""
    used = sorted({p for p, _, _ in episodes})  # each policy's weights once, rows read them by index
    position = {p: k for k, p in enumerate(used)}
    return raw_rows(
        setup.family,
        setup.spec,
        [setup.envs[e] for _, e, _ in episodes],
        [s for _, _, s in episodes],
        np.stack([setup.policies[p] for p in used]),
        np.full(len(episodes), setup.max_steps),
        core,
        np.array([position[p] for p, _, _ in episodes]),
    )


@numba.njit(cache=True)
def tally(
    rewards: np.ndarray,
    obs: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    caps: np.ndarray,
    returns: np.ndarray,
    lengths: np.ndarray,
    done: np.ndarray,
    bad: np.ndarray,
) -> bool:
    """Add one lock-step to every row not yet done; returns whether all rows are done.

    A row ends at termination, truncation, its step cap or a non-finite reward or observation
    (then it is `bad` and that step's reward is not added)."""
    all_done = True
    for r in range(returns.size):
        if done[r]:
            continue
        finite = np.isfinite(rewards[r])
        for k in range(obs.shape[1]):
            finite = finite and np.isfinite(obs[r, k])
        if finite:
            returns[r] += rewards[r]
        else:
            bad[r] = True
        lengths[r] += 1
        done[r] = terminated[r] or truncated[r] or lengths[r] >= caps[r] or not finite
        all_done = all_done and done[r]
    return all_done


def raw_rows(
    family: Any,
    spec: PolicySpec,
    params: list[EnvParams],
    seeds: list[int],
    flats: np.ndarray,
    caps: np.ndarray,
    core: str = "compiled",
    index: np.ndarray | None = None,
) -> int:
    """Episodes (one row per params, seed and step cap; row r runs weights `flats[index[r]]`,
    by default `flats[r]`) in one batch, as plain code runs them; returns the steps taken. `core`:

    - "compiled": the family's row kernel as the pool runs it: rows each to its end in turn
      in one compiled call with the compiled forward (`row_loop._step_kernel`);
    - "lockstep" (terrain): the same physics and forward in lock-step on the family's
      `make_batch`, three compiled calls per step (forward, step, `tally`);
    - "numpy": the numpy core the terrain family had before it was compiled (frozen in
      tests/test_terrain_core.py) with a batched numpy forward, finished rows dropped as the
      loop goes: the previous limit.
    """
    n, caps = len(params), np.asarray(caps, dtype=np.int64)
    done, lengths, returns = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n)
    if core == "compiled":
        policy = BatchedPolicy(spec, flats, index)
        _, lengths, _ = _step_kernel(family.row_kernel(), Rows(list(params), list(seeds), caps, policy), None)
        return int(lengths.sum())
    if core == "lockstep":
        env, policy = family.make_batch(params, seeds, int(caps.max())), BatchedPolicy(spec, flats, index)
        obs, bad, all_done = env.reset(), np.zeros(n, dtype=bool), False
        while not all_done:
            obs, rew, term, trunc = env.step(policy.act(obs, done))
            all_done = tally(rew, obs, term, trunc, caps, returns, lengths, done, bad)
        return int(lengths.sum())
    from test_terrain_core import FrozenNumpyCore

    low, high = action_bounds(spec)
    env = FrozenNumpyCore([family.course(p, s) for p, s in zip(params, seeds)], int(caps.max()))
    flats = flats if index is None else flats[index]  # the numpy forward reads a weights row per row
    layers, obs, rows = numpy_layers(spec, flats), env.reset(), np.arange(n)
    while not done.all():
        live = ~done
        if rows.size == n:
            actions = numpy_forward(layers, obs, low, high)
        else:
            actions = np.zeros((n, spec.act_dim), dtype=np.float32)
            actions[rows] = numpy_forward(layers, obs[rows], low, high)
        if np.count_nonzero(live) <= 0.75 * rows.size:  # drop finished rows from the forward
            keep = np.flatnonzero(live[rows])
            rows, layers = rows[keep], [(w[keep], b[keep]) for w, b in layers]
        obs, rew, term, trunc = env.step(actions)
        returns += rew * live
        lengths += live
        done |= live & (term | trunc | (lengths >= caps))
    return int(lengths.sum())


def action_bounds(spec: PolicySpec) -> tuple[np.ndarray, np.ndarray]:
    """The action box as float32 arrays."""
    return np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)


# ====================================================================== CPU accounting
def _tree_jiffies(root: int) -> int:
    """utime + stime (+ reaped children) of `root` and all its live descendants."""
    stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, jiffies)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total


def _machine_busy_jiffies() -> int:
    """Busy CPU time of the whole machine (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    return sum(values) - values[3] - values[4]  # minus idle and iowait


class CpuWatch:
    """Average cores busy in this script's process tree and in the rest of the machine over a span."""

    HZ = os.sysconf("SC_CLK_TCK")

    def __init__(self) -> None:
        self.t0, self.own0, self.all0 = time.monotonic(), _tree_jiffies(os.getpid()), _machine_busy_jiffies()

    def stop(self) -> dict[str, float]:
        seconds = time.monotonic() - self.t0
        own = (_tree_jiffies(os.getpid()) - self.own0) / self.HZ
        everything = (_machine_busy_jiffies() - self.all0) / self.HZ
        return {"script_cores": round(own / seconds, 3), "other_cores": round(max(0.0, everything - own) / seconds, 3)}


SETTLE_MAX_WAIT = {"seconds": 10.0}  # `--quick` (a smoke run, its numbers meaningless) waits for nothing


def settle(window: float = 0.5, quiet_cores: float = 0.15) -> dict[str, float]:
    """Wait until the machine is quiet (Ray start-up, process exits, ...) before a measurement.

    Quiet means fewer than `quiet_cores` busy over `window` seconds; gives up after
    `SETTLE_MAX_WAIT` seconds (other programs may keep it busy) and says how busy it was.
    """
    max_wait = SETTLE_MAX_WAIT["seconds"]
    if max_wait <= 0:
        return {"settle_s": 0.0, "busy_before_cores": 0.0}
    t0 = time.monotonic()
    while True:
        busy0 = _machine_busy_jiffies()
        time.sleep(window)
        busy = (_machine_busy_jiffies() - busy0) / CpuWatch.HZ / window
        if busy < quiet_cores or time.monotonic() - t0 > max_wait:
            return {"settle_s": round(time.monotonic() - t0, 2), "busy_before_cores": round(busy, 3)}


# ============================================================================ measures
@dataclass
class Measurement:
    """One timed run of one way."""

    steps: int
    seconds: float
    steps_per_s: float
    cpu: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)


def plain_runner(setup: Setup, core: str = "compiled") -> Callable[[list[Episode]], int]:
    """The limit's plain code for `setup`: episodes in -> env steps taken. One `raw_batch` batch
    with `core` for a batched family, else RAW_SLOTS reused gymnasium envs at a time."""
    if not hasattr(setup.family, "row_kernel"):
        return raw_walkers(setup, RAW_SLOTS)
    low, high = action_bounds(setup.spec)
    return lambda episodes: raw_batch(setup, episodes, low, high, core)


def raw_process(
    setup: Setup,
    warmup: list[Episode],
    waves: list[list[Episode]],
    barrier: Any,
    results: Any,
    release: Any,
    core: str = "compiled",
) -> None:
    """Body of one raw process: its share of a warm-up wave, wait for the others, its share of every
    timed wave, report, wait to exit."""
    run = plain_runner(setup, core)
    run(warmup)  # not counted
    barrier.wait()
    t0, cpu0, steps, wave_seconds = time.monotonic(), time.process_time(), 0, []
    for episodes in waves:
        start = time.monotonic()
        steps += run(episodes)
        wave_seconds.append(time.monotonic() - start)
    results.put((steps, t0, time.monotonic(), time.process_time() - cpu0, wave_seconds))
    release.wait()  # exit (interpreter teardown) only after the parent has read the CPU counters


def compare_raw_widths(name: str, sizes: Sizes, log: Callable[[str], None]) -> dict[str, Any]:
    """Steps/s of `raw_slots` in one process with each of RAW_WIDTHS slots, interleaved over the
    repetitions (median): which width the raw processes use. Returns the JSON entry."""
    setup = make_setup(name, sizes)
    walkers = raw_walkers(setup, max(RAW_WIDTHS))
    walkers(matrix_episodes(setup, 0))  # warm-up
    rates: dict[int, list[float]] = {w: [] for w in RAW_WIDTHS}
    for rep in range(sizes.repeats):
        waves = [matrix_episodes(setup, 10**6 * (rep + 1) + 10**4 * wave) for wave in range(sizes.waves)]
        for width in RAW_WIDTHS:
            t0 = time.perf_counter()
            steps = sum(walkers(wave, width) for wave in waves)
            rates[width].append(steps / (time.perf_counter() - t0))
    median = {w: round(statistics.median(r)) for w, r in rates.items()}
    log(
        f"{name}: raw steps/s in one process by slots stepped together (median of {sizes.repeats}): "
        + ", ".join(f"{w}: {r:,}" for w, r in median.items())
    )
    return {"steps_per_s_by_width": median, "per_repeat": {w: [round(x) for x in r] for w, r in rates.items()}}


def measure_raw(
    setup: Setup, warmup: list[Episode], waves: list[list[Episode]], workers: int, core: str = "compiled"
) -> Measurement:
    """W spawned processes, each wave's episodes dealt round-robin (an equal share each); steps/s summed over processes."""
    ctx = mp.get_context("spawn")
    barrier, results, release = ctx.Barrier(workers + 1), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(
            target=raw_process,
            args=(setup, warmup[i::workers], [w[i::workers] for w in waves], barrier, results, release, core),
        )
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    quiet = settle()  # the processes are warm and blocked on the barrier
    barrier.wait()  # the clock starts now
    watch = CpuWatch()
    reports = [results.get() for _ in procs]
    cpu = watch.stop()
    release.set()
    for proc in procs:
        proc.join()
    steps = sum(r[0] for r in reports)
    wall = max(r[2] for r in reports) - min(r[1] for r in reports)
    rate = sum(r[0] / (r[2] - r[1]) for r in reports)
    rollout_cores = sum(r[3] for r in reports) / wall
    cpu["background_cores"] = round(max(0.0, cpu["script_cores"] - rollout_cores), 3)  # driver, queues
    # ES needs a whole wave before the next: plain code that waits for it spends, per wave, the
    # time of the process that took longest (not counting the cost of a barrier itself)
    synced = sum(max(per_wave) for per_wave in zip(*(r[4] for r in reports)))
    return Measurement(
        steps, wall, rate, cpu | quiet, {"wall_steps_per_s": steps / wall, "synced_steps_per_s": steps / synced}
    )


# ====================================================== the engine alone (no policy)
ENGINE_ACTIONS = 997  # actions drawn once and cycled through: the engine alone, without a policy


def engine_actions(spec: PolicySpec) -> np.ndarray:
    """Uniform random actions over the action box, float32 (the same every run)."""
    low, high = action_bounds(spec)
    return np.random.default_rng(0).uniform(low, high, size=(ENGINE_ACTIONS, low.size)).astype(np.float32)


@numba.njit(cache=True)
def _engine_rows(
    table: np.ndarray,
    bases: np.ndarray,
    max_cell: int,
    course_length: float,
    progress_scale: float,
    caps: np.ndarray,
    actions: np.ndarray,
) -> int:
    """Terrain rows each to its end with actions from `actions` instead of a policy: the
    physics and the observation of the terrain row kernel, nothing else. Returns the steps taken."""
    obs = np.empty(terrain_core.OBS_DIM, dtype=np.float32)
    state = np.empty(4)
    steps = 0
    for r in range(bases.size):
        base = bases[r]
        state[:] = 0.0
        grounded, cell = True, 0
        terrain_core.observe_row(table, base, state, grounded, cell, obs)
        for _ in range(caps[r]):
            a = actions[steps % actions.shape[0]]
            _, fell, finished, cell, grounded = terrain_core.step_row(
                table,
                base,
                max_cell,
                course_length,
                progress_scale,
                np.float64(a[0]),
                np.float64(a[1]),
                state,
                grounded,
                cell,
            )
            terrain_core.observe_row(table, base, state, grounded, cell, obs)
            steps += 1
            if fell or finished:
                break
    return steps


def engine_runner(setup: Setup) -> Callable[[list[Episode]], int]:
    """Episodes in -> env steps taken, stepping the engine with `engine_actions` (no policy):
    terrain rows through `_engine_rows` on the batch the family builds (so a fresh course per
    episode is built here too), a gymnasium env one episode at a time on envs built once and
    renewed as the pool renews them."""
    actions = engine_actions(setup.spec)
    if hasattr(setup.family, "row_kernel"):

        def run_batch(episodes: list[Episode]) -> int:
            env = setup.family.make_batch([setup.envs[e] for _, e, _ in episodes], [s for _, _, s in episodes], 1)
            caps = np.full(len(episodes), setup.max_steps, dtype=np.int64)
            course = env.table, env.bases, env.max_cell, env.course_length, env.progress_scale
            return _engine_rows(*course, caps, actions)

        return run_batch
    envs = [setup.family.make_env(p) for p in setup.envs]
    renew = getattr(setup.family, "renew", None)

    def run_envs(episodes: list[Episode]) -> int:
        steps = 0
        for _, e, seed in episodes:
            env = envs[e]
            if renew is not None:
                renew(env)
            env.reset(seed=seed)
            step, limit = env.unwrapped.step, env.spec.max_episode_steps if env.spec is not None else None
            for _ in range(min(setup.max_steps, limit or setup.max_steps)):
                _, _, terminated, truncated, _ = step(actions[steps % ENGINE_ACTIONS])
                steps += 1
                if terminated or truncated:
                    break
        return steps

    return run_envs


def measure_engine(setup: Setup, warmup: list[Episode], waves: list[list[Episode]]) -> Measurement:
    """The engine alone in this process (one core): steps/s over the waves, after a warm-up wave."""
    run = engine_runner(setup)
    run(warmup)
    quiet = settle()
    watch, t0 = CpuWatch(), time.perf_counter()
    steps = sum(run(wave) for wave in waves)
    seconds = time.perf_counter() - t0
    return Measurement(steps, seconds, steps / seconds, watch.stop() | quiet)


class PlainRayWorker:
    """The raw processes' plain code in a Ray actor. It gets the matrix (weights and envs) when
    it is made; a call carries its share of a wave's episodes, as (policy, env, seed), and,
    where asked, the weights of the policies they use (`used`) as float32 bytes."""

    def __init__(self, setup: Setup):
        self.setup = setup
        self.plain = plain_runner(setup)

    def run(self, episodes: list[Episode], used: Sequence[int] = (), *weights: bytes) -> int:
        """Steps taken running `episodes`, after taking the weights sent for the `used` policies."""
        if used:
            rows = np.frombuffer(b"".join(weights), dtype=np.float32).reshape(len(used), -1)
            for p, row in zip(used, rows):
                self.setup.policies[p] = row
        return self.plain(episodes)


def deal_by_length(episodes: list[Episode], length: dict[tuple[int, int], int], workers: int) -> list[list[Episode]]:
    """`episodes` in `workers` shares of nearly equal steps: longest first, each to the share
    with the fewest steps so far, an episode's steps taken as its (policy, env)'s `length`."""
    shares: list[list[Episode]] = [[] for _ in range(workers)]
    load = [0] * workers
    for episode in sorted(episodes, key=lambda ep: -length[ep[0], ep[1]]):
        k = load.index(min(load))
        shares[k].append(episode)
        load[k] += length[episode[0], episode[1]]
    return shares


def measure_raw_ray(
    setup: Setup, warmup: list[Episode], waves: list[list[Episode]], workers: int, send_weights: bool
) -> Measurement:
    """The raw processes' work on W plain Ray actors, one call per actor per wave, the next wave
    sent when all are back, with no framework code, each wave dealt in shares of equal steps by
    each (policy, env)'s episode length in the warm-up wave, run here first (exact for pinned
    courses, whose episodes repeat). `send_weights`: each call also carries the weights of its
    share's policies as float32 bytes in parts under Ray's 100 KB inline limit, as a run must
    send new weights every wave (the same work as the pool); else nothing but the episodes
    travels (Ray's floor)."""
    import ray

    run = plain_runner(setup)
    length = {(p, e): run([(p, e, seed)]) for p, e, seed in warmup}
    shares = [deal_by_length(episodes, length, workers) for episodes in waves]
    actors = [ray.remote(num_cpus=1)(PlainRayWorker).remote(setup) for _ in range(workers)]

    def call(actor: Any, share: list[Episode]) -> Any:
        if not send_weights:
            return actor.run.remote(share)
        used = sorted({p for p, _, _ in share})
        data = np.stack([setup.policies[p] for p in used]).tobytes()
        # parts the size the pool sends: each under Ray's limit for an argument sent inline
        parts = [data[i : i + INLINE_PART_BYTES] for i in range(0, len(data), INLINE_PART_BYTES)]
        return actor.run.remote(share, used, *parts)

    def wave(parts: list[list[Episode]]) -> int:
        return sum(ray.get([call(actor, part) for actor, part in zip(actors, parts)]))

    try:
        wave(deal_by_length(warmup, length, workers))  # not counted: loads the kernels, builds the envs
        quiet = settle()
        watch = CpuWatch()
        t0 = time.perf_counter()
        steps = sum(wave(parts) for parts in shares)
        seconds = time.perf_counter() - t0
        return Measurement(steps, seconds, steps / seconds, watch.stop() | quiet)
    finally:
        for actor in actors:
            ray.kill(actor)


def open_pool(setup: Setup, workers: int) -> RayEvaluator:
    """A pool warmed up by one short wave (imports, first torch calls, env construction). No
    wave runs wholly in the driver (`local_wave_steps=0`): this page measures the workers'
    transport, and a warm-up wave run in the driver would leave them cold. On this one machine
    the driver takes one worker's share of each wave, as the pool does by default there."""
    pool = RayEvaluator(setup.family, setup.spec, noise=None, workers=workers, local_wave_steps=0)
    refs = [pool.put(w) for w in setup.policies]
    pairs = [(ref, env) for ref in refs for env in setup.envs]
    warm = [EvalRequest(ref, env, 1, 10**8 + i, min(50, setup.max_steps)) for i, (ref, env) in enumerate(pairs)]
    check(pool.evaluate(warm))
    pool.release(refs)
    return pool


def check(results: Sequence[Any]) -> None:
    """Fail loudly if any request came back with an error."""
    bad = [r.error.describe() for r in results if r.error is not None]
    if bad:
        raise RuntimeError(f"{len(bad)} evaluation errors, first: {bad[0]}")


def measure_pool(setup: Setup, warmup_base: int, seed_bases: list[int], workers: int) -> Measurement:
    """`evaluate` of one wave per seed base, back to back, on a freshly warmed pool that has run
    one wave of the same shape (as the raw processes have): what it measures from a wave
    (step rates, episode lengths per env) it has learnt, as it has in a run after one iteration."""
    pool = open_pool(setup, workers)
    try:
        refs = [pool.put(w) for w in setup.policies]
        check(pool.evaluate(matrix_requests(setup, refs, warmup_base)))  # not counted
        waves = [matrix_requests(setup, refs, base) for base in seed_bases]
        quiet = settle()
        watch = CpuWatch()
        t0 = time.perf_counter()
        results = [pool.evaluate(requests) for requests in waves]
        seconds = time.perf_counter() - t0
        cpu = watch.stop()
        for wave in results:
            check(wave)
        steps = sum(simulated_steps(requests, wave) for requests, wave in zip(waves, results))
        return Measurement(steps, seconds, steps / seconds, cpu | quiet)
    finally:
        pool.close()


def naive_episode(
    family: Any, spec: PolicySpec, weights: np.ndarray, params: EnvParams, seed: int, max_steps: int
) -> tuple[float, int]:
    """The user's pattern: a task that rebuilds the policy and the env, then runs one episode."""
    torch.set_num_threads(1)
    policy = MLPPolicy(spec)
    policy.load_flat(weights)
    env = family.make_env(params)
    try:
        return run_episode(env, policy, *action_bounds(spec), seed, max_steps)
    finally:
        env.close()


def submit_naive(setup: Setup, episodes: list[Episode]) -> list[tuple[float, int]]:
    """All episodes as tasks at once, weights by value (numpy arguments, not object refs)."""
    import ray

    task = ray.remote(num_cpus=1)(naive_episode)
    refs = [
        task.remote(setup.family, setup.spec, setup.policies[p], setup.envs[e], seed, setup.max_steps)
        for p, e, seed in episodes
    ]
    return ray.get(refs)


def measure_naive(setup: Setup, episodes: list[Episode], workers: int) -> Measurement:
    """Warm the task workers with a few tasks, then time all episodes."""
    submit_naive(setup, [(0, 0, 10**8 + i) for i in range(2 * workers)])
    quiet = settle()
    watch = CpuWatch()
    t0 = time.perf_counter()
    out = submit_naive(setup, episodes)
    seconds = time.perf_counter() - t0
    steps = sum(length for _, length in out)
    return Measurement(steps, seconds, steps / seconds, watch.stop() | quiet)


def evotorch_applies(setup: Setup) -> bool:
    """EvoTorch (the `bench` extra) is installed and the env is gymnasium's BipedalWalker-v3."""
    try:
        import evotorch  # noqa: F401
    except ImportError:
        return False
    return isinstance(setup.family, BipedalFamily)


def measure_evotorch(setup: Setup, waves: int, workers: int) -> Measurement:
    """EvoTorch on the same work: GymNE on BipedalWalker-v3 with the same network, step cap and
    workers (Ray actors), PGPE with the same population sampling the same weight distribution
    (stdev 0.1 around 0, learning rates ~0 so it stays put); `waves` generations timed after a
    warm-up one. Its episodes start on random courses (GymNE draws reset seeds)."""
    import logging

    from evotorch.algorithms import PGPE
    from evotorch.neuroevolution import GymNE

    logging.getLogger("evotorch").setLevel(logging.WARNING)
    problem = GymNE(
        env="BipedalWalker-v3",
        network=EVOTORCH_NETWORK,
        num_actors=workers,
        episode_length=setup.max_steps,
        initial_bounds=(-1e-5, 1e-5),
    )
    search = PGPE(
        problem, popsize=len(setup.policies), center_learning_rate=1e-9, stdev_learning_rate=1e-9, stdev_init=0.1
    )
    search.step()  # warm-up: actors, envs
    quiet = settle()
    watch = CpuWatch()
    steps0 = problem.status["total_interaction_count"]
    t0 = time.perf_counter()
    for _ in range(waves):
        search.step()
    seconds = time.perf_counter() - t0
    steps = int(problem.status["total_interaction_count"] - steps0)
    problem.kill_actors()
    return Measurement(steps, seconds, steps / seconds, watch.stop() | quiet)


# ================================================================================ memory
def memory_wave(
    pool: RayEvaluator, setup: Setup, sizes: Sizes, distinct: int, seed_base: int
) -> list[dict[str, float]]:
    """`memory_requests` one-episode requests on the first env, cycling over `distinct` fresh
    policies; weights are released afterwards. Returns each worker's memory after the wave."""
    refs = [pool.put(w) for w in random_policies(setup.spec, distinct, seed=seed_base)]
    requests = [
        EvalRequest(refs[i % distinct], setup.envs[0], 1, seed_base + i, sizes.memory_max_steps)
        for i in range(sizes.memory_requests)
    ]
    check(pool.evaluate(requests))
    pool.release(refs)
    return worker_memory(pool)


def measure_memory(setup: Setup, sizes: Sizes, workers: int) -> dict[str, Any]:
    """Worker RSS after waves that differ only in the number of distinct policies (10 vs 1000)."""
    few, many = sizes.memory_policies
    pool = open_pool(setup, workers)
    try:
        memory_wave(pool, setup, sizes, few, 2 * 10**6)  # warm-up: steady state for this wave shape
        after_few = memory_wave(pool, setup, sizes, few, 3 * 10**6)
        after_many = memory_wave(pool, setup, sizes, many, 4 * 10**6)
        after_many_again = memory_wave(pool, setup, sizes, many, 5 * 10**6)
    finally:
        pool.close()
    rss_few, rss_many = [m["rss_mb"] for m in after_few], [m["rss_mb"] for m in after_many]
    return {
        "worker_rss_mb_10": round(max(rss_few), 1),
        "worker_rss_mb_1000": round(max(rss_many), 1),
        "total_rss_mb_10": round(sum(rss_few), 1),
        "total_rss_mb_1000": round(sum(rss_many), 1),
        "worker_rss_mb_1000_second_wave": round(max(m["rss_mb"] for m in after_many_again), 1),
        "worker_peak_rss_mb_10": round(max(m["peak_rss_mb"] for m in after_few), 1),
        "worker_peak_rss_mb_1000": round(max(m["peak_rss_mb"] for m in after_many), 1),
        "rss_growth_1000_vs_10": round(max(rss_many) / max(rss_few) - 1.0, 4),
        "memory_waves": {
            "rows": sizes.memory_requests,
            "policies": [few, many],
            "max_steps": sizes.memory_max_steps,
            "per_worker_after_10": after_few,
            "per_worker_after_1000": after_many,
            "per_worker_after_1000_second_wave": after_many_again,
        },
    }


def worker_memory(pool: RayEvaluator) -> list[dict[str, float]]:
    """`worker_memory()` plus the anonymous / shared split of RSS from /proc (same node)."""
    out = []
    for mem, pid in zip(pool.worker_memory(), pool.worker_pids()):
        split = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                        key, kb = line.split()[:2]
                        split[key[:-1].lower() + "_mb"] = round(int(kb) / 1024, 1)
        except OSError:
            pass
        out.append({k: round(v, 1) for k, v in mem.items()} | split)
    return out


# =============================================================================== driver
@contextmanager
def ray_session(workers: int) -> Iterator[None]:
    """A private, quiet Ray instance with W CPUs, shut down afterwards so raw runs beside no Ray at all."""
    import ray

    # address="local": always a new instance, never one found through RAY_ADDRESS.
    ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def benchmark_env(name: str, sizes: Sizes, workers: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Interleaved raw / pool / naive repetitions, then memory; returns the env's JSON entry."""
    setup = make_setup(name, sizes)
    n_waves = sizes.waves_for(name)
    runs: dict[str, list[Measurement]] = {
        "engine": [],
        "raw": [],
        "raw_ray": [],
        "raw_ray_weights": [],
        "pool": [],
        "naive": [],
    }
    # the compiled family on fixed courses: also the numpy core it replaced (the previous
    # limit) and the same kernels in lock-step
    extra_cores = ["numpy", "lockstep"] if name == "terrain" else []
    for core in extra_cores:
        runs[f"raw_{core}"] = []
    if evotorch_applies(setup):
        runs["evotorch"] = []
    for rep in range(sizes.repeats):
        # fresh episodes every wave and repetition
        seed_bases = [10**6 * (rep + 1) + 10**4 * wave for wave in range(n_waves)]
        waves = [matrix_episodes(setup, base) for base in seed_bases]
        warmup_base = 10**6 * (rep + 1) + 10**4 * n_waves  # one wave beyond the timed ones
        runs["engine"].append(measure_engine(setup, matrix_episodes(setup, warmup_base), waves))  # one core
        runs["raw"].append(measure_raw(setup, matrix_episodes(setup, warmup_base), waves, workers))  # no Ray running
        for core in extra_cores:
            runs[f"raw_{core}"].append(measure_raw(setup, matrix_episodes(setup, warmup_base), waves, workers, core))
        with ray_session(workers):
            for way, send in (("raw_ray", False), ("raw_ray_weights", True)):
                runs[way].append(measure_raw_ray(setup, matrix_episodes(setup, warmup_base), waves, workers, send))
            runs["pool"].append(measure_pool(setup, warmup_base, seed_bases, workers))
            runs["naive"].append(measure_naive(setup, waves[0], workers))  # one wave: it is slow
            if "evotorch" in runs:
                runs["evotorch"].append(measure_evotorch(setup, n_waves, workers))
        log(
            f"  [{name} rep {rep + 1}/{sizes.repeats}] "
            + "  ".join(
                f"{way} {ms[-1].steps_per_s:,.0f} steps/s ({ms[-1].steps} steps, {ms[-1].seconds:.1f}s, "
                f"other load {ms[-1].cpu['other_cores']:.2f} cores)"
                for way, ms in runs.items()
            )
        )
    median = {way: statistics.median(m.steps_per_s for m in ms) for way, ms in runs.items()}
    # Steps per CPU-second of the whole process tree: less sensitive to other programs' load.
    per_cpu = {
        way: statistics.median(m.steps / max(1e-9, m.cpu["script_cores"] * m.seconds) for m in ms)
        for way, ms in runs.items()
    }
    entry = {
        # the three rates peers publish: the engine alone and plain code's rollouts per core,
        # and the pool's rate (over all workers)
        "engine_steps_per_s_per_core": round(median["engine"], 1),
        "rollout_steps_per_s_per_core": round(median["raw"] / workers, 1),
        "raw_steps_per_s": round(median["raw"], 1),
        "pool_steps_per_s": round(median["pool"], 1),
        "naive_steps_per_s": round(median["naive"], 1),
        "efficiency": round(median["pool"] / median["raw"], 3),
        # raw waiting for every wave to end before the next, as an ES loop must (supplementary)
        "raw_synced_steps_per_s": round(statistics.median(m.extra["synced_steps_per_s"] for m in runs["raw"]), 1),
        # the same plain code on Ray actors, a call per worker per wave: with nothing but the
        # episodes travelling (Ray's floor), and with the weights sent as a run must send them
        "raw_ray_steps_per_s": round(median["raw_ray"], 1),
        "raw_ray_vs_raw": round(median["raw_ray"] / median["raw"], 3),
        "pool_vs_raw_ray": round(median["pool"] / median["raw_ray"], 3),
        "raw_ray_weights_steps_per_s": round(median["raw_ray_weights"], 1),
        "raw_ray_weights_vs_raw": round(median["raw_ray_weights"] / median["raw"], 3),
        "pool_vs_raw_ray_weights": round(median["pool"] / median["raw_ray_weights"], 3),
        "speedup_vs_naive": round(median["pool"] / median["naive"], 3),
        "efficiency_per_repeat": [round(p.steps_per_s / r.steps_per_s, 3) for p, r in zip(runs["pool"], runs["raw"])],
        "speedup_vs_naive_per_repeat": [
            round(p.steps_per_s / n.steps_per_s, 3) for p, n in zip(runs["pool"], runs["naive"])
        ],
        **(
            {
                "evotorch_steps_per_s": round(median["evotorch"], 1),
                "evotorch_share_of_raw": round(median["evotorch"] / median["raw"], 3),
                "pool_vs_evotorch": round(median["pool"] / median["evotorch"], 3),
            }
            if "evotorch" in median
            else {}
        ),
        **{f"raw_{core}_steps_per_s": round(median[f"raw_{core}"], 1) for core in extra_cores},
        **(
            {
                "pool_vs_raw_numpy": round(median["pool"] / median["raw_numpy"], 3),
                "raw_vs_raw_numpy": round(median["raw"] / median["raw_numpy"], 3),
                "raw_vs_raw_lockstep": round(median["raw"] / median["raw_lockstep"], 3),
            }
            if extra_cores
            else {}
        ),
        "steps_per_cpu_s": {way: round(v, 1) for way, v in per_cpu.items()},
        "cpu_efficiency": round(per_cpu["pool"] / per_cpu["raw"], 3),
        "max_other_load_cores": max(m.cpu["other_cores"] for ms in runs.values() for m in ms),
    }
    log(f"  [{name}] memory waves ...")
    with ray_session(workers):
        entry |= measure_memory(setup, sizes, workers)
    entry |= {
        "matrix": {
            "policies": len(setup.policies),
            "envs": len(setup.envs),
            "episodes": setup.episodes,
            "waves_per_timed_span": n_waves,
            "max_steps": setup.max_steps,
            "policy_params": setup.spec.num_params,
            "env_params": [p.values for p in setup.envs],
        },
        "runs": {way: [asdict(m) for m in ms] for way, ms in runs.items()},
    }
    return entry


def machine_info(workers: int) -> dict[str, Any]:
    """What the numbers were measured on."""
    import ray

    model = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?"
    )
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "load_average_at_start": os.getloadavg(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "torch": torch.__version__,
        "ray": ray.__version__,
        "gymnasium": gym.__version__,
        "workers": workers,
    }


def print_table(results: dict[str, dict[str, Any]], quick: bool) -> None:
    """One row per env, then the targets."""
    cols = [
        ("env", "{}"),
        ("engine/core", "{:,.0f}"),
        ("rollout/core", "{:,.0f}"),
        ("raw", "{:,.0f}"),
        ("pool", "{:,.0f}"),
        ("naive", "{:,.0f}"),
        ("efficiency", "{:.2f}"),
        ("vs_naive", "{:.1f}x"),
        ("rss_10", "{:.0f}"),
        ("rss_1000", "{:.0f}"),
        ("total_10", "{:.0f}"),
        ("total_1000", "{:.0f}"),
    ]
    keys = [
        "engine_steps_per_s_per_core",
        "rollout_steps_per_s_per_core",
        "raw_steps_per_s",
        "pool_steps_per_s",
        "naive_steps_per_s",
        "efficiency",
        "speedup_vs_naive",
        "worker_rss_mb_10",
        "worker_rss_mb_1000",
        "total_rss_mb_10",
        "total_rss_mb_1000",
    ]
    rows = [[name] + [fmt.format(r[k]) for (_, fmt), k in zip(cols[1:], keys)] for name, r in results.items()]
    widths = [max(len(c[0]), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    print(
        "steps/s (median over repeats): the engine alone and plain code's rollouts per core, then over all "
        "workers; RSS in MB: max over workers (rss_*) and sum over workers (total_*)"
    )
    print("  ".join(c[0].rjust(w) for c, w in zip(cols, widths)))
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    for name, r in results.items():
        target = TARGETS["efficiency"].get(name, 0.9)
        marks = [
            f"pool / raw limit {r['efficiency']:.2f} {'>=' if r['efficiency'] >= target else '<'} {target}",
            f"rss growth {100 * r['rss_growth_1000_vs_10']:+.1f}% (target within "
            f"{100 * TARGETS['rss_growth_1000_vs_10']:.0f}%)",
        ]
        marks.append(
            f"raw waiting for each wave {r['raw_synced_steps_per_s']:,.0f} steps/s "
            f"(pool / that {r['pool_steps_per_s'] / r['raw_synced_steps_per_s']:.2f})"
        )
        marks.append(
            f"plain code on Ray actors {r['raw_ray_steps_per_s']:,.0f} steps/s ({r['raw_ray_vs_raw']:.2f} of raw; "
            f"pool / that {r['pool_vs_raw_ray']:.2f}), sending the weights {r['raw_ray_weights_steps_per_s']:,.0f} "
            f"({r['raw_ray_weights_vs_raw']:.2f} of raw; pool / that {r['pool_vs_raw_ray_weights']:.2f})"
        )
        if "pool_vs_evotorch" in r:
            ok = r["pool_vs_evotorch"] >= TARGETS["pool_vs_evotorch"]
            marks.append(
                f"EvoTorch {r['evotorch_steps_per_s']:,.0f} steps/s ({r['evotorch_share_of_raw']:.2f} of raw), "
                f"pool / EvoTorch {r['pool_vs_evotorch']:.2f} {'>=' if ok else '<'} {TARGETS['pool_vs_evotorch']}"
            )
        if "pool_vs_raw_numpy" in r:
            ok = r["pool_vs_raw_numpy"] >= TARGETS["pool_vs_raw_numpy_terrain"]
            marks.append(
                f"raw with the numpy core {r['raw_numpy_steps_per_s']:,.0f} steps/s, pool / that "
                f"{r['pool_vs_raw_numpy']:.2f} {'>=' if ok else '<'} {TARGETS['pool_vs_raw_numpy_terrain']}; "
                f"the same kernels in lock-step {r['raw_lockstep_steps_per_s']:,.0f} steps/s "
                f"(raw / that {r['raw_vs_raw_lockstep']:.2f})"
            )
        if name == "terrain":
            ok = r["speedup_vs_naive"] >= TARGETS["speedup_vs_naive_terrain"]
            marks.append(
                f"vs naive {r['speedup_vs_naive']:.1f}x {'>=' if ok else '<'} "
                f"{TARGETS['speedup_vs_naive_terrain']:.0f}x"
            )
        print(f"{name}: " + "; ".join(marks))
    if quick:
        print("(--quick: smoke-test sizes; the targets are meant for full-size runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", default="terrain,terrain_fresh,bipedal")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument(
        "--raw-widths",
        action="store_true",
        help="only time the raw loop in one process with 1, 4 and 8 walkers stepped together",
    )
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repetitions (default 5, quick 1)")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="where to write the results (default benchmarks/results/eval_pool.json; "
        "a --quick run writes nothing unless asked, so a smoke run never replaces them)",
    )
    args = parser.parse_args()
    if args.json is None and not args.quick and not args.raw_widths:
        args.json = ROOT / "benchmarks" / "results" / "eval_pool.json"
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.quick:
        SETTLE_MAX_WAIT["seconds"] = 0.0
    if args.repeats:
        sizes.repeats = args.repeats
    t0 = time.perf_counter()
    log = functools.partial(print, flush=True)
    if args.raw_widths:
        widths = {name: compare_raw_widths(name, sizes, log) for name in ("bipedal", "bipedal_family")}
        if args.json is not None:
            args.json.write_text(json.dumps({"machine": machine_info(1), "raw_widths": widths}, indent=2))
            print(f"wrote {args.json}")
        return
    # the script's long-lived objects (torch, Ray, gymnasium) frozen, as `poet.run` freezes a
    # run's before its loop: a full collection then does not walk them inside a timed span
    gc.freeze()
    info = machine_info(args.workers)
    results = {}
    for name in [n.strip() for n in args.envs.split(",") if n.strip()]:
        log(f"{name} ...")
        results[name] = benchmark_env(name, sizes, args.workers, log)
    info["load_average_at_end"] = os.getloadavg()
    info["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print_table(results, args.quick)
    print(f"total wall time {info['wall_seconds']:.0f}s")
    if args.json is None:
        print("results not written (--quick without --json)")
        return
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"machine": info, "sizes": asdict(sizes), "targets": TARGETS, "envs": results}, indent=2, default=float
        )
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
