"""A user-defined trainer in a few dozen lines: random-search hill climbing.

    poet run --set trainer.name=experiments.random_search:RandomSearchTrainer \
             --set trainer.options.candidates=16

Each step scores the agent and `candidates` Gaussian perturbations of it, all pairs' rollouts
in one evaluator wave, and keeps the best if it beats the agent. Given a batch of levels
(`task.levels`: robust PLR, ACCEL and DR), a candidate's return is its mean over them. The Trainer protocol is
`name`, `init_state`, `reset_state` and `step`; an `Options` dataclass (optional) gets
its fields checked against `trainer.options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from poet.evaluation import EvalRequest, Evaluator
from poet.trainers import TrainerContext, TrainStep, TrainTask


@dataclass
class RandomSearchOptions:
    candidates: int = 8  # perturbations tried per step
    sigma: float = 0.05  # their standard deviation
    episodes: int = 1  # episodes per candidate (and for the incumbent)

    def check(self) -> list[tuple[str, str]]:
        return [
            (k, f"must be > 0, got {getattr(self, k)}")
            for k in ("candidates", "sigma", "episodes")
            if getattr(self, k) <= 0
        ]


class RandomSearchTrainer:
    name = "random_search"
    trains_on_levels = True  # scores each candidate on every level of a batch
    Options = RandomSearchOptions

    def __init__(self, options: RandomSearchOptions, context: TrainerContext):
        self.options, self.context = options, context

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        return {"steps": 0, "improvements": 0}  # plain data: checkpoints hold it as is

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        return self.init_state(theta)

    def step(self, tasks: Sequence[TrainTask], evaluator: Evaluator) -> list[TrainStep]:
        o, ctx = self.options, self.context
        plans, requests, refs = [], [], []
        for task in tasks:
            rng = np.random.default_rng(task.seed)  # all randomness of the step from its seed
            thetas = [task.theta] + [
                (task.theta + o.sigma * rng.standard_normal(task.theta.size)).astype(np.float32)
                for _ in range(o.candidates)
            ]
            seed = int(rng.integers(2**31 - 1))  # every candidate sees the same episodes
            levels = task.levels or [task.env]  # a batch (robust PLR, ACCEL, DR) or the pair's env
            scored = [*thetas, task.theta] if task.eval_episodes > 0 else thetas
            for i, theta in enumerate(scored):
                refs.append(evaluator.put(theta))
                episodes, tag = (
                    (o.episodes, task.key) if i < len(thetas) else (task.eval_episodes, f"{task.key} (score)")
                )
                requests += [
                    EvalRequest(refs[-1], env, episodes, seed + (i >= len(thetas)), ctx.max_steps, tag=tag)
                    for env in levels
                ]
            plans.append((thetas, len(levels)))
        scores = ctx.errors.scores(evaluator.evaluate(requests))
        evaluator.release(refs)
        steps, at = [], 0
        for task, (thetas, k) in zip(tasks, plans):
            per_level = np.reshape(scores[at : at + len(thetas) * k], (len(thetas), k))
            at += len(thetas) * k
            returns = per_level.mean(axis=1)  # a candidate's return: its mean over the levels
            own = None
            if task.eval_episodes > 0:
                own, at = np.asarray(scores[at : at + k], dtype=float), at + k
            best = int(np.argmax(returns))  # index 0, the incumbent, wins ties
            state = {"steps": task.state["steps"] + 1, "improvements": task.state["improvements"] + (best > 0)}
            steps.append(
                TrainStep(
                    theta=thetas[best],
                    state=state,
                    score=None if own is None else float(own.mean()),
                    metrics={"rs_best": float(returns[best]), "rs_incumbent": float(returns[0])},
                    levels=[
                        {
                            "return_max": float(per_level[:, j].max()),
                            **({} if own is None else {"return": float(own[j])}),
                        }
                        for j in range(k)
                    ]
                    if task.levels
                    else [],
                )
            )
        return steps
