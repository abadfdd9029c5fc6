"""ES gradient, Adam, and the ESTrainer driving an InProcessEvaluator on a short terrain course."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import envs
from poet.evaluation import EvalRequest, InProcessEvaluator, NoiseTable
from poet.policies import init_flat, spec_for_spaces
from poet.trainers import ESOptions, ESTrainer, TrainerContext, TrainTask
from poet.trainers.adam import adam_state, adam_step
from poet.trainers.es import es_gradient

MAX_STEPS = 100
POP = 8
NOISE_SIZE = 100_000


# ----------------------------------------------------------------- es_gradient
def _quadratic_returns(theta: np.ndarray, eps: np.ndarray, sigma: float, target: np.ndarray) -> np.ndarray:
    plus = -np.sum((theta + sigma * eps - target) ** 2, axis=1)
    minus = -np.sum((theta - sigma * eps - target) ** 2, axis=1)
    return np.stack([plus, minus], axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_es_gradient_points_uphill_on_quadratic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dim, sigma = 20, 0.1
    theta = rng.standard_normal(dim)
    target = 2.0 * rng.standard_normal(dim)
    eps = rng.standard_normal((200, dim))
    g = es_gradient(_quadratic_returns(theta, eps, sigma, target), eps, sigma)
    d = target - theta
    cos = g @ d / (np.linalg.norm(g) * np.linalg.norm(d))
    assert cos > 0.5


def test_es_adam_loop_reduces_distance_on_quadratic() -> None:
    rng = np.random.default_rng(0)
    dim, sigma, lr = 20, 0.1, 0.05
    table = NoiseTable(np.random.SeedSequence(11), NOISE_SIZE)
    theta = np.zeros(dim, dtype=np.float32)
    target = rng.standard_normal(dim).astype(np.float32)
    state = adam_state(dim)
    d0 = float(np.linalg.norm(theta - target))
    for _ in range(40):
        offsets = table.sample_offsets(rng, dim, 50)
        eps = np.stack([table.get(int(o), dim) for o in offsets])
        g = es_gradient(_quadratic_returns(theta, eps, sigma, target), eps, sigma)
        theta, state = adam_step(theta, -g, state, lr, 0.9, 0.999, 1e-8)
    assert state["t"] == 40
    assert float(np.linalg.norm(theta - target)) < 0.5 * d0


# ------------------------------------------------------------------------- Adam
def test_adam_first_step_is_lr_per_coordinate() -> None:
    lr = 0.01
    theta = np.array([0.0, 1.0, -2.0, 5.0], dtype=np.float32)
    grad = np.array([1e-3, -1.0, 100.0, -3.0])
    new, state = adam_step(theta, grad, adam_state(4), lr, 0.99, 0.999, 1e-8)
    # bias-corrected: each coordinate moves by lr against the sign of its gradient, exactly
    # lr * sqrt(1-b2) |g| / (sqrt(1-b2) |g| + eps) (eps shows only on the tiny 1e-3 gradient)
    s = np.sqrt(0.001) * np.abs(grad)
    # (float32 theta: one ulp at 5.0 is ~5e-7; the eps effect on the first entry is 3e-6)
    np.testing.assert_allclose(new - theta, -lr * np.sign(grad) * s / (s + 1e-8), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.abs(new - theta)[1:], lr, rtol=0, atol=1e-6)
    assert new.dtype == np.float32
    assert state["t"] == 1
    np.testing.assert_allclose(state["m"], 0.01 * grad, rtol=1e-6)
    np.testing.assert_allclose(state["v"], 0.001 * grad * grad, rtol=1e-5)


def test_adam_constant_gradient_steps_stay_lr() -> None:
    lr, theta, state = 0.02, np.zeros(3, dtype=np.float32), adam_state(3)
    grad = np.array([2.0, -0.5, 10.0])
    for _ in range(1, 6):
        before = theta.copy()
        theta, state = adam_step(theta, grad, state, lr, 0.99, 0.999, 1e-8)
        np.testing.assert_allclose(theta - before, -lr * np.sign(grad), rtol=1e-3)
    np.testing.assert_allclose(theta, -5 * lr * np.sign(grad), rtol=1e-3)


def test_adam_does_not_mutate_inputs() -> None:
    theta = np.array([1.0, 2.0], dtype=np.float32)
    grad = np.array([0.5, -0.5])
    state = {"t": 3, "m": np.array([0.1, 0.2], dtype=np.float32), "v": np.array([0.3, 0.4], dtype=np.float32)}
    snapshot = {"t": 3, "m": state["m"].copy(), "v": state["v"].copy()}
    theta0, grad0 = theta.copy(), grad.copy()
    new, new_state = adam_step(theta, grad, state, 0.01, 0.99, 0.999, 1e-8)
    assert state["t"] == snapshot["t"]
    np.testing.assert_array_equal(state["m"], snapshot["m"])
    np.testing.assert_array_equal(state["v"], snapshot["v"])
    np.testing.assert_array_equal(theta, theta0)
    np.testing.assert_array_equal(grad, grad0)
    assert new_state is not state and new_state["m"] is not state["m"] and new_state["v"] is not state["v"]
    assert new_state["t"] == 4
    assert not np.array_equal(new, theta)


# ------------------------------------------------------------------- ESOptions
def test_es_options_defaults_are_valid() -> None:
    assert ESOptions().check() == []


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"population": 7}, "population"),
        ({"population": 0}, "population"),
        ({"population": 1}, "population"),
        ({"sigma": 0.0}, "sigma"),
        ({"lr": -0.1}, "lr"),
        ({"lr_floor": 0.0}, "lr_floor"),
        ({"sigma_decay": 1.5}, "sigma_decay"),
        ({"lr_decay": 0.0}, "lr_decay"),
        ({"l2": -0.01}, "l2"),
        ({"episodes_per_perturbation": 0}, "episodes_per_perturbation"),
        ({"noise_table_size": 0}, "noise_table_size"),
    ],
)
def test_es_options_check_flags_bad_values(changes: dict, field: str) -> None:
    bad = dataclasses.replace(ESOptions(), **changes).check()
    assert [f for f, _ in bad] == [field]


def test_es_options_check_accepts_even_population_and_unit_decay() -> None:
    assert ESOptions(population=2, sigma_decay=1.0, lr_decay=1.0, l2=0.0).check() == []


@pytest.mark.parametrize("field", ["beta1", "beta2"])
def test_es_options_check_rejects_beta_of_one(field: str) -> None:
    opts = dataclasses.replace(ESOptions(), **{field: 1.0})
    # the value the check lets through is unusable:
    with np.errstate(divide="ignore", invalid="ignore"):
        theta, _ = adam_step(
            np.zeros(2, np.float32), np.ones(2), adam_state(2), 0.01, opts.beta1, opts.beta2, opts.adam_eps
        )
    assert not (np.all(np.isfinite(theta)) and np.any(theta != 0))
    assert field in [f for f, _ in opts.check()]


# ------------------------------------------------------------------- ESTrainer
@pytest.fixture(scope="module")
def terrain():
    family = envs.make_family("terrain", {"course_length": 20.0})
    env = family.make_env(family.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (8, 8), "tanh")
    noise = NoiseTable(np.random.SeedSequence(2024), NOISE_SIZE)
    return family, spec, noise


class CountingEvaluator:
    """Wraps an evaluator, recording every call."""

    def __init__(self, inner):
        self.inner = inner
        self.evaluate_calls: list[list[EvalRequest]] = []
        self.results: list = []
        self.puts = 0
        self.released: list = []

    def put(self, weights):
        self.puts += 1
        return self.inner.put(weights)

    def release(self, refs):
        self.released.extend(refs)
        self.inner.release(refs)

    def evaluate(self, requests):
        self.evaluate_calls.append(list(requests))
        res = self.inner.evaluate(requests)
        self.results.append(res)
        return res

    def close(self):
        self.inner.close()


OPTS = ESOptions(
    population=POP,
    noise_table_size=NOISE_SIZE,
    lr=0.01,
    lr_decay=0.5,
    lr_floor=0.004,
    sigma=0.1,
    sigma_decay=0.5,
    sigma_floor=0.03,
)


def _setup(terrain, options: ESOptions = OPTS):
    family, spec, noise = terrain
    trainer = ESTrainer(options, TrainerContext(spec=spec, max_steps=MAX_STEPS, noise=noise))
    evaluator = CountingEvaluator(InProcessEvaluator(family, spec, noise))
    return trainer, evaluator


def _tasks(terrain, trainer, eval_episodes=(1, 2)):
    family, spec, _ = terrain
    rng = np.random.default_rng(5)
    env2 = family.mutate(family.mutate(family.initial(), rng), rng)
    thetas = [init_flat(spec, np.random.default_rng(1)) * 3, init_flat(spec, np.random.default_rng(2)) * 3]
    return [
        TrainTask(
            key="p0",
            theta=thetas[0],
            env=family.initial(),
            state=trainer.init_state(thetas[0]),
            seed=111,
            eval_episodes=eval_episodes[0],
        ),
        TrainTask(
            key="p1",
            theta=thetas[1],
            env=env2,
            state=trainer.init_state(thetas[1]),
            seed=222,
            eval_episodes=eval_episodes[1],
        ),
    ]


def test_es_trainer_needs_noise_table(terrain) -> None:
    _, spec, _ = terrain
    with pytest.raises(ValueError, match="noise table"):
        ESTrainer(OPTS, TrainerContext(spec=spec, max_steps=MAX_STEPS))


def test_es_trainer_init_state(terrain) -> None:
    trainer, _ = _setup(terrain)
    st = trainer.init_state(np.ones(5, dtype=np.float32))
    assert st["t"] == 0 and st["lr"] == 0.01 and st["sigma"] == 0.1
    np.testing.assert_array_equal(st["m"], np.zeros(5))
    np.testing.assert_array_equal(st["v"], np.zeros(5))


def test_es_step_submits_all_tasks_in_one_evaluate_call(terrain) -> None:
    trainer, ev = _setup(terrain)
    tasks = _tasks(terrain, trainer)
    steps = trainer.step(tasks, ev)
    assert len(ev.evaluate_calls) == 1
    reqs = ev.evaluate_calls[0]
    assert len(reqs) == POP * len(tasks) + len(tasks)
    assert ev.puts == 2 and len(ev.released) == 2
    assert len(steps) == 2
    # layout per task: POP mirrored requests (+1, -1 on the same offset and seed), then the score request
    for t, task in enumerate(tasks):
        block = reqs[t * (POP + 1) : (t + 1) * (POP + 1)]
        es, score_req = block[:POP], block[POP]
        for k in range(0, POP, 2):
            a, b = es[k], es[k + 1]
            assert a.perturbation.offset == b.perturbation.offset and a.seed == b.seed
            assert (a.perturbation.sign, b.perturbation.sign) == (1, -1)
            assert a.perturbation.sigma == b.perturbation.sigma == 0.1
            assert a.env == task.env and a.max_steps == MAX_STEPS and a.episodes == 1
            assert 0 <= a.perturbation.offset <= NOISE_SIZE - task.theta.size
        assert score_req.perturbation is None and score_req.episodes == task.eval_episodes
        assert score_req.tag == f"{task.key} (score)" and es[0].tag == f"{task.key} (ES)"
        assert score_req.policy == es[0].policy


def test_es_step_update_matches_hand_computation(terrain) -> None:
    """The new theta is exactly Adam on -grad + l2*theta from the evaluator's own returns."""
    _, _, noise = terrain
    trainer, ev = _setup(terrain)
    tasks = _tasks(terrain, trainer)
    steps = trainer.step(tasks, ev)
    reqs, results = ev.evaluate_calls[0], ev.results[0]
    for t, (task, step) in enumerate(zip(tasks, steps)):
        block = slice(t * (POP + 1), (t + 1) * (POP + 1))
        r, q = results[block], reqs[block]
        returns = np.array([x.mean for x in r[:POP]]).reshape(POP // 2, 2)
        eps = np.stack([noise.get(q[k].perturbation.offset, task.theta.size) for k in range(0, POP, 2)])
        g = es_gradient(returns, eps, 0.1)
        theta = task.theta.astype(np.float32)
        expected, adam = adam_step(theta, -g + OPTS.l2 * theta, task.state, 0.01, OPTS.beta1, OPTS.beta2, OPTS.adam_eps)
        np.testing.assert_array_equal(step.theta, expected)
        np.testing.assert_array_equal(step.state["m"], adam["m"])
        assert step.state["t"] == 1
        assert step.score == r[POP].mean
        assert step.metrics["es_return_mean"] == pytest.approx(returns.mean())
        assert step.metrics["es_return_max"] == returns.max()
        assert step.metrics["lr"] == 0.01 and step.metrics["sigma"] == 0.1
        assert not np.array_equal(step.theta, task.theta)
        # the task's own state is left alone
        assert task.state["t"] == 0 and not task.state["m"].any()


def test_es_step_without_eval_episodes_gives_no_score(terrain) -> None:
    trainer, ev = _setup(terrain)
    tasks = _tasks(terrain, trainer, eval_episodes=(0, 3))
    steps = trainer.step(tasks, ev)
    assert len(ev.evaluate_calls[0]) == 2 * POP + 1
    assert steps[0].score is None
    assert steps[1].score == ev.results[0][-1].mean


def test_es_lr_and_sigma_decay_and_floors(terrain) -> None:
    trainer, ev = _setup(terrain)
    task = _tasks(terrain, trainer, eval_episodes=(0, 0))[0]
    seen = []
    for i in range(3):
        step = trainer.step([task], ev)[0]
        seen.append((step.state["lr"], step.state["sigma"], step.metrics["sigma"]))
        task = TrainTask(key=task.key, theta=step.theta, env=task.env, state=step.state, seed=1000 + i)
    # lr: 0.01 -> 0.005 -> max(0.0025, 0.004) -> 0.004; sigma: 0.1 -> 0.05 -> max(0.025, 0.03) -> 0.03
    assert [s[0] for s in seen] == pytest.approx([0.005, 0.004, 0.004], abs=1e-15)
    assert [s[1] for s in seen] == pytest.approx([0.05, 0.03, 0.03], abs=1e-15)
    # the perturbations of a step use the sigma the step started with
    assert [s[2] for s in seen] == pytest.approx([0.1, 0.05, 0.03], abs=1e-15)
    assert [c[0].perturbation.sigma for c in ev.evaluate_calls] == pytest.approx([0.1, 0.05, 0.03], abs=1e-15)


def test_es_default_decay_factor(terrain) -> None:
    opts = dataclasses.replace(OPTS, lr_decay=0.9999, sigma_decay=0.999, lr_floor=0.001, sigma_floor=0.01)
    trainer, ev = _setup(terrain, opts)
    task = _tasks(terrain, trainer, eval_episodes=(0, 0))[0]
    st = trainer.step([task], ev)[0].state
    assert st["lr"] == pytest.approx(0.01 * 0.9999, rel=1e-12)
    assert st["sigma"] == pytest.approx(0.1 * 0.999, rel=1e-12)


def test_es_reset_state_restores_initial_schedule_and_zero_moments(terrain) -> None:
    trainer, ev = _setup(terrain)
    task = _tasks(terrain, trainer)[0]
    step = trainer.step([task], ev)[0]
    assert step.state["m"].any() and step.state["lr"] != 0.01
    st = trainer.reset_state(step.state, step.theta)
    assert st["t"] == 0 and st["lr"] == 0.01 and st["sigma"] == 0.1
    assert st["m"].shape == st["v"].shape == (task.theta.size,)
    assert not st["m"].any() and not st["v"].any()


def test_es_step_is_deterministic(terrain) -> None:
    outs = []
    for _ in range(2):
        trainer, ev = _setup(terrain)
        outs.append(trainer.step(_tasks(terrain, trainer), ev))
    for a, b in zip(*outs):
        assert a.theta.tobytes() == b.theta.tobytes()
        assert a.state["m"].tobytes() == b.state["m"].tobytes()
        assert a.state["v"].tobytes() == b.state["v"].tobytes()
        assert a.score == b.score and a.metrics == b.metrics
    # a different task seed gives different perturbations
    trainer, ev = _setup(terrain)
    tasks = _tasks(terrain, trainer)
    tasks[0].seed = 112
    other = trainer.step(tasks, ev)
    assert other[0].theta.tobytes() != outs[0][0].theta.tobytes()
    assert other[1].theta.tobytes() == outs[0][1].theta.tobytes()  # tasks do not affect each other
