"""Enhanced POET's CPPN terrain family: BipedalWalker on ground drawn by an evolved CPPN.

Params are `{"genome": <plain-data CPPN genome>}` (see `envs.cppn`), so a terrain is
rebuilt exactly from its EnvParams JSON alone. The ground follows the reference's
`bipedal_walker_custom.py` (uber-research/poet, CPPN branch):

* the start pad (steps 0..TERRAIN_STARTPAD) is flat at TERRAIN_HEIGHT;
* from step TERRAIN_STARTPAD + 1 on, x (metres) maps to x_ = (x - mid) * pi / mid with
  mid = TERRAIN_LENGTH * TERRAIN_STEP / 2, and the ground is
  y = TERRAIN_HEIGHT + s * (cppn(x_) - cppn(x_ at step TERRAIN_STARTPAD + 1)),
  so it joins the pad continuously;
* amplitude normalisation (the reference rescaled the output node's response at mutation
  time, randomly, when the amplitude left [0.25, 16]; here it is a deterministic function
  of the genome, applied over the x range the terrain uses): with A = max |cppn(x_) - cppn(x_0)|
  over the used steps, s = AMPLITUDE_MIN / A if A < AMPLITUDE_MIN, AMPLITUDE_MAX / A if
  A > AMPLITUDE_MAX, else 1 (A below 1e-9 counts as flat: s = 0);
* no pits, no stumps; the walker, observation, action, reward are gymnasium's, and episodes
  are truncated after `max_episode_steps` (2000) as in the `bipedal` family.

The env reuses `BipedalTerrainEnv` (fresh Box2D world per reset, step truncation,
rendering); only the params and `_generate_terrain` differ.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.utils import EzPickle

from envs import cppn
from envs.base import EnvParamError, EnvParams
from envs.bipedal import (
    MAX_EPISODE_STEPS,
    TERRAIN_HEIGHT,
    TERRAIN_LENGTH,
    TERRAIN_STARTPAD,
    TERRAIN_STEP,
    BipedalTerrainEnv,
    BipedalWalker,
    draw_course,
    walker_setup,
)

FAMILY = "bipedal_cppn"
AMPLITUDE_MIN = 0.25  # metres; the reference's lower bound
AMPLITUDE_MAX = 16.0  # metres; the reference's upper bound
FLAT_EPS = 1e-9
NUM_FEATURES = 20
HEIGHT_DIFF_TOL = 1e-6  # a child's ground must move by more than this somewhere (metres)

# Steps whose height the CPPN sets, and their CPPN inputs (reference's mapping).
USED_STEPS = np.arange(TERRAIN_STARTPAD + 1, TERRAIN_LENGTH)
_MID = TERRAIN_LENGTH * TERRAIN_STEP / 2.0
CPPN_X = (USED_STEPS * TERRAIN_STEP - _MID) * np.pi / _MID


def _genome_of(params: EnvParams) -> dict[str, Any]:
    """The genome of `params`, validated; errors name the field as 'genome.<part>'."""
    if not isinstance(params, EnvParams):
        raise EnvParamError(FAMILY, "params", f"expected EnvParams, got {type(params).__name__}")
    if params.family != FAMILY:
        raise EnvParamError(FAMILY, "family", f"expected family {FAMILY!r}, got {params.family!r}")
    values = params.values
    extra = sorted(set(values) - {"genome"})
    if extra:
        raise EnvParamError(FAMILY, extra[0], "unknown parameter")
    if "genome" not in values:
        raise EnvParamError(FAMILY, "genome", "missing")
    genome = values["genome"]
    try:
        cppn.validate_genome(genome)
    except cppn.GenomeError as err:
        field = f"genome.{err.field}" if err.field else "genome"
        raise EnvParamError(FAMILY, field, str(err).split(": ", 1)[-1]) from None
    return genome


def ground_heights(genome: dict[str, Any]) -> np.ndarray:
    """Ground y (metres) at each of the TERRAIN_LENGTH grid steps, float64."""
    raw = cppn.evaluate(genome, CPPN_X)
    rel = raw - raw[0]
    if not np.all(np.isfinite(rel)):
        raise EnvParamError(FAMILY, "genome", "the CPPN output is not finite over the terrain")
    amp = float(np.max(np.abs(rel)))
    if amp < FLAT_EPS:
        scale = 0.0
    elif amp < AMPLITUDE_MIN:
        scale = AMPLITUDE_MIN / amp
    elif amp > AMPLITUDE_MAX:
        scale = AMPLITUDE_MAX / amp
    else:
        scale = 1.0
    y = np.full(TERRAIN_LENGTH, float(TERRAIN_HEIGHT), dtype=np.float64)
    y[USED_STEPS] = TERRAIN_HEIGHT + scale * rel
    return y


# ================================================================ gymnasium env
class BipedalCPPNEnv(BipedalTerrainEnv):
    """gymnasium's BipedalWalker on a CPPN-drawn ground (no obstacles).

    `BipedalTerrainEnv.__init__` checks `bipedal` params, so this skips it and sets the
    same attributes itself; reset (fresh Box2D world), step (truncation) and rendering are
    inherited unchanged.
    """

    def __init__(
        self, params: EnvParams, render_mode: str | None = None, max_episode_steps: int = MAX_EPISODE_STEPS
    ):
        self.params = params
        self.genome = _genome_of(params)
        self.ground = ground_heights(self.genome)
        self.enabled_kinds = ()
        self.max_episode_steps = int(max_episode_steps)
        self.obstacles: list[tuple[str, float, float]] = []
        self.obstacle_polys: list[list[tuple[float, float]]] = []
        self._elapsed = 0
        BipedalWalker.__init__(self, render_mode=render_mode, hardcore=False)
        EzPickle.__init__(self, params, render_mode, max_episode_steps)

    def _generate_terrain(self, hardcore: bool) -> None:  # noqa: ARG002 - the genome decides
        self.terrain = []
        self.obstacles = []
        self.obstacle_polys = []
        self.terrain_x = [i * TERRAIN_STEP for i in range(TERRAIN_LENGTH)]
        self.terrain_y = [float(v) for v in self.ground]
        self._build_ground()


# ====================================================================== family
class BipedalCPPNFamily:
    """Enhanced POET's CPPN-terrain BipedalWalker family."""

    name = FAMILY

    def __init__(self, max_episode_steps: int = MAX_EPISODE_STEPS):
        self.max_episode_steps, self.observation_space, self.action_space = walker_setup(max_episode_steps)

    def initial(self) -> EnvParams:
        """The reference's start genome (x and bias into an identity output), zero weights: flat."""
        return EnvParams.create(FAMILY, {"genome": cppn.initial_genome()})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """A child whose ground differs from the parent's; all randomness from `rng`."""
        genome = _genome_of(params)
        parent = ground_heights(genome)

        def differs(child: dict[str, Any]) -> bool:
            return float(np.max(np.abs(ground_heights(child) - parent))) > HEIGHT_DIFF_TOL

        child = cppn.mutate(genome, rng, xs=CPPN_X, accept=differs)
        return EnvParams.create(FAMILY, {"genome": child})

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the bad field ('genome.nodes[2].activation', ...)."""
        ground_heights(_genome_of(params))

    def features(self, params: EnvParams) -> np.ndarray:
        """Ground height above TERRAIN_HEIGHT (metres) at NUM_FEATURES evenly spaced x over the used range."""
        y = ground_heights(_genome_of(params)) - TERRAIN_HEIGHT
        pts = np.linspace(USED_STEPS[0], USED_STEPS[-1], NUM_FEATURES)
        return np.interp(pts, np.arange(TERRAIN_LENGTH), y).astype(np.float64)

    def flat(self, params: EnvParams) -> dict[str, float]:
        """Genome size and ground statistics (metres) as scalar columns."""
        genome = _genome_of(params)
        h = ground_heights(genome)[USED_STEPS] - TERRAIN_HEIGHT
        slopes = np.abs(np.diff(h)) / TERRAIN_STEP
        return {
            "hidden_nodes": float(cppn.num_hidden(genome)),
            "connections": float(cppn.num_enabled_connections(genome)),
            "amplitude": float(np.max(np.abs(h))),
            "height_std": float(np.std(h)),
            "max_slope": float(np.max(slopes)),
        }

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> BipedalCPPNEnv:
        """A gymnasium env on these params (truncates at max_episode_steps)."""
        return BipedalCPPNEnv(params, render_mode=render_mode, max_episode_steps=self.max_episode_steps)

    def render_profile(self, params: EnvParams, seed: int = 0) -> np.ndarray:
        """An RGB image (200 x 800) of the whole ground (the seed changes nothing here)."""
        return draw_course(self, params, seed)
