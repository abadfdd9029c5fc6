"""The mlp learner's minibatch step for box actions with its gradient written out.

The loss is `clipped_step`'s (the clipped objective, `vf_coef` x the value loss, minus
`ent_coef` x the entropy) and the gradient is the one autograd takes of it: at the
networks' outputs in one compiled pass over the minibatch's rows (`_loss_gradient`), then
layer by layer with torch's kernels (matrix products, `tanh_backward`) into one flat buffer
in the order of the learner's parameters. No graph is built. `tests/test_ppo_rollouts.py`
checks the gradient against autograd's.

Where autograd's rules choose, this follows them: the minimum of the two surrogate terms
passes the gradient of the smaller one (both where they are equal, which happens only
inside the clipping range or at a zero advantage, where the two gradients agree), and the
clamp passes it inside [1 - clip, 1 + clip], ends included.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import torch

from poet.policies.mlp_torch import tanh_values
from poet.trainers.adam import adam_step_into
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
        out, actor_h = self._forward(self.actor, x)
        predicted, value_h = self._forward(self.value, x)
        d_out, d_predicted = torch.empty_like(out), torch.empty_like(predicted)
        stats = np.empty(5)
        arrays = (out, predicted.reshape(-1), u, old_logp, advantages, returns, self.log_std)
        _loss_gradient(
            *(t.numpy() for t in arrays), o.clip, o.vf_coef, o.ent_coef, o.value_loss == "huber",
            d_out.numpy(), d_predicted.numpy().reshape(-1), self.log_std_grad.numpy(), stats,
        )  # fmt: skip
        self._backward(self.actor, self.actor_grad, actor_h, d_out)
        self._backward(self.value, self.value_grad, value_h, d_predicted)

        norm = float(np.linalg.norm(self.grad.astype(np.float64)))
        scale = o.max_grad_norm / norm if norm > o.max_grad_norm else 1.0
        adam_step_into(self.learner.flat, self.grad, scale, adam, o.lr, o.beta1, o.beta2, o.adam_eps)
        for name, value in zip(STATS, stats):
            sums[name] += float(value)

    def _forward(self, layers: Layers, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The network's output and the inputs of each layer (x, then each hidden activation)."""
        inputs = [x]
        for w, b in layers[:-1]:
            a = torch.addmm(b, inputs[-1], w.t())
            inputs.append(torch.relu(a) if self.relu else tanh_values(a))
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


STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


@numba.njit(cache=True, error_model="numpy")
def _loss_gradient(
    out, predicted, u, old_logp, advantages, returns, log_std, clip, vf_coef, ent_coef, huber,
    d_out, d_predicted, d_log_std, stats,
):  # fmt: skip
    """The loss's gradient at the networks' outputs (`out`, `predicted`) and at the log-std,
    and the step's statistics (`STATS`, into `stats`), in one pass over the minibatch's rows:
    float32 per row as torch computes it, the sums over rows in float64."""
    n, act = out.shape
    std = np.exp(log_std)
    lo, hi = np.float32(1.0 - clip), np.float32(1.0 + clip)
    half, one, zero = np.float32(0.5), np.float32(1.0), np.float32(0.0)
    log_norm = np.float32(0.5 * LOG_2PI)
    policy_scale, value_scale = np.float32(-1.0 / n), np.float32(vf_coef / n)
    d_log_std_sum = np.zeros(act)
    z = np.empty(act, dtype=np.float32)
    policy_sum = value_sum = kl_sum = clipped_count = 0.0
    for i in range(n):
        logp = zero
        for j in range(act):
            z[j] = (u[i, j] - out[i, j]) / std[j]
            logp += -half * z[j] * z[j] - log_std[j] - log_norm
        log_ratio = logp - old_logp[i]
        ratio = np.exp(log_ratio)
        a = advantages[i]
        unclipped = ratio * a
        clipped = (lo if ratio < lo else (hi if ratio > hi else ratio)) * a
        policy_sum += min(unclipped, clipped)
        inside = lo <= ratio <= hi
        # autograd's rules: the smaller term's gradient (both where equal), the clamp's inside its range
        d_logp = (a if unclipped <= clipped or inside else zero) * ratio * policy_scale
        for j in range(act):
            d_out[i, j] = d_logp * z[j] / std[j]
            d_log_std_sum[j] += d_logp * (z[j] * z[j] - one)
        error = predicted[i] - returns[i]
        if huber:  # smooth L1 with beta 1
            value_sum += 0.5 * error * error if abs(error) < 1.0 else abs(error) - 0.5
            d = -one if error < -1.0 else (one if error > 1.0 else error)
        else:  # half the squared error
            value_sum += 0.5 * error * error
            d = error
        d_predicted[i] = d * value_scale
        kl_sum += (ratio - one) - log_ratio
        clipped_count += 1.0 if abs(ratio - one) > clip else 0.0
    entropy = 0.0
    for j in range(act):
        d_log_std[j] = np.float32(d_log_std_sum[j] - ent_coef)
        entropy += log_std[j] + 0.5 * (1.0 + LOG_2PI)
    stats[0], stats[1], stats[2] = -policy_sum / n, value_sum / n, entropy
    stats[3], stats[4] = kl_sum / n, clipped_count / n
