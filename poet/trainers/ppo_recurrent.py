"""PPO's learner for the torch policy kinds (`policy.kind` other than mlp), recurrent ones included.

The actor is the run's network of that kind; the value net is a second network of the same
kind and options with one output, in the trainer's state (dcd's maze agent shares its
recurrent core between the two heads; separate networks keep `theta` the actor alone, which
is what every evaluator runs). Each env of a job carries both networks' recurrent states,
zero at every episode start, as the evaluators' are.

A recurrent kind is updated with truncated back-propagation through the rollout, as dcd's
recurrent PPO (`algos/ppo.py` with `algos/storage.py`'s `recurrent_generator`): a
minibatch is a set of whole env sequences (`minibatch_size // n_steps` envs, at least one),
each replayed from the states it had at the rollout's first step, the states zeroed where
an episode starts within it. A feed-forward kind is updated as the mlp is, on minibatches
of single steps.

These networks take no observation normaliser (it cannot be folded into a convolution or
a recurrent cell): they see raw observations (`trainer.ppo.normalize_obs: false`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from poet.policies import PolicySpec
from poet.policies.batched import squash
from poet.policies.kinds import build_module
from poet.trainers.ppo import PPOOptions, gae, positive_value_loss
from poet.trainers.ppo_loss import FlatParameters, autograd_step, clipped_step, log_prob_entropy, sample_outputs


def value_spec(spec: PolicySpec) -> PolicySpec:
    """The value net's spec: the actor's kind and options with one unbounded output."""
    return dataclasses.replace(spec, act_dim=1, action_kind="box", action_low=(-1.0,), action_high=(1.0,))


class KindLearner:
    """Actor, log-std and value net of a torch kind as one flat parameter vector, with each
    env's recurrent states (`begin` zeroes an env's, at its episode start)."""

    def __init__(self, spec: PolicySpec, n_envs: int):
        self.spec = spec
        self.box = spec.action_kind == "box"
        self.value_spec = value_spec(spec)
        self.actor, self.value = build_module(spec), build_module(self.value_spec)
        shared = FlatParameters(
            [self.actor, torch.nn.Parameter(torch.zeros(spec.act_dim if self.box else 0)), self.value]
        )
        self.log_std, self.params, self._flat = shared.parts[1], shared.params, shared.flat
        self.recurrent = self.actor.state_size > 0 or self.value.state_size > 0
        self.h_actor = torch.zeros(n_envs, self.actor.state_size)
        self.h_value = torch.zeros(n_envs, self.value.state_size)

    def get(self) -> np.ndarray:
        return self._flat.copy()

    def set(self, flat: np.ndarray) -> None:
        self._flat[:] = flat

    def split(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat = self.get()
        na, nl = self.spec.num_params, self.log_std.numel()
        return flat[:na], flat[na : na + nl], flat[na + nl :]

    def load_stored(self, theta: np.ndarray, state: dict[str, Any], norm: Any) -> None:
        """The stored networks as they are (raw observations: nothing to re-express)."""
        self.set(np.concatenate([theta, state["log_std"], state["value"]]).astype(np.float32))

    def stored(self, norm: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(theta, log_std, value) to store."""
        return self.split()

    def _obs(self, z: np.ndarray | torch.Tensor) -> torch.Tensor:
        z = torch.as_tensor(z, dtype=torch.float32)
        return z.reshape(*z.shape[:-1], *self.spec.shape)

    def env_actions(self, u: np.ndarray) -> np.ndarray:
        """The evaluators' mapping from network output to env action (tanh to bounds, or the index)."""
        return squash(self.spec, np.asarray(u, dtype=np.float32)) if self.box else u.astype(np.int64)

    def log_prob_entropy(self, out: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return log_prob_entropy(self.box, self.log_std, out, u)

    def begin(self, envs: list[int]) -> None:
        """These envs start new episodes: their states are zero."""
        self.h_actor[envs] = 0.0
        self.h_value[envs] = 0.0

    def initial_states(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of every env's states now (a rollout's starting states)."""
        return self.h_actor.clone(), self.h_value.clone()

    @torch.no_grad()
    def sample(self, z: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled outputs (`sample_outputs` with this step's `noise`), their log-probabilities
        and the values; every env's states advance."""
        x = self._obs(z)
        out, self.h_actor = self.actor(x, self.h_actor)
        value, self.h_value = self.value(x, self.h_value)
        u, logp = sample_outputs(self.box, self.log_std, out, noise)
        return u.numpy(), logp.numpy(), value.squeeze(-1).numpy()

    @torch.no_grad()
    def values(self, z: np.ndarray, envs: list[int] | None = None) -> np.ndarray:
        """Values of observations of `envs` (all: None) from their current states, which stay as they are."""
        h = self.h_value if envs is None else self.h_value[envs]
        return self.value(self._obs(z), h)[0].squeeze(-1).numpy()

    def minibatch_step(self, x: torch.Tensor, *batch: Any) -> None:
        """One clipped-objective step of a feed-forward kind on a minibatch of single steps (`autograd_step`)."""
        autograd_step(self, x, *batch)

    def policy_out(self, z: torch.Tensor) -> torch.Tensor:
        """Outputs of a feed-forward kind for a batch of single steps."""
        return self.actor(self._obs(z), torch.zeros(z.shape[0], 0))[0]

    def value_out(self, z: torch.Tensor) -> torch.Tensor:
        """Values of a feed-forward kind for a batch of single steps."""
        return self.value(self._obs(z), torch.zeros(z.shape[0], 0))[0].squeeze(-1)

    def replay(
        self, z: torch.Tensor, starts: torch.Tensor, h_actor: torch.Tensor, h_value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs (T, B, act_dim) and values (T, B) of B env sequences of T steps, from their
        starting states, each state zeroed where `starts` (T, B) is 1 (an episode starts there)."""
        outs, values = [], []
        for t in range(z.shape[0]):
            keep = (1.0 - starts[t]).unsqueeze(-1)
            x = self._obs(z[t])
            out, h_actor = self.actor(x, h_actor * keep)
            value, h_value = self.value(x, h_value * keep)
            outs.append(out)
            values.append(value.squeeze(-1))
        return torch.stack(outs), torch.stack(values)


def episode_starts(continues: np.ndarray) -> np.ndarray:
    """1 where a step begins a new episode within the rollout (after a step that ended one)."""
    starts = np.zeros_like(continues)
    starts[1:] = 1.0 - continues[:-1]
    return starts


def update_sequences(
    learner: KindLearner,
    batch: Any,
    z: np.ndarray,
    rewards: np.ndarray,
    adam: dict[str, Any],
    o: PPOOptions,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Epochs of clipped-objective updates of a recurrent kind on whole env sequences (see the
    module docstring); Adam state updated in place."""
    adv = gae(rewards, batch.values, batch.next_values, batch.continues, o.gamma, o.gae_lambda)
    pvl = positive_value_loss(adv)
    returns = adv + batch.values
    if o.advantage_norm == "batch":
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-5) if adv.size > 1 else adv
    steps, n_envs = adv.shape
    zt = torch.as_tensor(z.astype(np.float32))
    ut = torch.as_tensor(batch.u.astype(np.float32))
    old_logp = torch.as_tensor(batch.logp.astype(np.float32))
    adv_t = torch.as_tensor(adv.astype(np.float32))
    ret_t = torch.as_tensor(returns.astype(np.float32))
    starts = torch.as_tensor(episode_starts(batch.continues).astype(np.float32))
    h_actor0, h_value0 = batch.initial_state
    per_batch = max(1, min(n_envs, o.minibatch_size // steps))
    sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clip_fraction": 0.0}
    count = 0
    for _ in range(o.epochs):
        order = rng.permutation(n_envs)
        for first in range(0, n_envs - per_batch + 1, per_batch):  # full minibatches only
            envs = torch.as_tensor(order[first : first + per_batch])
            out, predicted = learner.replay(zt[:, envs], starts[:, envs], h_actor0[envs], h_value0[envs])
            size = steps * per_batch
            logp, ent = learner.log_prob_entropy(out.reshape(size, -1), ut[:, envs].reshape(size, *ut.shape[2:]))
            a = adv_t[:, envs].reshape(size)
            if o.advantage_norm == "minibatch" and size > 1:
                a = (a - a.mean()) / (a.std() + 1e-8)
            target = ret_t[:, envs].reshape(size)
            clipped_step(
                learner, logp, ent, old_logp[:, envs].reshape(size), a, predicted.reshape(size), target, adam, o, sums
            )
            count += 1
    return {**{k: v / max(1, count) for k, v in sums.items()}, "positive_value_loss": pvl}
