"""Rank transforms: centred ranks (ES, PATA-EC as the reference) and average-tie ranks (PATA-EC option)."""

from __future__ import annotations

import numpy as np


def centered_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of all entries scaled to [-0.5, 0.5] (ties broken by position, as in OpenAI/Uber ES)."""
    x = np.asarray(x)
    flat = x.ravel()
    ranks = np.empty(flat.size, dtype=np.float64)
    ranks[np.argsort(flat, kind="stable")] = np.arange(flat.size, dtype=np.float64)
    if flat.size > 1:
        ranks = ranks / (flat.size - 1) - 0.5
    else:
        ranks[:] = 0.0
    return ranks.reshape(x.shape)


def average_ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks of a 1-D array, tied entries sharing the mean of their ranks."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    ranks = np.empty(x.size, dtype=np.float64)
    start = 0
    while start < x.size:
        end = start
        while end + 1 < x.size and sorted_x[end + 1] == sorted_x[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0
        start = end + 1
    return ranks


def rank_normalise(x: np.ndarray) -> np.ndarray:
    """Average ranks scaled to [-0.5, 0.5] (the `average` PATA-EC tie rule)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size <= 1:
        return np.zeros(x.size)
    return average_ranks(x) / (x.size - 1) - 0.5
