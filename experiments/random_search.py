"""A user-defined trainer in a few dozen lines: random-search hill climbing.

    poet run --set trainer.name=experiments.random_search:RandomSearchTrainer \
             --set trainer.options.candidates=16

Each step scores the agent and `candidates` Gaussian perturbations of it, all pairs' rollouts
in one evaluator wave, and keeps the best if it beats the agent. The Trainer protocol is
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
            for theta in thetas:
                refs.append(evaluator.put(theta))
                requests.append(EvalRequest(refs[-1], task.env, o.episodes, seed, ctx.max_steps, tag=task.key))
            if task.eval_episodes > 0:
                refs.append(evaluator.put(task.theta))
                requests.append(
                    EvalRequest(
                        refs[-1], task.env, task.eval_episodes, seed + 1, ctx.max_steps, tag=f"{task.key} (score)"
                    )
                )
            plans.append(thetas)
        scores = ctx.errors.scores(evaluator.evaluate(requests))
        evaluator.release(refs)
        steps, at = [], 0
        for task, thetas in zip(tasks, plans):
            returns = scores[at : at + len(thetas)]
            at += len(thetas)
            score = None
            if task.eval_episodes > 0:
                score, at = float(scores[at]), at + 1
            best = int(np.argmax(returns))  # index 0, the incumbent, wins ties
            state = {"steps": task.state["steps"] + 1, "improvements": task.state["improvements"] + (best > 0)}
            steps.append(
                TrainStep(
                    theta=thetas[best],
                    state=state,
                    score=score,
                    metrics={"rs_best": float(returns[best]), "rs_incumbent": float(returns[0])},
                )
            )
        return steps
