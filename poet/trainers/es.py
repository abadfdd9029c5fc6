"""Evolution strategies as POET trains with them.

Mirrored sampling from the shared noise table, centred ranks over all returns, the
gradient estimate divided by sigma, Adam with L2 regularisation, and decaying learning
rate and noise. Every pair's perturbations of a step go to the evaluator as one wave.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from poet.evaluation import EvalRequest, Evaluator, NoiseTable, Perturbation
from poet.ranking import centered_ranks
from poet.trainers.adam import adam_state, adam_step
from poet.trainers.base import TrainerContext, TrainStep, TrainTask, out_of_range


@dataclass
class ESOptions:
    """ES hyper-parameters (defaults: the POET paper's)."""

    population: int = 512  # rollouts per step, as mirrored pairs: population / 2 noise vectors
    episodes_per_perturbation: int = 1
    sigma: float = 0.1
    sigma_decay: float = 0.999
    sigma_floor: float = 0.01
    lr: float = 0.01
    lr_decay: float = 0.9999
    lr_floor: float = 0.001
    l2: float = 0.01
    beta1: float = 0.99
    beta2: float = 0.999
    adam_eps: float = 1e-8
    noise_table_size: int = 25_000_000

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(self, ["population"], lambda v: v >= 2 and v % 2 == 0, "an even number >= 2 (mirrored pairs)"),
            *out_of_range(self, ("episodes_per_perturbation", "noise_table_size"), lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ("sigma", "lr", "sigma_floor", "lr_floor", "adam_eps"), lambda v: v > 0, "> 0"),
            *out_of_range(self, ("sigma_decay", "lr_decay"), lambda v: 0 < v <= 1, "in (0, 1]"),
            # 1 would divide by zero in Adam's bias correction
            *out_of_range(self, ("beta1", "beta2"), lambda v: 0 <= v < 1, "in [0, 1)"),
            *out_of_range(self, ["l2"], lambda v: v >= 0, ">= 0"),
        ]


def es_gradient(returns: np.ndarray, noise: np.ndarray, sigma: float) -> np.ndarray:
    """Ascent direction from mirrored returns (n, 2) and their noise vectors (n, dim)."""
    ranks = centered_ranks(returns)
    weights = ranks[:, 0] - ranks[:, 1]
    return (weights @ noise.astype(np.float64)) / (returns.size * sigma)


class ESTrainer:
    """POET's ES: one Adam step per pair per iteration."""

    name = "es"
    Options = ESOptions

    def __init__(self, options: ESOptions, context: TrainerContext):
        if context.noise is None:
            raise ValueError("the ES trainer needs the run's noise table")
        self.options, self.context = options, context
        self.noise: NoiseTable = context.noise

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        """Fresh Adam moments and the initial lr and sigma."""
        return {**adam_state(theta.size), "lr": self.options.lr, "sigma": self.options.sigma}

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        """POET resets the optimizer and schedules when a transfer is accepted."""
        return self.init_state(theta)

    def _requests(self, task: TrainTask, ref, dim: int) -> tuple[list[EvalRequest], np.ndarray]:
        o, ctx = self.options, self.context
        rng = np.random.Generator(np.random.PCG64(task.seed))
        half = o.population // 2
        offsets = self.noise.sample_offsets(rng, dim, half)
        # Common random numbers: +eps and -eps of a pair see the same courses.
        seeds = rng.integers(0, 2**31 - 1, size=half)
        eval_seed = int(rng.integers(0, 2**31 - 1))
        sigma = float(task.state["sigma"])
        reqs = [
            EvalRequest(ref, task.env, o.episodes_per_perturbation, int(s), ctx.max_steps,
                        Perturbation(int(off), sigma, sign), tag=f"{task.key} (ES)")
            for off, s in zip(offsets, seeds) for sign in (1, -1)
        ]
        if task.eval_episodes > 0:
            reqs.append(EvalRequest(ref, task.env, task.eval_episodes, eval_seed, ctx.max_steps, tag=f"{task.key} (score)"))
        return reqs, offsets

    def step(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        """One ES step per task; all tasks' rollouts in one evaluator call."""
        o = self.options
        plans, requests, refs = [], [], []
        for task in tasks:
            ref = evaluator.put(task.theta)
            refs.append(ref)
            reqs, offsets = self._requests(task, ref, task.theta.size)
            plans.append((len(requests), len(reqs), offsets))
            requests.extend(reqs)
        results = evaluator.evaluate(requests)
        evaluator.release(refs)
        scores = self.context.errors.scores(results)
        steps = []
        for task, (start, count, offsets) in zip(tasks, plans):
            half = o.population // 2
            returns = scores[start:start + 2 * half].reshape(half, 2)
            score = float(scores[start + count - 1]) if task.eval_episodes > 0 else None
            steps.append(self._update(task, returns, offsets, score))
        return steps

    def _update(self, task: TrainTask, returns: np.ndarray, offsets: np.ndarray, score: float | None) -> TrainStep:
        o, st = self.options, task.state
        dim = task.theta.size
        noise = np.stack([self.noise.get(int(off), dim) for off in offsets])
        g = es_gradient(returns, noise, float(st["sigma"]))
        theta = task.theta.astype(np.float32)
        new_theta, adam = adam_step(theta, -g + o.l2 * theta, st, float(st["lr"]), o.beta1, o.beta2, o.adam_eps)
        state = {
            **adam,
            "lr": max(float(st["lr"]) * o.lr_decay, o.lr_floor),
            "sigma": max(float(st["sigma"]) * o.sigma_decay, o.sigma_floor),
        }
        norm = float(np.linalg.norm(theta))
        metrics = {
            "lr": float(st["lr"]),
            "sigma": float(st["sigma"]),
            "es_return_mean": float(returns.mean()),
            "es_return_max": float(returns.max()),
            "grad_norm": float(np.linalg.norm(g)),
            "update_ratio": float(np.linalg.norm(new_theta - theta) / norm) if norm > 0 else 0.0,
        }
        return TrainStep(theta=new_theta, state=state, score=score, metrics=metrics)
