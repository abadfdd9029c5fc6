"""What ACCEL, robust PLR and domain randomisation run with by default: the settings that
facebookresearch/dcd's BipedalWalker configs share (`train_scripts/grid_configs/bipedal/
bipedal_accel.json`, `bipedal_robust_plr.json`, `bipedal_dr.json`: the same lines in each),
with the code defaults they leave in place (`arguments.py`, `util/__init__.py`,
`envs/wrappers/vec_normalize.py`, `algos/ppo.py`, `models/walker_models.py`).

Each curriculum's `defaults` is this mapping; its own options (buffer, replay probability,
edits) are in its `Options`. `tests/test_curriculum_defaults.py` checks every value against
the line of dcd it comes from.
"""

from __future__ import annotations

NUM_PROCESSES = 16  # "num_processes": 16 parallel envs, each on its own level
NUM_STEPS = 2048  # "num_steps": steps per env per PPO update
NUM_MINI_BATCH = 32  # "num_mini_batch"

DEFAULTS: dict = {
    "trainer": {
        "name": "ppo",  # dcd's student is trained with PPO (algos/ppo.py)
        "ppo": {
            "n_envs": NUM_PROCESSES,
            "n_steps": NUM_STEPS,
            "epochs": 5,  # "ppo_epoch"
            "minibatch_size": NUM_PROCESSES * NUM_STEPS // NUM_MINI_BATCH,  # 1024 steps per minibatch
            "lr": 3e-4,  # "lr"
            "gamma": 0.99,  # "gamma"
            "gae_lambda": 0.9,  # "gae_lambda"
            "clip": 0.2,  # "clip_param"
            "ent_coef": 0.001,  # "entropy_coef"
            "vf_coef": 0.5,  # "value_loss_coef"
            "max_grad_norm": 0.5,  # "max_grad_norm"
            "adam_eps": 1e-5,  # arguments.py --eps
            "init_log_std": 0.0,  # walker_models.py DiagGaussian: AddBias(torch.zeros(...))
            "value_hidden": [64, 64],  # walker_models.py MLPBase(hidden_size=64): the critic's 64-64 tanh
            "value_init": "orthogonal",  # walker_models.py MLPBase: orthogonal, gain sqrt 2 (critic_linear too)
            "value_loss": "huber",  # "clip_value_loss": false -> algos/ppo.py F.smooth_l1_loss
            "advantage_norm": "batch",  # algos/ppo.py: over the whole rollout, std + 1e-5
            "normalize_obs": False,  # util/__init__.py VecNormalize(ob=False, ...)
            "normalize_rewards": True,  # "normalize_returns": true -> VecNormalize(ret=True)
            "reward_clip": 10.0,  # vec_normalize.py cliprew=10.
            "scoring_updates_stats": True,  # every rollout steps the VecNormalize, scoring ones too
        },
    },
    # walker_models.py MLPBase(hidden_size=64): the actor's 64-64 tanh, orthogonal weights
    # (gain sqrt 2; DiagGaussian's mean head gain 1), zero biases
    "policy": {"hidden": [64, 64], "init": "orthogonal"},
    "evaluation": {"max_steps": 2000},  # envs/bipedalwalker/adversarial.py register(max_episode_steps=2000)
}
