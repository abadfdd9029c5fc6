"""The mlp learner's minibatch step for box actions with its gradient written out.

The loss is `clipped_step`'s (the clipped objective, `vf_coef` x the value loss, minus
`ent_coef` x the entropy) and the gradient is the one autograd takes of it, computed layer
by layer with the same torch kernels (matrix products, `tanh_backward`) into one flat
buffer in the order of the learner's parameters: no graph is built, and a minibatch step
costs about two thirds of the autograd one. `tests/test_ppo_rollouts.py` checks the
gradient against autograd's.

Where autograd's rules choose, this follows them: the minimum of the two surrogate terms
passes the gradient of the smaller one (both where they are equal, which happens only
inside the clipping range or at a zero advantage, where the two gradients agree), and the
clamp passes it inside [1 - clip, 1 + clip], ends included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from poet.policies.mlp import tanh_into
from poet.trainers.adam import adam_step
from poet.trainers.ppo_loss import LOG_2PI

Layers = list[tuple[torch.Tensor, torch.Tensor]]


class MLPStep:
    """Minibatch steps of a learner whose actor and value net are `MLPPolicy` modules and whose
    parameters are views of one flat vector (`FlatParameters`, in the order
    actor, log-std, value)."""

    def __init__(self, learner: Any):
        self.learner = learner
        self.grad = np.zeros(learner.get().size, dtype=np.float32)
        flat = torch.from_numpy(self.grad)
        views, start = [], 0
        for p in learner.params:
            views.append(flat[start : start + p.numel()].view(p.shape))
            start += p.numel()
        weights = [p.detach() for p in learner.params]  # the same memory as the parameters
        na = 2 * len(learner.actor.layers)
        self.actor, self.actor_grad = _pairs(weights[:na]), _pairs(views[:na])
        self.log_std, self.log_std_grad = weights[na], views[na]
        self.value, self.value_grad = _pairs(weights[na + 1 :]), _pairs(views[na + 1 :])
        self.relu = learner.spec.activation == "relu"

    @torch.no_grad()
    def step(
        self,
        x: torch.Tensor,
        u: torch.Tensor,
        old_logp: torch.Tensor,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        adam: dict[str, Any],
        o: Any,
        sums: dict[str, float],
    ) -> None:
        """One minibatch step on normalised observations `x` (rows): loss, gradient, its clip
        to `max_grad_norm`, one Adam step (state in `adam`); the step's statistics added to `sums`."""
        n = x.shape[0]
        out, actor_h = self._forward(self.actor, x)
        predicted, value_h = self._forward(self.value, x)
        predicted = predicted.squeeze(-1)
        std = torch.exp(self.log_std)
        z = (u - out) / std
        logp = (-0.5 * z * z - self.log_std - 0.5 * LOG_2PI).sum(-1)
        log_ratio = logp - old_logp
        ratio = torch.exp(log_ratio)
        unclipped = ratio * advantages
        clipped = torch.clamp(ratio, 1 - o.clip, 1 + o.clip) * advantages
        policy_loss = -torch.min(unclipped, clipped).mean()
        error = predicted - returns
        if o.value_loss == "huber":
            value_loss = torch.nn.functional.smooth_l1_loss(predicted, returns)
            d_predicted = torch.clamp(error, -1.0, 1.0)
        else:
            value_loss = 0.5 * error.pow(2).mean()
            d_predicted = error
        entropy = (self.log_std + 0.5 * (1.0 + LOG_2PI)).sum()

        inside = (ratio >= 1 - o.clip) & (ratio <= 1 + o.clip)
        d_ratio = torch.where((unclipped <= clipped) | inside, advantages, 0.0)
        d_logp = d_ratio * ratio * (-1.0 / n)
        self._backward(self.actor, self.actor_grad, actor_h, d_logp.unsqueeze(-1) * z / std)
        self.log_std_grad.copy_((d_logp.unsqueeze(-1) * (z * z - 1.0)).sum(0) - o.ent_coef)
        self._backward(self.value, self.value_grad, value_h, (d_predicted * (o.vf_coef / n)).unsqueeze(-1))

        grad = self.grad.astype(np.float64)
        norm = float(np.linalg.norm(grad))
        if norm > o.max_grad_norm:
            grad *= o.max_grad_norm / norm
        new, moments = adam_step(self.learner.get(), grad, adam, o.lr, o.beta1, o.beta2, o.adam_eps)
        adam.update(moments)
        self.learner.set(new)
        sums["policy_loss"] += float(policy_loss)
        sums["value_loss"] += float(value_loss)
        sums["entropy"] += float(entropy)
        sums["approx_kl"] += float(((ratio - 1) - log_ratio).mean())
        sums["clip_fraction"] += float(((ratio - 1).abs() > o.clip).float().mean())

    def _forward(self, layers: Layers, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The network's output and the inputs of each layer (x, then each hidden activation)."""
        inputs = [x]
        for w, b in layers[:-1]:
            a = torch.addmm(b, inputs[-1], w.t())
            inputs.append(torch.relu(a) if self.relu else _tanh(a))
        w, b = layers[-1]
        return torch.addmm(b, inputs[-1], w.t()), inputs

    def _backward(self, layers: Layers, grads: Layers, inputs: list[torch.Tensor], d_out: torch.Tensor) -> None:
        """The gradient of every layer's weights and bias, from the gradient at the output."""
        g = d_out
        for k in range(len(layers) - 1, -1, -1):
            grad_w, grad_b = grads[k]
            torch.mm(g.t(), inputs[k], out=grad_w)
            torch.sum(g, 0, out=grad_b)
            if k:
                g = torch.mm(g, layers[k][0])
                h = inputs[k]
                g = torch.ops.aten.threshold_backward(g, h, 0) if self.relu else torch.ops.aten.tanh_backward(g, h)


def _pairs(tensors: list[torch.Tensor]) -> Layers:
    return list(zip(tensors[0::2], tensors[1::2]))


def _tanh(a: torch.Tensor) -> torch.Tensor:
    """The mlp kind's tanh (`poet.policies.mlp_torch.tanh`) without autograd's wrapper."""
    y = torch.empty_like(a)
    tanh_into(a.numpy().reshape(-1), y.numpy().reshape(-1))
    return y
