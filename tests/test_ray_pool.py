"""The Ray pool: same results as in-process whatever the workers and chunking, fault tolerance,
env errors, memory that does not grow with policies, and a 2-node cluster."""

from __future__ import annotations

import functools
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import ray
import ray.cloudpickle

import envs
import poet
from envs import EnvParams
from poet.analysis import load_run
from poet.errors import EvaluationFailed, WaveInterrupted
from poet.evaluation import EvalRequest, InProcessEvaluator, NoiseTable, Perturbation
from poet.evaluation.planning import Deadlines, EpisodeLengths
from poet.evaluation.ray_pool import RayEvaluator
from poet.policies import init_flat, spec_for_spaces
from poet.runtime import checkpoint
from poet.seeding import Seeds
from tests.conftest import ROOT

# Test-only classes travel to the workers by value (the workers cannot import tests/).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

TERRAIN = envs.make_family("terrain", {"course_length": 30.0})


def _setup(family, hidden=(16, 16), noise_size=200_000):
    env = family.make_env(family.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, hidden, "tanh")
    return spec, NoiseTable(Seeds(7).sequence("noise"), noise_size)


def _params(family, n, seed=0):
    rng = np.random.default_rng(seed)
    out = [family.initial()]
    while len(out) < n:
        out.append(family.mutate(out[-1], rng))
    return out


def _requests(ev, spec, params, n_policies=6, scale=3.0):
    """A mixed wave: plain and perturbed requests, different episode counts and step caps."""
    refs = [ev.put(init_flat(spec, np.random.default_rng(i)) * scale) for i in range(n_policies)]
    reqs = []
    for i, ref in enumerate(refs):
        for j, p in enumerate(params):
            reqs.append(EvalRequest(ref, p, 1 + (i + j) % 3, 1000 * i + j, 60 + 40 * (j % 3), tag=f"pol{i} env{j}"))
            reqs.append(EvalRequest(ref, p, 1, 77 + i, 150, Perturbation(13 * i + j, 0.1, 1 - 2 * (j % 2))))
    return reqs


def _same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.error is None) == (y.error is None)
        np.testing.assert_array_equal(x.returns, y.returns)
        np.testing.assert_array_equal(x.lengths, y.lengths)


@pytest.mark.parametrize("family_name,weights", [("terrain", "whole"), ("cartpole", "whole"), ("terrain", "in parts")])
def test_pool_equals_inprocess_whatever_workers_and_chunking(ray_local, family_name, weights, monkeypatch):
    if weights == "in parts":  # what chunks of many small policies do: two rows per part here
        monkeypatch.setattr("poet.evaluation.ray_pool.INLINE_PART_BYTES", 2 * _setup(TERRAIN)[0].num_params * 4)
    family = TERRAIN if family_name == "terrain" else envs.make_family("cartpole")
    spec, noise = _setup(family)
    params = _params(family, 4)
    ref_ev = InProcessEvaluator(family, spec, noise)
    expected = ref_ev.evaluate(_requests(ref_ev, spec, params))
    # chunks None: the pool's own plan, where the driver takes a worker's share (terrain)
    for workers, chunks, inflight in [(1, 1, 1), (2, 2, 2), (3, 7, 1), (2, None, 2), (1, None, 1), (3, None, 2)]:
        ev = RayEvaluator(
            family,
            spec,
            noise,
            workers=workers,
            chunks_per_worker=chunks,
            inflight_per_worker=inflight,
            local_wave_steps=0,
        )
        try:
            reqs = _requests(ev, spec, params)
            _same(ev.evaluate(reqs), expected)
            _same(ev.evaluate(list(reversed(reqs)))[::-1], expected)  # order of the wave changes nothing
        finally:
            ev.close()
    assert ray_local.is_initialized(), "closing a pool must not shut down a Ray it did not start"


@pytest.mark.parametrize("driver_share", [None, False])
def test_batched_waves_go_in_one_chunk_per_worker(ray_local, driver_share):
    """One chunk per worker; on one machine (the default there) the driver runs one of them."""
    spec, noise = _setup(TERRAIN)
    params = _params(TERRAIN, 4)
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, local_wave_steps=0, driver_share=driver_share)
    assert ev.driver_share is (driver_share is None)  # the test's Ray is one node
    chunk_counts = []
    original = ev._dispatch
    ev._dispatch = lambda units, *args: (chunk_counts.append(len(units)), original(units, *args))[1]
    try:
        refs = [ev.put(init_flat(spec, np.random.default_rng(i))) for i in range(8)]
        for wave, cap in enumerate([40, 120, 80, 160, 60, 140, 100, 100]):  # rows and lengths vary: a, b identified
            ev.evaluate(
                [
                    EvalRequest(ref, p, 1 + wave % 3, 100 * wave + i, cap)
                    for i, (ref, p) in enumerate((ref, p) for ref in refs for p in params)
                ]
            )
    finally:
        ev.close()
    sent = 1 if ev.driver_share else 2
    assert (chunk_counts, ev.driver_shares, ev.local_waves) == ([sent] * 8, 8 * (2 - sent), 0)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_drivers_share_answers_each_request_when_policies_interleave(ray_local, workers):
    """The plan lines a wave up by policy; the driver's share (the whole wave with one worker)
    must answer its requests in the plan's order, not the wave's."""
    spec, noise = _setup(TERRAIN)
    params = _params(TERRAIN, 3)

    def interleaved(ev):
        refs = [ev.put(init_flat(spec, np.random.default_rng(i)) * 3.0) for i in range(3)]
        return [EvalRequest(refs[i], p, 1, 100 * i + j, 200) for j, p in enumerate(params) for i in range(3)]

    ref_ev = InProcessEvaluator(TERRAIN, spec, noise)
    expected = ref_ev.evaluate(interleaved(ref_ev))
    ev = RayEvaluator(TERRAIN, spec, noise, workers=workers, local_wave_steps=0, driver_share=True)
    try:
        _same(ev.evaluate(interleaved(ev)), expected)
    finally:
        ev.close()
    assert ev.driver_shares == 1


def test_a_wave_cut_finer_than_one_chunk_per_worker_is_not_shared(ray_local):
    """More rows than `batch_rows` per worker: every chunk goes to the workers (a share would
    be one process too many), with the same results."""
    spec, noise = _setup(TERRAIN)
    params = _params(TERRAIN, 4)
    ref_ev = InProcessEvaluator(TERRAIN, spec, noise)
    expected = ref_ev.evaluate(_requests(ref_ev, spec, params))
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, batch_rows=4, local_wave_steps=0, driver_share=True)
    calls = []
    original = ev._dispatch
    ev._dispatch = lambda units, *args: (calls.append(len(units)), original(units, *args))[1]
    try:
        _same(ev.evaluate(_requests(ev, spec, params)), expected)
    finally:
        ev.close()
    assert calls[0] > 2 and ev.driver_shares == 0


def test_a_small_wave_of_a_compiled_family_runs_in_the_driver_with_the_same_results(ray_local):
    family = TERRAIN
    spec, noise = _setup(family)
    params = _params(family, 4)
    ref_ev = InProcessEvaluator(family, spec, noise)
    reqs = _requests(ref_ev, spec, params)
    expected = ref_ev.evaluate(reqs)
    steps = int(sum(r.lengths.sum() for r in expected))
    caps = sum(r.episodes * r.max_steps for r in reqs)  # what planning expects of a first wave
    ev = RayEvaluator(family, spec, noise, workers=2, local_wave_steps=caps)
    calls = []
    original = ev._dispatch
    ev._dispatch = lambda units, *args: (calls.append(len(units)), original(units, *args))[1]
    try:
        mine = _requests(ev, spec, params)
        _same(ev.evaluate(mine), expected)  # a first wave is expected to run to its caps: just within
        assert (ev.local_waves, calls, ev.env_steps) == (1, [], steps)
        ev.local_wave_steps, ev.episode_lengths = caps - 1, EpisodeLengths()  # one step over the limit
        _same(ev.evaluate(mine), expected)
        assert (ev.local_waves, calls, ev.env_steps, ev.driver_shares) == (1, [1], 2 * steps, 1)
    finally:
        ev.close()


def test_gymnasium_waves_never_run_in_the_driver(ray_local):
    family = FlakyFamily()
    spec, noise = _setup(family.inner)
    ev = RayEvaluator(family, spec, noise, workers=2, local_wave_steps=10**9, driver_share=True)
    try:
        ref = ev.put(init_flat(spec, np.random.default_rng(0)))
        results = ev.evaluate([EvalRequest(ref, family.initial(), 1, i, 20) for i in range(3)])
    finally:
        ev.close()
    assert all(r.ok for r in results)
    assert (ev.local_wave_steps, ev.local_waves, ev.driver_share, ev.driver_shares) == (0, 0, False, 0)


def test_a_wave_leaves_no_reference_cycles_in_the_driver(ray_local):
    """The pool's side of a wave frees what it allocates when the wave ends (the workers'
    side: tests/test_evaluation.py), so no wave leaves work for the cyclic collector."""
    spec, noise = _setup(TERRAIN)
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, local_wave_steps=0)
    try:
        reqs = _requests(ev, spec, _params(TERRAIN, 4))
        ev.evaluate(reqs)
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                ev.evaluate(reqs)
            assert gc.collect() == 0
        finally:
            gc.enable()
    finally:
        ev.close()


def test_a_pool_whose_wave_was_stopped_answers_the_next_wave_right(ray_local):
    """A stop request abandons a wave with chunks still running; their answers, when they
    come, must not be taken for the next wave's."""
    spec, noise = _setup(TERRAIN)
    params = _params(TERRAIN, 4)
    ref_ev = InProcessEvaluator(TERRAIN, spec, noise)
    expected = ref_ev.evaluate(_requests(ref_ev, spec, params))
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, chunks_per_worker=3, local_wave_steps=0)
    try:
        reqs = _requests(ev, spec, params)
        long_wave = [EvalRequest(r.policy, r.env, 30, r.seed, 400) for r in reqs]
        polls = iter(range(10**9))
        ev.should_stop = lambda: next(polls) >= 2  # once the first chunks are out
        with pytest.raises(WaveInterrupted):
            ev.evaluate(long_wave)
        ev.should_stop = None
        _same(ev.evaluate(reqs), expected)
        _same(ev.evaluate(reqs), expected)
    finally:
        ev.close()


def test_a_stop_request_during_the_drivers_share_abandons_the_wave(ray_local):
    """The driver's share polls stop requests as the workers' waves do; the answers of the
    workers' chunks, when they come, are not taken for the next wave's."""
    spec, noise = _setup(TERRAIN)
    params = _params(TERRAIN, 4)
    ref_ev = InProcessEvaluator(TERRAIN, spec, noise)
    expected = ref_ev.evaluate(_requests(ref_ev, spec, params))
    ev = RayEvaluator(TERRAIN, spec, noise, workers=3, local_wave_steps=0, driver_share=True)
    try:
        reqs = _requests(ev, spec, params)
        long_wave = [EvalRequest(r.policy, r.env, 30, r.seed, 400) for r in reqs]
        polls = iter(range(10**9))
        ev.should_stop = lambda: next(polls) >= 1  # the dispatch's first look passes, the share's fails
        with pytest.raises(WaveInterrupted):
            ev.evaluate(long_wave)
        assert ev.driver_shares == 0
        ev.should_stop = None
        _same(ev.evaluate(reqs), expected)
        _same(ev.evaluate(reqs), expected)
        assert ev.driver_shares == 2
    finally:
        ev.close()


def test_the_pool_opens_no_connection_of_its_own(ray_local):
    """Chunks travel as Ray actor tasks; Ray's own calls (pid) answer beside them."""
    spec, noise = _setup(TERRAIN)
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, local_wave_steps=0)
    try:
        reqs = _requests(ev, spec, _params(TERRAIN, 2))
        assert all(r.error is None for r in ev.evaluate(reqs))
        assert ray.get([w.actor.pid.remote() for w in ev.workers]) == ev.worker_pids()
    finally:
        ev.close()
    # and no module imports a transport of its own: tests/test_layout.py


class HookedEnv(gym.Wrapper):
    """An env whose t-th step of an episode calls `hook(t, reward)` after stepping; what the hook
    returns is the step's reward."""

    def __init__(self, env, hook):
        super().__init__(env)
        self.hook, self.t = hook, 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        self.t += 1
        obs, reward, term, trunc, info = self.env.step(action)
        return obs, self.hook(self.t, reward), term, trunc, info


class FlakyFamily:
    """Terrain, run as gymnasium envs (no row kernel), whose env raises on step 5 when roughness
    is 0.5 and returns a NaN reward on step 3 when it is 0.7."""

    name = "terrain"
    row_kernel = None  # episodes run as gymnasium envs, where these families misbehave

    def __init__(self, start_roughness: float = 0.0):
        self.inner = envs.make_family("terrain", {"course_length": 20.0})
        self.start_roughness = start_roughness

    def initial(self):
        return self.inner.initial().replace(roughness=self.start_roughness)

    def __getattr__(self, item):
        if item == "inner":  # during unpickling, before __dict__ is restored
            raise AttributeError(item)
        return getattr(self.inner, item)

    def make_env(self, params, render_mode=None):
        return HookedEnv(self.inner.make_env(params, render_mode), functools.partial(self.hook, params["roughness"]))

    def hook(self, roughness: float, t: int, reward: float) -> float:
        if roughness == 0.5 and t == 5:
            raise RuntimeError("terrain generator exploded")
        return np.nan if roughness == 0.7 and t == 3 else reward


def test_env_errors_carry_identity_and_spare_the_rest(ray_local):
    family = FlakyFamily()
    spec, noise = _setup(family.inner)
    good, boom, nan = (family.initial().replace(roughness=r) for r in (0.0, 0.5, 0.7))
    ev = RayEvaluator(family, spec, noise, workers=2, chunks_per_worker=1, local_wave_steps=0)
    try:
        ref = ev.put(init_flat(spec, np.random.default_rng(0)))
        reqs = [
            EvalRequest(ref, good, 2, 1, 100, tag="p0 ok"),
            EvalRequest(ref, boom, 2, 2, 100, tag="p1 boom"),
            EvalRequest(ref, nan, 1, 3, 100, tag="p2 nan"),
            EvalRequest(ref, good, 1, 4, 100, tag="p3 ok"),
        ]
        results = ev.evaluate(reqs)
        alone = ev.evaluate([reqs[0], reqs[3]])
    finally:
        ev.close()
    assert results[1].error is not None and "terrain generator exploded" in results[1].error.message
    assert results[1].error.tag == "p1 boom" and results[1].error.seed == 2
    assert EnvParams.from_json(results[1].error.env_json) == boom
    assert results[2].error is not None and "non-finite" in results[2].error.message
    assert results[2].error.tag == "p2 nan"
    _same([results[0], results[3]], alone)


def test_run_stops_on_env_error_by_default_and_can_go_on(ray_local, tiny, tmp_path, monkeypatch):
    # The first env of the run has roughness 0.5: its env raises.
    monkeypatch.setitem(envs.FAMILIES, "flaky", lambda **o: FlakyFamily(start_roughness=0.5))
    cfg = tiny(env={"family": "flaky", "options": {}}, evaluation={"backend": "ray"}, iterations=2)
    with pytest.raises(EvaluationFailed, match=r"p0 .*terrain generator exploded.*on_error"):
        poet.run(cfg, out=tmp_path / "stop", progress=False)
    assert (tmp_path / "stop" / "config.yaml").exists()
    cfg["evaluation"] = {**cfg["evaluation"], "on_error": "score_as_failure", "failure_score": -123.0}
    poet.run(cfg, out=tmp_path / "go", progress=False)
    run = load_run(tmp_path / "go")
    assert (run.iterations["score"] == -123.0).all() and len(run.iterations) == 2


def test_worker_memory_does_not_grow_with_policies(ray_local):
    """A worker keeps no policy past the chunk that carried it (RLlib keeps a copy of each in
    every worker: its memory grows with the policies seen). 2000 new policies in waves of 10
    leave a worker's memory where 10 did; one wave of 1000 takes it to that wave's working
    set. (Memory is read after the allocator hands its free pages back: `RolloutWorker.memory`.)"""
    spec, noise = _setup(TERRAIN, hidden=(40, 40))
    p = TERRAIN.initial()
    ev = RayEvaluator(TERRAIN, spec, noise, workers=2, local_wave_steps=0)
    try:

        def wave(n, first_seed):
            refs = [ev.put(init_flat(spec, np.random.default_rng(first_seed + i)) * 2) for i in range(n)]
            ev.evaluate([EvalRequest(r, p, 1, i, 30) for i, r in enumerate(refs)])
            ev.release(refs)

        def rss_mb():
            return max(m["rss_mb"] for m in ev.worker_memory())

        wave(10, 0)  # warm-up: imports, allocator pools
        small = rss_mb()
        for k in range(200):
            wave(10, 100_000 + 10 * k)
        many = rss_mb()
        wave(1000, 10**7)
        large = rss_mb()
    finally:
        ev.close()
    # a copy of each policy would hold 2000 x 10.5 KB, half of it in each worker
    assert many <= small + 4, f"worker RSS grew from {small:.0f} MB to {many:.0f} MB over 2000 policies"
    # the wave's 10.5 MB of weights, a worker's half held a few times over during its chunk
    assert large <= small + 48, f"worker RSS went from {small:.0f} MB to {large:.0f} MB for a 1000-policy wave"


def test_ray_backend_run_equals_inprocess(ray_local, tiny, tmp_path):
    for curriculum in ("poet", "enhanced_poet"):
        a = tmp_path / f"{curriculum}-inprocess"
        b = tmp_path / f"{curriculum}-ray"
        poet.run(tiny(curriculum=curriculum), out=a, progress=False)
        poet.run(tiny(curriculum=curriculum, evaluation={"backend": "ray"}, ray={"workers": 2}), out=b, progress=False)
        ra, rb = load_run(a), load_run(b)
        for table in ("iterations", "envs", "transfers", "events"):
            pd.testing.assert_frame_equal(getattr(ra, table), getattr(rb, table), check_exact=True, obj=table)


CLUSTER_SCRIPT = r"""
import json, sys
import numpy as np
import ray
from ray.cluster_utils import Cluster
sys.path.insert(0, sys.argv[1])
from tests.test_ray_pool import TERRAIN, _setup, _params, _requests
from poet.evaluation.ray_pool import RayEvaluator

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
cluster.add_node(num_cpus=1)
ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
spec, noise = _setup(TERRAIN)
ev = RayEvaluator(TERRAIN, spec, noise, workers=2, local_wave_steps=0)
nodes = ray.get([w.actor.node.remote() for w in ev.workers])
res = ev.evaluate(_requests(ev, spec, _params(TERRAIN, 4)))
print(json.dumps({"nodes": len(set(nodes)), "returns": [r.returns.tolist() for r in res],
                  "lengths": [r.lengths.tolist() for r in res]}))
ev.close()
ray.shutdown()
cluster.shutdown()
"""


@pytest.mark.slow
def test_two_node_cluster_gives_single_node_results():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", CLUSTER_SCRIPT, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["nodes"] == 2, "the two workers should land on two different nodes"
    spec, noise = _setup(TERRAIN)
    ev = InProcessEvaluator(TERRAIN, spec, noise)
    expected = ev.evaluate(_requests(ev, spec, _params(TERRAIN, 4)))
    assert out["returns"] == [r.returns.tolist() for r in expected]
    assert out["lengths"] == [r.lengths.tolist() for r in expected]


@pytest.mark.slow
def test_local_run_ignores_ray_address_and_starts_its_own_pool(tiny, tmp_path):
    """RAY_ADDRESS pointing at a dead cluster: a run without --address starts its own local Ray."""
    import yaml

    from tests.conftest import ROOT

    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(tiny(iterations=1, evaluation={"backend": "ray"}, ray={"workers": 1})))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "127.0.0.1:1"}
    out = subprocess.run(
        [sys.executable, "-m", "poet.cli", "run", str(config), "--out", str(tmp_path / "r"), "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert load_run(tmp_path / "r").iterations["iteration"].tolist() == [0]


class KillerFamily(FlakyFamily):
    """Terrain whose env ends its worker process (os._exit) when roughness is 0.9."""

    def make_env(self, params, render_mode=None):
        if params["roughness"] == 0.9:
            os._exit(3)
        return self.inner.make_env(params, render_mode)


def test_a_request_that_kills_its_worker_fails_alone(ray_local):
    family = KillerFamily()
    spec, noise = _setup(family.inner)
    good = [family.initial().replace(roughness=r) for r in (0.0, 0.1, 0.2)]
    killer = family.initial().replace(roughness=0.9)
    ev = RayEvaluator(family, spec, noise, workers=2, chunks_per_worker=1, max_chunk_retries=1, local_wave_steps=0)
    try:
        ref = ev.put(init_flat(spec, np.random.default_rng(0)))
        reqs = [EvalRequest(ref, e, 1, i, 50, tag=f"r{i}") for i, e in enumerate([good[0], good[1], killer, good[2]])]
        results = ev.evaluate(reqs)
        alone = ev.evaluate([reqs[i] for i in (0, 1, 3)])
        assert len(ev.worker_pids()) == 2  # the pool is whole again
    finally:
        ev.close()
    assert [r.ok for r in results] == [True, True, False, True]
    assert results[2].error.tag == "r2" and "worker died 2 times" in results[2].error.message
    _same([results[i] for i in (0, 1, 3)], alone)


class DiesOnceWhileFlaggedFamily(FlakyFamily):
    """Terrain whose worker process is killed (SIGKILL) at a multiple of its 20th env step while a
    flag file exists; the first worker there removes the flag, so exactly one dies (numbers
    unchanged)."""

    def __init__(self, flag: str):
        super().__init__()
        self.flag, self.steps = flag, 0

    def hook(self, roughness: float, t: int, reward: float) -> float:
        self.steps += 1  # in this process
        if self.steps % 20 == 0:
            try:
                os.unlink(self.flag)
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return reward


def step_or_die(step, flag: str, at: int = 20):
    """`step`, except that its `at`-th call SIGKILLs the process while the file `flag` exists
    (the first process there removes it, so exactly one dies)."""
    calls = [0]

    def wrapped(*args):
        calls[0] += 1
        if calls[0] == at:
            try:
                os.unlink(flag)
            except FileNotFoundError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return step(*args)

    return wrapped


def test_killed_worker_mid_wave_gives_identical_results(ray_local, tmp_path):
    # The kill comes from inside a chunk at a fixed step, not from a timer: a timer guessed from
    # one wave's duration missed the wave on a loaded machine.
    flag = tmp_path / "die"
    family = DiesOnceWhileFlaggedFamily(str(flag))
    spec, noise = _setup(family.inner)
    params = _params(family.inner, 8)
    ev = RayEvaluator(family, spec, noise, workers=2, chunks_per_worker=6, inflight_per_worker=1, local_wave_steps=0)
    try:
        reqs = _requests(ev, spec, params, n_policies=40, scale=0.3)
        clean = ev.evaluate(reqs)
        before = set(ev.worker_pids())
        flag.touch()
        faulty = ev.evaluate(reqs)
        assert not flag.exists() and ev.restarts == 1
        assert len(before - set(ev.worker_pids())) == 1  # one worker died and was replaced
        _same(faulty, clean)
        assert all(r.error is None for r in faulty)
        # the pool keeps working at full size after the fault
        assert len(ev.worker_pids()) == 2
        _same(ev.evaluate(reqs), clean)
    finally:
        ev.close()


class HangingFamily(FlakyFamily):
    """Terrain whose env step never returns when roughness is 0.8 (a simulator stuck in a loop)."""

    def hook(self, roughness: float, t: int, reward: float) -> float:
        if roughness == 0.8:
            time.sleep(3600)
        return reward


def test_deadline_kills_a_chunk_that_never_returns_and_only_its_request_fails(ray_local):
    family = HangingFamily()
    spec, noise = _setup(family.inner)
    good = [family.initial().replace(roughness=r) for r in (0.0, 0.1, 0.2)]
    stuck = family.initial().replace(roughness=0.8)
    ev = RayEvaluator(
        family,
        spec,
        noise,
        workers=2,
        chunks_per_worker=1,
        max_chunk_retries=1,
        deadlines=Deadlines(seconds=2.0),
        local_wave_steps=0,
    )
    try:
        ref = ev.put(init_flat(spec, np.random.default_rng(0)))
        reqs = [EvalRequest(ref, e, 1, i, 50, tag=f"r{i}") for i, e in enumerate([good[0], stuck, good[1], good[2]])]
        t0 = time.monotonic()
        results = ev.evaluate(reqs)
        seconds = time.monotonic() - t0
        alone = ev.evaluate([reqs[i] for i in (0, 2, 3)])
        assert len(ev.worker_pids()) == 2  # the pool is whole again
    finally:
        ev.close()
    assert [r.ok for r in results] == [True, False, True, True]
    err = results[1].error
    assert err.tag == "r1" and "deadline of 2 s 2 times" in err.message
    assert EnvParams.from_json(err.env_json) == stuck
    # a pair chunk timed out, then the request alone twice: three deadlines of 2 s and the
    # restarts, far under the hour the step sleeps (the bound leaves room for a loaded machine)
    assert seconds < 600, seconds
    _same([results[i] for i in (0, 2, 3)], alone)


def test_run_with_an_env_that_never_returns_stops_or_goes_on_as_on_error_says(ray_local, tiny, tmp_path, monkeypatch):
    # The first env of the run never finishes a step: every ES rollout on it overruns.
    monkeypatch.setitem(envs.FAMILIES, "hanging", lambda **o: HangingFamily(start_roughness=0.8))
    cfg = tiny(
        env={"family": "hanging", "options": {}},
        evaluation={"backend": "ray"},
        iterations=1,
        trainer={"name": "es", "es": {"population": 2, "noise_table_size": 200_000}},
        ray={"workers": 2, "deadline_s": 1.5, "max_chunk_retries": 0},
    )
    with pytest.raises(EvaluationFailed, match=r"p0 .*deadline of 1.5 s once.*on_error"):
        poet.run(cfg, out=tmp_path / "stop", progress=False)
    cfg["evaluation"] = {**cfg["evaluation"], "on_error": "score_as_failure", "failure_score": -123.0}
    poet.run(cfg, out=tmp_path / "go", progress=False)
    assert load_run(tmp_path / "go").iterations["score"].tolist() == [-123.0]


class SlowWhileFlaggedFamily(FlakyFamily):
    """Terrain whose env steps take half a second each while a flag file exists (numbers unchanged)."""

    def __init__(self, flag: str):
        super().__init__()
        self.flag = flag

    def hook(self, roughness: float, t: int, reward: float) -> float:
        if os.path.exists(self.flag):
            time.sleep(0.5)
        return reward


def test_sigterm_during_a_long_wave_exits_within_seconds_and_resume_equals_straight(
    ray_local, tiny, tmp_path, monkeypatch
):
    from poet.errors import RunInterrupted
    from tests.test_checkpoint import _assert_same_run

    flag = tmp_path / "slow"
    monkeypatch.setitem(envs.FAMILIES, "slowable", lambda **o: SlowWhileFlaggedFamily(str(flag)))
    cfg = tiny(
        env={"family": "slowable", "options": {}},
        evaluation={"backend": "ray"},
        iterations=6,
        ray={"workers": 2},
        checkpoint={"every": 0},
    )
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    poet.run(cfg, out=straight, progress=False)

    signalled: list[float] = []

    def slow_down_then_terminate():
        # once iteration 2 is recorded, the waves of iteration 3 crawl (75 s a chunk); stop one.
        # The table's file exists before its first row reaches it: an empty table is not done
        # (its max is NaN, which no comparison holds for).
        def recorded() -> int:
            if not (stopped / "records" / "iterations.jsonl").exists():
                return -1
            done = load_run(stopped).iterations["iteration"]
            return int(done.max()) if len(done) else -1

        while recorded() < 2:
            time.sleep(0.02)
        flag.touch()
        time.sleep(1.0)
        signalled.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=slow_down_then_terminate, daemon=True).start()
    with pytest.raises(RunInterrupted) as stop:
        poet.run(cfg, out=stopped, progress=False)
    seconds = time.monotonic() - signalled[0]
    assert seconds < 30, seconds  # a chunk at this pace takes over a minute
    flag.unlink()
    done = load_run(stopped).iterations["iteration"]
    saved = checkpoint.load(checkpoint.checkpoints(stopped)[-1])
    # the iteration in progress is dropped: the checkpoint and the tables end at the last completed one
    assert stop.value.iteration == saved.iteration == done.max() + 1 >= 3
    poet.resume(stopped, progress=False)
    _assert_same_run(straight, stopped)


def test_a_local_pool_refuses_processes_without_its_token(tmp_path):
    """A local run's Ray listens on every interface (Ray's choice); its token keeps others out."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import os, subprocess, sys\n"
        "from poet.runtime.ray_session import ensure_ray\n"
        "import ray\n"
        "assert ensure_ray(None, 1)\n"
        "assert os.environ.get('RAY_AUTH_MODE') == 'token'\n"
        "gcs = ray.get_runtime_context().gcs_address\n"
        "code = f'import ray; ray.init(address={gcs!r}, logging_level=40)'\n"
        "stranger = {k: v for k, v in os.environ.items() if not k.startswith('RAY_AUTH')}\n"
        "stranger['HOME'] = sys.argv[1]  # no ~/.ray/auth_token there\n"
        "# 3 connection tries instead of Ray's 20 (a second apart): the owner below shows they suffice\n"
        "few = {'RAY_NUM_REDIS_GET_RETRIES': '3'}\n"
        "r = subprocess.run([sys.executable, '-c', code], env={**stranger, **few}, capture_output=True, text=True, timeout=120)\n"
        "print('stranger', r.returncode)\n"
        "r = subprocess.run([sys.executable, '-c', code], env={**os.environ, **few}, capture_output=True, text=True, timeout=120)\n"
        "print('owner', r.returncode)\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(
        [sys.executable, str(script), str(home)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "stranger 1" in out.stdout and "owner 0" in out.stdout
