"""Pair: one environment with its agent, the agent's trainer state and its lineage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs import EnvParams
from poet.evaluation.policy_store import weights_key


@dataclass
class Pair:
    """An env-agent pair of the population."""

    pair_id: str
    index: int  # creation order; also the integer key of the pair's random streams
    env: EnvParams
    theta: np.ndarray
    state: dict[str, Any]
    parent_env_id: str | None
    created_iteration: int
    scores: list[float] = field(default_factory=list)  # one per training iteration
    retired_iteration: int | None = None

    @property
    def agent_id(self) -> str:
        """Content id of the current agent (changes whenever theta does)."""
        return weights_key(self.theta)

    def recent_scores(self, n: int) -> list[float]:
        """The last n training scores."""
        return self.scores[-n:]
