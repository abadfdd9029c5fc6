"""PPO's compiled rollouts (`poet.evaluation.recording`) against its gymnasium rollouts: the
same streams give the same steps, samples, log-probabilities and values."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import envs
from poet.evaluation import recording
from poet.policies import init_flat, spec_for_spaces
from poet.trainers import PPOOptions, PPOTrainer, TrainerContext, ppo_job
from poet.trainers.base import ErrorPolicy
from poet.trainers.ppo import Normaliser

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
