"""Evolution strategies as POET trains with them (uber-research/poet `es.py`, `optimizers.py`).

Mirrored sampling from the shared noise table, centred ranks over all 2N returns, the
gradient sum((r+ - r-) * eps) / N / sigma over the N mirrored pairs (`compute_grads`),
Adam (beta1 0.9) on -gradient + L2 * theta, and decaying learning rate and noise. Every
pair's perturbations of a step go to the evaluator as one wave.

A task with a batch of levels (robust PLR's and ACCEL's cycle) spreads the mirrored pairs
over them, pair j on level j mod k (both halves of a pair on the same level, so the pair's
difference still cancels the level's own difficulty), and one step follows from all of
them: the same cost as a step on one env, each level seen by population / 2k pairs.

`propose` is the reference's `get_step(..., propose_only=True)`: one step from a given
theta with a given state, committing nothing: an Adam step with the state's moments
(`Adam.propose`, what transfers use with `--propose_with_adam`), or a plain SGD step at the
initial learning rate (`SimpleSGD`, what child admission uses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from poet.config import out_of_range
from poet.evaluation import Evaluator, NoiseTable, PolicyRef, RequestTable, RequestTableBuilder
from poet.ranking import centered_ranks
from poet.trainers.adam import adam_propose, adam_state, adam_step
from poet.trainers.base import TrainerContext, TrainStep, TrainTask


@dataclass
class ESOptions:
    """ES hyper-parameters (defaults: the reference's `run_poet_local.sh` and `master.py`)."""

    population: int = 512  # rollouts per step, as mirrored pairs: population / 2 noise vectors
    # episodes each perturbed policy runs, their returns averaged (the reference: one; on a
    # fixed course they are identical and run once)
    episodes_per_perturbation: int = 1
    sigma: float = 0.1  # initial noise std of the perturbations (--noise_std)
    sigma_decay: float = 0.999  # sigma is multiplied by this after every committed step (--noise_decay)
    sigma_floor: float = 0.01  # sigma never decays below this (--noise_limit)
    lr: float = 0.01  # initial Adam step size, also child admission's plain SGD step (--learning_rate)
    lr_decay: float = 0.9999  # lr is multiplied by this after every committed step (--lr_decay)
    lr_floor: float = 0.001  # lr never decays below this (--lr_limit)
    l2: float = 0.01  # L2 coefficient: Adam descends -gradient + l2 * theta (--l2_coeff)
    beta1: float = 0.9  # Adam's first-moment decay: the reference's Adam default (optimizers.py)
    beta2: float = 0.999  # Adam's second-moment decay (optimizers.py)
    adam_eps: float = 1e-8  # Adam's epsilon, added to sqrt(v) (optimizers.py)
    # floats in the shared noise table the perturbations are read from, drawn from the run's
    # seed (the reference's holds 250M; this many is ample for POET's 40-40 policy)
    noise_table_size: int = 25_000_000
    # how a transfer's fine-tuned candidate steps: "adam" with the target's moments, not
    # committed (the reference run script's --propose_with_adam), or "sgd" (plain step)
    propose_with: Literal["adam", "sgd"] = "adam"

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(
                self, ["population"], lambda v: v >= 2 and v % 2 == 0, "an even number >= 2 (mirrored pairs)"
            ),
            *out_of_range(self, ("episodes_per_perturbation", "noise_table_size"), lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ("sigma", "lr", "sigma_floor", "lr_floor", "adam_eps"), lambda v: v > 0, "> 0"),
            *out_of_range(self, ("sigma_decay", "lr_decay"), lambda v: 0 < v <= 1, "in (0, 1]"),
            # 1 would divide by zero in Adam's bias correction
            *out_of_range(self, ("beta1", "beta2"), lambda v: 0 <= v < 1, "in [0, 1)"),
            *out_of_range(self, ["l2"], lambda v: v >= 0, ">= 0"),
        ]


def es_gradient(returns: np.ndarray, noise: np.ndarray, sigma: float) -> np.ndarray:
    """Ascent direction from mirrored returns (n, 2) and their noise vectors (n, dim).

    sum_i (R_i+ - R_i-) eps_i / n / sigma with R the centred ranks of all 2n returns: the
    reference divides by n = len(returns) (the number of mirrored pairs), not by 2n.
    """
    ranks = centered_ranks(returns)
    weights = ranks[:, 0] - ranks[:, 1]
    return (weights @ noise.astype(np.float64)) / (len(returns) * sigma)


class ESTrainer:
    """POET's ES: one Adam step per pair per iteration."""

    name = "es"
    trains_on_levels = True  # spreads its mirrored pairs over `TrainTask.levels`
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

    def _add_requests(self, requests: RequestTableBuilder, task: TrainTask, ref: PolicyRef) -> np.ndarray:
        """Add the task's requests: mirrored pair j (+eps, then -eps) on level j mod k, then, if
        asked, one score request per level. Returns the pairs' noise offsets."""
        o, ctx = self.options, self.context
        rng = np.random.Generator(np.random.PCG64(task.seed))
        half = o.population // 2
        offsets = self.noise.sample_offsets(rng, task.theta.size, half)
        # Common random numbers: +eps and -eps of a pair see the same courses.
        seeds = rng.integers(0, 2**31 - 1, size=half)
        eval_seed = int(rng.integers(0, 2**31 - 1))
        sigma = float(task.state["sigma"])
        levels = task.levels or [task.env]
        requests.add(
            ref,
            levels,
            [j % len(levels) for j in range(half) for _ in (1, -1)],
            np.repeat(seeds, 2).tolist(),
            o.episodes_per_perturbation,
            ctx.max_steps,
            offsets=np.repeat(offsets, 2).tolist(),
            scales=[sigma, -sigma] * half,
            tag=f"{task.key} (ES)",
        )
        if task.eval_episodes > 0:
            requests.add(
                ref,
                levels,
                range(len(levels)),
                [eval_seed] * len(levels),
                task.eval_episodes,
                ctx.max_steps,
                tag=f"{task.key} (score)",
            )
        return offsets

    def _plan(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> tuple[list, RequestTable, list]:
        """Every task's requests (weights put into `evaluator`): (per task (start, count, offsets), requests, refs)."""
        plans, refs, requests = [], [], RequestTableBuilder()
        for task in tasks:
            ref = evaluator.put(task.theta)
            refs.append(ref)
            start = len(requests)
            offsets = self._add_requests(requests, task, ref)
            plans.append((start, len(requests) - start, offsets))
        return plans, requests.build(), refs

    def _gradients(
        self, tasks: Sequence[TrainTask], evaluator: Evaluator
    ) -> list[tuple[np.ndarray, np.ndarray, list[float]]]:
        """(gradient, returns, scores) per task, with a score per level (none if not asked);
        all tasks' rollouts in one evaluator call."""
        o = self.options
        plans, requests, refs = self._plan(tasks, evaluator)
        results = evaluator.evaluate(requests) if requests else []
        evaluator.release(refs)
        scores = self.context.errors.scores(results)
        out = []
        half = o.population // 2
        for task, (start, count, offsets) in zip(tasks, plans):
            returns = scores[start : start + 2 * half].reshape(half, 2)
            level_scores = [float(v) for v in scores[start + 2 * half : start + count]]
            dim = task.theta.size
            noise = np.stack([self.noise.get(int(off), dim) for off in offsets])
            out.append((es_gradient(returns, noise, float(task.state["sigma"])), returns, level_scores))
        return out

    def step(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        """One ES step per task; all tasks' rollouts in one evaluator call."""
        return [
            self._update(task, g, returns, scores)
            for task, (g, returns, scores) in zip(tasks, self._gradients(tasks, evaluator))
        ]

    def propose(self, tasks: Sequence[TrainTask], evaluator: Evaluator, plain: bool = False) -> list[np.ndarray]:
        """One step from each task's theta and state, committing nothing (the reference's proposals).

        `plain`: a SimpleSGD step at the initial learning rate (child admission); otherwise
        `propose_with` decides (Adam with the state's moments and step size by default).
        """
        o = self.options
        out = []
        for task, (g, _, _) in zip(tasks, self._gradients(tasks, evaluator)):
            theta = task.theta.astype(np.float32)
            grad = -g + o.l2 * theta
            # A fresh state (t = 0) has no Adam step to propose (the reference would divide by
            # zero there; its schedule never asks): it takes the plain step.
            if plain or o.propose_with == "sgd" or int(task.state["t"]) == 0:
                out.append((theta - o.lr * grad).astype(np.float32))
            else:
                out.append(adam_propose(theta, grad, task.state, float(task.state["lr"]), o.beta1, o.beta2, o.adam_eps))
        return out

    def _update(self, task: TrainTask, g: np.ndarray, returns: np.ndarray, scores: list[float]) -> TrainStep:
        o, st = self.options, task.state
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
        levels = []
        for i in range(len(task.levels)):  # pairs i, i + k, ... ran on level i
            level = {"return_max": float(returns[i :: len(task.levels)].max())} if i < len(returns) else {}
            levels.append({**level, **({"return": scores[i]} if scores else {})})
        score = float(np.mean(scores)) if scores else None
        return TrainStep(theta=new_theta, state=state, score=score, metrics=metrics, levels=levels)
