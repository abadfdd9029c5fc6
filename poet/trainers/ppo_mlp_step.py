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

from poet.policies.mlp import tanh_into
from poet.trainers.adam import adam_step_into
from poet.trainers.ppo_loss import LOG_2PI


class _Net:
    """One network of the learner: its layers' weights and biases (the parameters' memory),
    the weights transposed (views), the views of the flat gradient each layer's gradients go
    to, and the buffers of a minibatch's forward and backward, made once for each number of
    rows (a job's minibatches are all one size)."""

    def __init__(self, weights: list[torch.Tensor], grads: list[torch.Tensor], relu: bool):
        self.w, self.b = weights[0::2], weights[1::2]
        self.wt = [w.t() for w in self.w]
        self.grad_w, self.grad_b = grads[0::2], grads[1::2]
        self.relu, self.rows = relu, -1

    def _buffers(self, rows: int) -> None:
        widths = [w.shape[0] for w in self.w]
        self.h = [torch.empty(rows, n) for n in widths]  # each layer's output (the hidden ones activated)
        self.g = [torch.empty(rows, n) for n in widths[:-1]]  # the gradient at each hidden layer's output
        # the tanh goes from a buffer of its own: in place, the compiled loop runs unvectorised
        self.pre = [torch.empty(rows, n) for n in widths[:-1]] if not self.relu else self.h[:-1]
        self.pre_flat = [a.numpy().reshape(-1) for a in self.pre]
        self.h_flat = [h.numpy().reshape(-1) for h in self.h[:-1]]
        self.rows = rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The output for inputs `x` (rows); every layer's input is kept for `backward`."""
        if x.shape[0] != self.rows:
            self._buffers(x.shape[0])
        self.x = x
        inputs, last = x, len(self.w) - 1
        for k in range(last):
            torch.addmm(self.b[k], inputs, self.wt[k], out=self.pre[k])
            if self.relu:
                torch.relu_(self.h[k])
            else:
                tanh_into(self.pre_flat[k], self.h_flat[k])
            inputs = self.h[k]
        return torch.addmm(self.b[last], inputs, self.wt[last], out=self.h[last])

    def backward(self, d_out: torch.Tensor) -> None:
        """Every layer's weight and bias gradient, from the gradient at the output."""
        g = d_out
        for k in range(len(self.w) - 1, -1, -1):
            torch.mm(g.t(), self.h[k - 1] if k else self.x, out=self.grad_w[k])
            torch.sum(g, 0, out=self.grad_b[k])
            if k:
                h, into = self.h[k - 1], self.g[k - 1]
                torch.mm(g, self.w[k], out=into)
                if self.relu:
                    torch.ops.aten.threshold_backward.grad_input(into, h, 0, grad_input=into)
                else:  # torch's own fused grad * (1 - y^2)
                    torch.ops.aten.tanh_backward.grad_input(into, h, grad_input=into)
                g = into


class MLPStep:
    """Minibatch steps of a learner whose actor and value net are `MLPPolicy` modules and whose
    parameters are views of one flat vector (`FlatParameters`, in the order
    actor, log-std, value)."""

    def __init__(self, learner: Any):
        self.learner = learner
        self.grad = np.zeros(learner.flat.size, dtype=np.float32)
        flat = torch.from_numpy(self.grad)
        views, start = [], 0
        for p in learner.params:
            views.append(flat[start : start + p.numel()].view(p.shape))
            start += p.numel()
        weights = [p.detach() for p in learner.params]  # the same memory as the parameters
        na, relu = 2 * len(learner.actor.layers), learner.spec.activation == "relu"
        self.actor = _Net(weights[:na], views[:na], relu)
        self.log_std, self.log_std_grad = weights[na].numpy(), views[na].numpy()
        self.value = _Net(weights[na + 1 :], views[na + 1 :], relu)
        self.rows = -1

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
        out, predicted = self.actor.forward(x), self.value.forward(x)
        if x.shape[0] != self.rows:
            self.d_out, self.d_predicted = torch.empty_like(out), torch.empty_like(predicted)
            self.arrays = (out.numpy(), predicted.numpy().reshape(-1), self.d_out.numpy())
            self.arrays += (self.d_predicted.numpy().reshape(-1), np.empty(len(STATS)))
            self.rows = x.shape[0]
        out_np, predicted_np, d_out, d_predicted, stats = self.arrays
        _loss_gradient(
            out_np, predicted_np, u.numpy(), old_logp.numpy(), advantages.numpy(), returns.numpy(), self.log_std,
            o.clip, o.vf_coef, o.ent_coef, o.value_loss == "huber", d_out, d_predicted, self.log_std_grad, stats,
        )  # fmt: skip
        self.actor.backward(self.d_out)
        self.value.backward(self.d_predicted)

        norm = float(np.linalg.norm(self.grad.astype(np.float64)))
        scale = o.max_grad_norm / norm if norm > o.max_grad_norm else 1.0
        adam_step_into(self.learner.flat, self.grad, scale, adam, o.lr, o.beta1, o.beta2, o.adam_eps)
        for name, value in zip(STATS, stats.tolist()):
            sums[name] += value


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
