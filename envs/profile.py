"""The geometry of a whole course, in metres, as the terrain families give it for drawing.

A family with courses (`terrain`, `bipedal`, `bipedal_cppn`) has
`course_profile(params, seed=0) -> CourseProfile`: the ground line, its pits and stumps,
the start pad and the finish, and its parameters in words. `envs` draws nothing from it;
`poet profile` and `poet report` turn it into a figure with axes in metres and a legend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CourseProfile:
    """One course seen from the side; every length in metres, heights on the env's own axis."""

    family: str
    x: np.ndarray  # distance along the course of each ground point, increasing
    y: np.ndarray  # ground height at x; NaN where there is no ground at all (a bottomless pit)
    start: tuple[float, float]  # the start pad, from..to
    finish: float | None  # where an episode counts as finished; None if nowhere
    pits: tuple[tuple[float, float], ...] = ()  # openings, from..to
    stumps: tuple[tuple[float, float, float, float], ...] = ()  # (from, to, bottom, top)
    solids: tuple[
        tuple[float, float, float, float], ...
    ] = ()  # other ground blocks (pit walls, stair steps), as stumps
    description: str = ""  # the parameters in words, e.g. "roughness 2.4 · pit gap 0.8-2.4 · stump height 0.4-1.2"
    seed: int | None = None  # the seed the course was built from; None when the seed changes nothing

    def __post_init__(self) -> None:
        x, y = np.asarray(self.x, dtype=np.float64), np.asarray(self.y, dtype=np.float64)
        if x.ndim != 1 or x.shape != y.shape or x.size < 2:
            raise ValueError(f"x and y must be 1-D of one length >= 2, got {x.shape} and {y.shape}")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)

    @property
    def extent(self) -> tuple[float, float]:
        """Lowest and highest point of the ground and of everything on it."""
        tops = [float(np.nanmax(self.y))] + [b[3] for b in (*self.stumps, *self.solids)]
        bottoms = [float(np.nanmin(self.y))] + [b[2] for b in (*self.stumps, *self.solids)]
        return min(bottoms), max(tops)


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[first, last) index ranges of the True runs of a 1-D bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.asarray(mask, dtype=np.int8), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def span_text(values: list | tuple) -> str:
    """A [lo, hi] range as 'lo-hi' with at most two decimals (numbers as short as they go)."""
    return "-".join(f"{float(v):.2f}".rstrip("0").rstrip(".") for v in values)
