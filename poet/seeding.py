"""The only source of randomness: named SeedSequence streams from one root seed.

A stream is named by what it is for ("mutation", "es.noise", ...) plus integer keys
(iteration, pair index, ...). The same (root, name, keys) always gives the same
stream, in any process, and different names give independent streams. Nothing in the
framework touches a global RNG.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from envs.seed_stream import entropy_words, generate_state


def _name_key(name: str) -> int:
    # crc32 is stable across processes and Python versions (unlike hash()).
    return zlib.crc32(name.encode("utf-8"))


@dataclass(frozen=True)
class Seeds:
    """Derives independent, reproducible random streams from a root seed."""

    root: int

    def __post_init__(self) -> None:
        if isinstance(self.root, bool) or not isinstance(self.root, (int, np.integer)) or self.root < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.root!r}")

    def sequence(self, name: str, *keys: int) -> np.random.SeedSequence:
        """The SeedSequence for a named stream."""
        spawn_key = (_name_key(name),) + tuple(int(k) for k in keys)
        return np.random.SeedSequence(entropy=int(self.root), spawn_key=spawn_key)

    def rng(self, name: str, *keys: int) -> np.random.Generator:
        """A numpy Generator for a named stream."""
        return np.random.Generator(np.random.PCG64(self.sequence(name, *keys)))

    def integer(self, name: str, *keys: int) -> int:
        """One 31-bit integer seed for a named stream (for env resets and evaluation requests)."""
        return int(self.sequence(name, *keys).generate_state(1, dtype=np.uint32)[0] >> 1)


_EPISODE_KEY = _name_key("episode")


def episode_seeds(seed: int, episodes: int) -> list[int]:
    """Per-episode env seeds of an evaluation request, a function of (seed, episode index) only."""
    # np.random.SeedSequence(entropy=seed, spawn_key=(key,)).generate_state(episodes), compiled
    words = generate_state(entropy_words(int(seed), (_EPISODE_KEY,)), int(episodes))
    return [x >> 1 for x in words.tolist()]
