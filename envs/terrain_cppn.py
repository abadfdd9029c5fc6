"""Enhanced POET's CPPN ground on the fast terrain runner: the family `terrain_cppn`.

Params are `{"genome": <plain-data CPPN genome>}`, exactly as `bipedal_cppn`'s (`envs.cppn`),
so a course is rebuilt from its EnvParams JSON alone, and the genome's operators are
`bipedal_cppn`'s: the reference's (uber-research/poet master, `cppn.py`) by default, with the
same options (`operators`, `amplitude`, `initial`).

The ground is the one `bipedal_cppn` draws for BipedalWalker (`bipedal_cppn.ground_heights`:
one height every TERRAIN_STEP = 14/30 m, flat over the walker's start pad), laid under the
runner metre for metre: the height at x is the walker's ground at the same x above the pad's
level, linear between the walker's steps, and held at its last value past the walker's
course. There are no pits and no stumps; the seed changes nothing. The runner, its physics,
observations, actions and rewards are the `terrain` family's (`envs.terrain_core`), so
batches run on the same compiled kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from envs.base import BIPEDAL_SCORES, EnvParamError, EnvParams
from envs.bipedal import TERRAIN_HEIGHT, TERRAIN_LENGTH, TERRAIN_STEP
from envs.bipedal_cppn import FAMILY as WALKER_FAMILY
from envs.bipedal_cppn import BipedalCPPNFamily, ground_heights
from envs.kernel import RowKernel
from envs.profile import CourseProfile
from envs.terrain import (
    RES,
    START_PAD,
    Course,
    TerrainBatch,
    TerrainEnv,
    TerrainFamily,
    course_profile,
    ground_course,
    n_cells_for,
    terrain_kernel,
)

FAMILY = "terrain_cppn"
_WALKER_X = np.arange(TERRAIN_LENGTH) * TERRAIN_STEP  # metres along the walker's course


def _as_walker(params: EnvParams) -> EnvParams:
    """The same genome as `bipedal_cppn` params (whose checks name the genome's fields)."""
    if not isinstance(params, EnvParams):
        raise EnvParamError(FAMILY, "params", f"expected EnvParams, got {type(params).__name__}")
    if params.family != FAMILY:
        raise EnvParamError(FAMILY, "family", f"expected family {FAMILY!r}, got {params.family!r}")
    return EnvParams.create(WALKER_FAMILY, params.values)


def _ours(params: EnvParams) -> EnvParams:
    return EnvParams.create(FAMILY, params.values)


def _checked(params: EnvParams, genomes: BipedalCPPNFamily) -> EnvParams:
    """`params` as bipedal_cppn's, validated (errors name this family and the genome's field)."""
    walker = _as_walker(params)
    try:
        genomes.validate(walker)
    except EnvParamError as err:
        raise EnvParamError(FAMILY, err.field, str(err).split(": ", 1)[-1]) from None
    return walker


@lru_cache(maxsize=1024)
def _course_of(params: EnvParams, genomes: BipedalCPPNFamily, course_length: float) -> Course:
    # cached on the params: a batch validates and draws each env's ground once, not once per row
    genome = _checked(params, genomes).values["genome"]
    walker = ground_heights(genome, genomes.amplitude) - TERRAIN_HEIGHT
    x = np.arange(n_cells_for(course_length)) * RES
    return ground_course(np.interp(x, _WALKER_X, walker), course_length)


class TerrainCPPNFamily:
    """Enhanced POET's CPPN ground (the reference's genome and operators) on the terrain runner."""

    name = FAMILY
    defaults = BIPEDAL_SCORES  # POET's thresholds

    def __init__(
        self,
        course_length: float = 80.0,
        max_episode_steps: int = 600,
        operators: str = "reference",
        amplitude: str = "reference",
        initial: str = "reference",
    ):
        runner = TerrainFamily(course_length, max_episode_steps)  # checks the runner's options
        self._genomes = BipedalCPPNFamily(operators=operators, amplitude=amplitude, initial=initial)
        self.course_length, self.max_episode_steps = runner.course_length, runner.max_episode_steps
        self.observation_space, self.action_space = runner.observation_space, runner.action_space

    def _walker(self, params: EnvParams) -> EnvParams:
        return _checked(params, self._genomes)

    def initial(self, rng: np.random.Generator | None = None) -> EnvParams:
        """The start genome (bipedal_cppn's `initial`: the reference's random slope by default)."""
        return _ours(self._genomes.initial(rng))

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """A child genome by bipedal_cppn's `mutate` (the reference's operators by default)."""
        return _ours(self._genomes.mutate(self._walker(params), rng))

    def sample(self, rng: np.random.Generator) -> EnvParams:
        """A random ground (bipedal_cppn's `sample`: the start genome, then a few mutations)."""
        return _ours(self._genomes.sample(rng))

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the bad field ('genome.nodes[2].activation', ...)."""
        self._walker(params)

    def features(self, params: EnvParams) -> np.ndarray:
        """bipedal_cppn's features: the ground's height at evenly spaced points (metres)."""
        return self._genomes.features(self._walker(params))

    def flat(self, params: EnvParams) -> dict[str, float]:
        """bipedal_cppn's scalar columns: genome size and ground statistics (metres)."""
        return self._genomes.flat(self._walker(params))

    def course(self, params: EnvParams, seed: int = 0) -> Course:  # noqa: ARG002 - the genome decides
        """The course of `params` at this family's course_length (the same for every seed)."""
        return _course_of(params, self._genomes, self.course_length)

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> TerrainEnv:
        """A gymnasium env on these params (truncates at max_episode_steps)."""
        self.validate(params)
        return TerrainEnv(params, self.course_length, self.max_episode_steps, render_mode, course_of=self.course)

    def row_kernel(self) -> RowKernel:
        """The compiled fast path the evaluators run: the terrain core on these courses (`envs.kernel`)."""
        return terrain_kernel(self.course)

    def make_batch(self, params: Sequence[EnvParams], seeds: Sequence[int], max_steps: int) -> TerrainBatch:
        """One row per (params, seed) episode, stepped together, on the terrain family's core
        (tests and analysis; the evaluators run `row_kernel`)."""
        if len(params) != len(seeds):
            raise ValueError(f"got {len(params)} params but {len(seeds)} seeds")
        if int(max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
        return TerrainBatch([self.course(p) for p in params], int(max_steps))

    def course_profile(self, params: EnvParams, seed: int = 0) -> CourseProfile:  # noqa: ARG002
        """The whole course, in metres, for drawing (`envs.profile`); the seed changes nothing here."""
        stats = self.flat(params)
        words = (
            f"{stats['hidden_nodes']:.0f} hidden nodes · {stats['connections']:.0f} connections · "
            f"amplitude {stats['amplitude']:.2f} m · max slope {stats['max_slope']:.2f}"
        )
        profile = course_profile(self.course(params), words, None)
        return CourseProfile(
            FAMILY, profile.x, profile.y, (0.0, START_PAD), profile.finish, description=words, seed=None
        )
