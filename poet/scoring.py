"""Scoring agents on envs with a cache: the evaluation work of reproduction and transfer.

A score is the mean return of `eval_episodes` episodes whose seed is a function of the
env only, so an (agent, env) score never changes and a cached one is exact. Agents are
keyed by the content of their weights: an archived agent is never re-evaluated on an
env it was already scored on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from envs import EnvParams
from poet.evaluation import EvalRequest, Evaluator
from poet.evaluation.policy_store import weights_key
from poet.seeding import Seeds
from poet.trainers.base import ErrorPolicy


@dataclass
class ScoreCache:
    """(agent id, env id) -> score."""

    scores: dict[tuple[str, str], float] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, agent: str, env: str) -> float | None:
        """The cached score, or None."""
        return self.scores.get((agent, env))

    def put(self, agent: str, env: str, score: float) -> None:
        """Remember a score."""
        self.scores[(agent, env)] = float(score)

    def keep_agents(self, agents: set[str]) -> None:
        """Drop scores of agents that no longer exist (bounds memory and checkpoint size)."""
        self.scores = {k: v for k, v in self.scores.items() if k[0] in agents}


class Scorer:
    """Scores many (agent, env) combinations in one evaluator wave, using the cache."""

    def __init__(
        self, evaluator: Evaluator, seeds: Seeds, episodes: int, max_steps: int, errors: ErrorPolicy, cache: ScoreCache
    ):
        self.evaluator, self.seeds, self.episodes = evaluator, seeds, episodes
        self.max_steps, self.errors, self.cache = max_steps, errors, cache

    def env_seed(self, env: EnvParams) -> int:
        """The evaluation seed of an env (a function of the env's content only)."""
        return self.seeds.integer("score", int(env.id[:8], 16))

    def score(self, jobs: Sequence[tuple[np.ndarray, EnvParams]], tags: Sequence[str] | None = None) -> np.ndarray:
        """Scores of each (theta, env); cache misses go to the evaluator as one batch."""
        keys = [(weights_key(theta), env.id) for theta, env in jobs]
        todo: dict[tuple[str, str], int] = {}
        for i, key in enumerate(keys):
            if self.cache.get(*key) is None and key not in todo:
                todo[key] = i
        self.cache.hits += len(jobs) - len(todo)
        self.cache.misses += len(todo)
        if todo:
            refs, requests = {}, []
            for key, i in todo.items():
                theta, env = jobs[i]
                if key[0] not in refs:
                    refs[key[0]] = self.evaluator.put(theta)
                tag = tags[i] if tags is not None else ""
                requests.append(
                    EvalRequest(refs[key[0]], env, self.episodes, self.env_seed(env), self.max_steps, tag=tag)
                )
            results = self.evaluator.evaluate(requests)
            self.evaluator.release(list(refs.values()))
            for key, s in zip(todo, self.errors.scores(results)):
                self.cache.put(*key, s)
        return np.array([self.cache.get(*key) for key in keys], dtype=np.float64)
