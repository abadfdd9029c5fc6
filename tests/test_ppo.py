"""The PPO trainer: learning, exact folding of the observation normaliser, determinism on any backend, errors."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
import ray.cloudpickle
import torch

import envs
import poet
from envs import EnvParams
from poet.analysis import load_run
from poet.evaluation import EvalRequest, InProcessEvaluator, Job
from poet.evaluation.ray_pool import RayEvaluator
from poet.policies import init_flat, spec_for_spaces
from poet.policies.mlp_torch import MLPPolicy
from poet.trainers import EvaluationFailed, PPOOptions, PPOTrainer, TrainerContext, TrainTask
from poet.trainers.base import ErrorPolicy
from poet.trainers.ppo import fold, merge_moments, unfold
from tests.conftest import ROOT, assert_torch_stays_unloaded
from tests.test_ray_pool import step_or_die

# Test-only classes travel to the workers by value (the workers cannot import tests/).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

TERRAIN = envs.make_family("terrain")
CARTPOLE = envs.make_family("cartpole")
SMALL = PPOOptions(n_envs=4, n_steps=64, epochs=2, minibatch_size=64)


def _setup(family, hidden=(40, 40), options=SMALL, max_steps=400, errors=None):
    env = family.make_env(family.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, hidden, "tanh")
    env.close()
    trainer = PPOTrainer(options, TrainerContext(spec=spec, max_steps=max_steps, errors=errors or ErrorPolicy()))
    return spec, trainer


def _train(trainer, evaluator, family, spec, iterations, seed=0, eval_every=0, params=None):
    """PPO alone on one env: (theta, state, scores of the starting agent where asked, all metrics)."""
    params = params or family.initial()
    theta = init_flat(spec, np.random.default_rng(seed))
    state = trainer.init_state(theta)
    scores, metrics = [], []
    for it in range(iterations):
        ask = 3 if eval_every and it % eval_every == 0 else 0
        (step,) = trainer.step(
            [TrainTask("p0", theta, params, state, seed=seed * 1000 + it, eval_episodes=ask)], evaluator
        )
        theta, state = step.theta, step.state
        metrics.append(step.metrics)
        if step.score is not None:
            scores.append(step.score)
    return theta, state, scores, metrics


def _same_state(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert np.array_equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def test_ppo_solves_the_flat_terrain_course():
    """Budget: 20 POET iterations of 8 envs x 256 steps (41k env steps; about 10 s here).

    Measured: the starting agent of iteration 5 already scores 298.8 (the course's
    maximum is about 300); the threshold is POET's solved score, 230.
    """
    spec, trainer = _setup(TERRAIN, options=PPOOptions())
    ev = InProcessEvaluator(TERRAIN, spec)
    theta, _, scores, metrics = _train(trainer, ev, TERRAIN, spec, iterations=20, eval_every=5)
    final = ev.evaluate([EvalRequest(ev.put(theta), TERRAIN.initial(), 5, 99, 400)])[0].mean
    assert max(scores + [final]) >= 230, (scores, final)
    assert final >= 230
    assert metrics[-1]["env_steps"] == 20 * 8 * 256


def test_ppo_learns_discrete_actions_on_cartpole():
    """Categorical policy: 12 iterations of 8 x 256 steps lift CartPole from ~10 to well over 100 steps."""
    spec, trainer = _setup(CARTPOLE, options=PPOOptions(), max_steps=500)
    assert spec.action_kind == "discrete"
    ev = InProcessEvaluator(CARTPOLE, spec)
    theta0 = init_flat(spec, np.random.default_rng(0))
    start = ev.evaluate([EvalRequest(ev.put(theta0), CARTPOLE.initial(), 5, 1, 500)])[0].mean
    theta, state, _, _ = _train(trainer, ev, CARTPOLE, spec, iterations=12)
    end = ev.evaluate([EvalRequest(ev.put(theta), CARTPOLE.initial(), 5, 1, 500)])[0].mean
    assert state["log_std"].size == 0
    assert start < 50 and end >= 150, (start, end)


def test_fold_and_unfold_are_inverse_and_preserve_the_function():
    spec, _ = _setup(TERRAIN, hidden=(16, 8))
    rng = np.random.default_rng(1)
    theta = init_flat(spec, rng) * 5
    mean, std = rng.normal(size=spec.obs_dim), rng.uniform(0.1, 3, size=spec.obs_dim)
    h = spec.hidden[0]
    u = unfold(theta, spec.obs_dim, h, mean, std)
    np.testing.assert_allclose(fold(u, spec.obs_dim, h, mean, std), theta, rtol=1e-5, atol=1e-6)
    raw, normed = MLPPolicy(spec), MLPPolicy(spec)
    raw.load_flat(theta)
    normed.load_flat(u)
    x = rng.normal(size=(64, spec.obs_dim)) * 3
    with torch.no_grad():
        a = raw(torch.as_tensor(x, dtype=torch.float32))
        b = normed(torch.as_tensor((x - mean) / std, dtype=torch.float32))
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
    assert theta.dtype == u.dtype == np.float32


def test_merge_moments_equals_the_moments_of_all_rows():
    rng = np.random.default_rng(2)
    rows = [rng.normal(3, 2, size=(n, 4)) for n in (1, 7, 100, 33)]
    mean, var, count = np.zeros(4), np.ones(4), 0.0
    for r in rows:
        mean, var, count = merge_moments(mean, var, count, r)
    every = np.concatenate(rows)
    np.testing.assert_allclose(mean, every.mean(0), rtol=1e-12)
    np.testing.assert_allclose(var, every.var(0), rtol=1e-10)
    assert count == len(every)


def test_normaliser_lives_in_the_state_and_theta_runs_on_raw_observations():
    spec, trainer = _setup(TERRAIN)
    ev = InProcessEvaluator(TERRAIN, spec)
    theta, state, _, metrics = _train(trainer, ev, TERRAIN, spec, iterations=2)
    assert state["obs_count"] == 2 * SMALL.n_envs * SMALL.n_steps
    assert not np.allclose(state["obs_mean"], 0)
    # look-ahead features over flat ground never vary; the std floor keeps theta's fold tame
    assert np.any(state["obs_var"] == 0) and np.all(np.isfinite(theta)) and np.abs(theta).max() < 100
    assert state["updates"] == 2 and state["adam_t"] == 2 * SMALL.epochs * 4  # 256 rows / 64 per minibatch
    assert state["value"].size > 0 and np.isfinite(metrics[-1]["policy_loss"])
    # a transferred agent starts with a fresh state (its normaliser is already in theta)
    fresh = trainer.reset_state(state, theta)
    assert fresh["obs_count"] == 0 and fresh["value"].size == 0


def test_same_seed_same_agent_in_process_and_on_the_pool_whatever_the_workers(ray_local):
    spec, trainer = _setup(TERRAIN)
    params = [TERRAIN.initial(), TERRAIN.initial().replace(roughness=1.5)]
    theta = init_flat(spec, np.random.default_rng(4))

    def one_iteration(evaluator):
        tasks = [
            TrainTask(f"p{i}", theta, p, trainer.init_state(theta), seed=10 + i, eval_episodes=2)
            for i, p in enumerate(params)
        ]
        first = trainer.step(tasks, evaluator)
        again = trainer.step(
            [TrainTask(t.key, s.theta, t.env, s.state, seed=20, eval_episodes=0) for t, s in zip(tasks, first)],
            evaluator,
        )
        return first + again

    base = one_iteration(InProcessEvaluator(TERRAIN, spec))
    for workers in (1, 2):
        pool = RayEvaluator(TERRAIN, spec, workers=workers)
        try:
            got = one_iteration(pool)
        finally:
            pool.close()
        for a, b in zip(base, got):
            assert np.array_equal(a.theta, b.theta)
            _same_state(a.state, b.state)
            assert a.score == b.score
            assert a.metrics == pytest.approx(b.metrics, nan_ok=True, rel=0, abs=0)
    assert not np.array_equal(base[0].theta, base[1].theta)  # different envs, different agents


class _DiesOnceWhileFlaggedFamily:
    """Terrain whose worker process is killed (SIGKILL) while a flag file exists: at an env's
    20th step (`compiled` false: its envs step as gymnasium envs), or at the 3rd course the
    row kernel builds (the compiled rollouts); the first worker there removes the flag, so
    exactly one dies (numbers unchanged)."""

    name = "terrain"

    def __init__(self, flag: str, compiled: bool = False):
        self.inner, self.flag, self.compiled = envs.make_family("terrain"), flag, compiled

    def __getattr__(self, item):
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def make_env(self, params: EnvParams, render_mode=None):
        env = self.inner.make_env(params, render_mode)
        env.step = step_or_die(env.step, self.flag)
        return env

    @property
    def row_kernel(self):
        if not self.compiled:
            return None
        kernel = self.inner.row_kernel()
        return lambda: dataclasses.replace(kernel, data=step_or_die(kernel.data, self.flag, at=3))


@pytest.mark.parametrize("compiled", [False, True], ids=["gymnasium", "compiled"])
def test_killed_worker_mid_jobs_wave_gives_identical_agents(ray_local, tmp_path, compiled):
    """A worker SIGKILLed while running PPO jobs is replaced and its jobs re-run: same agents."""
    # The kill comes from inside a job at a fixed step, not from a timer: a timer guessed from
    # one wave's duration can miss the wave on a loaded machine.
    flag = tmp_path / "die"
    family = _DiesOnceWhileFlaggedFamily(str(flag), compiled)
    spec, trainer = _setup(family)
    theta = init_flat(spec, np.random.default_rng(5))
    tasks = [
        TrainTask(f"p{i}", theta, family.initial().replace(roughness=0.3 * i), trainer.init_state(theta), seed=i)
        for i in range(8)
    ]
    pool = RayEvaluator(family, spec, workers=2, inflight_per_worker=1)
    try:
        clean = trainer.step(tasks, pool)
        before = set(pool.worker_pids())
        flag.touch()
        faulty = trainer.step(tasks, pool)
        assert not flag.exists() and pool.restarts == 1
        assert len(before - set(pool.worker_pids())) == 1 and len(pool.worker_pids()) == 2
    finally:
        pool.close()
    for a, b in zip(clean, faulty):
        assert np.array_equal(a.theta, b.theta)
        _same_state(a.state, b.state)


class _ExplodingEnvFamily:
    """Terrain whose envs raise on the 30th step when roughness is 0.5, and give a NaN
    reward on it when roughness is 0.7."""

    name = "terrain"
    row_kernel = None  # its envs step as gymnasium envs, where the fault is

    def __init__(self):
        self.inner = envs.make_family("terrain", {"course_length": 20.0})

    def __getattr__(self, item):
        if item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)

    def make_env(self, params: EnvParams, render_mode=None):
        env = self.inner.make_env(params, render_mode)
        if params["roughness"] not in (0.5, 0.7):
            return env
        step, count = env.step, [0]

        def exploding(action):
            count[0] += 1
            if count[0] == 30:
                if params["roughness"] == 0.5:
                    raise RuntimeError("terrain generator exploded")
                obs, _, term, trunc, info = step(action)
                return obs, float("nan"), term, trunc, info
            return step(action)

        env.step = exploding
        return env


@pytest.mark.parametrize(
    "roughness, why", [(0.5, "step raised RuntimeError: terrain generator exploded"), (0.7, "non-finite reward")]
)
def test_env_error_in_a_ppo_job_names_the_pair_and_env(roughness, why):
    family = _ExplodingEnvFamily()
    boom = family.initial().replace(roughness=roughness)
    spec, trainer = _setup(family)
    ev = InProcessEvaluator(family, spec)
    theta = init_flat(spec, np.random.default_rng(0))
    task = TrainTask("p7", theta, boom, trainer.init_state(theta), seed=1)
    with pytest.raises(
        EvaluationFailed, match=rf"PPO training failed for p7: .*roughness.:{roughness}.*{why}.*on_error"
    ):
        trainer.step([task], ev)
    _, lenient = _setup(family, errors=ErrorPolicy("score_as_failure", -5.0))
    ok = TrainTask("p8", theta, family.initial(), lenient.init_state(theta), seed=1)
    failed, fine = lenient.step([task, ok], ev)
    assert np.array_equal(failed.theta, theta) and failed.metrics == {"ppo_failed": 1.0}
    assert not np.array_equal(fine.theta, theta) and "policy_loss" in fine.metrics


def test_job_function_errors_are_reported_per_job():
    spec, _ = _setup(TERRAIN)
    ev = InProcessEvaluator(TERRAIN, spec)
    out = ev.run_jobs([Job("poet.trainers.ppo:no_such_fn", {}, tag="a"), Job("nomodule", {}, tag="b")])
    assert not out[0].ok and out[0].error.startswith("a: ") and "no_such_fn" in out[0].error
    assert not out[1].ok and "job function must be 'package.module:Name'" in out[1].error


@pytest.mark.slow
def test_quickstart_with_ppo_admits_new_envs(ray_local, tmp_path):
    """The quickstart config with `trainer.name=ppo`, 30 of its 120 iterations (a reproduction
    step at 20 admits two envs; transfers at 10 and 20), without the held-out tests it asserts
    nothing about."""
    poet.run(
        ROOT / "experiments" / "quickstart.yaml",
        out=tmp_path / "run",
        overrides=["trainer.name=ppo", "iterations=30", "evaluation.test_every=0"],
        progress=False,
    )
    run = load_run(tmp_path / "run")
    assert len(run.envs) >= 3, run.envs
    assert run.iterations["score"].max() >= 230
    assert {"policy_loss", "value_loss", "approx_kl"} <= set(run.iterations.columns)
    fine_tuned = run.transfers[run.transfers["kind"] == "fine_tune"]  # one PPO job per fine-tune candidate
    assert len(fine_tuned) > 0 and fine_tuned["score"].notna().all()
    # the PPO jobs' own env steps count in the run's throughput: 8 envs x 128 steps per pair
    train = run.phases[run.phases["phase"] == "train"]
    active = run.iterations.groupby("iteration")["pair_id"].nunique()
    assert (train.set_index("iteration")["env_steps"] >= 8 * 128 * active).all()


def test_a_run_that_does_not_train_with_ppo_never_loads_torch(tmp_path) -> None:
    """PPO's torch lives in its job module: an ES run, with a `trainer.ppo` section to check and
    checkpoints to write, leaves torch unloaded (loading it costs every run about a second)."""
    code = (
        "import poet\n"
        "from tests.conftest import tiny_config\n"
        "cfg = tiny_config(iterations=3, trainer={'name': 'es', 'es': {'population': 4, 'noise_table_size': 10000},"
        " 'ppo': {'n_envs': 2}}, checkpoint={'every': 1})\n"
        f"poet.run(cfg, out={str(tmp_path / 'run')!r})\n"
    )
    assert_torch_stays_unloaded(code)
    assert (tmp_path / "run" / "checkpoints").is_dir()


# ------------------------------------------------------------------ dcd's PPO rules
GOLD_REWARDS = 20.0 * np.array(
    [
        [1.0, 1.0, 1.0],
        [3.0, 0.0, -1.0],
        [-0.5, 4.0, 2.0],
        [2.0, 1.0, -3.0],
        [0.0, -1.5, 1.0],
        [5.0, 2.5, 0.25],
        [-1.0, 0.5, 3.5],
        [0.75, -0.25, 6.0],
        [-900.0, 0.1, 0.2],
    ]
)
GOLD_DONES = [(2, 0), (4, 1), (5, 0), (6, 2)]
# dcd's envs/wrappers/vec_normalize.py VecNormalize(ob=False, ret=True) with baselines'
# running_mean_std.py RunningMeanStd, stepped with GOLD_REWARDS and GOLD_DONES: the rewards
# it hands PPO, and its return statistics after the last step.
GOLD_SCALED = np.array(
    [
        [1.0000000000000000e01, 1.0000000000000000e01, 1.0000000000000000e01],
        [2.4079103223812677e00, 0.0, -8.0263677412708923e-01],
        [-3.1285718981228761e-01, 2.5028575184983008e00, 1.2514287592491504e00],
        [1.0053305461913824e00, 5.0266527309569120e-01, -1.5079958192870737e00],
        [0.0, -7.6843192639189506e-01, 5.1228795092793011e-01],
        [2.3180394460056868e00, 1.1590197230028434e00, 1.1590197230028434e-01],
        [-4.6515778308836320e-01, 2.3257889154418160e-01, 1.6280522408092712e00],
        [3.3906298070611957e-01, -1.1302099356870651e-01, 2.7125038456489565e00],
        [-5.2787841620035172e00, 5.8653157355594639e-04, 1.1730631471118928e-03],
    ]
)
GOLD_STATS = (-619.1513989360033, 11627255.080559127, 27.0001)


def _context() -> TrainerContext:
    import gymnasium as gym

    spec = spec_for_spaces(gym.spaces.Box(-1.0, 1.0, (2,)), gym.spaces.Box(-1.0, 1.0, (1,)), (4,), "tanh")
    return TrainerContext(spec=spec, max_steps=10, errors=ErrorPolicy())


def _gold_batch():
    from types import SimpleNamespace

    continues = np.ones_like(GOLD_REWARDS)
    for t, i in GOLD_DONES:
        continues[t, i] = 0.0
    return SimpleNamespace(rewards=GOLD_REWARDS.copy(), continues=continues)


def test_rewards_are_scaled_and_clipped_as_dcds_vecnormalize_does():
    from poet.trainers.ppo_job import _scale_rewards

    state = PPOTrainer(PPOOptions(), _context()).init_state(np.zeros(1))
    o = PPOOptions(reward_clip=10.0)
    scaled = _scale_rewards(_gold_batch(), state, o, np.zeros(3), update=True)
    np.testing.assert_allclose(scaled, GOLD_SCALED, rtol=1e-12, atol=1e-15)
    got = (state["ret_mean"], state["ret_var"], state["ret_count"])
    np.testing.assert_allclose(got, GOLD_STATS, rtol=1e-12)


def test_a_scoring_rollout_moves_the_statistics_only_when_asked():
    from poet.trainers.ppo_job import _scale_rewards

    for update in (True, False):
        state = PPOTrainer(PPOOptions(), _context()).init_state(np.zeros(1))
        before = dict(state)
        _scale_rewards(_gold_batch(), state, PPOOptions(), np.zeros(3), update=update)
        assert (state["ret_count"] == GOLD_STATS[2]) is update and (state == before) is not update


@pytest.mark.parametrize(("rows", "cols", "gain"), [(6, 4, 2**0.5), (3, 7, 1.0), (5, 5, 2**0.5)])
def test_orthogonal_init_is_torchs_orthogonal_on_the_same_gaussian(rows, cols, gain):
    """dcd's start (walker_models.py: nn.init.orthogonal_): given torch's own Gaussian draw, our
    construction gives torch's matrix."""
    from poet.policies import orthogonal

    torch.manual_seed(rows * 10 + cols)
    expected = torch.nn.init.orthogonal_(torch.empty(rows, cols, dtype=torch.float64), gain=gain)
    torch.manual_seed(rows * 10 + cols)
    drawn = torch.empty(rows, cols, dtype=torch.float64).normal_(0, 1).numpy()

    class Replay:
        def standard_normal(self, shape):
            assert tuple(shape) == (rows, cols)
            return drawn.copy()

    np.testing.assert_allclose(orthogonal(Replay(), rows, cols, gain), expected.numpy(), atol=1e-12)
    flat = orthogonal(np.random.default_rng(0), rows, cols, gain)
    small = min(rows, cols)
    gram = flat.T @ flat if rows >= cols else flat @ flat.T
    np.testing.assert_allclose(gram, gain**2 * np.eye(small), atol=1e-12)
