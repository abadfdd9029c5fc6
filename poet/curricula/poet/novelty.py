"""Environment characterisations and kNN novelty.

POET: hand-designed feature vectors from the env family (the reference's `env2array`
distances, `original_poet` branch). Enhanced POET: PATA-EC, the centred ranks of all
agents' scores on an env clipped to the minimal-criterion bounds (`update_pata_ec`).
"""

from __future__ import annotations

import numpy as np

from poet.ranking import centered_ranks, rank_normalise


def knn_novelty(x: np.ndarray, archive: np.ndarray, k: int) -> float:
    """Mean Euclidean distance from `x` to its k nearest rows of `archive` (all rows if fewer)."""
    archive = np.asarray(archive, dtype=np.float64)
    if archive.size == 0:
        return float("inf")
    d = np.sqrt(np.sum((archive - np.asarray(x, dtype=np.float64)) ** 2, axis=1))
    k = min(k, d.size)
    return float(np.mean(np.sort(d, kind="stable")[:k]))


def pata_ec(scores: np.ndarray, mc_lower: float, mc_upper: float, ties: str = "ordinal") -> np.ndarray:
    """PATA-EC of one env: all agents' scores clipped to the MC bounds, then centred ranks in [-0.5, 0.5].

    `ties="ordinal"` (the reference's `compute_centered_ranks`): tied scores get distinct
    ranks by position, the earlier agent the lower rank. `ties="average"`: tied scores
    share the mean of their ranks, so the vector does not depend on agent order.
    """
    clipped = np.clip(np.asarray(scores, dtype=np.float64), mc_lower, mc_upper)
    if ties == "ordinal":
        return centered_ranks(clipped)
    if ties == "average":
        return rank_normalise(clipped)
    raise ValueError(f"unknown PATA-EC tie rule {ties!r}; known: ordinal, average")
