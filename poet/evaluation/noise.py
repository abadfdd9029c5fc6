"""The shared ES noise table: one block of Gaussian noise, indexed by offsets."""

from __future__ import annotations

import numpy as np


class NoiseTable:
    """A fixed float32 standard-normal table; a perturbation is a slice of it.

    Trainer and evaluator build the same table from the same SeedSequence, so only
    offsets (and sigma and signs) travel between them.
    """

    def __init__(self, seed_sequence: np.random.SeedSequence, size: int):
        if size < 1:
            raise ValueError(f"noise table size must be >= 1, got {size}")
        rng = np.random.Generator(np.random.PCG64(seed_sequence))
        self.noise = rng.standard_normal(size, dtype=np.float32)
        self.noise.setflags(write=False)

    @classmethod
    def from_array(cls, noise: np.ndarray) -> NoiseTable:
        """Wrap an existing array (e.g. one shared through an object store)."""
        table = object.__new__(cls)
        table.noise = noise
        return table

    @property
    def size(self) -> int:
        """Number of floats in the table."""
        return int(self.noise.size)

    def get(self, offset: int, dim: int) -> np.ndarray:
        """The noise vector at `offset` (a read-only view)."""
        if offset < 0 or offset + dim > self.noise.size:
            raise IndexError(f"noise offset {offset} + dim {dim} outside a table of {self.noise.size}")
        return self.noise[offset : offset + dim]

    def sample_offsets(self, rng: np.random.Generator, dim: int, count: int) -> np.ndarray:
        """`count` random offsets for vectors of length `dim`."""
        if dim > self.noise.size:
            raise ValueError(f"noise table of {self.noise.size} floats is smaller than the policy ({dim} parameters)")
        return rng.integers(0, self.noise.size - dim + 1, size=count)


def perturb(theta: np.ndarray, noise: np.ndarray, sigma: float, sign: int) -> np.ndarray:
    """theta + sign * sigma * noise in float32 (the one formula trainer and workers share)."""
    return (theta + np.float32(sign * sigma) * noise).astype(np.float32, copy=False)
