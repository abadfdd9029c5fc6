"""Environment characterisations and kNN novelty.

POET: hand-designed feature vectors from the env family. Enhanced POET: PATA-EC, the
ranking of all agents' scores on an env (clipped to the minimal-criterion bounds).
"""
from __future__ import annotations

import numpy as np

from poet.ranking import rank_normalise


def knn_novelty(x: np.ndarray, archive: np.ndarray, k: int) -> float:
    """Mean Euclidean distance from `x` to its k nearest rows of `archive` (all rows if fewer)."""
    archive = np.asarray(archive, dtype=np.float64)
    if archive.size == 0:
        return float("inf")
    d = np.sqrt(np.sum((archive - np.asarray(x, dtype=np.float64)) ** 2, axis=1))
    k = min(k, d.size)
    return float(np.mean(np.sort(d, kind="stable")[:k]))


def pata_ec(scores: np.ndarray, mc_lower: float, mc_upper: float) -> np.ndarray:
    """PATA-EC of one env: all agents' scores clipped to the MC bounds, rank-normalised, ties averaged."""
    return rank_normalise(np.clip(np.asarray(scores, dtype=np.float64), mc_lower, mc_upper))
