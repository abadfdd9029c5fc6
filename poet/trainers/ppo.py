"""PPO as a POET trainer: each pair's training loop runs as one job on the evaluation pool.

Per POET iteration and pair, one job collects `n_steps` from each of `n_envs` envs of the
pair's params and does `epochs` passes of clipped-objective minibatch updates, repeated
`updates_per_iteration` times; all pairs' jobs go to the pool together. The pieces are
the usual ones (Schulman et al. 2017, and the defaults of common implementations): GAE,
a value network, an entropy bonus, per-minibatch advantage normalisation, global
gradient-norm clipping and Adam.

How it fits POET's agents (a plain MLP `theta` that the evaluators run on raw observations):

* The actor is the run's policy network. Continuous actions: a Gaussian over the
  network's pre-squash output with a state-independent log-std; the env gets the same
  squash to the action bounds the evaluators apply, so the mean action is exactly what
  the evaluators score. Discrete actions: a categorical over the outputs (the evaluators
  take the argmax).
* Observation normalisation keeps running mean and variance in the agent's state. The
  networks learn in normalised coordinates; `theta` (and the value net in the state) are
  stored with the normaliser folded into the first layer, so `theta` is an ordinary
  policy on raw observations and a statistics update never changes what the agent does.
  (No clipping of normalised observations, which would not fold; instead the std is
  floored at `obs_std_floor`, so a feature that was constant in training, e.g. a look-ahead
  over flat ground, is not blown up when a harder env makes it vary.)
* Rewards are scaled by the running standard deviation of the discounted return.
* All randomness (env seeds, action noise, value-net init, minibatch order) comes from
  the task's seed through numpy; torch runs on one thread, so a job's result depends on
  its payload only, in-process or on any Ray worker.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from envs import EnvParams
from poet.config import out_of_range
from poet.evaluation import EvalRequest, Evaluator
from poet.evaluation.jobs import Job, WorkerView
from poet.policies import PolicySpec, init_flat
from poet.torch_policy import MLPPolicy, to_actions
from poet.trainers.adam import adam_step
from poet.trainers.base import EvaluationFailed, TrainerContext, TrainStep, TrainTask

JOB_FN = "poet.trainers.ppo:ppo_job"
REGRET_FN = "poet.trainers.ppo:ppo_regret_job"
STD_EPS = 1e-8
LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class PPOOptions:
    """PPO hyper-parameters (defaults: common ones for continuous control)."""

    n_envs: int = 8  # envs stepped together in a job
    n_steps: int = 256  # steps per env per update
    updates_per_iteration: int = 1  # PPO updates per POET iteration
    epochs: int = 10  # passes over each update's rollout (n_steps from each env or level)
    # env steps per minibatch (at most the batch); a remainder short of a full minibatch is left out
    minibatch_size: int = 256
    lr: float = 3e-4  # Adam step size (no schedule)
    gamma: float = 0.99  # discount factor
    gae_lambda: float = 0.95  # GAE's lambda
    clip: float = 0.2  # the policy ratio's clipping range: [1 - clip, 1 + clip]
    ent_coef: float = 0.0  # weight of the entropy bonus in the loss
    vf_coef: float = 0.5  # weight of the value loss (half the mean squared error) in the loss
    max_grad_norm: float = 0.5  # the gradient of actor, log-std and value net together is clipped to this norm
    init_log_std: float = -0.5  # initial log-std of the Gaussian over the pre-squash actions (learned, per action)
    # hidden layer sizes of the value network (the policy's activation); it lives in the
    # trainer's state, not in the agent's theta
    value_hidden: list[int] = field(default_factory=lambda: [64, 64])
    normalize_obs: bool = True  # running mean/std normalisation of observations, folded into theta's first layer
    obs_std_floor: float = 0.1  # a feature constant so far is scaled by at most 1 / floor when it varies later
    normalize_rewards: bool = True  # rewards divided by the running std of the discounted return
    beta1: float = 0.9  # Adam's first-moment decay
    beta2: float = 0.999  # Adam's second-moment decay
    adam_eps: float = 1e-5  # Adam's epsilon, added to sqrt(v)

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(
                self,
                ("n_envs", "n_steps", "updates_per_iteration", "epochs", "minibatch_size"),
                lambda v: v >= 1,
                ">= 1",
            ),
            *out_of_range(self, ("lr", "clip", "max_grad_norm", "adam_eps", "obs_std_floor"), lambda v: v > 0, "> 0"),
            *out_of_range(self, ("gamma", "gae_lambda"), lambda v: 0 <= v <= 1, "in [0, 1]"),
            *out_of_range(self, ("beta1", "beta2"), lambda v: 0 <= v < 1, "in [0, 1)"),
            *out_of_range(self, ("ent_coef", "vf_coef"), lambda v: v >= 0, ">= 0"),
            *out_of_range(
                self, ["value_hidden"], lambda v: len(v) > 0 and min(v) >= 1, "at least one layer, all sizes >= 1"
            ),
        ]


# ---------------------------------------------------------------- normaliser folding


def _first_layer(flat: np.ndarray, in_dim: int, out_dim: int) -> tuple[np.ndarray, np.ndarray]:
    w = flat[: in_dim * out_dim].astype(np.float64).reshape(out_dim, in_dim)
    b = flat[in_dim * out_dim : in_dim * out_dim + out_dim].astype(np.float64)
    return w, b


def fold(flat: np.ndarray, in_dim: int, out_dim: int, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Weights on normalised inputs (x - mean) / std -> the same function on raw inputs x."""
    w, b = _first_layer(flat, in_dim, out_dim)
    out = np.array(flat, dtype=np.float32)
    out[: in_dim * out_dim] = (w / std).ravel()
    out[in_dim * out_dim : in_dim * out_dim + out_dim] = b - w @ (mean / std)
    return out


def unfold(flat: np.ndarray, in_dim: int, out_dim: int, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Inverse of `fold`: weights on raw inputs -> the same function on normalised inputs."""
    w, b = _first_layer(flat, in_dim, out_dim)
    out = np.array(flat, dtype=np.float32)
    out[: in_dim * out_dim] = (w * std).ravel()
    out[in_dim * out_dim : in_dim * out_dim + out_dim] = b + w @ mean
    return out


def merge_moments(
    mean: np.ndarray, var: np.ndarray, count: float, batch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Running mean/variance merged with a batch of rows (parallel-variance formula)."""
    n = batch.shape[0]
    if n == 0:
        return mean, var, count
    b_mean, b_var = batch.mean(axis=0), batch.var(axis=0)
    total = count + n
    delta = b_mean - mean
    new_mean = mean + delta * n / total
    m2 = var * count + b_var * n + delta * delta * count * n / total
    return new_mean, m2 / total, float(total)


# ---------------------------------------------------------------- the learner inside a job


class _Learner:
    """Actor, log-std and value net in normalised coordinates, as one flat parameter vector."""

    def __init__(self, spec: PolicySpec, value_hidden: Sequence[int]):
        self.spec = spec
        self.box = spec.action_kind == "box"
        self.actor = MLPPolicy(spec)
        self.value_spec = PolicySpec(spec.obs_dim, 1, tuple(value_hidden), spec.activation, "box", (-1.0,), (1.0,))
        self.value = MLPPolicy(self.value_spec)
        self.log_std = torch.nn.Parameter(torch.zeros(spec.act_dim if self.box else 0))
        self.params = [*self.actor.parameters(), self.log_std, *self.value.parameters()]

    def get(self) -> np.ndarray:
        return torch.nn.utils.parameters_to_vector(self.params).detach().numpy().astype(np.float32)

    def set(self, flat: np.ndarray) -> None:
        torch.nn.utils.vector_to_parameters(torch.as_tensor(np.asarray(flat, dtype=np.float32)), self.params)

    def load(self, actor: np.ndarray, log_std: np.ndarray, value: np.ndarray) -> None:
        self.set(np.concatenate([actor, log_std, value]).astype(np.float32))

    def split(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat = self.get()
        na, nl = self.spec.num_params, self.log_std.numel()
        return flat[:na], flat[na : na + nl], flat[na + nl :]

    def env_actions(self, u: np.ndarray) -> np.ndarray:
        """The evaluators' mapping from network output to env action (tanh to bounds, or the index)."""
        return to_actions(self.spec, torch.as_tensor(u)) if self.box else u.astype(np.int64)

    def log_prob_entropy(self, out: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of samples `u` under the policy with outputs `out`, and its entropy."""
        if self.box:
            z = (u - out) / torch.exp(self.log_std)
            logp = (-0.5 * z * z - self.log_std - 0.5 * LOG_2PI).sum(-1)
            ent = (self.log_std + 0.5 * (1.0 + LOG_2PI)).sum().expand(out.shape[0])
            return logp, ent
        logits = torch.log_softmax(out, dim=-1)
        logp = logits.gather(-1, u.long().unsqueeze(-1)).squeeze(-1)
        ent = -(logits.exp() * logits).sum(-1)
        return logp, ent

    @torch.no_grad()
    def sample(self, z: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled outputs u, their log-probabilities and the values, for normalised observations z."""
        zt = torch.as_tensor(z, dtype=torch.float32)
        out = self.actor(zt)
        if self.box:
            eps = torch.as_tensor(rng.standard_normal(out.shape).astype(np.float32))
            u = out + torch.exp(self.log_std) * eps
        else:  # Gumbel-max: an exact categorical draw from numpy's stream
            g = torch.as_tensor(rng.gumbel(size=out.shape).astype(np.float32))
            u = torch.argmax(torch.log_softmax(out, -1) + g, dim=-1).to(torch.float32)
        logp, _ = self.log_prob_entropy(out, u)
        return u.numpy(), logp.numpy(), self.value(zt).squeeze(-1).numpy()

    @torch.no_grad()
    def values(self, z: np.ndarray) -> np.ndarray:
        return self.value(torch.as_tensor(z, dtype=torch.float32)).squeeze(-1).numpy()


@dataclass
class _Batch:
    obs: np.ndarray  # (T, N, obs_dim) raw observations
    u: np.ndarray  # (T, N, act_dim) or (T, N) sampled outputs
    logp: np.ndarray  # (T, N)
    values: np.ndarray  # (T, N)
    rewards: np.ndarray  # (T, N) raw rewards
    next_values: np.ndarray  # (T, N) value of the next state (0 after termination)
    continues: np.ndarray  # (T, N) 1 where the episode goes on after the step
    episode_returns: list[float]
    episode_lengths: list[int]
    episode_slots: list[int]  # the env each finished episode ran in


class _Rollouts:
    """One env per level (the same params in every env for an ordinary step), with their
    episode bookkeeping kept across updates."""

    def __init__(self, worker: WorkerView, levels: Sequence[EnvParams], max_steps: int, rng: np.random.Generator):
        self.levels, self.max_steps, self.rng = list(levels), max_steps, rng
        self.envs = [worker.family.make_env(params) for params in self.levels]
        n = len(self.envs)
        self.obs = np.stack([self._reset(i) for i in range(n)])
        self.ep_return = np.zeros(n)
        self.ep_len = np.zeros(n, dtype=np.int64)

    def _reset(self, i: int) -> np.ndarray:
        seed = self.levels[i].reset_seed(int(self.rng.integers(0, 2**31 - 1)))
        obs, _ = self.envs[i].reset(seed=seed)
        return np.asarray(obs, dtype=np.float64).ravel()

    def _fail(self, i: int, what: str) -> RuntimeError:
        return RuntimeError(f"env {self.levels[i].to_json()}: {what}")

    def collect(self, learner: _Learner, norm: _Normaliser, n_steps: int) -> _Batch:
        n = len(self.envs)
        dim = self.obs.shape[1]
        obs = np.empty((n_steps, n, dim))
        us, logps, vals, rews = [], np.empty((n_steps, n)), np.empty((n_steps, n)), np.empty((n_steps, n))
        next_v = np.zeros((n_steps, n))
        cont = np.ones((n_steps, n))
        finished_returns, finished_lengths, finished_slots = [], [], []
        for t in range(n_steps):
            obs[t] = self.obs
            u, logps[t], vals[t] = learner.sample(norm.apply(self.obs), self.rng)
            us.append(u)
            actions = learner.env_actions(u)
            truncated_obs: dict[int, np.ndarray] = {}
            for i, env in enumerate(self.envs):
                try:
                    o, r, term, trunc, _ = env.step(actions[i])
                except Exception as exc:  # noqa: BLE001 - reported with the env's params
                    raise self._fail(i, f"step raised {type(exc).__name__}: {exc}") from None
                o = np.asarray(o, dtype=np.float64).ravel()
                if not math.isfinite(float(r)) or not np.all(np.isfinite(o)):
                    raise self._fail(i, f"non-finite reward or observation (reward {r})")
                rews[t, i] = r
                self.ep_return[i] += r
                self.ep_len[i] += 1
                trunc = bool(trunc) or self.ep_len[i] >= self.max_steps
                if term or trunc:
                    finished_returns.append(float(self.ep_return[i]))
                    finished_lengths.append(int(self.ep_len[i]))
                    finished_slots.append(i)
                    cont[t, i] = 0.0
                    if not term:
                        truncated_obs[i] = o
                    self.ep_return[i], self.ep_len[i] = 0.0, 0
                    o = self._reset(i)
                self.obs[i] = o
            if truncated_obs:  # bootstrap a time-limit cut from the value of where it stopped
                idx = sorted(truncated_obs)
                next_v[t, idx] = learner.values(norm.apply(np.stack([truncated_obs[i] for i in idx])))
        # the value of the state after each step that did not end an episode
        next_v[:-1] = np.where(cont[:-1] > 0, vals[1:], next_v[:-1])
        last = learner.values(norm.apply(self.obs))
        next_v[-1] = np.where(cont[-1] > 0, last, next_v[-1])
        return _Batch(
            obs, np.stack(us), logps, vals, rews, next_v, cont, finished_returns, finished_lengths, finished_slots
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()


class _Normaliser:
    """Running observation statistics (identity when disabled)."""

    def __init__(self, state: dict[str, Any], enabled: bool, floor: float):
        self.enabled, self.floor = enabled, floor
        self.mean = np.asarray(state["obs_mean"], dtype=np.float64)
        self.var = np.asarray(state["obs_var"], dtype=np.float64)
        self.count = float(state["obs_count"])
        self._set_std()

    def _set_std(self) -> None:
        # once per statistics update, not per env step
        self.std = np.maximum(np.sqrt(self.var), self.floor) if self.count > 0 else np.ones_like(self.var)

    def apply(self, obs: np.ndarray) -> np.ndarray:
        return ((obs - self.mean) / self.std).astype(np.float32)

    def update(self, rows: np.ndarray) -> None:
        if self.enabled:
            self.mean, self.var, self.count = merge_moments(self.mean, self.var, self.count, rows)
            self._set_std()


def _gae(
    rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, continues: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    adv = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[1])
    for t in range(rewards.shape[0] - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        running = delta + gamma * lam * continues[t] * running
        adv[t] = running
    return adv


def positive_value_loss(advantages: np.ndarray) -> float:
    """PLR's regret score (dcd `_average_positive_value_loss`): the mean of the GAE
    advantages clipped at 0, i.e. how much better things went than the value net expected."""
    return float(np.maximum(advantages, 0.0).mean()) if advantages.size else 0.0


def level_scores(
    rewards: np.ndarray, values: np.ndarray, continues: np.ndarray, gamma: float, lam: float
) -> tuple[list[list[float]], np.ndarray]:
    """Each env's level scores from one rollout, as dcd's `LevelSampler.update_with_rollouts`
    takes them: GAE with every episode end a `done` and `done` forced at the rollout's last
    step (no bootstrap anywhere), then the positive value loss of each episode that ended in
    the rollout, in order; the unfinished episode at the end is not scored (dcd's
    "cliffhanger", with its BipedalWalker configs' `handle_timelimits`). Also returns each
    env's mean absolute advantage clipped to 1 (dcd's `get_batched_value_loss`, which picks
    the levels ACCEL edits)."""
    cont = continues.copy()
    cont[-1] = 0.0
    following = np.zeros_like(values)
    following[:-1] = values[1:]
    adv = _gae(rewards, values, following * cont, cont, gamma, lam)
    scores: list[list[float]] = []
    for i in range(rewards.shape[1]):
        ends = np.flatnonzero(continues[:, i] == 0.0)
        starts = np.concatenate([[0], ends[:-1] + 1])
        scores.append([positive_value_loss(adv[a : b + 1, i]) for a, b in zip(starts, ends)])
    return scores, np.minimum(np.abs(adv).mean(axis=0), 1.0)


def _level_metrics(batch: _Batch, rewards: np.ndarray, o: PPOOptions) -> list[dict[str, Any]]:
    """Per env of a rollout over a batch of levels: its episodes' scores (`level_scores`), the
    mean return of its finished episodes (0 with none, as dcd) and its value loss."""
    scores, value_loss = level_scores(rewards, batch.values, batch.continues, o.gamma, o.gae_lambda)
    out = []
    for i, episode_scores in enumerate(scores):
        returns = [r for r, slot in zip(batch.episode_returns, batch.episode_slots) if slot == i]
        out.append(
            {
                "scores": episode_scores,
                "mean_return": float(np.mean(returns)) if returns else 0.0,
                "value_loss": float(value_loss[i]),
            }
        )
    return out


def _scale_rewards(batch: _Batch, state: dict[str, Any], o: PPOOptions, acc: np.ndarray) -> np.ndarray:
    """Rewards divided by the running std of the discounted return (updated with this batch).

    `acc` holds each env's discounted return so far and is carried in place across the
    updates of a job (a job starts fresh episodes, so it starts at zero).
    """
    if not o.normalize_rewards:
        return batch.rewards
    disc = np.empty_like(batch.rewards)
    for t in range(batch.rewards.shape[0]):
        acc *= o.gamma
        acc += batch.rewards[t]
        disc[t] = acc
        acc *= batch.continues[t]
    mean, var, count = merge_moments(
        np.array([state["ret_mean"]]), np.array([state["ret_var"]]), float(state["ret_count"]), disc.reshape(-1, 1)
    )
    state["ret_mean"], state["ret_var"], state["ret_count"] = float(mean[0]), float(var[0]), count
    return batch.rewards / math.sqrt(state["ret_var"] + STD_EPS)


def _update(
    learner: _Learner,
    batch: _Batch,
    z: np.ndarray,
    rewards: np.ndarray,
    adam: dict[str, Any],
    o: PPOOptions,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Epochs of clipped-objective minibatch steps on one batch (Adam state updated in place)."""
    adv = _gae(rewards, batch.values, batch.next_values, batch.continues, o.gamma, o.gae_lambda)
    pvl = positive_value_loss(adv)  # of the rollouts, under the value net that collected them
    returns = adv + batch.values
    n = adv.size
    zt = torch.as_tensor(z.reshape(n, -1))
    ut = torch.as_tensor(batch.u.reshape(n, *batch.u.shape[2:]).astype(np.float32))
    old_logp = torch.as_tensor(batch.logp.reshape(n).astype(np.float32))
    adv_t = torch.as_tensor(adv.reshape(n).astype(np.float32))
    ret_t = torch.as_tensor(returns.reshape(n).astype(np.float32))
    size = min(o.minibatch_size, n)
    sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clip_fraction": 0.0}
    steps = 0
    for _ in range(o.epochs):
        order = rng.permutation(n)
        for start in range(0, n - size + 1, size):  # full minibatches only
            idx = torch.as_tensor(order[start : start + size])
            a = adv_t[idx]
            a = (a - a.mean()) / (a.std() + 1e-8) if size > 1 else a
            logp, ent = learner.log_prob_entropy(learner.actor(zt[idx]), ut[idx])
            log_ratio = logp - old_logp[idx]
            ratio = torch.exp(log_ratio)
            policy_loss = -torch.min(ratio * a, torch.clamp(ratio, 1 - o.clip, 1 + o.clip) * a).mean()
            value_loss = 0.5 * (learner.value(zt[idx]).squeeze(-1) - ret_t[idx]).pow(2).mean()
            entropy = ent.mean()
            loss = policy_loss + o.vf_coef * value_loss - o.ent_coef * entropy
            for p in learner.params:
                p.grad = None
            loss.backward()
            grad = (
                torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in learner.params])
                .numpy()
                .astype(np.float64)
            )
            norm = float(np.linalg.norm(grad))
            if norm > o.max_grad_norm:
                grad *= o.max_grad_norm / norm
            new, moments = adam_step(learner.get(), grad, adam, o.lr, o.beta1, o.beta2, o.adam_eps)
            adam.update(moments)
            learner.set(new)
            with torch.no_grad():
                sums["policy_loss"] += float(policy_loss)
                sums["value_loss"] += float(value_loss)
                sums["entropy"] += float(entropy)
                sums["approx_kl"] += float(((ratio - 1) - log_ratio).mean())
                sums["clip_fraction"] += float(((ratio - 1).abs() > o.clip).float().mean())
            steps += 1
    return {**{k: v / max(1, steps) for k, v in sums.items()}, "positive_value_loss": pvl}


# ---------------------------------------------------------------- the job


def _job_setup(
    worker: WorkerView, payload: dict[str, Any]
) -> tuple[PPOOptions, dict[str, Any], np.ndarray, np.random.Generator, _Learner]:
    """A job's options, its own copy of the agent's state (a fresh value net for an agent that
    never trained, drawn first from the job's generator), theta, the generator and a learner."""
    o = PPOOptions(**payload["options"])
    state = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in payload["state"].items()}
    rng = np.random.Generator(np.random.PCG64(int(payload["seed"])))
    learner = _Learner(worker.spec, o.value_hidden)
    if state["value"].size == 0:  # first job of this agent: a fresh value net
        state["value"] = init_flat(learner.value_spec, rng, "normc")
    return o, state, np.asarray(payload["theta"], dtype=np.float32), rng, learner


def _load_networks(
    learner: _Learner, spec: PolicySpec, theta: np.ndarray, state: dict[str, Any], norm: _Normaliser
) -> None:
    """The stored (raw-observation) networks, expressed in the normaliser's current coordinates."""
    learner.load(
        unfold(theta, spec.obs_dim, spec.layer_sizes[1], norm.mean, norm.std),
        state["log_std"],
        unfold(state["value"], spec.obs_dim, learner.value_spec.layer_sizes[1], norm.mean, norm.std),
    )


def _levels(payload: dict[str, Any], o: PPOOptions) -> list[EnvParams]:
    """The env params of each env of a job: one per level of a batch, else `n_envs` of the task's env."""
    return list(payload["levels"]) if payload.get("levels") else [payload["env"]] * o.n_envs


def ppo_job(worker: WorkerView, payload: dict[str, Any]) -> dict[str, Any]:
    """One pair's PPO training for one POET iteration; runs on a pool worker (or in-process).
    With a batch of levels, each level has one env, and the result has each level's metrics
    from the last rollout (`_level_metrics`)."""
    o, state, theta, rng, learner = _job_setup(worker, payload)
    spec: PolicySpec = worker.spec
    h_actor = spec.layer_sizes[1]
    h_value = learner.value_spec.layer_sizes[1]
    if state["adam_m"].size == 0:
        dim = learner.get().size
        state["adam_m"], state["adam_v"] = np.zeros(dim, np.float32), np.zeros(dim, np.float32)
    adam = {"t": int(state["adam_t"]), "m": state["adam_m"], "v": state["adam_v"]}
    norm = _Normaliser(state, o.normalize_obs, o.obs_std_floor)
    levels = _levels(payload, o)
    rollouts = _Rollouts(worker, levels, int(payload["max_steps"]), rng)
    ret_acc = np.zeros(len(levels))
    level_metrics: list[dict[str, Any]] = []
    totals: dict[str, float] = {}
    returns: list[float] = []
    lengths: list[int] = []

    try:
        for update in range(o.updates_per_iteration):
            _load_networks(learner, spec, theta, state, norm)
            batch = rollouts.collect(learner, norm, o.n_steps)
            returns += batch.episode_returns
            lengths += batch.episode_lengths
            # New statistics, same functions: re-express the networks in the new coordinates.
            norm.update(batch.obs.reshape(-1, batch.obs.shape[-1]))
            _load_networks(learner, spec, theta, state, norm)
            rewards = _scale_rewards(batch, state, o, ret_acc)
            if payload.get("levels") and update == o.updates_per_iteration - 1:  # the last rollout's
                level_metrics = _level_metrics(batch, rewards, o)
            z = norm.apply(batch.obs.reshape(-1, batch.obs.shape[-1])).reshape(*batch.obs.shape[:2], -1)
            for k, v in _update(learner, batch, z, rewards, adam, o, rng).items():
                totals[k] = totals.get(k, 0.0) + v / o.updates_per_iteration
            actor, log_std, value = learner.split()
            theta = fold(actor, spec.obs_dim, h_actor, norm.mean, norm.std)
            state["value"] = fold(value, spec.obs_dim, h_value, norm.mean, norm.std)
            state["log_std"] = log_std
            state["updates"] = int(state["updates"]) + 1
            state["env_steps"] = int(state["env_steps"]) + o.n_steps * len(levels)
    finally:
        rollouts.close()
    state.update(
        adam_t=int(adam["t"]),
        adam_m=adam["m"],
        adam_v=adam["v"],
        obs_mean=norm.mean,
        obs_var=norm.var,
        obs_count=norm.count,
    )
    metrics = {
        **totals,
        "ppo_episodes": float(len(returns)),
        "ppo_return_mean": float(np.mean(returns)) if returns else float("nan"),
        "ppo_length_mean": float(np.mean(lengths)) if lengths else float("nan"),
        "log_std_mean": float(np.mean(state["log_std"])) if state["log_std"].size else 0.0,
        "env_steps": float(state["env_steps"]),
    }
    return {
        "theta": theta,
        "state": state,
        "metrics": metrics,
        "levels": level_metrics,
        "env_steps_taken": o.n_steps * len(levels) * o.updates_per_iteration,
    }


def ppo_regret_job(worker: WorkerView, payload: dict[str, Any]) -> dict[str, Any]:
    """An agent's level metrics (`_level_metrics`) on a batch of levels without training: one
    rollout of n_steps in one env per level with its policy and value net, rewards scaled by
    its running return statistics as they are (nothing is updated)."""
    o, state, theta, rng, learner = _job_setup(worker, payload)
    norm = _Normaliser(state, o.normalize_obs, o.obs_std_floor)
    _load_networks(learner, worker.spec, theta, state, norm)
    levels = _levels(payload, o)
    rollouts = _Rollouts(worker, levels, int(payload["max_steps"]), rng)
    try:
        batch = rollouts.collect(learner, norm, o.n_steps)
    finally:
        rollouts.close()
    rewards = batch.rewards / math.sqrt(float(state["ret_var"]) + STD_EPS) if o.normalize_rewards else batch.rewards
    return {"levels": _level_metrics(batch, rewards, o), "env_steps_taken": o.n_steps * len(levels)}


# ---------------------------------------------------------------- the trainer


class PPOTrainer:
    """PPO on the pool: every pair's iteration of training is one job, all pairs in one wave."""

    name = "ppo"
    Options = PPOOptions

    def __init__(self, options: PPOOptions, context: TrainerContext):
        self.options, self.context = options, context

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        """Identity normaliser, initial log-std; value net and Adam moments are made by the first job."""
        spec, o = self.context.spec, self.options
        return {
            "obs_mean": np.zeros(spec.obs_dim),
            "obs_var": np.ones(spec.obs_dim),
            "obs_count": 0.0,
            "log_std": np.full(spec.act_dim if spec.action_kind == "box" else 0, o.init_log_std, dtype=np.float32),
            "value": np.zeros(0, dtype=np.float32),
            "adam_t": 0,
            "adam_m": np.zeros(0, dtype=np.float32),
            "adam_v": np.zeros(0, dtype=np.float32),
            "ret_mean": 0.0,
            "ret_var": 1.0,
            "ret_count": 0.0,
            "updates": 0,
            "env_steps": 0,
        }

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        """A transferred agent starts afresh here (its normaliser is already folded into theta)."""
        return self.init_state(theta)

    def _check_rollout_for_levels(self, tasks: Sequence[TrainTask]) -> None:
        """Level scores come from the episodes that end within one rollout (dcd): warn when a
        rollout is shorter than an episode may be, so that some levels may never be scored."""
        o, cap = self.options, self.context.max_steps
        if o.n_steps < cap and any(t.levels for t in tasks):
            warnings.warn(
                f"a level is scored by the episodes that end on it within one rollout, as dcd does: with "
                f"trainer.ppo.n_steps ({o.n_steps}) < evaluation.max_steps ({cap}) a level whose episodes "
                f"all last longer is never scored (dcd: 2048 steps for 2000-step episodes)",
                UserWarning,
                stacklevel=3,
            )

    def step(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        """Score the starting agents (one wave), then one PPO job per task (one wave)."""
        o, ctx = self.options, self.context
        self._check_rollout_for_levels(tasks)
        plans = []
        for task in tasks:
            rng = np.random.Generator(np.random.PCG64(task.seed))
            plans.append((int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 2**31 - 1))))
        scores: list[float | None] = [None] * len(tasks)
        level_returns: list[list[float]] = [[] for _ in tasks]
        scored = [i for i, t in enumerate(tasks) if t.eval_episodes > 0]
        if scored:
            refs = [evaluator.put(tasks[i].theta) for i in scored]
            owners, requests = [], []
            for i, ref in zip(scored, refs):
                for env in tasks[i].levels or [tasks[i].env]:
                    owners.append(i)
                    requests.append(
                        EvalRequest(
                            ref, env, tasks[i].eval_episodes, plans[i][0], ctx.max_steps, tag=f"{tasks[i].key} (score)"
                        )
                    )
            values = ctx.errors.scores(evaluator.evaluate(requests))
            evaluator.release(refs)
            for i, v in zip(owners, values):
                level_returns[i].append(float(v))
            for i in scored:
                scores[i] = float(np.mean(level_returns[i]))
        options = asdict(o)
        jobs = [
            Job(
                JOB_FN,
                {
                    "options": options,
                    "theta": t.theta,
                    "state": t.state,
                    "env": t.env,
                    "levels": t.levels,
                    "seed": plans[i][1],
                    "max_steps": ctx.max_steps,
                },
                cost=float((len(t.levels) or o.n_envs) * o.n_steps * o.updates_per_iteration),
                tag=t.key,
            )
            for i, t in enumerate(tasks)
        ]
        results = evaluator.run_jobs(jobs)
        steps = []
        for task, score, returns, result in zip(tasks, scores, level_returns, results):
            if result.ok:
                v = result.value
                levels = [{**m, "return": r} for m, r in zip(v["levels"], returns)] if returns else v["levels"]
                steps.append(
                    TrainStep(theta=v["theta"], state=v["state"], score=score, metrics=v["metrics"], levels=levels)
                )
            elif ctx.errors.on_error == "stop":
                raise EvaluationFailed(
                    f"PPO training failed for {result.error} (set evaluation.on_error=score_as_failure to go on)"
                )
            else:  # the agent keeps its weights and state; the failure is in the metrics
                steps.append(TrainStep(theta=task.theta, state=task.state, score=score, metrics={"ppo_failed": 1.0}))
        return steps

    def regret(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[list[dict[str, Any]]]:
        """Each task's agent on its batch of levels (`levels`, else its env) without training,
        one env per level and one job per task, all in one wave: each level's metrics
        (`_level_metrics`: its episodes' scores, mean return, value loss). What robust PLR
        and ACCEL score new levels by."""
        o, ctx = self.options, self.context
        self._check_rollout_for_levels(tasks)
        options = asdict(o)
        batches = [t.levels or [t.env] for t in tasks]
        jobs = [
            Job(
                REGRET_FN,
                {
                    "options": options,
                    "theta": t.theta,
                    "state": t.state,
                    "env": t.env,
                    "levels": levels,
                    "seed": int(np.random.Generator(np.random.PCG64(t.seed)).integers(0, 2**31 - 1)),
                    "max_steps": ctx.max_steps,
                },
                cost=float(len(levels) * o.n_steps),
                tag=f"{t.key} (regret)",
            )
            for t, levels in zip(tasks, batches)
        ]
        out = []
        for levels, result in zip(batches, evaluator.run_jobs(jobs)):
            if result.ok:
                out.append(result.value["levels"])
            elif ctx.errors.on_error == "stop":
                raise EvaluationFailed(
                    f"scoring a level failed for {result.error} (set evaluation.on_error=score_as_failure to go on)"
                )
            else:  # a level the agent cannot even be run on is not worth replaying
                out.append([{"scores": [0.0], "mean_return": 0.0, "value_loss": 0.0} for _ in levels])
        return out
