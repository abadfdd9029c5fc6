"""The POET schedule, and nothing else.

Each iteration (the reference's `optimize`): reproduce (every `reproduction.every`
iterations, not at 0), one training step of every active pair and its score, transfer
(every `transfer.every` iterations when there are at least two pairs). The phases live
in reproduction.py, transfer.py and the trainer; every phase submits its evaluations as
batches.
"""
from __future__ import annotations

import inspect
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from envs import EnvFamily, EnvParams
from poet.context import RunContext
from poet.evaluation import EvalRequest
from poet.pair import Pair
from poet.policies import init_flat
from poet.records import json_text
from poet.reproduction import course_seed_for, record_env, reproduce
from poet.trainers import TrainTask
from poet.transfer import transfer


class Orchestrator:
    """Runs POET or Enhanced POET over a RunContext."""

    def __init__(self, ctx: RunContext, on_iteration: Callable[["Orchestrator"], None] | None = None):
        self.ctx = ctx
        self.iteration = 0  # the next iteration to run
        self.on_iteration = on_iteration
        self.last_steps_per_second = float("nan")  # env steps per second of the last iteration
        self.target: int | None = None  # the iteration count `run` goes to (None: open-ended)

    def start(self) -> Pair:
        """Create the first pair: the family's initial env with a fresh agent."""
        ctx = self.ctx
        env = initial_params(ctx.family, ctx.seeds.rng("env.initial"))
        env = env.with_course_seed(course_seed_for(ctx, ctx.seeds.rng("env.course", 0)))
        ctx.family.validate(env)
        theta = init_flat(ctx.spec, ctx.seeds.rng("policy.init"), ctx.cfg.policy.init)
        index = ctx.population.new_index()
        pair = Pair(pair_id=f"p{index}", index=index, env=env, theta=theta, state=ctx.trainer.init_state(theta),
                    parent_env_id=None, created_iteration=0)
        ctx.population.add(pair)
        record_env(ctx, pair)
        ctx.records.write("events", {"iteration": 0, "kind": "admitted", "pair_id": pair.pair_id, "env_id": env.id,
                                     "detail": json_text({"initial": True})})
        ctx.records.flush()
        return pair

    def train(self, iteration: int) -> None:
        """One trainer step for every active pair (one wave), and each pair's score.

        With `evaluation.self_score: after_step` (the reference's `ind_es_step`) the updated
        agents are scored in a second wave; with `before_step` the trainer scores the
        starting agents in its own wave.
        """
        ctx = self.ctx
        after = ctx.cfg.evaluation.self_score == "after_step"
        pairs = list(ctx.population.active)
        tasks = [self._task(p, iteration, p.theta, p.state, 0 if after else ctx.cfg.evaluation.eval_episodes)
                 for p in pairs]
        steps = ctx.trainer.step(tasks, ctx.evaluator)
        drop = getattr(ctx.evaluator, "drop_ahead", None)
        if callable(drop):
            drop()  # what the last iteration ran ahead for this step and it did not ask for
        if after:
            ahead = self._next_requests(pairs, steps, iteration)
            scores = ctx.scorer.score([(s.theta, p.env) for p, s in zip(pairs, steps)],
                                      tags=[f"{p.pair_id} (score)" for p in pairs], along=ahead)
            if ahead:
                ctx.evaluator.release(list({r.policy for r in ahead}))
        else:
            scores = [float("nan") if s.score is None else s.score for s in steps]
        for pair, step, score in zip(pairs, steps, scores):
            score = float(score)
            ctx.records.write("iterations", {"iteration": iteration, "pair_id": pair.pair_id, "env_id": pair.env.id,
                                             "score": score, **step.metrics})
            pair.scores.append(score)
            pair.theta, pair.state = step.theta, step.state
            ctx.mark_solved(pair.pair_id, pair.env.id, score, iteration, "training")

    def _task(self, pair: Pair, iteration: int, theta: np.ndarray, state: dict, eval_episodes: int) -> TrainTask:
        return TrainTask(key=pair.pair_id, theta=theta, env=pair.env, state=state,
                         seed=self.ctx.seeds.integer("train", iteration, pair.index), eval_episodes=eval_episodes)

    def _next_requests(self, pairs: list[Pair], steps: list, iteration: int) -> list[EvalRequest]:
        """The trainer requests of the next iteration if every pair trains on from where this
        step left it (`evaluation.run_ahead`): the score wave runs them too, and the next
        iteration reuses every one it asks for unchanged (none of a pair transferred to or
        retired in between)."""
        ctx = self.ctx
        plan = getattr(ctx.trainer, "requests", None)
        if (not ctx.cfg.evaluation.run_ahead or not callable(plan) or not hasattr(ctx.evaluator, "evaluate_along")
                or (self.target is not None and iteration + 1 >= self.target)):
            return []
        return plan([self._task(p, iteration + 1, s.theta, s.state, 0) for p, s in zip(pairs, steps)], ctx.evaluator)

    @contextmanager
    def _phase(self, name: str, totals: list[float]) -> Iterator[None]:
        """Time a phase and count its env steps into the `phases` table (and `totals`: seconds, steps)."""
        steps0, t0 = getattr(self.ctx.evaluator, "env_steps", 0), time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        steps = getattr(self.ctx.evaluator, "env_steps", 0) - steps0
        totals[0] += seconds
        totals[1] += steps
        self.ctx.records.write("phases", {"iteration": self.iteration, "phase": name, "seconds": seconds,
                                          "env_steps": int(steps)})

    def run_iteration(self) -> None:
        """Run the next iteration of the schedule."""
        ctx, it = self.ctx, self.iteration
        totals = [0.0, 0.0]
        if it > 0 and it % ctx.cfg.reproduction.every == 0:
            with self._phase("reproduce", totals):
                summary = reproduce(ctx, it)
            ctx.log(summary.line(len(ctx.population.active), len(ctx.population.archive)))
        with self._phase("train", totals):
            self.train(it)
        if len(ctx.population.active) > 1 and it % ctx.cfg.transfer.every == 0:
            with self._phase("transfer", totals):
                line = transfer(ctx, it).line()
            ctx.log(line)
        self.last_steps_per_second = totals[1] / totals[0] if totals[0] > 0 else float("nan")
        self._forget_stale_scores()
        ctx.records.flush()
        self.iteration += 1
        if self.on_iteration is not None:
            self.on_iteration(self)

    def run(self, iterations: int) -> None:
        """Run until `iterations` iterations are done."""
        self.target = iterations
        if not self.ctx.population.active:
            self.start()
        while self.iteration < iterations:
            self.run_iteration()

    def _forget_stale_scores(self) -> None:
        # Scores of agents that trained on are never asked again; keep only living agents'.
        living = {p.agent_id for p in self.ctx.population.all_pairs}
        self.ctx.scorer.cache.keep_agents(living)

    def annecs(self) -> int:
        """Accumulated number of novel environments created and solved (envs admitted by reproduction)."""
        initial = {p.env.id for p in self.ctx.population.all_pairs if p.parent_env_id is None}
        return sum(1 for env_id in self.ctx.solved if env_id not in initial)


def initial_params(family: EnvFamily, rng: np.random.Generator) -> EnvParams:
    """The family's first env; families whose start is random (`initial(rng)`) draw it from `rng`."""
    try:
        takes_rng = len(inspect.signature(family.initial).parameters) >= 1
    except (TypeError, ValueError):
        takes_rng = False
    return family.initial(rng) if takes_rng else family.initial()
