"""The benchmark's baselines do the same work as the pool, and its EvoTorch peer (the `bench` extra) runs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import eval_pool as ep  # noqa: E402
import eval_pool_kinds as epk  # noqa: E402

from poet.evaluation import InProcessEvaluator, NoiseTable  # noqa: E402
from poet.evaluation.requests import simulated_steps  # noqa: E402


def run_script(tmp_path, script: str, *args: str) -> dict:
    """Run `benchmarks/<script>` with `args` and `--json`; the JSON it wrote."""
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def _sizes(**shapes) -> ep.Sizes:
    sizes = ep.Sizes.quick()
    sizes.shapes.update(shapes)
    return sizes


@pytest.mark.parametrize("core", ["compiled", "lockstep", "numpy"])
@pytest.mark.parametrize("name", ["terrain", "terrain_fresh"])
def test_raw_limit_runs_the_pools_episodes(name, core):
    """The batched raw loops (the pool's compiled path, the same kernels in lock-step, the numpy
    core before them) and the framework's rollout step the same episodes to the same lengths."""
    setup = ep.make_setup(name, _sizes(**{name: (6, 3, 2)}))
    episodes = ep.matrix_episodes(setup, 10**6)
    assert len(episodes) == 6 * 3 * (1 if name == "terrain" else 2)
    low, high = ep.action_bounds(setup.spec)
    raw_steps = ep.raw_batch(setup, episodes, low, high, core)
    ev = InProcessEvaluator(setup.family, setup.spec, None)
    requests = ep.matrix_requests(setup, [ev.put(w) for w in setup.policies], 10**6)
    assert raw_steps == simulated_steps(requests, ev.evaluate(requests)) > 0


@pytest.mark.parametrize("name", ["bipedal", "bipedal_family"])
def test_raw_walker_slots_run_the_pools_episodes(name):
    """The raw slot loop, with reused and renewed envs, steps the pool's episodes at any width."""
    sizes = _sizes(bipedal=(8, 1, 1), bipedal_family=(3, 2, 1))
    sizes.bipedal_max_steps = 400  # long enough that some walkers fall: reused, not renewed, envs then differ
    setup = ep.make_setup(name, sizes)
    walkers = ep.raw_walkers(setup, 4)
    ev = InProcessEvaluator(setup.family, setup.spec, None)
    requests = ep.matrix_requests(setup, [ev.put(w) for w in setup.policies], 10**6)
    pool_steps = simulated_steps(requests, ev.evaluate(requests))
    for width in (1, 4, 3):  # the envs have run episodes before the second and third passes
        assert walkers(ep.matrix_episodes(setup, 10**6), width) == pool_steps > 0


def test_numpy_policies_match_the_frameworks():
    from poet.policies import BatchedPolicy

    setup = ep.make_setup("bipedal", _sizes(bipedal=(5, 1, 1)))
    flats = np.stack(setup.policies)
    obs = np.random.default_rng(0).standard_normal((5, setup.spec.obs_dim)).astype(np.float32)
    low, high = ep.action_bounds(setup.spec)
    np.testing.assert_allclose(
        ep.numpy_forward(ep.numpy_layers(setup.spec, flats), obs, low, high),
        BatchedPolicy(setup.spec, flats).act(obs),
        atol=1e-6,
    )
    assert abs(float(flats.std()) - 0.1) < 0.01  # N(0, 0.1): the distribution EvoTorch's PGPE samples too


@pytest.mark.slow
def test_evotorch_peer_runs_the_same_shape_of_work(ray_local):
    pytest.importorskip("evotorch", reason="the bench extra (make installs it)")
    sizes = _sizes(bipedal=(4, 1, 1))
    sizes.bipedal_max_steps = 20
    setup = ep.make_setup("bipedal", sizes)
    assert ep.evotorch_applies(setup)
    m = ep.measure_evotorch(setup, waves=2, workers=2)
    # 2 generations of 4 episodes of at most 20 steps
    assert 0 < m.steps <= 2 * 4 * 20 and m.steps_per_s > 0


@pytest.mark.slow
def test_benchmark_script_runs_end_to_end(tmp_path):
    """The script as docs/benchmarks.md runs it (smoke sizes): raw, Ray's floor, pool, naive, memory, JSON."""
    terrain = run_script(tmp_path, "eval_pool.py", "--quick", "--envs", "terrain")["envs"]["terrain"]
    runs = terrain["runs"]
    steps = {way: runs[way][0]["steps"] for way in ("raw", "raw_ray", "raw_ray_weights", "pool")}
    assert len(set(steps.values())) == 1 and steps["raw"] > 0, steps  # the same episodes
    assert terrain["efficiency"] > 0 and terrain["worker_rss_mb_1000"] > 0
    assert 0 < terrain["raw_synced_steps_per_s"] <= 1.05 * terrain["raw_steps_per_s"]  # waiting costs, never pays


@pytest.mark.parametrize("name", ["cnn", "lstm", "cnn_lstm", "cartpole_lstm", "cartpole_cnn"])
def test_kinds_raw_limit_runs_the_pools_episodes(name):
    """The plain torch code of eval_pool_kinds.py (lock-step slots with its own batched forward)
    and the framework's rollout of the same ES wave: the same episodes, lengths and returns."""
    setup = epk.make_setup(name, epk.Sizes.quick())
    perts, episodes = epk.make_wave(setup, 10**6)
    assert len(perts) == setup.perturbations and len(episodes) == setup.perturbations * len(setup.envs)
    steps, returns, lengths = epk.PlainRunner(setup)((perts, episodes))
    ev = InProcessEvaluator(setup.family, setup.spec, NoiseTable.from_array(setup.noise))
    requests = epk.wave_requests(setup, ev.put(setup.theta), 10**6)
    results = ev.evaluate(requests)
    assert steps == simulated_steps(requests, results) > 0
    np.testing.assert_array_equal(lengths, [int(r.lengths[0]) for r in results])
    np.testing.assert_allclose(returns, [float(r.returns[0]) for r in results], rtol=1e-6, atol=1e-9)


def test_kinds_benchmark_quick_mode_never_writes_into_results():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "eval_pool_kinds.py"),
            "--quick",
            "--json",
            str(ROOT / "benchmarks" / "results" / "eval_pool_kinds.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "never writes into benchmarks/results/" in proc.stderr


@pytest.mark.slow
def test_kinds_benchmark_script_runs_end_to_end(tmp_path):
    """`benchmarks/eval_pool_kinds.py --quick`: raw and pool for the lstm on terrain and on
    cartpole (the other kinds' plain code: test_kinds_raw_limit_runs_the_pools_episodes), the
    same episodes both ways, the memory waves, the JSON."""
    result = run_script(tmp_path, "eval_pool_kinds.py", "--quick", "--workers", "2", "--kinds", "lstm,cartpole_lstm")
    assert set(result["rows"]) == {"lstm", "cartpole_lstm"}
    assert "--quick" in result["command"] and result["wall_seconds"] > 0 and result["machine"]["workers"] == 2
    for name, row in result["rows"].items():
        raw, pool = row["runs"]["raw"], row["runs"]["pool"]
        assert len(raw) == len(pool) == len(row["pool_vs_raw_per_repeat"]) == result["sizes"]["repeats"] == 1
        assert raw[0]["steps"] == pool[0]["steps"] > 0, name  # the same episodes both ways
        assert row["same_steps"] and row["returns_max_abs_diff"] < 1e-6, name
        assert sum(row["checks"][0]["steps_per_wave"]) == raw[0]["steps"]
        assert row["raw_steps_per_s"] > 0 and row["pool_steps_per_s"] > 0 and row["pool_vs_raw"] > 0
    assert result["rows"]["cartpole_lstm"]["family"] == "cartpole"
    memory = result["memory"]
    assert memory["kind"] == "lstm" and memory["policies"] == [2, 20]
    assert memory["weights_mb"] == pytest.approx(20 * memory["policy_params"] * 4 / 2**20, abs=0.1)
    assert len(memory["worker_rss_mb_10"]) == len(memory["worker_rss_mb_1000"]) == 2
    assert all(mb > 0 for mb in memory["worker_rss_mb_1000"])


@pytest.mark.parametrize(
    "script, args",
    [
        ("compiled_graph.py", ["--waves", "2", "--repeats", "1"]),
        ("pool_waves.py", ["--waves", "2"]),
        ("chunk_cost.py", ["--chunks", "2", "--repeats", "1"]),
    ],
)
def test_pool_call_path_scripts_run_end_to_end(tmp_path, script, args):
    """The scripts behind the per-wave tables of docs/benchmarks.md run (2 waves) and write their JSON."""
    result = run_script(tmp_path, script, *args)
    if script == "compiled_graph.py":
        assert result["waves"] == 2 and all(v > 0 for v in result["wave_ms_median"].values())
    elif script == "chunk_cost.py":
        assert result["chunks"] == 2 and result["rows_per_chunk"] > 0 and result["framework_over_plain"] > 0
    else:
        assert result["chunk_speeds"]["waves"] == 2 and result["chunk_speeds"]["wave_ms_median"] > 0
        # every wave of the time line had one call per worker, each inside its wave
        timeline = result["wave_timeline"]
        assert timeline["waves"] == 2 and 0 < timeline["ms_median"]["call"] < timeline["ms_median"]["wave"]


@pytest.mark.slow
def test_quickstart_replays_its_waves_in_plain_code_and_on_plain_ray(tmp_path):
    """`benchmarks/quickstart.py --raw-limit` (3 iterations): the replay in plain processes and on
    plain Ray actors takes exactly the run's env steps, and the shares come out in the JSON."""
    result = run_script(tmp_path, "quickstart.py", "--raw-limit", "--set", "iterations=3")
    assert result["raw_steps_same_waves"] == result["env_steps"] > 0
    for key in ("pool_share_of_raw_same_waves", "raw_ray_share_of_raw_same_waves", "pool_share_of_raw_ray_same_waves"):
        assert result[key] > 0, key


@pytest.mark.slow
def test_backends_runs_both_backends_to_the_same_records(tmp_path):
    """`benchmarks/backends.py` (2 iterations, one round): a run on the Ray pool and one
    in-process, the same records from both, and each backend's timings in the JSON."""
    result = run_script(tmp_path, "backends.py", "--set", "iterations=2", "--rounds", "1")
    assert result["records"]["iterations"] == 2 and result["records"]["env_steps"] > 0
    for backend in ("ray", "inprocess"):
        assert len(result["runs"][backend]) == 1 and result["median"][backend]["wall_seconds"] > 0


def test_cross_eval_benchmark_scores_the_same_on_both_backends(tmp_path):
    """benchmarks/cross_eval.py on a tiny run: every wave's scores identical, rates reported."""
    import poet
    from tests.conftest import tiny_config

    poet.run(tiny_config(), out=tmp_path / "run", progress=False)
    result = run_script(
        tmp_path, "cross_eval.py", str(tmp_path / "run"), "--agents", "3", "--envs", "3", "--rounds", "1"
    )
    assert result["scores_per_wave"] == 9
    assert set(result["median"]) == {"ray_first", "ray_warm", "inprocess_first", "inprocess_warm"}
    assert all(m["env_steps"] > 0 for m in result["median"].values())


def test_checkpoint_capture_times_both_layouts_of_the_score_cache(tmp_path):
    """benchmarks/checkpoint_capture.py on a tiny Enhanced POET run's checkpoint: every part is
    timed on both layouts, and the cache it measures is the checkpoint's, all of it."""
    import poet
    from tests.conftest import tiny_config

    cfg = tiny_config(curriculum="enhanced_poet", iterations=9, reproduction={"capacity": 2, "every": 4})
    poet.run(cfg, out=tmp_path / "run", progress=False)
    newest = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*"))[-1]
    out = tmp_path / "capture.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "checkpoint_capture.py"),
            str(newest),
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    state = json.loads((newest / "state.json").read_text())
    with np.load(newest / "arrays.npz") as npz:
        assert result["cached_scores"] == len(npz["score_cache/score"]) > 0
    assert result["archived"] >= 1 and result["active"] >= 1
    assert result["lookup_jobs"] > 0
    assert 0 < len(state["score_cache"]["agents"]) <= result["active"] + result["archived"]
    parts = ("boundary", "write", "read", "lookup")
    assert set(result["seconds"]) == {*parts, *(f"flat_{k}" for k in parts), "checkpoint", "load"}
    assert set(result["flat_over_this"]) == set(parts)


@pytest.mark.slow
def test_accel_ppo_times_every_part_of_both_loops(tmp_path):
    """`benchmarks/accel_ppo.py` (a few iterations at dcd's sizes): the framework's ACCEL and the
    plain PPO loop train, every part of a framework run is timed and the parts add up to its
    wall, and the compiled rollout alone ran as many steps as a PPO rollout."""
    result = run_script(tmp_path, "accel_ppo.py", "--iterations", "6", "--plain-updates", "1", "--repeats", "1")
    accel, plain = result["runs"]["accel"][0], result["runs"]["plain"][0]
    assert accel["ppo_updates"] > 0 and accel["calls"]["rollout"] >= accel["ppo_updates"]
    assert accel["calls"]["level_scoring"] > 0  # ACCEL scored new levels
    assert all(accel["seconds"][p] >= 0 for p in ("rollout", "gae", "update", "level_scoring", "rest"))
    assert sum(accel["seconds"].values()) == pytest.approx(accel["wall_seconds"])
    assert plain["env_steps"] == result["sizes"]["levels_per_update"] * result["sizes"]["n_steps"]
    assert result["sizes"]["n_steps"] == 2048 and result["sizes"]["minibatch_size"] == 1024  # dcd's
    assert result["accel_vs_plain"] > 0 and result["accel_rollout_vs_rollout_alone"] > 0
    alone = result["runs"]["rollout_alone"][0]
    assert alone["env_steps"] >= result["sizes"]["levels_per_update"] * result["sizes"]["n_steps"]


def test_maze_engine_benchmark_times_the_engine_and_the_env_on_both_views(tmp_path):
    result = run_script(tmp_path, "maze_engine.py", "--steps", "20000", "--env-steps", "500", "--repeats", "1")
    assert list(result["results"]) == ["dr60_uniform", "FourRooms"]
    assert [r["see_through_walls"] for r in result["results"].values()] == [True, False]
    for r in result["results"].values():
        assert r["engine_steps_per_s"] > 0 and r["env_steps_per_s"] > 0
        assert r["engine_over_env"] == pytest.approx(r["engine_steps_per_s"] / r["env_steps_per_s"])
