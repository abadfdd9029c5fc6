"""PPO's loss and step, shared by every policy kind's update: the log-probabilities of the
sampled outputs, the clipped objective with the value loss and the entropy bonus, and one
Adam step on the gradient clipped to its global norm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from poet.trainers.adam import adam_step

LOG_2PI = math.log(2.0 * math.pi)


def log_prob_entropy(
    box: bool, log_std: torch.Tensor, out: torch.Tensor, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of samples `u` under the policy with outputs `out` (a Gaussian with
    `log_std` around them for boxes, a categorical over them otherwise), and its entropy."""
    if box:
        z = (u - out) / torch.exp(log_std)
        logp = (-0.5 * z * z - log_std - 0.5 * LOG_2PI).sum(-1)
        ent = (log_std + 0.5 * (1.0 + LOG_2PI)).sum().expand(out.shape[0])
        return logp, ent
    logits = torch.log_softmax(out, dim=-1)
    logp = logits.gather(-1, u.long().unsqueeze(-1)).squeeze(-1)
    ent = -(logits.exp() * logits).sum(-1)
    return logp, ent


def draw_noise(rng: np.random.Generator, box: bool, shape: tuple[int, ...]) -> np.ndarray:
    """A rollout's action noise, float32, one block (steps, envs, outputs): standard normal for
    boxes, standard Gumbel for a categorical (`sample_outputs`)."""
    if box:
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.gumbel(size=shape).astype(np.float32)


def sample_outputs(
    box: bool, log_std: torch.Tensor, out: torch.Tensor, noise: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampled outputs around `out` from their `noise` (`draw_noise`) and their
    log-probabilities: `out + exp(log_std) * noise` for boxes, else the categorical draw by
    Gumbel-max (exact)."""
    eps = torch.as_tensor(noise)
    if box:
        u = out + torch.exp(log_std) * eps
    else:
        u = torch.argmax(torch.log_softmax(out, -1) + eps, dim=-1).to(torch.float32)
    return u, log_prob_entropy(box, log_std, out, u)[0]


class FlatParameters:
    """The parameters of some modules and loose parameters, in order, as views of one float32
    numpy vector (the order of `parameters_to_vector`): reading and writing them all is one
    copy, which a minibatch step does twice."""

    def __init__(self, parts: Sequence[torch.nn.Module | torch.nn.Parameter]):
        self.flat = np.zeros(sum(p.numel() for part in parts for p in _parameters(part)), dtype=np.float32)
        self.params: list[torch.nn.Parameter] = []
        self.parts: list[torch.nn.Module | torch.nn.Parameter] = []
        for part in parts:
            if isinstance(part, torch.nn.Parameter):
                self.parts.append(self._view(part))
                continue
            for module in part.modules():
                for name, p in list(module.named_parameters(recurse=False)):
                    setattr(module, name, self._view(p))
            self.parts.append(part)

    def _view(self, p: torch.Tensor) -> torch.nn.Parameter:
        start = sum(q.numel() for q in self.params)
        part = self.flat[start : start + p.numel()]
        part[:] = p.detach().numpy().ravel()
        view = torch.nn.Parameter(torch.from_numpy(part).view(p.shape))
        self.params.append(view)
        return view


def _parameters(part: torch.nn.Module | torch.nn.Parameter) -> list[torch.nn.Parameter]:
    return [part] if isinstance(part, torch.nn.Parameter) else list(part.parameters())


def clipped_grad(params: list[torch.Tensor], max_norm: float) -> np.ndarray:
    """The parameters' gradient as one float64 vector, scaled to `max_norm` where its norm is above it."""
    grad = (
        torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        .numpy()
        .astype(np.float64)
    )
    norm = float(np.linalg.norm(grad))
    if norm > max_norm:
        grad *= max_norm / norm
    return grad


def clipped_step(
    learner: Any,
    logp: torch.Tensor,
    ent: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    predicted: torch.Tensor,
    returns: torch.Tensor,
    adam: dict[str, Any],
    o: Any,
    sums: dict[str, float],
) -> None:
    """One minibatch step: the clipped objective plus `vf_coef` x the value loss minus
    `ent_coef` x the entropy, its gradient clipped, one Adam step on the learner's flat
    parameters (Adam state in `adam` updated in place); the step's statistics added to `sums`."""
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    policy_loss = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - o.clip, 1 + o.clip) * advantages).mean()
    if o.value_loss == "huber":
        value_loss = torch.nn.functional.smooth_l1_loss(predicted, returns)
    else:
        value_loss = 0.5 * (predicted - returns).pow(2).mean()
    entropy = ent.mean()
    loss = policy_loss + o.vf_coef * value_loss - o.ent_coef * entropy
    for p in learner.params:
        p.grad = None
    loss.backward()
    grad = clipped_grad(learner.params, o.max_grad_norm)
    new, moments = adam_step(learner.get(), grad, adam, o.lr, o.beta1, o.beta2, o.adam_eps)
    adam.update(moments)
    learner.set(new)
    with torch.no_grad():
        sums["policy_loss"] += float(policy_loss)
        sums["value_loss"] += float(value_loss)
        sums["entropy"] += float(entropy)
        sums["approx_kl"] += float(((ratio - 1) - log_ratio).mean())
        sums["clip_fraction"] += float(((ratio - 1).abs() > o.clip).float().mean())


def autograd_step(
    learner: Any,
    x: torch.Tensor,
    u: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    adam: dict[str, Any],
    o: Any,
    sums: dict[str, float],
) -> None:
    """`clipped_step` on a minibatch of single steps `x` of a feed-forward learner, its
    gradient by autograd."""
    logp, ent = learner.log_prob_entropy(learner.policy_out(x), u)
    clipped_step(learner, logp, ent, old_logp, advantages, learner.value_out(x), returns, adam, o, sums)
