"""Scoring agents on envs with a cache: the evaluation work of reproduction and transfer.

A score is the mean return of `eval_episodes` episodes whose seed is a function of the
env only, so an (agent, env) score never changes and a cached one is exact. Agents are
keyed by the content of their weights: an archived agent is never re-evaluated on an
env it was already scored on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from envs import EnvParams
from poet.evaluation import EvalRequest, Evaluator
from poet.evaluation.policy_store import weights_key
from poet.seeding import Seeds
from poet.trainers.base import ErrorPolicy


@dataclass
class ScoreCache:
    """(agent id, env id) -> score, held per agent.

    An archive keeps every agent it ever scored, so a long run's cache holds millions of
    scores; held per agent, dropping an agent's scores costs one step per agent and a copy of
    the cache (`snapshot`, at every iteration boundary) one per agent too. An agent's scores
    are read-only mappings that `put_many` replaces rather than changes, so a snapshot shares
    them and never sees a later score.
    """

    by_agent: dict[str, Mapping[str, float]] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def get(self, agent: str, env: str) -> float | None:
        """The cached score, or None."""
        scores = self.by_agent.get(agent)
        return None if scores is None else scores.get(env)

    def put_many(self, scores: Iterable[tuple[str, str, float]]) -> None:
        """Remember (agent, env, score) triples."""
        by_agent: dict[str, dict[str, float]] = {}
        for agent, env, score in scores:
            if agent not in by_agent:
                by_agent[agent] = dict(self.by_agent.get(agent, {}))
            by_agent[agent][env] = float(score)
        for agent, new in by_agent.items():
            self.by_agent[agent] = MappingProxyType(new)

    def keep_agents(self, agents: set[str]) -> None:
        """Drop scores of agents that no longer exist (bounds memory and checkpoint size)."""
        for agent in [a for a in self.by_agent if a not in agents]:
            del self.by_agent[agent]

    def snapshot(self) -> dict[str, Mapping[str, float]]:
        """The scores as they are now, unchanged by later `put_many` and `keep_agents` calls."""
        return dict(self.by_agent)


class Scorer:
    """Scores many (agent, env) combinations in one evaluator wave, using the cache."""

    def __init__(
        self, evaluator: Evaluator, seeds: Seeds, episodes: int, max_steps: int, errors: ErrorPolicy, cache: ScoreCache
    ):
        self.evaluator, self.seeds, self.episodes = evaluator, seeds, episodes
        self.max_steps, self.errors, self.cache = max_steps, errors, cache
        self._env_seeds: dict[str, int] = {}

    def env_seed(self, env: EnvParams) -> int:
        """The evaluation seed of an env (a function of the env's content only)."""
        seed = self._env_seeds.get(env.id)
        if seed is None:  # a score wave asks for each env's seed many times, one per agent
            seed = self._env_seeds[env.id] = self.seeds.integer("score", int(env.id[:8], 16))
        return seed

    def score(self, jobs: Sequence[tuple[np.ndarray, EnvParams]], tags: Sequence[str] | None = None) -> np.ndarray:
        """Scores of each (theta, env); cache misses go to the evaluator as one batch."""
        agent_of: dict[int, str] = {}  # id(theta) -> its key: a batch scores each agent on many envs
        keys = []
        for theta, env in jobs:  # `jobs` holds every theta until the end, so no id is reused
            agent = agent_of.get(id(theta))
            if agent is None:
                agent = agent_of[id(theta)] = weights_key(theta)
            keys.append((agent, env.id))
        found = [self.cache.get(*key) for key in keys]
        todo: dict[tuple[str, str], int] = {}
        for i, (key, score) in enumerate(zip(keys, found)):
            if score is None and key not in todo:
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
            self.cache.put_many((agent, env, s) for (agent, env), s in zip(todo, self.errors.scores(results)))
            found = [self.cache.get(*key) if score is None else score for key, score in zip(keys, found)]
        return np.array(found, dtype=np.float64)
