"""The population: active pairs in creation order, retired pairs in an archive, capacity."""

from __future__ import annotations

from dataclasses import dataclass, field

from envs import EnvParams
from poet.pair import Pair


@dataclass
class Population:
    """Active pairs, the archive of retired pairs, and every env ever admitted."""

    active: list[Pair] = field(default_factory=list)
    archive: list[Pair] = field(default_factory=list)
    next_index: int = 0

    def new_index(self) -> int:
        """A fresh pair index (pair ids are p0, p1, ...)."""
        i = self.next_index
        self.next_index += 1
        return i

    def add(self, pair: Pair) -> None:
        """Admit a pair."""
        self.active.append(pair)

    def retire_over_capacity(self, capacity: int, iteration: int) -> list[Pair]:
        """Move the oldest active pairs to the archive until at most `capacity` remain."""
        retired = []
        while len(self.active) > capacity:
            pair = self.active.pop(0)
            pair.retired_iteration = iteration
            self.archive.append(pair)
            retired.append(pair)
        return retired

    @property
    def all_pairs(self) -> list[Pair]:
        """Archived then active pairs, in creation order."""
        return sorted(self.archive + self.active, key=lambda p: p.index)

    @property
    def admitted_envs(self) -> list[EnvParams]:
        """Every env ever admitted (the novelty archive), in creation order."""
        return [p.env for p in self.all_pairs]

    def env_ids(self) -> set[str]:
        """Ids of every env ever admitted."""
        return {p.env.id for p in self.all_pairs}

    def get(self, pair_id: str) -> Pair:
        """A pair by id (active or archived)."""
        for p in self.active + self.archive:
            if p.pair_id == pair_id:
                return p
        raise KeyError(pair_id)
