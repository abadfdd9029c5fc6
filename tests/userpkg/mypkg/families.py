"""A family defined outside the project: the terrain family on short courses, renamed."""

from __future__ import annotations

from envs import EnvParams
from envs import make_family as make_registered


class ShortTerrain:
    """Terrain on a short course, under its own name (delegates everything else)."""

    name = "terrain"  # its params are terrain params

    def __init__(self, course_length: float = 20.0):
        self.inner = make_registered("terrain", {"course_length": course_length, "max_episode_steps": 150})

    def __getattr__(self, item):
        if item == "inner":  # during unpickling, before __dict__ is restored
            raise AttributeError(item)
        return getattr(self.inner, item)

    def initial(self) -> EnvParams:
        return self.inner.initial()


def make_family(course_length: float = 20.0) -> ShortTerrain:
    """The factory a config names: `env.family: mypkg.families:make_family`."""
    return ShortTerrain(course_length)
