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
* Rewards are scaled by the running standard deviation of the discounted return, updated
  at every env step and optionally clipped (dcd's and baselines' `VecNormalize(ret=True)`).
* All randomness (env seeds, action noise, value-net init, minibatch order) comes from
  the task's seed through numpy; torch runs on one thread, so a job's result depends on
  its payload only, in-process or on any Ray worker.

This module holds the options, the trainer and the numpy arithmetic (the normaliser and
its folding into the first layer, running moments, GAE, level scores). The job a worker
runs, with torch, is in `poet.trainers.ppo_job`, so a run that does not train with PPO
never loads torch.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numba
import numpy as np

from poet.config import out_of_range
from poet.evaluation import EvalRequest, Evaluator
from poet.evaluation.jobs import Job
from poet.policies import PolicySpec
from poet.trainers.base import EvaluationFailed, TrainerContext, TrainStep, TrainTask

JOB_FN = "poet.trainers.ppo_job:ppo_job"
REGRET_FN = "poet.trainers.ppo_job:ppo_regret_job"
STD_EPS = 1e-8
RETURN_COUNT_INIT = 1e-4  # baselines' RunningMeanStd starts at this count (mean 0, variance 1)


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
    vf_coef: float = 0.5  # weight of the value loss in the loss
    # the value loss: "mse", half the mean squared error; "huber", the mean smooth L1 (beta 1)
    # error (dcd's algos/ppo.py without value clipping)
    value_loss: Literal["mse", "huber"] = "mse"
    # advantages are standardised per "minibatch" (std + 1e-8), or over the whole "batch" of
    # an update before the minibatches are cut (dcd: std + 1e-5)
    advantage_norm: Literal["minibatch", "batch"] = "minibatch"
    max_grad_norm: float = 0.5  # the gradient of actor, log-std and value net together is clipped to this norm
    init_log_std: float = -0.5  # initial log-std of the Gaussian over the pre-squash actions (learned, per action)
    # hidden layer sizes of the value network (the policy's activation) of an mlp policy; it
    # lives in the trainer's state, not in the agent's theta (another kind's value net is a
    # network of the policy's own kind and options, with one output)
    value_hidden: list[int] = field(default_factory=lambda: [64, 64])
    # the value network's first weights: "normc" (normalised columns, a small last layer), or
    # "orthogonal" with gain sqrt 2 in every layer (dcd's critic)
    value_init: Literal["normc", "orthogonal"] = "normc"
    normalize_obs: bool = True  # running mean/std normalisation of observations, folded into theta's first layer
    obs_std_floor: float = 0.1  # a feature constant so far is scaled by at most 1 / floor when it varies later
    # rewards divided by the running std of the discounted return, updated at every env step
    # (baselines' and dcd's VecNormalize(ret=True))
    normalize_rewards: bool = True
    reward_clip: float | None = None  # normalised rewards clipped to [-reward_clip, reward_clip]; None: not clipped
    # a scoring rollout (`regret`: robust PLR's and ACCEL's new levels) updates the agent's
    # reward statistics, as every rollout through dcd's VecNormalize does; false: it changes nothing
    scoring_updates_stats: bool = False
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
            *out_of_range(self, ["reward_clip"], lambda v: v is None or v > 0, "> 0 (or unset: no clipping)"),
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


class Normaliser:
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
        """(obs - mean) / std in float64, rounded to float32 (numpy's numbers), any leading shape."""
        rows = np.ascontiguousarray(obs, dtype=np.float64).reshape(-1, self.mean.size)
        out = np.empty(rows.shape, dtype=np.float32)
        _normalise(rows, self.mean, self.std, out)
        return out.reshape(np.shape(obs))

    def update(self, rows: np.ndarray) -> None:
        if self.enabled:
            self.mean, self.var, self.count = merge_moments(self.mean, self.var, self.count, rows)
            self._set_std()


@numba.njit(cache=True)
def _normalise(rows, mean, std, out):
    for i in range(rows.shape[0]):
        for k in range(rows.shape[1]):
            out[i, k] = np.float32((rows[i, k] - mean[k]) / std[k])


def gae(
    rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, continues: np.ndarray, gamma: float, lam: float
) -> np.ndarray:
    """GAE advantages (T, N): delta_t = r_t + gamma V(s_t+1) - V(s_t), summed backwards with
    gamma * lambda and cut where an episode ends; float64, whatever the inputs' float type."""
    arrays = [np.ascontiguousarray(a, dtype=np.float64) for a in (rewards, values, next_values, continues)]
    adv = np.zeros(arrays[0].shape)
    _gae(*arrays, float(gamma), float(lam), adv)
    return adv


@numba.njit(cache=True)
def _gae(rewards, values, next_values, continues, gamma, lam, adv):
    running = np.zeros(rewards.shape[1])
    for t in range(rewards.shape[0] - 1, -1, -1):
        for i in range(rewards.shape[1]):
            delta = rewards[t, i] + gamma * next_values[t, i] - values[t, i]
            running[i] = delta + gamma * lam * continues[t, i] * running[i]
            adv[t, i] = running[i]


def scale_rewards(
    rewards: np.ndarray,
    continues: np.ndarray,
    acc: np.ndarray,
    moments: tuple[float, float, float],
    gamma: float,
    update: bool,
) -> tuple[np.ndarray, tuple[float, float, float]]:
    """Rewards (T, N) divided by the running std of the discounted return, and the running
    (mean, var, count) after them: per step, each env's discounted return so far (`acc`, kept
    in place) joins the moments (if `update`) before that step's rewards are divided by
    sqrt(var + STD_EPS) (baselines' `VecNormalize(ret=True)`); `acc` is cut where an episode ends."""
    state = np.array(moments, dtype=np.float64)
    scaled = np.empty(rewards.shape)
    _scale_rewards(np.ascontiguousarray(rewards, np.float64), np.ascontiguousarray(continues, np.float64), acc,
                   state, float(gamma), bool(update), scaled)  # fmt: skip
    return scaled, (float(state[0]), float(state[1]), float(state[2]))


@numba.njit(cache=True)
def _scale_rewards(rewards, continues, acc, state, gamma, update, scaled):
    mean, var, count = state[0], state[1], state[2]
    n = rewards.shape[1]
    for t in range(rewards.shape[0]):
        for i in range(n):
            acc[i] = acc[i] * gamma + rewards[t, i]
        if update:  # `merge_moments` with this step's n returns
            b_mean = 0.0
            for i in range(n):
                b_mean += acc[i]
            b_mean /= n
            b_var = 0.0
            for i in range(n):
                b_var += (acc[i] - b_mean) * (acc[i] - b_mean)
            b_var /= n
            total = count + n
            delta = b_mean - mean
            mean = mean + delta * n / total
            var = (var * count + b_var * n + delta * delta * count * n / total) / total
            count = total
        std = np.sqrt(var + STD_EPS)
        for i in range(n):
            scaled[t, i] = rewards[t, i] / std
            acc[i] *= continues[t, i]
    state[0], state[1], state[2] = mean, var, count


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
    adv = gae(rewards, values, following * cont, cont, gamma, lam)
    scores: list[list[float]] = []
    for i in range(rewards.shape[1]):
        ends = np.flatnonzero(continues[:, i] == 0.0)
        starts = np.concatenate([[0], ends[:-1] + 1])
        scores.append([positive_value_loss(adv[a : b + 1, i]) for a, b in zip(starts, ends)])
    return scores, np.minimum(np.abs(adv).mean(axis=0), 1.0)


# ---------------------------------------------------------------- the trainer


class PPOTrainer:
    """PPO on the pool: every pair's iteration of training is one job, all pairs in one wave."""

    name = "ppo"
    trains_on_levels = True  # one parallel env per level of `TrainTask.levels`
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
            "ret_count": RETURN_COUNT_INIT,
            "updates": 0,
            "env_steps": 0,
        }

    @staticmethod
    def check_policy(options: PPOOptions, spec: PolicySpec) -> list[tuple[str, str]]:
        """(option, problem) for options this policy cannot train with: a torch kind's first
        layer cannot take the observation normaliser (`poet.trainers.ppo_recurrent`)."""
        if options.normalize_obs and not spec.compiled:
            return [
                (
                    "normalize_obs",
                    f"policy kind {spec.kind!r} cannot fold the observation normaliser into its weights (only the "
                    "mlp can); set it to false to train on raw observations",
                )
            ]
        return []

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

    def regret(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        """Each task's agent on its batch of levels (`levels`, else its env) without training,
        one env per level and one job per task, all in one wave: what robust PLR and ACCEL
        score new levels by. Each step keeps the task's theta; its `levels` hold each level's
        metrics (`_level_metrics`: its episodes' scores, mean return, value loss), its state
        the agent's reward statistics after the rollout (`scoring_updates_stats`)."""
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
        for task, levels, result in zip(tasks, batches, evaluator.run_jobs(jobs)):
            if result.ok:
                out.append(TrainStep(task.theta, result.value["state"], None, {}, result.value["levels"]))
            elif ctx.errors.on_error == "stop":
                raise EvaluationFailed(
                    f"scoring a level failed for {result.error} (set evaluation.on_error=score_as_failure to go on)"
                )
            else:  # a level the agent cannot even be run on is not worth replaying
                failed = [{"scores": [0.0], "mean_return": 0.0, "value_loss": 0.0} for _ in levels]
                out.append(TrainStep(task.theta, task.state, None, {}, failed))
        return out
