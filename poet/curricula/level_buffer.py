"""Prioritized level replay's level buffer, as facebookresearch/dcd's `LevelSampler` runs it
for an unbounded level space (`sample_full_distribution`), in plain data.

- Replay distribution: P = (1 - rho) P_S + rho P_C over the levels in the buffer, with
  P_S from the scores by rank (the highest score has rank 1; weight 1 / rank^(1/T)) and
  P_C from staleness (weight = staleness, the `power` transform at temperature 1), each
  normalised over the levels held. As in dcd, ranks are taken over all `capacity` slots,
  an empty slot scoring 0 (a level scoring 0 ranks among the empty slots), in the order
  of numpy's default `argsort`, reversed (tied scores rank in that order, which for a
  handful of levels puts the last slot first); and when every level's staleness is 0,
  P_C is 1/capacity per level, so a part-filled buffer's P sums to less than 1 and
  sampling normalises it.
- Staleness: every replay adds 1 to each level's staleness and sets the replayed one's to 0.
- Scores arrive per episode, in the order dcd's `update_with_rollouts` takes them (env by
  env, each env's finished episodes in order): each replaces the level's score (alpha = 1),
  so a level keeps its last episode's. A new level's first score decides whether it enters
  (`offer`); a new level with no finished episode never enters.
- Replay decision ("proportionate" schedule, dcd's default): with f the buffer's fill
  fraction, replay when f >= min_fill and u < min(f, replay_prob).
- A new level enters an empty slot while there is one; then it replaces the level with the
  least replay support (the smallest P; dcd's default `replay_support`) or, with
  `priority="score"`, the lowest-scored level, if its score is at least that level's. Its
  staleness starts at the number of new levels proposed since it was (dcd's
  `running_sample_count`, which replays do not advance).

All randomness comes from the Generator passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class LevelBuffer:
    """Levels (any JSON-able description) with scores and staleness; plain data throughout."""

    capacity: int
    temperature: float = 0.1
    staleness_coef: float = 0.5
    priority: str = "replay_support"  # which level a new one may replace: "replay_support" | "score"
    levels: list[Any] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    staleness: list[float] = field(default_factory=list)
    samples: int = 0  # dcd's running_sample_count: new levels proposed so far

    @property
    def fill(self) -> float:
        """The fraction of the buffer in use."""
        return len(self.levels) / self.capacity

    @staticmethod
    def levels_to_replay(capacity: int, min_fill: float) -> int:
        """How many levels a buffer of `capacity` must hold before `replay_decision` can
        replay: the fewest n >= 1 with n / capacity >= min_fill."""
        n = max(1, math.ceil(min_fill * capacity))
        while n > 1 and (n - 1) / capacity >= min_fill:  # the rounded product may miss by one
            n -= 1
        while n < capacity and n / capacity < min_fill:
            n += 1
        return n

    def weights(self) -> np.ndarray:
        """The replay weights of the buffer's levels, as dcd's `sample_weights` gives them (they
        sum to less than 1 in a part-filled buffer whose staleness is all 0)."""
        n = len(self.levels)
        if n == 0:
            return np.zeros(0)
        scores = np.zeros(self.capacity)
        scores[:n] = self.scores
        order = np.flip(scores.argsort())  # numpy's default kind, as dcd: ties fall in its order
        ranks = np.empty(scores.size)
        ranks[order] = np.arange(1, scores.size + 1)
        p_score = _normalised(1.0 / ranks[:n] ** (1.0 / self.temperature))
        if self.staleness_coef <= 0:
            return p_score
        stale = np.asarray(self.staleness, dtype=np.float64).clip(0)
        total = stale.sum()
        p_stale = stale / total if total > 0 else np.full(n, 1.0 / self.capacity)
        return (1 - self.staleness_coef) * p_score + self.staleness_coef * p_stale

    def replay_decision(self, rng: np.random.Generator, replay_prob: float, min_fill: float) -> bool:
        """Whether the next level is a replay (else a new one); always draws one number."""
        u = rng.random()
        return self.fill >= min_fill and len(self.levels) > 0 and u < min(self.fill, replay_prob)

    def sample_replay(self, rng: np.random.Generator) -> int:
        """The index of a level drawn from `weights()`; updates staleness."""
        weights = self.weights()
        index = int(rng.choice(len(self.levels), p=weights / weights.sum()))
        if self.staleness_coef > 0:
            self.staleness = [s + 1.0 for s in self.staleness]
            self.staleness[index] = 0.0
        return index

    def propose(self) -> int:
        """Count a new level drawn; returns its timestamp (for the staleness it enters with)."""
        self.samples += 1
        return self.samples

    def insert(self, level: Any, score: float, timestamp: int) -> int | None:
        """Offer a scored new level; returns its index, or None when it does not get in."""
        score = finite(score)
        if len(self.levels) < self.capacity:
            self.levels.append(level)
            self.scores.append(float(score))
            self.staleness.append(float(self.samples - timestamp))
            return len(self.levels) - 1
        index = int(np.argmin(self.weights() if self.priority == "replay_support" else np.asarray(self.scores)))
        if self.scores[index] > score:
            return None
        self.levels[index], self.scores[index] = level, float(score)
        self.staleness[index] = float(self.samples - timestamp)
        return index

    def offer(self, level: Any, scores: list[float], timestamp: int) -> int | None:
        """A new level with its episodes' scores in order: the first decides whether it enters
        (`insert`), the later ones replace its score; with none it does not enter. Returns its
        index or None."""
        scores = [finite(s) for s in scores]  # all checked before the buffer changes
        if not scores:
            return None
        index = self.insert(level, scores[0], timestamp)
        if index is not None:
            self.update(index, scores[-1])
        return index

    def update(self, index: int, score: float) -> None:
        """A replayed level's new score."""
        self.scores[index] = finite(score)

    def to_data(self) -> dict[str, Any]:
        """Plain data for the run state (checkpoints)."""
        return {
            "capacity": self.capacity,
            "temperature": self.temperature,
            "staleness_coef": self.staleness_coef,
            "priority": self.priority,
            "levels": list(self.levels),
            "scores": list(self.scores),
            "staleness": list(self.staleness),
            "samples": self.samples,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> LevelBuffer:
        """Inverse of `to_data`."""
        return cls(
            int(data["capacity"]),
            float(data["temperature"]),
            float(data["staleness_coef"]),
            str(data.get("priority", "replay_support")),
            list(data["levels"]),
            [float(s) for s in data["scores"]],
            [float(s) for s in data["staleness"]],
            int(data["samples"]),
        )


def finite(score: float) -> float:
    """A level's score as a float; a non-finite one is refused (a NaN would rank first for good,
    an infinity swamp the ranks: jaxued PR 6's `-inf` from levels with no finished episode)."""
    value = float(score)
    if not math.isfinite(value):
        raise ValueError(f"a level's score must be a finite number, got {value!r}")
    return value


def _normalised(w: np.ndarray) -> np.ndarray:
    z = w.sum()
    return w / z if z > 0 else np.full(len(w), 1.0 / len(w))
