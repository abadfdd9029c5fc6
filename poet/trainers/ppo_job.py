"""PPO's job: one pair's training (or one regret rollout) on a pool worker, with torch.

The trainer, its options and the numpy arithmetic are in `poet.trainers.ppo`, whose
docstring says how PPO fits POET's agents. A job's rollouts run in the compiled loop where
the family has a row kernel and the policy is an mlp (`_KernelRollouts`), else as
gymnasium envs with a torch forward per step (`_Rollouts`); both draw the same streams.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from envs import EnvParams
from poet.evaluation.jobs import WorkerView
from poet.evaluation.recording import KernelRecorder
from poet.evaluation.row_loop import row_kernel_of
from poet.policies import PolicySpec, init_flat, init_orthogonal
from poet.policies.mlp_torch import MLPPolicy, to_actions
from poet.trainers.ppo import (
    Normaliser,
    PPOOptions,
    fold,
    gae,
    level_scores,
    positive_value_loss,
    scale_rewards,
    unfold,
)
from poet.trainers.ppo_loss import FlatParameters, autograd_step, draw_noise, log_prob_entropy, sample_outputs
from poet.trainers.ppo_mlp_step import MLPStep
from poet.trainers.ppo_recurrent import KindLearner, update_sequences

# ---------------------------------------------------------------- the learner inside a job


class _Learner:
    """The mlp's actor, log-std and value net in normalised coordinates, as one flat parameter
    vector (a torch kind's learner is `poet.trainers.ppo_recurrent.KindLearner`)."""

    recurrent = False

    def __init__(self, spec: PolicySpec, value_hidden: Sequence[int]):
        self.spec = spec
        self.box = spec.action_kind == "box"
        self.actor = MLPPolicy(spec)
        self.value_spec = PolicySpec(spec.obs_dim, 1, tuple(value_hidden), spec.activation, "box", (-1.0,), (1.0,))
        self.value = MLPPolicy(self.value_spec)
        shared = FlatParameters(
            [self.actor, torch.nn.Parameter(torch.zeros(spec.act_dim if self.box else 0)), self.value]
        )
        self.log_std, self.params = shared.parts[1], shared.params
        self.flat = shared.flat  # the parameters' memory
        self._step: MLPStep | None = None

    def get(self) -> np.ndarray:
        return self.flat.copy()

    def set(self, flat: np.ndarray) -> None:
        self.flat[:] = flat

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
        return log_prob_entropy(self.box, self.log_std, out, u)

    def policy_out(self, z: torch.Tensor) -> torch.Tensor:
        return self.actor(z)

    def value_out(self, z: torch.Tensor) -> torch.Tensor:
        return self.value(z).squeeze(-1)

    def minibatch_step(self, x: torch.Tensor, *batch: Any) -> None:
        """One clipped-objective step on a minibatch (`autograd_step`'s arguments): for box
        actions with the gradient written out (`MLPStep`), else by autograd."""
        if not self.box:
            autograd_step(self, x, *batch)
            return
        if self._step is None:
            self._step = MLPStep(self)
        self._step.step(x, *batch)

    def begin(self, envs: list[int]) -> None:
        """These envs start new episodes (an MLP keeps no state)."""

    def initial_states(self) -> None:
        return None

    def load_stored(self, theta: np.ndarray, state: dict[str, Any], norm: Normaliser) -> None:
        """The stored (raw-observation) networks, expressed in the normaliser's current coordinates."""
        self.load(
            unfold(theta, self.spec.obs_dim, self.spec.layer_sizes[1], norm.mean, norm.std),
            state["log_std"],
            unfold(state["value"], self.spec.obs_dim, self.value_spec.layer_sizes[1], norm.mean, norm.std),
        )

    def stored(self, norm: Normaliser) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(theta, log_std, value) on raw observations: the normaliser folded into the first layers."""
        actor, log_std, value = self.split()
        theta = fold(actor, self.spec.obs_dim, self.spec.layer_sizes[1], norm.mean, norm.std)
        return theta, log_std, fold(value, self.spec.obs_dim, self.value_spec.layer_sizes[1], norm.mean, norm.std)

    @torch.no_grad()
    def sample(self, z: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled outputs u (`sample_outputs` with this step's `noise`), their log-probabilities
        and the values, for normalised observations z."""
        zt = torch.as_tensor(z, dtype=torch.float32)
        out = self.actor(zt)
        u, logp = sample_outputs(self.box, self.log_std, out, noise)
        return u.numpy(), logp.numpy(), self.value(zt).squeeze(-1).numpy()

    @torch.no_grad()
    def log_probs(self, out: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Log-probabilities of samples `u` around policy outputs `out` (any leading shape)."""
        return self.log_prob_entropy(torch.as_tensor(out), torch.as_tensor(u))[0].numpy()

    @torch.no_grad()
    def values(self, z: np.ndarray, envs: list[int] | None = None) -> np.ndarray:
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
    initial_state: Any = None  # a recurrent learner's states at the rollout's first step


def _streams(seed: int, n_envs: int) -> tuple[list[np.random.Generator], np.random.Generator]:
    """A job's two streams of rollout randomness, apart from its main generator (value init,
    minibatch order) and from each other: each env's generator of reset seeds, and the
    generator of the action noise (a block per rollout, `draw_noise`)."""
    resets = [np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, i))) for i in range(n_envs)]
    return resets, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))


class _Rollouts:
    """One gymnasium env per level (the same params in every env for an ordinary step), with
    their episode bookkeeping kept across updates; the policy runs as torch, one batch per step."""

    def __init__(self, worker: WorkerView, levels: Sequence[EnvParams], max_steps: int, seed: int):
        self.levels, self.max_steps = list(levels), max_steps
        self.resets, self.noise = _streams(seed, len(self.levels))
        self.envs = [worker.family.make_env(params) for params in self.levels]
        n = len(self.envs)
        self.obs = np.stack([self._reset(i) for i in range(n)])
        self.ep_return = np.zeros(n)
        self.ep_len = np.zeros(n, dtype=np.int64)

    def _reset(self, i: int) -> np.ndarray:
        seed = self.levels[i].reset_seed(int(self.resets[i].integers(0, 2**31 - 1)))
        obs, _ = self.envs[i].reset(seed=seed)
        return np.asarray(obs, dtype=np.float64).ravel()

    def collect(self, learner: Any, norm: Normaliser, n_steps: int) -> _Batch:
        n = len(self.envs)
        initial_state = learner.initial_states()
        dim = self.obs.shape[1]
        noise = draw_noise(self.noise, learner.box, (n_steps, n, learner.spec.act_dim))
        obs = np.empty((n_steps, n, dim))
        us, logps, vals, rews = [], np.empty((n_steps, n)), np.empty((n_steps, n)), np.empty((n_steps, n))
        next_v = np.zeros((n_steps, n))
        cont = np.ones((n_steps, n))
        step_obs = np.empty((n, dim))  # each env's observation after this step, before any reset
        finished_returns, finished_lengths, finished_slots = [], [], []
        for t in range(n_steps):
            obs[t] = self.obs
            u, logps[t], vals[t] = learner.sample(norm.apply(self.obs), noise[t])
            us.append(u)
            actions = learner.env_actions(u)
            truncated_obs: dict[int, np.ndarray] = {}
            started: list[int] = []
            for i, env in enumerate(self.envs):
                try:
                    o, r, term, trunc, _ = env.step(actions[i])
                except Exception as exc:  # noqa: BLE001 - reported with the env's params
                    raise _fail(self.levels, i, f"step raised {type(exc).__name__}: {exc}") from None
                o = step_obs[i] = np.asarray(o, dtype=np.float64).ravel()
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
                    started.append(i)
                self.obs[i] = o
            # one look per step for all envs (almost never true): the first bad env is named
            bad = ~(np.isfinite(rews[t]) & np.isfinite(step_obs).all(axis=1))
            if bad.any():
                i = int(np.argmax(bad))
                raise _fail(self.levels, i, f"non-finite reward or observation (reward {rews[t, i]})")
            if truncated_obs:  # bootstrap a time-limit cut from the value of where it stopped
                idx = sorted(truncated_obs)
                next_v[t, idx] = learner.values(norm.apply(np.stack([truncated_obs[i] for i in idx])), idx)
            if started:  # after the bootstrap, which reads the ended episodes' states
                learner.begin(started)
        # the value of the state after each step that did not end an episode
        next_v[:-1] = np.where(cont[:-1] > 0, vals[1:], next_v[:-1])
        last = learner.values(norm.apply(self.obs))
        next_v[-1] = np.where(cont[-1] > 0, last, next_v[-1])
        return _Batch(
            obs,
            np.stack(us),
            logps,
            vals,
            rews,
            next_v,
            cont,
            finished_returns,
            finished_lengths,
            finished_slots,
            initial_state,
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()


class _KernelRollouts:
    """The same rollouts for an mlp on a family with a row kernel: the envs and both networks
    step in the compiled loop (`poet.evaluation.recording`), the log-probabilities come from
    torch for the whole rollout at once. Same streams, same numbers as `_Rollouts` up to
    float32 round-off in the forwards."""

    def __init__(
        self,
        worker: WorkerView,
        value_spec: PolicySpec,
        levels: Sequence[EnvParams],
        max_steps: int,
        seed: int,
        kernel: Any,
    ):
        self.levels = list(levels)
        resets, self.noise = _streams(seed, len(self.levels))
        fail = functools.partial(_fail, self.levels)
        self.recorder = KernelRecorder(kernel, worker.spec, value_spec, self.levels, max_steps, resets, fail)

    def collect(self, learner: _Learner, norm: Normaliser, n_steps: int) -> _Batch:
        n = len(self.levels)
        noise = draw_noise(self.noise, True, (n_steps, n, learner.spec.act_dim))
        sigma = torch.exp(learner.log_std).detach().numpy()  # torch's exp, as `sample_outputs` takes it
        actor, _, value = learner.split()
        rec = self.recorder.collect(actor, value, norm.mean, norm.std, sigma, noise)
        vals = rec.values.astype(np.float64)
        next_v = np.where(rec.cut, rec.cut_values, 0.0)  # a time-limit cut bootstraps from where it stopped
        next_v[:-1] = np.where(rec.continues[:-1] > 0, vals[1:], next_v[:-1])
        next_v[-1] = np.where(rec.continues[-1] > 0, rec.last_values, next_v[-1])
        return _Batch(
            rec.obs,
            rec.u,
            learner.log_probs(rec.mean, rec.u).astype(np.float64),
            vals,
            rec.rewards,
            next_v,
            rec.continues,
            rec.episode_returns,
            rec.episode_lengths,
            rec.episode_slots,
        )

    def close(self) -> None:
        """Nothing to close: the envs are rows of compiled data."""


def _fail(levels: Sequence[EnvParams], i: int, what: str) -> RuntimeError:
    return RuntimeError(f"env {levels[i].to_json()}: {what}")


def _rollouts(
    worker: WorkerView, learner: Any, levels: Sequence[EnvParams], max_steps: int, seed: int
) -> _Rollouts | _KernelRollouts:
    """The compiled rollouts where the family has a row kernel and the policy is an mlp, else gymnasium envs."""
    kernel = (
        None if learner.recurrent or not isinstance(learner, _Learner) else row_kernel_of(worker.family, worker.spec)
    )
    if kernel is None:
        return _Rollouts(worker, levels, max_steps, seed)
    return _KernelRollouts(worker, learner.value_spec, levels, max_steps, seed, kernel)


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


def _scale_rewards(batch: _Batch, state: dict[str, Any], o: PPOOptions, acc: np.ndarray, update: bool) -> np.ndarray:
    """Rewards as dcd's `VecNormalize(ret=True)` (baselines' rule) gives them (`scale_rewards`),
    the running moments in `state` updated if `update`, clipped to +-`reward_clip`.

    `acc` holds each env's discounted return so far and is carried in place across the
    updates of a job (a job starts fresh episodes, so it starts at zero).
    """
    if not o.normalize_rewards:
        return batch.rewards
    moments = (float(state["ret_mean"]), float(state["ret_var"]), float(state["ret_count"]))
    scaled, moments = scale_rewards(batch.rewards, batch.continues, acc, moments, o.gamma, update)
    if update:
        state["ret_mean"], state["ret_var"], state["ret_count"] = moments
    return scaled if o.reward_clip is None else np.clip(scaled, -o.reward_clip, o.reward_clip)


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
    adv = gae(rewards, batch.values, batch.next_values, batch.continues, o.gamma, o.gae_lambda)
    pvl = positive_value_loss(adv)  # of the rollouts, under the value net that collected them
    returns = adv + batch.values
    if o.advantage_norm == "batch":  # torch's std: n - 1 in the denominator
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-5) if adv.size > 1 else adv
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
        # each array in the epoch's order once, so that a minibatch is a slice of rows of each
        order = torch.as_tensor(rng.permutation(n))
        z_e, u_e, old_e, adv_e, ret_e = (t.index_select(0, order) for t in (zt, ut, old_logp, adv_t, ret_t))
        for start in range(0, n - size + 1, size):  # full minibatches only
            rows = slice(start, start + size)
            a = adv_e[rows]
            if o.advantage_norm == "minibatch" and size > 1:
                a = (a - a.mean()) / (a.std() + 1e-8)
            learner.minibatch_step(z_e[rows], u_e[rows], old_e[rows], a, ret_e[rows], adam, o, sums)
            steps += 1
    return {**{k: v / max(1, steps) for k, v in sums.items()}, "positive_value_loss": pvl}


# ---------------------------------------------------------------- the job


def _job_setup(
    worker: WorkerView, payload: dict[str, Any]
) -> tuple[PPOOptions, dict[str, Any], np.ndarray, np.random.Generator, Any]:
    """A job's options, its own copy of the agent's state (a fresh value net for an agent that
    never trained, drawn first from the job's generator), theta, the generator and a learner
    (the mlp's, or a torch kind's with a recurrent state per env of the job)."""
    o = PPOOptions(**payload["options"])
    state = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in payload["state"].items()}
    rng = np.random.Generator(np.random.PCG64(int(payload["seed"])))
    spec: PolicySpec = worker.spec
    learner = _Learner(spec, o.value_hidden) if spec.compiled else KindLearner(spec, len(_levels(payload, o)))
    if state["value"].size == 0:  # first job of this agent: a fresh value net
        if o.value_init == "orthogonal":
            state["value"] = init_orthogonal(learner.value_spec, rng, last_gain=math.sqrt(2.0))
        else:
            state["value"] = init_flat(learner.value_spec, rng, o.value_init)
    return o, state, np.asarray(payload["theta"], dtype=np.float32), rng, learner


def _levels(payload: dict[str, Any], o: PPOOptions) -> list[EnvParams]:
    """The env params of each env of a job: one per level of a batch, else `n_envs` of the task's env."""
    return list(payload["levels"]) if payload.get("levels") else [payload["env"]] * o.n_envs


def ppo_job(worker: WorkerView, payload: dict[str, Any]) -> dict[str, Any]:
    """One pair's PPO training for one POET iteration; runs on a pool worker (or in-process).
    With a batch of levels, each level has one env, and the result has each level's metrics
    from the last rollout (`_level_metrics`)."""
    o, state, theta, rng, learner = _job_setup(worker, payload)
    if state["adam_m"].size == 0:
        dim = learner.get().size
        state["adam_m"], state["adam_v"] = np.zeros(dim, np.float32), np.zeros(dim, np.float32)
    adam = {"t": int(state["adam_t"]), "m": state["adam_m"], "v": state["adam_v"]}
    norm = Normaliser(state, o.normalize_obs, o.obs_std_floor)
    levels = _levels(payload, o)
    rollouts = _rollouts(worker, learner, levels, int(payload["max_steps"]), int(payload["seed"]))
    ret_acc = np.zeros(len(levels))
    level_metrics: list[dict[str, Any]] = []
    totals: dict[str, float] = {}
    returns: list[float] = []
    lengths: list[int] = []

    try:
        for update in range(o.updates_per_iteration):
            learner.load_stored(theta, state, norm)
            batch = rollouts.collect(learner, norm, o.n_steps)
            returns += batch.episode_returns
            lengths += batch.episode_lengths
            # New statistics, same functions: re-express the networks in the new coordinates.
            norm.update(batch.obs.reshape(-1, batch.obs.shape[-1]))
            learner.load_stored(theta, state, norm)
            rewards = _scale_rewards(batch, state, o, ret_acc, update=True)
            if payload.get("levels") and update == o.updates_per_iteration - 1:  # the last rollout's
                level_metrics = _level_metrics(batch, rewards, o)
            z = norm.apply(batch.obs.reshape(-1, batch.obs.shape[-1])).reshape(*batch.obs.shape[:2], -1)
            update_fn = update_sequences if learner.recurrent else _update
            for k, v in update_fn(learner, batch, z, rewards, adam, o, rng).items():
                totals[k] = totals.get(k, 0.0) + v / o.updates_per_iteration
            theta, state["log_std"], state["value"] = learner.stored(norm)
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
    its running return statistics, which the rollout updates (`scoring_updates_stats`, as
    dcd's VecNormalize does in every rollout) or leaves as they are."""
    o, state, theta, rng, learner = _job_setup(worker, payload)
    norm = Normaliser(state, o.normalize_obs, o.obs_std_floor)
    learner.load_stored(theta, state, norm)
    levels = _levels(payload, o)
    rollouts = _rollouts(worker, learner, levels, int(payload["max_steps"]), int(payload["seed"]))
    try:
        batch = rollouts.collect(learner, norm, o.n_steps)
    finally:
        rollouts.close()
    rewards = _scale_rewards(batch, state, o, np.zeros(len(levels)), update=o.scoring_updates_stats)
    return {"levels": _level_metrics(batch, rewards, o), "state": state, "env_steps_taken": o.n_steps * len(levels)}
