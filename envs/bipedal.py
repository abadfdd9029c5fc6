"""POET's BipedalWalker family: gymnasium's Box2D walker on a course built from POET's params,
or from dcd's 8-D level vector (`envs.dcd_levels`: stairs too, the course as dcd builds it).

The parameters are the `terrain` family's (same names, ranges, units and mutation rules):
`roughness` in [0, 10], `pit_gap` and `stump_height` each [] (disabled) or [lo, hi]. This
module owns no parameter logic: `BipedalFamily` hands mutate/validate/features/flat to a
`TerrainFamily` after renaming the params' family, and renames the results back.

The course follows POET's `bipedal_walker_custom.py` (uber-research/poet):

* grass stretches of gymnasium's length between obstacles;
* roughness scales the ground's random walk: POET keeps gymnasium's walk
  (`velocity += uniform(-1, 1) / SCALE` after the start pad) and moves
  `y += roughness * velocity`, so roughness 0 gives exactly flat ground;
* after each grass stretch an obstacle kind is drawn among the ENABLED kinds only
  (stump first, then pit, as POET numbers its states);
* a pit is `pit_gap = 1 + uniform(lo, hi)` steps from the left wall's left edge to the right
  wall's left edge (`counter = ceil(pit_gap)`), so the opening is `uniform(lo, hi)` TERRAIN_STEP;
* a stump is a block 1 TERRAIN_STEP wide and `uniform(lo, hi)` TERRAIN_STEP high.

Everything else (walker, 24-dim observation, 4-dim action, reward, falling) is gymnasium's
`BipedalWalker`; episodes are truncated inside the env after `max_episode_steps` (2000).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.utils import EzPickle

from envs import dcd_levels as dcd
from envs.base import BIPEDAL_SCORES, EnvParamError, EnvParams
from envs.profile import CourseProfile
from envs.terrain import TerrainFamily, describe
from envs.terrain import difficulty as terrain_difficulty

try:  # Box2D is optional for the rest of the project; fail when the family is used.
    import Box2D
    from gymnasium.envs.box2d import bipedal_walker as _bw
    from gymnasium.envs.box2d.bipedal_walker import BipedalWalker
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("the 'bipedal' env family needs Box2D: pip install 'gymnasium[box2d]'") from exc

FAMILY = "bipedal"
MAX_EPISODE_STEPS = 2000

TERRAIN_STEP = _bw.TERRAIN_STEP
TERRAIN_LENGTH = _bw.TERRAIN_LENGTH
TERRAIN_HEIGHT = _bw.TERRAIN_HEIGHT
TERRAIN_GRASS = _bw.TERRAIN_GRASS
TERRAIN_STARTPAD = _bw.TERRAIN_STARTPAD
SCALE = _bw.SCALE
# Box2D rejects polygons thinner than about its linear slop; a stump drawn lower than this
# (metres) gets a body of this height (its recorded height stays the sampled one).
MIN_STUMP_BODY = 0.01

WALL_COLORS = ((255, 255, 255), (153, 153, 153))

_TERRAIN = TerrainFamily()


def _check_family(params: EnvParams) -> None:
    if not isinstance(params, EnvParams):
        raise EnvParamError(FAMILY, "params", f"expected EnvParams, got {type(params).__name__}")
    if params.family != FAMILY:
        raise EnvParamError(FAMILY, "family", f"expected family {FAMILY!r}, got {params.family!r}")


def _to_terrain(params: EnvParams) -> EnvParams:
    """The same values under the terrain family's name (checks the family name first)."""
    _check_family(params)
    return EnvParams.create(_TERRAIN.name, params.values)


def _refuse_hardcore(params: EnvParams, what: str) -> None:
    """gym's hardcore course has no parameters: nothing to characterise it by."""
    validate_level(params)
    if dcd.is_gym_hardcore(params.values):
        raise EnvParamError(FAMILY, "gym_hardcore", f"gym's hardcore course is a test level with no params: no {what}")


def validate_level(params: EnvParams) -> None:
    """Raise EnvParamError (family 'bipedal') naming the bad field: of dcd's 8-D levels by
    dcd's ranges, of POET's 5-D ones by the terrain family's."""
    _check_family(params)
    if dcd.is_gym_hardcore(params.values):
        return
    if not dcd.is_dcd_level(params.values):
        _delegate("validate", params)
        return
    for field, problem in dcd.problems(params.values)[:1]:
        raise EnvParamError(FAMILY, field, problem)


def _delegate(method: str, params: EnvParams, *args: Any) -> Any:
    """Call TerrainFamily.<method> on translated params; its errors renamed to this family."""
    translated = _to_terrain(params)
    try:
        return getattr(_TERRAIN, method)(translated, *args)
    except EnvParamError as err:
        message = str(err).split(": ", 1)[-1]
        raise EnvParamError(FAMILY, err.field, message) from None


# ================================================================ gymnasium env
class BipedalTerrainEnv(BipedalWalker):
    """gymnasium's BipedalWalker on a course generated from POET's parameters.

    After `reset`, `self.obstacles` lists `(kind, x_start, size)`: kind 'pit' (x_start at
    the left edge of the opening, size its width in TERRAIN_STEP units) or 'stump' (x_start
    at its left side, size its height in TERRAIN_STEP units); x_start in metres.
    """

    dcd_config: dict | None = None  # a dcd level's built config (`dcd_levels.config_of`); None: POET's
    gym_hardcore = False  # gym's hardcore course (`dcd_levels.HARDCORE`)
    _dcd_rng: np.random.RandomState | None = None  # gym 0.15's stream, seeded at each reset

    @property
    def _legacy(self) -> bool:
        """Whether the course is drawn from gym 0.15's stream: dcd's levels and gym's hardcore."""
        return self.dcd_config is not None or self.gym_hardcore

    @property
    def np_random(self) -> Any:
        """The stream the course, clouds and start push are drawn from: gymnasium's Generator,
        or gym 0.15's RandomState for dcd's levels and gym's hardcore course (gymnasium's own,
        seeded too, is left for its checks)."""
        return self._dcd_rng if self._legacy else super().np_random

    @np_random.setter
    def np_random(self, value: Any) -> None:
        self._np_random = value

    def __init__(self, params: EnvParams, render_mode: str | None = None, max_episode_steps: int = MAX_EPISODE_STEPS):
        validate_level(params)
        v = params.values
        self.params = params
        # dcd's levels: the course as dcd builds it, from its config and its random stream;
        # gym's hardcore course: gymnasium's own hardcore generator on gym 0.15's stream
        self.gym_hardcore = dcd.is_gym_hardcore(v)
        self.dcd_config = dcd.config_of(v) if dcd.is_dcd_level(v) else None
        c = self.dcd_config or (dcd.level() if self.gym_hardcore else v)
        self.roughness = float(c["roughness"])
        self.pit_gap = tuple(float(x) for x in c["pit_gap"])
        self.stump_height = tuple(float(x) for x in c["stump_height"])
        self.stair_height = tuple(float(x) for x in c.get("stair_height", ()))
        # POET's and dcd's state numbering: 0 grass, then stump, (dcd: stairs,) pit, of the enabled
        kinds = (("stump", self.stump_height), ("stairs", self.stair_height), ("pit", self.pit_gap))
        self.enabled_kinds = tuple(k for k, on in kinds if on)
        self.max_episode_steps = int(max_episode_steps)
        self.obstacles: list[tuple[str, float, float]] = []
        self.obstacle_polys: list[list[tuple[float, float]]] = []
        self._elapsed = 0
        super().__init__(render_mode=render_mode, hardcore=bool(self.enabled_kinds) or self.gym_hardcore)
        EzPickle.__init__(self, params, render_mode, max_episode_steps)

    # ---- episode bookkeeping ----
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # A fresh Box2D world each episode: a reused world keeps broad-phase and contact
        # state from earlier episodes, so the same seed could give different rollouts.
        self._destroy()
        self.world = Box2D.b2World()
        if self._legacy:  # dcd's stream: gym 0.15's RandomState (`np_random`)
            if seed is None:
                seed = int(self._dcd_rng.randint(2**31 - 1)) if self._dcd_rng is not None else 0
            self.level_seed, self._dcd_rng = int(seed), dcd.legacy_gym_rng(seed)
        obs, info = super().reset(seed=seed, options=options)
        self._elapsed = 0  # BipedalWalker.reset ends with one internal step
        return obs, info

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = super().step(action)
        self._elapsed += 1
        if not terminated and self._elapsed >= self.max_episode_steps:
            truncated = True
        return obs, float(reward), bool(terminated), bool(truncated), info

    # ---- the course ----
    def _static_poly(self, poly: list[tuple[float, float]]) -> None:
        self.fd_polygon.shape.vertices = poly
        body = self.world.CreateStaticBody(fixtures=self.fd_polygon)
        body.color1, body.color2 = WALL_COLORS
        self.terrain.append(body)
        self.obstacle_polys.append(list(poly))

    def _generate_terrain(self, hardcore: bool) -> None:  # noqa: ARG002 - params decide
        """The course, as POET's `bipedal_walker_custom.py` builds it from a 5-D level and as
        dcd's `walker_env.py` builds it from an 8-D one (their differences: the stump, the
        kind's draw and dcd's stairs); gym's hardcore course is gymnasium's own generator."""
        self.obstacles, self.obstacle_polys = [], []
        if self.gym_hardcore:  # gymnasium's generator records no obstacles
            BipedalWalker._generate_terrain(self, True)
            return
        dcd_level = self.dcd_config is not None
        kinds = self.enabled_kinds
        state, velocity, y, counter, oneshot = 0, 0.0, TERRAIN_HEIGHT, TERRAIN_STARTPAD, False
        pit_diff, original_y = 0.0, y
        stair = (0.0, 1, 0, 0)  # height, slope, width, steps of the stairs being walked
        self.terrain, self.terrain_x, self.terrain_y = [], [], []
        for i in range(TERRAIN_LENGTH):
            # self.np_random each time: dcd's stump retry reseeds the stream mid-course
            x = i * TERRAIN_STEP
            self.terrain_x.append(x)
            kind = kinds[state - 1] if state else "grass"
            if kind == "grass" and not oneshot:
                velocity = 0.8 * velocity + 0.01 * np.sign(TERRAIN_HEIGHT - y)
                if i > TERRAIN_STARTPAD:
                    velocity += self.np_random.uniform(-1, 1) / SCALE
                y += self.roughness * velocity
            elif kind == "pit" and oneshot:
                width = float(self.np_random.uniform(*self.pit_gap))
                pit_gap = 1.0 + width
                counter = int(np.ceil(pit_gap))
                pit_diff = counter - pit_gap
                poly = [
                    (x, y),
                    (x + TERRAIN_STEP, y),
                    (x + TERRAIN_STEP, y - 4 * TERRAIN_STEP),
                    (x, y - 4 * TERRAIN_STEP),
                ]
                self._static_poly(poly)
                self._static_poly([(p[0] + TERRAIN_STEP * pit_gap, p[1]) for p in poly])
                self.obstacles.append(("pit", x + TERRAIN_STEP, width))
                counter += 2
                original_y = y
            elif kind == "pit":
                y = original_y
                if counter > 1:
                    y -= 4 * TERRAIN_STEP
                if counter == 1:
                    # the ground resumes at the right wall's left edge, not on the grid
                    self.terrain_x[-1] -= pit_diff * TERRAIN_STEP
                    pit_diff = 0.0
            elif kind == "stump" and oneshot:
                if dcd_level:
                    self._dcd_stump(x, y)  # dcd's stump keeps the grass counter: flat ground after it
                else:
                    self._poet_stump(x, y)
                    counter = 1  # POET's default stump_width
            elif kind == "stairs" and oneshot:
                stair, original_y = self._dcd_stairs(x, y), y
                if stair[0] > dcd.STAIR_HEIGHT_EPS:
                    counter = stair[3] * stair[2] + 1
            elif kind == "stairs":
                height, slope, width, steps = stair
                n = (steps * width - counter) // width
                y = original_y + n * height * slope * TERRAIN_STEP - (height if slope == -1 else 0) * TERRAIN_STEP
            oneshot = False
            self.terrain_y.append(y)
            counter -= 1
            if counter == 0:
                counter = int(self.np_random.integers(TERRAIN_GRASS // 2, TERRAIN_GRASS))
                if state == 0 and kinds:  # dcd draws the kind's number, POET the index of its list
                    draw = (
                        self.np_random.integers(1, len(kinds) + 1)
                        if dcd_level
                        else self.np_random.integers(len(kinds)) + 1
                    )
                    state = int(draw)
                else:
                    state = 0
                oneshot = True
        self._build_ground()

    def _poet_stump(self, x: float, y: float) -> None:
        """A stump as POET draws one: 1 step wide, `uniform(lo, hi)` steps high."""
        height = float(self.np_random.uniform(*self.stump_height))
        top = y + max(height * TERRAIN_STEP, MIN_STUMP_BODY)
        self._static_poly([(x, y), (x + TERRAIN_STEP, y), (x + TERRAIN_STEP, top), (x, top)])
        self.obstacles.append(("stump", x, height))

    def _dcd_stump(self, x: float, y: float) -> None:
        """A stump as dcd draws one; where Box2D refuses the polygon, dcd's retry: the stream
        reseeded at the level seed + 1 (again + 1 per failure, up to 10), then drawn again."""
        c, attempts = self.dcd_config, 0
        while True:
            rng = self.np_random
            width = int(rng.randint(*c["stump_width"]))
            height = float(rng.uniform(*c["stump_height"]))
            lift = int(rng.randint(*c["stump_float"]))
            # dcd's sums, term by term: the same floats on every machine
            bottom, top = y + lift * TERRAIN_STEP, y + height * TERRAIN_STEP + lift * TERRAIN_STEP
            poly = [(x, bottom), (x + width * TERRAIN_STEP, bottom), (x + width * TERRAIN_STEP, top), (x, top)]
            try:
                self.fd_polygon.shape.vertices = poly
                break
            except Exception:  # pybox2d's assertion on a degenerate polygon, whatever its class
                attempts += 1
                self._dcd_rng = dcd.legacy_gym_rng(self.level_seed + attempts)
                if attempts > 10:
                    break
        self._static_poly(poly)
        self.obstacles.append(("stump", x, height))

    def _dcd_stairs(self, x: float, y: float) -> tuple[float, int, int, int]:
        """Stairs as dcd draws them: a height, up or down, a width and a number of steps; each
        step a block; (height, slope, width, steps)."""
        rng, c = self.np_random, self.dcd_config
        height = float(rng.uniform(*c["stair_height"]))
        slope = 1 if rng.random() > 0.5 else -1
        width = int(rng.randint(*c["stair_width"]))
        steps = int(rng.randint(*c["stair_steps"]))
        if height > dcd.STAIR_HEIGHT_EPS:
            for k in range(steps):
                x0, x1 = x + k * width * TERRAIN_STEP, x + (1 + k) * width * TERRAIN_STEP
                top = y + k * height * slope * TERRAIN_STEP
                bottom = y + (-height + k * height * slope) * TERRAIN_STEP
                self._static_poly([(x0, top), (x1, top), (x1, bottom), (x0, bottom)])
            self.obstacles.append(("stairs", x, float(steps)))
        return height, slope, width, steps

    def _build_ground(self) -> None:
        """Box2D edges and drawing polygons along terrain_x / terrain_y, as gymnasium builds them."""
        self.terrain_poly = []
        for i in range(TERRAIN_LENGTH - 1):
            poly = [(self.terrain_x[i], self.terrain_y[i]), (self.terrain_x[i + 1], self.terrain_y[i + 1])]
            self.fd_edge.shape.vertices = poly
            body = self.world.CreateStaticBody(fixtures=self.fd_edge)
            color = (76, 255 if i % 2 == 0 else 204, 76)
            body.color1 = body.color2 = color
            self.terrain.append(body)
            poly += [(poly[1][0], 0), (poly[0][0], 0)]
            self.terrain_poly.append((poly, (102, 153, 76)))
        self.terrain.reverse()


def course_obstacles(env: Any) -> list[tuple[str, float, float]]:
    """The obstacles of the env's current course: (kind, x_start m, size in TERRAIN_STEP units).

    `env` may be wrapped (gymnasium.make); reset it first.
    """
    base = getattr(env, "unwrapped", env)
    if not isinstance(base, BipedalTerrainEnv):
        raise TypeError(f"expected a BipedalTerrainEnv, got {type(base).__name__}")
    return list(base.obstacles)


# ===================================================================== profile
FINISH_X = (TERRAIN_LENGTH - TERRAIN_GRASS) * TERRAIN_STEP  # gymnasium's walker ends the episode past this x


def env_profile(env: BipedalTerrainEnv, description: str = "", seed: int | None = None) -> CourseProfile:
    """The current course of `env` (reset it first) in metres: the ground line (down to a pit's
    floor inside a pit), the pit walls, the stumps, the start pad and gymnasium's finish x."""
    base = getattr(env, "unwrapped", env)
    # terrain_x steps back by < 1 step at a pit's far edge; the ground line keeps it increasing
    x = np.maximum.accumulate(np.asarray(base.terrain_x, dtype=np.float64))
    polys = iter(base.obstacle_polys)
    pits, stumps, walls = [], [], []
    for kind, x0, size in base.obstacles:
        # _generate_terrain adds two wall polygons per pit, one block per stump and one per
        # stair step (`size` of them), in this order
        count = {"pit": 2, "stump": 1, "stairs": int(size)}[kind]
        boxes = [np.asarray(next(polys), dtype=np.float64) for _ in range(count)]
        rects = [(p[:, 0].min(), p[:, 0].max(), p[:, 1].min(), p[:, 1].max()) for p in boxes]
        if kind == "pit":
            pits.append((x0, x0 + size * TERRAIN_STEP))
        (stumps if kind == "stump" else walls).extend(rects)
    return CourseProfile(
        base.params.family,
        x,
        np.asarray(base.terrain_y, dtype=np.float64),
        (0.0, TERRAIN_STARTPAD * TERRAIN_STEP),
        FINISH_X,
        tuple(pits),
        tuple(tuple(map(float, r)) for r in stumps),
        tuple(tuple(map(float, r)) for r in walls),
        description=description,
        seed=seed,
    )


def family_profile(family: Any, params: EnvParams, seed: int | None, description: str) -> CourseProfile:
    """`env_profile` of the course a walker family builds for (params, seed); seed None: the
    ground does not depend on it (built with seed 0)."""
    env = family.make_env(params)
    try:
        env.reset(seed=0 if seed is None else int(seed))
        return env_profile(env, description, seed)
    finally:
        env.close()


# ====================================================================== family
def walker_setup(max_episode_steps: Any) -> tuple[int, Any, Any]:
    """The checked episode cap and gymnasium's walker observation and action spaces."""
    steps_ok = isinstance(max_episode_steps, (int, np.integer)) and not isinstance(max_episode_steps, bool)
    if not steps_ok or max_episode_steps < 1:
        raise ValueError(f"option max_episode_steps must be a positive int, got {max_episode_steps!r}")
    probe = BipedalWalker()
    spaces = probe.observation_space, probe.action_space
    probe.close()
    return int(max_episode_steps), *spaces


class BipedalFamily:
    """POET's BipedalWalker family: terrain's params and mutation on gymnasium's Box2D walker,
    or dcd's 8-D level space (`level_space: dcd`, `envs.dcd_levels`)."""

    name = FAMILY
    defaults = BIPEDAL_SCORES  # POET's thresholds

    def __init__(
        self, max_episode_steps: int = MAX_EPISODE_STEPS, level_space: str = "poet", poet_mutation_8d: bool = False
    ):
        self.max_episode_steps, self.observation_space, self.action_space = walker_setup(max_episode_steps)
        # where new levels come from (`initial`, `sample`, `sample_easy`): POET's 5-D space or
        # dcd's 8-D one; `edit` and `interpolate` follow the level they are given
        self.level_space = dcd.check_level_space(level_space)
        # POET's mutate of a dcd level: refused (the paper has none) or this project's op
        self.poet_mutation_8d = dcd.check_poet_mutation_8d(poet_mutation_8d)

    def curriculum_defaults(self, curriculum: str) -> dict:
        """dcd's curricula on dcd's 8-D levels, the others on POET's (`dcd_levels.curriculum_defaults`)."""
        return dcd.curriculum_defaults(curriculum)

    @property
    def _dcd(self) -> bool:
        return self.level_space == "dcd"

    def initial(self) -> EnvParams:
        """The flat course: no roughness, no pits, no stumps (no stairs)."""
        return EnvParams.create(FAMILY, dcd.level() if self._dcd else _TERRAIN.initial().values)

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """POET's reproduce op (terrain's): all three groups move on every call. POET's paper
        defines no mutation of dcd's 8-D levels: one is refused, or with `poet_mutation_8d`
        moved by this project's op (`dcd_levels.poet_mutate`)."""
        if dcd.is_dcd_level(params.values):
            validate_level(params)
            return EnvParams.create(
                FAMILY, dcd.poet_mutate_or_refuse(FAMILY, params.values, rng, self.poet_mutation_8d)
            )
        child = _delegate("mutate", params, rng)
        return EnvParams.create(FAMILY, child.values)

    def edit(self, params: EnvParams, rng: np.random.Generator, edits: int = 1) -> EnvParams:
        """ACCEL's edit: dcd's `mutate_level` on the level's vector (`dcd_levels.edit_vector`;
        of a 5-D level, terrain's `edit`, dcd's POET mode)."""
        if dcd.is_dcd_level(params.values):
            validate_level(params)
            return EnvParams.create(FAMILY, dcd.edit(params.values, rng, edits))
        return EnvParams.create(FAMILY, _delegate("edit", params, rng, edits).values)

    def interpolate(self, start: EnvParams, target: EnvParams, t: float) -> EnvParams:
        """The course a fraction `t` of the way from `start` to `target` (terrain's
        `interpolate`; of two dcd levels, each number of the vector on the straight line)."""
        if dcd.is_dcd_level(start.values) and dcd.is_dcd_level(target.values):
            return EnvParams.create(FAMILY, dcd.interpolate(start.values, target.values, t))
        a, b = (EnvParams.create(_TERRAIN.name, p.values) for p in (start, target))
        return EnvParams.create(FAMILY, _TERRAIN.interpolate(a, b, t).values)

    def sample_easy(self, rng: np.random.Generator) -> EnvParams:
        """A random easy course, where ACCEL starts: dcd's easy ranges (`dcd_levels.EASY_RANGES`)
        or terrain's `sample_easy`."""
        if self._dcd:
            return EnvParams.create(FAMILY, dcd.sample_easy(rng))
        return EnvParams.create(FAMILY, _TERRAIN.sample_easy(rng).values)

    def test_levels(self) -> dict[str, EnvParams]:
        """The terrain family's held-out courses on the walker, whatever the level space, so
        that runs of every curriculum compare; dcd's test suite is a named set (`level_sets`)."""
        return {name: EnvParams.create(FAMILY, p.values) for name, p in _TERRAIN.test_levels().items()}

    def sample(self, rng: np.random.Generator) -> EnvParams:
        """A random course over the whole range: dcd's `reset_random` (`dcd_levels.sample_vector`)
        or terrain's `sample`."""
        if self._dcd:
            return EnvParams.create(FAMILY, dcd.sample(rng))
        return EnvParams.create(FAMILY, _TERRAIN.sample(rng).values)

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError (family 'bipedal') naming the bad field (`validate_level`)."""
        validate_level(params)

    def difficulty(self, params: EnvParams) -> int:
        """The POET paper's class of the course, 0 (easy) to 3 (extremely challenging), as
        terrain's; of a dcd level, by the pits, stumps and roughness it builds (the paper's
        criteria name no stairs)."""
        _refuse_hardcore(params, "class")
        if dcd.is_dcd_level(params.values):
            return terrain_difficulty(dcd.poet_view(params.values))
        return _delegate("difficulty", params)

    def features(self, params: EnvParams) -> np.ndarray:
        """[roughness, pit_lo, pit_hi, stump_lo, stump_hi]; a disabled group reads 0, 0. A dcd
        level's: its level vector (`dcd_levels.vector`)."""
        _refuse_hardcore(params, "features")
        if dcd.is_dcd_level(params.values):
            validate_level(params)
            return np.array(dcd.vector(params.values), dtype=np.float64)
        return _delegate("features", params)

    def flat(self, params: EnvParams) -> dict[str, float]:
        """One scalar per column, as the terrain family's; a dcd level's built ranges (0, 0
        and *_enabled 0 when off) and its stair steps."""
        _refuse_hardcore(params, "columns")
        return dcd.flat(params.values) if dcd.is_dcd_level(params.values) else _delegate("flat", params)

    def renew(self, env: BipedalTerrainEnv) -> bool:
        """A used env is as good as new: its reset builds a new Box2D world and the course from the seed."""
        return env.render_mode is None

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> BipedalTerrainEnv:
        """A gymnasium env on these params (truncates at max_episode_steps)."""
        return BipedalTerrainEnv(params, render_mode=render_mode, max_episode_steps=self.max_episode_steps)

    def level_sets(self) -> dict[str, dict[str, list[EnvParams]]]:
        """dcd's named test levels (`dcd_levels.level_sets`): set -> level -> the params of
        each episode, episode k pinned to course seed k."""
        return dcd.family_level_sets(FAMILY, hardcore=True)

    def published_results(self, name: str) -> dict[str, dict[str, dict[str, float]]]:
        """dcd's numbers for its test suite ("dcd": `dcd_levels.published_results`), none for
        the other sets."""
        return dcd.published_results() if name == "dcd" else {}

    def course_profile(self, params: EnvParams, seed: int = 0) -> CourseProfile:
        """The whole course of (params, seed), in metres, for drawing (`envs.profile`)."""
        text = dcd.describe(params.values) if dcd.is_dcd_level(params.values) else describe(params.values)
        return family_profile(self, params, int(seed), text)
