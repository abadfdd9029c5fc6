"""Enhanced POET's CPPN terrain family: BipedalWalker on ground drawn by an evolved CPPN.

Params are `{"genome": <plain-data CPPN genome>}` (see `envs.cppn`), so a terrain is
rebuilt exactly from its EnvParams JSON alone.

By default the family follows the reference, uber-research/poet master,
`poet_distributed/niches/box2d/`:

* ground (`amplitude="reference"`, `bipedal_walker_custom.py` `_generate_terrain`): the
  start pad (steps 0..TERRAIN_STARTPAD) is flat at TERRAIN_HEIGHT; from step
  TERRAIN_STARTPAD + 1 on, x (metres) maps to x_ = (x - mid) * pi / mid with
  mid = TERRAIN_LENGTH * TERRAIN_STEP / 2, and y = TERRAIN_HEIGHT + cppn(x_) - cppn(x_ at
  step TERRAIN_STARTPAD + 1), with no further scaling (the amplitude is set at mutation
  time through the output node's response, see below). Ours: every step after the pad
  is evaluated (the reference holds the previous height for one step each time its grass
  counter, drawn from the reset seed, runs out), so the ground does not depend on the seed;
* mutation (`operators="reference"`, `cppn.py` `CppnEnvParams.get_mutated_params` with
  neat-python 0.92 under `config-cppn`): `envs.cppn.mutate(..., operators="reference")`,
  including the random rescale of the output response into an amplitude of [0.25, 0.75)
  or [12, 16) over x in [-1, 1) when it leaves [0.25, 16];
* start (`initial="reference"`, `CppnEnvParams.__init__`: `configure_new`, output forced
  to identity): a random slope, `envs.cppn.initial_genome(rng)`.

Options that keep this project's earlier behaviour (ours, not the reference's):

* `amplitude="normalised"`: y = TERRAIN_HEIGHT + s * (cppn(x_) - cppn(x_0)) with s a
  deterministic function of the genome over the used steps: with
  A = max |cppn(x_) - cppn(x_0)|, s = AMPLITUDE_MIN / A if A < AMPLITUDE_MIN,
  AMPLITUDE_MAX / A if A > AMPLITUDE_MAX, else 1 (A below 1e-9 counts as flat: s = 0);
* `operators="extended"`: bias node, add connection and change activation, no node
  biases (see `envs.cppn`); a child's ground must also differ from its parent's by more
  than 1e-6 m somewhere (the reference only asks for a different genome, so a child
  whose only change is, say, the identity output's bias has its parent's ground);
* `initial="flat"`: x and a bias node into an identity output with zero weights: flat.

No pits, no stumps; the walker, observation, action, reward are gymnasium's, and
episodes are truncated after `max_episode_steps` (2000) as in the `bipedal` family. The env
reuses `BipedalTerrainEnv` (fresh Box2D world per reset, step truncation, rendering);
only the params and `_generate_terrain` differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.utils import EzPickle

from envs import cppn
from envs.base import BIPEDAL_SCORES, EnvParamError, EnvParams
from envs.bipedal import (
    MAX_EPISODE_STEPS,
    TERRAIN_HEIGHT,
    TERRAIN_LENGTH,
    TERRAIN_STARTPAD,
    TERRAIN_STEP,
    BipedalTerrainEnv,
    BipedalWalker,
    family_profile,
    walker_setup,
)
from envs.profile import CourseProfile

FAMILY = "bipedal_cppn"
AMPLITUDE_MIN = 0.25  # metres; amplitude "normalised" (ours) uses the reference's window
AMPLITUDE_MAX = 16.0  # metres; [0.25, 16] as bounds of the ground itself
FLAT_EPS = 1e-9
NUM_FEATURES = 20
HEIGHT_DIFF_TOL = 1e-6  # extended: a child's ground must move by more than this somewhere (metres)
AMPLITUDES = ("reference", "normalised")
OPERATORS = cppn.OPERATORS
INITIAL_STYLES = cppn.INITIAL_STYLES

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


def _check_choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{FAMILY} option {option!r}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def ground_heights(genome: dict[str, Any], amplitude: str = "reference") -> np.ndarray:
    """Ground y (metres) at each of the TERRAIN_LENGTH grid steps, float64.

    amplitude "reference": TERRAIN_HEIGHT + cppn(x_) - cppn(x_0) after the pad, unscaled;
    "normalised" (ours): that difference scaled into [AMPLITUDE_MIN, AMPLITUDE_MAX].
    """
    _check_choice("amplitude", amplitude, AMPLITUDES)
    raw = cppn.evaluate(genome, CPPN_X)
    rel = raw - raw[0]
    if not np.all(np.isfinite(rel)):
        raise EnvParamError(FAMILY, "genome", "the CPPN output is not finite over the terrain")
    amp = float(np.max(np.abs(rel)))
    if amplitude == "reference":
        scale = 1.0
    elif amp < FLAT_EPS:
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
        self,
        params: EnvParams,
        render_mode: str | None = None,
        max_episode_steps: int = MAX_EPISODE_STEPS,
        amplitude: str = "reference",
    ):
        self.params = params
        self.genome = _genome_of(params)
        self.amplitude = _check_choice("amplitude", amplitude, AMPLITUDES)
        self.ground = ground_heights(self.genome, self.amplitude)
        self.enabled_kinds = ()
        self.max_episode_steps = int(max_episode_steps)
        self.obstacles: list[tuple[str, float, float]] = []
        self.obstacle_polys: list[list[tuple[float, float]]] = []
        self._elapsed = 0
        BipedalWalker.__init__(self, render_mode=render_mode, hardcore=False)
        EzPickle.__init__(self, params, render_mode, max_episode_steps, self.amplitude)

    def _generate_terrain(self, hardcore: bool) -> None:  # noqa: ARG002 - the genome decides
        self.terrain = []
        self.obstacles = []
        self.obstacle_polys = []
        self.terrain_x = [i * TERRAIN_STEP for i in range(TERRAIN_LENGTH)]
        self.terrain_y = [float(v) for v in self.ground]
        self._build_ground()


# ====================================================================== family
SAMPLE_MUTATIONS = (0, 20)  # how many mutations `sample` applies to a random start genome


class BipedalCPPNFamily:
    """Enhanced POET's CPPN-terrain BipedalWalker family.

    Options (each defaults to the reference's behaviour; the other value is ours, the
    behaviour of earlier versions; see the module docstring):

    * operators: "reference" (neat-python 0.92 DefaultGenome.mutate under config-cppn, as
      `CppnEnvParams.get_mutated_params` calls it) | "extended";
    * amplitude: "reference" (`bipedal_walker_custom._generate_terrain`: no rescaling of
      the ground) | "normalised";
    * initial: "reference" (`CppnEnvParams.__init__`: a random slope) | "flat".
    """

    name = FAMILY
    defaults = BIPEDAL_SCORES  # POET's thresholds

    def __init__(
        self,
        max_episode_steps: int = MAX_EPISODE_STEPS,
        operators: str = "reference",
        amplitude: str = "reference",
        initial: str = "reference",
    ):
        self.operators = _check_choice("operators", operators, OPERATORS)
        self.amplitude = _check_choice("amplitude", amplitude, AMPLITUDES)
        self.initial_style = _check_choice("initial", initial, INITIAL_STYLES)
        self.max_episode_steps, self.observation_space, self.action_space = walker_setup(max_episode_steps)

    def initial(self, rng: np.random.Generator | None = None) -> EnvParams:
        """The start genome: option initial "reference" draws the reference's random slope
        from `rng` (None: a fixed PCG64(0) Generator, so the start is deterministic);
        "flat" is x and a bias node into an identity output with zero weights."""
        return EnvParams.create(FAMILY, {"genome": cppn.initial_genome(rng, style=self.initial_style)})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """A child of `params`; all randomness from `rng` (same rng state, same child).

        operators "reference": the reference's validity (`envs.cppn.mutate`), plus a finite
        ground; "extended": also a ground that differs from the parent's by more than
        HEIGHT_DIFF_TOL somewhere.
        """
        genome = _genome_of(params)
        if self.operators == "reference":

            def finite(child: dict[str, Any]) -> bool:
                return bool(np.all(np.isfinite(cppn.evaluate(child, CPPN_X))))

            child = cppn.mutate(genome, rng, accept=finite, operators="reference")
            return EnvParams.create(FAMILY, {"genome": child})
        parent = ground_heights(genome, self.amplitude)

        def differs(child: dict[str, Any]) -> bool:
            return float(np.max(np.abs(ground_heights(child, self.amplitude) - parent))) > HEIGHT_DIFF_TOL

        child = cppn.mutate(genome, rng, xs=CPPN_X, accept=differs, operators="extended")
        return EnvParams.create(FAMILY, {"genome": child})

    def sample(self, rng: np.random.Generator) -> EnvParams:
        """A random ground: the start genome drawn from `rng`, then SAMPLE_MUTATIONS[0] to
        SAMPLE_MUTATIONS[1] mutations (uniform count). The CPPN has no parameter box to draw
        from uniformly; neither reference defines a random level for it, so this is ours."""
        params = self.initial(rng)
        for _ in range(int(rng.integers(SAMPLE_MUTATIONS[0], SAMPLE_MUTATIONS[1] + 1))):
            params = self.mutate(params, rng)
        return params

    def ground(self, params: EnvParams) -> np.ndarray:
        """Ground y (metres) at each grid step under this family's amplitude option."""
        return ground_heights(_genome_of(params), self.amplitude)

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the bad field ('genome.nodes[2].activation', ...)."""
        self.ground(params)

    def features(self, params: EnvParams) -> np.ndarray:
        """Ground height above TERRAIN_HEIGHT (metres) at NUM_FEATURES evenly spaced x over the used range."""
        y = self.ground(params) - TERRAIN_HEIGHT
        pts = np.linspace(USED_STEPS[0], USED_STEPS[-1], NUM_FEATURES)
        return np.interp(pts, np.arange(TERRAIN_LENGTH), y).astype(np.float64)

    def flat(self, params: EnvParams) -> dict[str, float]:
        """Genome size and ground statistics (metres) as scalar columns."""
        genome = _genome_of(params)
        h = ground_heights(genome, self.amplitude)[USED_STEPS] - TERRAIN_HEIGHT
        slopes = np.abs(np.diff(h)) / TERRAIN_STEP
        return {
            "hidden_nodes": float(cppn.num_hidden(genome)),
            "connections": float(cppn.num_enabled_connections(genome)),
            "amplitude": float(np.max(np.abs(h))),
            "height_std": float(np.std(h)),
            "max_slope": float(np.max(slopes)),
        }

    def renew(self, env: BipedalCPPNEnv) -> bool:
        """A used env is as good as new: its reset builds a new Box2D world and the course from the seed."""
        return env.render_mode is None

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> BipedalCPPNEnv:
        """A gymnasium env on these params (truncates at max_episode_steps)."""
        return BipedalCPPNEnv(
            params, render_mode=render_mode, max_episode_steps=self.max_episode_steps, amplitude=self.amplitude
        )

    def course_profile(self, params: EnvParams, seed: int = 0) -> CourseProfile:  # noqa: ARG002
        """The whole ground, in metres, for drawing (`envs.profile`); the seed changes nothing here."""
        stats = self.flat(params)
        words = (
            f"{stats['hidden_nodes']:.0f} hidden nodes · {stats['connections']:.0f} connections · "
            f"amplitude {stats['amplitude']:.2f} m · max slope {stats['max_slope']:.2f}"
        )
        return family_profile(self, params, None, words)
