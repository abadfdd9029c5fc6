"""PPO's fast paths against the plain ones: the compiled rollouts (`poet.evaluation.recording`)
against the gymnasium rollouts (the same streams give the same steps, samples,
log-probabilities and values), and the mlp's written-out gradient against autograd's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import envs
from poet.evaluation import recording
from poet.policies import PolicySpec, init_flat, spec_for_spaces
from poet.trainers import PPOOptions, PPOTrainer, TrainerContext, ppo_job
from poet.trainers.adam import adam_step, adam_step_into
from poet.trainers.base import ErrorPolicy
from poet.trainers.ppo import Normaliser
from poet.trainers.ppo_loss import autograd_step

TERRAIN = envs.make_family("terrain")
MAX_STEPS = 150  # shorter than a rollout: episodes end, and some are cut at the cap


def _learner(seed: int = 3):
    """An mlp learner with a random actor and value net under a non-trivial normaliser."""
    env = TERRAIN.make_env(TERRAIN.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (40, 40), "tanh")
    env.close()
    rng = np.random.default_rng(seed)
    learner = ppo_job._Learner(spec, [64, 64])
    theta = init_flat(spec, rng)
    theta[-2] = 2.0  # drive on: episodes end in pits as well as at the step cap
    state = PPOTrainer(PPOOptions(), TrainerContext(spec, MAX_STEPS, ErrorPolicy())).init_state(theta)
    state.update(
        value=init_flat(learner.value_spec, rng),
        obs_mean=rng.normal(size=spec.obs_dim) * 0.1,
        obs_var=np.exp(rng.normal(size=spec.obs_dim)),
        obs_count=100.0,
        log_std=np.array([-0.5, 0.2], dtype=np.float32),
    )
    norm = Normaliser(state, True, 0.1)
    learner.load_stored(theta, state, norm)
    return SimpleNamespace(family=TERRAIN, spec=spec, noise=None), learner, norm


def _levels():
    rough = TERRAIN.initial().replace(roughness=2.0, pit_gap=[0.5, 1.5])
    return [rough.with_course_seed(5), rough.with_course_seed(None), TERRAIN.initial(), rough.with_course_seed(7)]


FIELDS = ("obs", "u", "logp", "values", "rewards", "next_values", "continues")


def test_the_compiled_rollout_gives_the_torch_rollouts_numbers_on_the_same_seeds():
    """Two collections in a row (episodes carried across them), fresh and pinned courses,
    episodes that end and episodes cut at the step cap: every recorded number within 1e-6
    (relative above 1) of the gymnasium envs stepped with the torch networks; the episodes
    the same. The difference is the order of float32 sums in the forwards."""
    worker, learner, norm = _learner()
    levels = _levels()
    torch_rollouts = ppo_job._Rollouts(worker, levels, MAX_STEPS, seed=11)
    compiled = ppo_job._KernelRollouts(worker, learner.value_spec, levels, MAX_STEPS, 11, TERRAIN.row_kernel())
    ended = 0
    for _ in range(2):
        a, b = torch_rollouts.collect(learner, norm, 400), compiled.collect(learner, norm, 400)
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.shape == y.shape, name
            scale = np.maximum(1.0, np.abs(x))
            assert np.max(np.abs(x - y) / scale) <= 1e-6, (name, np.max(np.abs(x - y) / scale))
        assert a.episode_slots == b.episode_slots and a.episode_lengths == b.episode_lengths
        np.testing.assert_allclose(a.episode_returns, b.episode_returns, rtol=1e-6, atol=1e-6)
        ended += len(a.episode_lengths)
        assert (a.continues == 0).any() and (a.next_values[a.continues == 0] != 0).any()  # cut episodes bootstrap
    assert ended >= 8 and min(a.episode_lengths) < MAX_STEPS  # terminations as well as cuts
    torch_rollouts.close()


def test_the_compiled_rollout_does_not_depend_on_how_many_courses_are_built_at_once(monkeypatch):
    worker, learner, norm = _learner()
    levels = [TERRAIN.initial().replace(roughness=3.0).with_course_seed(None)] * 3
    runs = []
    for per_build in (1, 16):
        monkeypatch.setattr(recording, "ROWS_PER_BUILD", per_build)
        rollouts = ppo_job._KernelRollouts(worker, learner.value_spec, levels, 60, 4, TERRAIN.row_kernel())
        runs.append([rollouts.collect(learner, norm, 250) for _ in range(2)])
    for a, b in zip(*runs):
        for name in FIELDS:
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert a.episode_returns == b.episode_returns and len(a.episode_returns) > 6


def test_the_recorder_refuses_noise_of_the_wrong_shape():
    worker, learner, norm = _learner()
    rollouts = ppo_job._KernelRollouts(worker, learner.value_spec, _levels(), MAX_STEPS, 1, TERRAIN.row_kernel())
    actor, _, value = learner.split()
    with pytest.raises(ValueError, match=r"expected noise of shape \(10, 4, 2\)"):
        rollouts.recorder.collect(actor, value, norm.mean, norm.std, np.ones(2), np.zeros((10, 3, 2)))


@pytest.mark.parametrize("value_loss", ["mse", "huber"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_the_written_out_gradient_is_autograds(value_loss, activation):
    """`MLPStep` against `autograd_step` on one minibatch whose ratios fall inside and outside
    the clipping range and whose value errors both sides of Huber's bend: the same losses and
    the same gradient (up to float32 round-off)."""
    spec = PolicySpec(22, 2, (40, 40), activation, "box", (-1.0, -1.0), (1.0, 1.0))
    rng = np.random.default_rng(0)
    learners = [ppo_job._Learner(spec, [64, 64]) for _ in range(2)]
    flat = (rng.standard_normal(learners[0].get().size) * 0.3).astype(np.float32)
    for learner in learners:
        learner.set(flat)
    n = 512
    torch.manual_seed(0)
    x, u = torch.randn(n, 22), torch.randn(n, 2)
    with torch.no_grad():  # ratios of the new policy to the old around 1, some clipped
        logp = learners[1].log_prob_entropy(learners[1].policy_out(x), u)[0]
    old_logp = logp + torch.as_tensor(rng.normal(0.0, 0.3, n).astype(np.float32))
    adv, ret = torch.randn(n), 2.0 * torch.randn(n)
    o = PPOOptions(value_loss=value_loss, lr=0.0, max_grad_norm=1e9, ent_coef=0.01)
    sums = [
        dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"), 0.0) for _ in range(2)
    ]
    adam = [{"t": 0, "m": np.zeros(flat.size, np.float32), "v": np.zeros(flat.size, np.float32)} for _ in range(2)]
    learners[0].minibatch_step(x, u, old_logp, adv, ret, adam[0], o, sums[0])
    autograd_step(learners[1], x, u, old_logp, adv, ret, adam[1], o, sums[1])
    assert 0.1 < sums[1]["clip_fraction"] < 0.9
    written = learners[0]._step.grad
    reference = torch.cat([p.grad.reshape(-1) for p in learners[1].params]).numpy()
    np.testing.assert_allclose(written, reference, rtol=1e-4, atol=1e-6 * np.abs(reference).max())
    assert sums[0] == pytest.approx(sums[1], rel=1e-5, abs=1e-7)  # float64 sums against torch's float32 means


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.int32)


@pytest.mark.parametrize("max_norm", [np.inf, 0.5])
def test_the_compiled_adam_step_is_numpys_to_the_bit(max_norm):
    """`adam_step_into` (the written-out step's) against `adam_step` on the float64 gradient
    clipped as before: the same parameters and moments, bit for bit, with and without the clip."""
    rng = np.random.default_rng(3)
    for t in (0, 1, 40):
        theta = rng.standard_normal(500).astype(np.float32)
        grad = (rng.standard_normal(500) * 10.0 ** rng.uniform(-6, 1, 500)).astype(np.float32)
        state = {"t": t, "m": rng.standard_normal(500).astype(np.float32) * 0.01}
        state["v"] = np.abs(rng.standard_normal(500)).astype(np.float32) * 1e-4
        g64 = grad.astype(np.float64)
        norm = float(np.linalg.norm(g64))
        scale = max_norm / norm if norm > max_norm else 1.0
        expected, moments = adam_step(theta, g64 * scale if scale != 1.0 else g64, state, 3e-4, 0.9, 0.999, 1e-5)
        into = {k: np.copy(v) for k, v in state.items()}
        adam_step_into(theta, grad, scale, into, 3e-4, 0.9, 0.999, 1e-5)
        assert np.array_equal(_bits(theta), _bits(expected)) and into["t"] == moments["t"] == t + 1
        assert np.array_equal(_bits(into["m"]), _bits(moments["m"])) and np.array_equal(
            _bits(into["v"]), _bits(moments["v"])
        )


def test_the_normaliser_gives_numpys_floats_for_any_shape():
    rng = np.random.default_rng(4)
    norm = Normaliser({"obs_mean": rng.standard_normal(5), "obs_var": rng.random(5), "obs_count": 3.0}, True, 1e-2)
    for obs in (rng.standard_normal((7, 3, 5)), rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5)):
        expected = ((obs - norm.mean) / norm.std).astype(np.float32)
        got = norm.apply(obs)
        assert got.shape == expected.shape and np.array_equal(_bits(got), _bits(expected))
