"""A fast pure-numpy 2-D runner on a generated course, with POET's BipedalWalker terrain params.

The three parameter groups (roughness, pit_gap, stump_height) and their mutation steps are
POET's, in POET's units, so POET's score thresholds keep their meaning: falling scores -100
and ends the episode, finishing the course scores about 300. Courses are laid out as POET's
generator lays out BipedalWalker's (the ground level across pits and under stumps), and a
unit's metres put each difficulty threshold at the fraction of the runner's own limit that
it is of POET's range (`PIT_SCALE`, `STUMP_SCALE`).

One core, `TerrainBatch`, steps many episodes with elementwise numpy operations and gathers
only (no reductions across rows), so a row's numbers never depend on the other rows or on
the batch size. `TerrainEnv` is the gymnasium view of the same core with one row, so both
paths give the same returns bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs import _raster, terrain_core
from envs import dcd_levels as dcd
from envs.base import BIPEDAL_SCORES, EnvParamError, EnvParams
from envs.kernel import KernelData, RowKernel
from envs.profile import CourseProfile, runs, span_text
from envs.terrain_core import (  # noqa: F401  (part of this module's API)
    FALL_DEPTH,
    FALL_REWARD,
    JUMP_SPEED,
    KILL,
    MAX_LOOKAHEAD,
    NO_GROUND,
    OBS_DIM,
    OBS_LIMIT,
    PIT,
    PROGRESS_REWARD,
    RES,
    SLOPE,
    H,
    X,
    Y,
)
from envs.terrain_course import (  # noqa: F401  (part of this module's API)
    PIT_KIND,
    PIT_SCALE,
    ROUGH_GAIN,
    STAIR_SCALE,
    STAIR_WIDTH,
    STAIRS_KIND,
    START_PAD,
    STUMP_KIND,
    STUMP_SCALE,
    build_course,
    n_cells_for,
)

FAMILY = "terrain"

# ---- the course's geometry is in envs/terrain_course.py, the physics in envs/terrain_core.py ----
PIT_MAX, PIT_DEFAULT, PIT_STEP = 8.0, (0.0, 0.8), 0.4
STUMP_MAX, STUMP_DEFAULT, STUMP_STEP = 5.0, (0.0, 0.4), 0.2
ROUGH_MAX, ROUGH_STEP = 10.0, 0.6
PARAM_NAMES = ("roughness", "pit_gap", "stump_height")


# ======================================================================== course
@dataclass(frozen=True)
class Course:
    """One generated course; all arrays are read-only and indexed by cell (x = i * RES)."""

    course_length: float
    base: np.ndarray  # the smooth ground before obstacles
    height: np.ndarray  # ground height; NO_GROUND in pit cells
    pit: np.ndarray  # bool
    rim: np.ndarray  # height of the ground just before the pit (pit cells; 0 elsewhere)
    stump: np.ndarray  # bool
    stair: np.ndarray  # bool: a cell of a stair step
    slope: np.ndarray  # gradient of the smooth ground (0 on stumps, stair steps and pits)
    table: np.ndarray  # (n_cells, 4) float64: height, slope, pit (0/1), fall level
    # per obstacle in course order: its kind (`STUMP_KIND`, `PIT_KIND`, `STAIRS_KIND`), its first cell,
    # pit width m | stump height m | stair step height m, and a staircase's steps (else 0)
    obstacle_arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

    @property
    def n_cells(self) -> int:
        """Number of grid cells."""
        return int(self.height.size)

    @cached_property
    def obstacles(self) -> tuple[tuple[str, float, float], ...]:
        """(kind, x_start m, pit width m | stump height m | stair step height m) per obstacle,
        in course order (built when first read: the rollouts never read it)."""
        code, first, size, _ = self.obstacle_arrays
        names = {STUMP_KIND: "stump", PIT_KIND: "pit", STAIRS_KIND: "stairs"}
        return tuple(
            (names[k], float(i * RES), float(z)) for k, i, z in zip(code.tolist(), first.tolist(), size.tolist())
        )


def generate_course(params: EnvParams, seed: int, course_length: float = 80.0) -> Course:
    """The course of one episode, from params and the episode seed (read-only).

    Courses are kept in a per-process cache of the COURSE_CACHE most recently used (a
    course of the default length holds about 60 KB, the cache at most about 16 MB): a
    pinned env's course (POET's default, one per env) is built once per process and shared
    by every row that runs it; a fresh course per episode (ACCEL, PLR, DR, held-out scoring)
    is built by the compiled layout when first asked for, and its antithetic twin then
    finds it in the cache."""
    return _course_of(params, int(seed), float(course_length))


COURSE_CACHE = 256


@lru_cache(maxsize=COURSE_CACHE)
def _course_of(params: EnvParams, seed: int, course_length: float) -> Course:
    roughness, pit_gap, stump_height = _checked_values(params)
    stairs = _stairs_of(params)
    return course_from_values(roughness, pit_gap, stump_height, seed, course_length, *stairs)


def _stairs_of(params: EnvParams) -> tuple[tuple[float, ...], int]:
    """A dcd level's stairs as the course builds them: the step height range and dcd's
    `randint` bound of steps; none for POET's levels."""
    if not dcd.is_dcd_level(params.values):
        return (), 0
    c = dcd.config_of(params.values)
    return _as_range(c["stair_height"]), (c["stair_steps"] or [0])[0]


@lru_cache(maxsize=4 * COURSE_CACHE)
def _checked_values(params: EnvParams) -> tuple[Any, ...]:
    # once per params, not per course: a fresh course per episode reuses its level's params
    validate_params(params)
    v = params.values
    if not dcd.is_dcd_level(v):
        return float(v["roughness"]), _as_range(v["pit_gap"]), _as_range(v["stump_height"])
    c = dcd.config_of(v)  # dcd's level: the ranges it builds, in this family's units
    return c["roughness"], _as_range(c["pit_gap"]), _as_range(c["stump_height"])


def _as_range(value: Sequence[float]) -> tuple[float, ...]:
    return tuple(float(x) for x in value)


def course_from_values(
    roughness: float,
    pit_gap: tuple[float, ...],
    stump_height: tuple[float, ...],
    seed: int,
    course_length: float,
    stair_height: tuple[float, ...] = (),
    stair_steps: int = 0,
) -> Course:
    """The course of these param values and seed, built anew and not validated (the
    feasibility study also builds courses beyond the family's range)."""
    arrays = build_course(roughness, pit_gap, stump_height, seed, course_length, stair_height, stair_steps)
    for a in arrays:
        a.flags.writeable = False  # shared through the cache
    return Course(course_length, *arrays[:8], tuple(arrays[8:]))


def ground_course(base: np.ndarray, course_length: float) -> Course:
    """A course on the given ground (one height per cell of `n_cells_for(course_length)`, metres),
    with no pits and no stumps; each cell's slope is that of the segment it starts."""
    base = np.array(base, dtype=np.float64)
    n = n_cells_for(course_length)
    if base.shape != (n,) or not np.all(np.isfinite(base)):
        raise ValueError(f"ground: expected {n} finite heights, got shape {base.shape}")
    slope = np.append(np.diff(base) / RES, 0.0)
    table = np.empty((n, 4))
    table[:, H], table[:, SLOPE], table[:, PIT], table[:, KILL] = base, slope, 0.0, -np.inf
    none = np.zeros(n, dtype=bool)
    arrays = [base, base.copy(), none, np.zeros(n), none.copy(), none.copy(), slope, table]
    for a in arrays:
        a.flags.writeable = False
    no_obstacles = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)
    return Course(float(course_length), *arrays, no_obstacles)


# ==================================================================== validation
def validate_params(params: EnvParams) -> None:
    """Raise EnvParamError naming the bad field if `params` are not valid terrain params."""
    if not isinstance(params, EnvParams):
        raise EnvParamError(FAMILY, "params", f"expected EnvParams, got {type(params).__name__}")
    if params.family != FAMILY:
        raise EnvParamError(FAMILY, "family", f"expected family {FAMILY!r}, got {params.family!r}")
    values = params.values
    if dcd.is_dcd_level(values):  # dcd's 8-D level: dcd's ranges
        for field, problem in dcd.problems(values)[:1]:
            raise EnvParamError(FAMILY, field, problem)
        return
    for name in PARAM_NAMES:
        if name not in values:
            raise EnvParamError(FAMILY, name, "missing")
    for name in values:
        if name not in PARAM_NAMES:
            raise EnvParamError(FAMILY, name, f"unknown parameter (known: {', '.join(PARAM_NAMES)})")
    _check_number("roughness", values["roughness"], 0.0, ROUGH_MAX)
    _check_range("pit_gap", values["pit_gap"], PIT_MAX, PIT_DEFAULT[1])
    _check_range("stump_height", values["stump_height"], STUMP_MAX, STUMP_DEFAULT[1])


def _check_number(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EnvParamError(FAMILY, name, f"expected a number, got {type(value).__name__}")
    if not (math.isfinite(value) and lo <= value <= hi):
        raise EnvParamError(FAMILY, name, f"{value!r} is outside [{lo}, {hi}]")
    return float(value)


def _check_range(name: str, value: Any, max_value: float, min_hi: float) -> None:
    if not isinstance(value, list):
        raise EnvParamError(FAMILY, name, f"expected [] or [lo, hi], got {type(value).__name__}")
    if not value:
        return
    if len(value) != 2:
        raise EnvParamError(FAMILY, name, f"expected [] or [lo, hi], got {len(value)} values")
    lo = _check_number(name, value[0], 0.0, max_value)
    hi = _check_number(name, value[1], 0.0, max_value)
    if lo > hi:
        raise EnvParamError(FAMILY, name, f"lo {lo} > hi {hi}")
    if hi < min_hi:
        raise EnvParamError(FAMILY, name, f"hi {hi} < {min_hi}")


# ====================================================================== mutation
def _mutate_range(
    current: list[float], rng: np.random.Generator, step: float, default: tuple[float, float], max_value: float
) -> list[float]:
    """POET's reproduce op for an [lo, hi] group: enable at default, else move the ends by +-step."""
    if not current:
        return [default[0], default[1]]
    lo, hi = float(current[0]), float(current[1])
    options = []
    for d_lo in (step, 0.0, -step):
        for d_hi in (step, 0.0, -step):
            if d_lo == 0.0 and d_hi == 0.0:
                continue
            new_lo, new_hi = round(lo + d_lo, 1) + 0.0, round(hi + d_hi, 1) + 0.0
            if 0.0 <= new_lo <= new_hi <= max_value and new_hi >= default[1]:
                options.append([new_lo, new_hi])
    if not options:
        return [round(lo, 1), round(hi, 1)]
    return options[int(rng.integers(len(options)))]


# ========================================================================= ACCEL's edit
# dcd's BipedalWalker edits (`PARAM_MUTATIONS`, POET mode: the first five of its level
# vector): roughness moves by U(0, 0.6), a pit-gap end by 0.4, a stump-height end by 0.2.
EDIT_STEPS = ((0.0, ROUGH_STEP), (PIT_STEP,), (PIT_STEP,), (STUMP_STEP,), (STUMP_STEP,))
EDIT_MAX = (ROUGH_MAX, PIT_MAX, PIT_MAX, STUMP_MAX, STUMP_MAX)


def edit_vector(vector: Sequence[float], rng: np.random.Generator, edits: int) -> np.ndarray:
    """`edits` edits of a level vector [roughness, pit_lo, pit_hi, stump_lo, stump_hi], drawn
    as dcd draws them: all entries to edit (uniform), then all directions (-1, 0 or +1), then
    for each roughness edit its size; each edit moves one entry by its step (`EDIT_STEPS`)
    times the direction and clips it to [0, max]. The ends of a group may cross; they are
    sorted when the vector becomes params."""
    out = np.array(vector, dtype=np.float64)
    entries = rng.integers(1, len(EDIT_STEPS) + 1, size=edits)
    directions = rng.integers(0, 3, size=edits) - 1
    for entry, direction in zip(entries, directions):
        step = EDIT_STEPS[entry - 1]
        size = step[0] if len(step) == 1 else rng.uniform(*step)
        out[entry - 1] = np.clip(out[entry - 1] + direction * size, 0.0, EDIT_MAX[entry - 1])
    return out


def from_edit_vector(vector: Sequence[float]) -> EnvParams:
    """The params of an edited level vector: each group's ends sorted, a group whose upper
    end is below its smallest enabled value (pits 0.8, stumps 0.4) off, as `sample` does.
    (dcd keeps the ends of a group that is off in its level vector; here it restarts at 0.)"""
    pit, stump = sorted(float(x) for x in vector[1:3]), sorted(float(x) for x in vector[3:5])
    return EnvParams.create(
        FAMILY,
        {
            "roughness": float(vector[0]),
            "pit_gap": pit if pit[1] >= PIT_DEFAULT[1] else [],
            "stump_height": stump if stump[1] >= STUMP_DEFAULT[1] else [],
        },
    )


# ===================================================================== the core
class TerrainBatch:
    """Many terrain episodes stepped together in lock-step (the gymnasium env's core, tests, analysis).

    Each step is one call of the compiled kernel `terrain_core.step_rows`, which steps every
    row on its own (no value crosses rows), so a row's numbers never depend on the other rows
    or on the batch size. Rows that are already done keep their state and last observation,
    and return zero reward with terminated = truncated = False; callers mask them.
    """

    def __init__(self, courses: Sequence[Course], max_steps: int):
        if not courses:
            raise ValueError("TerrainBatch needs at least one course")
        lengths = {c.course_length for c in courses}
        if len(lengths) != 1:
            raise ValueError("all courses of a batch need the same course_length")
        self.num_envs = len(courses)
        self.courses = tuple(courses)
        self.course_length = float(lengths.pop())
        self.max_steps = int(max_steps)
        self.single_observation_space = observation_space()
        self.single_action_space = action_space()
        self.table, self.bases, self.max_cell = lay_out(courses)
        self.progress_scale = PROGRESS_REWARD / self.course_length
        self._state = np.zeros((self.num_envs, 4))  # x, y, vx, vy per row
        self.grounded = np.ones(self.num_envs, dtype=bool)
        self.done = np.zeros(self.num_envs, dtype=bool)
        self.cell = np.zeros(self.num_envs, dtype=np.int64)
        self.reset()

    @property
    def x(self) -> np.ndarray:
        """Each row's position along the course (m)."""
        return self._state[:, X]

    @property
    def y(self) -> np.ndarray:
        """Each row's height (m)."""
        return self._state[:, Y]

    def reset(self) -> np.ndarray:
        """Put every runner at x = 0 on the start pad; returns (num_envs, OBS_DIM) float32."""
        self.t = 0
        # a new array: the caller may still hold the last one returned
        self._obs = np.empty((self.num_envs, OBS_DIM), dtype=np.float32)
        terrain_core.reset_rows(self.table, self.bases, self._state, self.grounded, self.done, self.cell, self._obs)
        return self._obs

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every row by DT; returns (obs float32, rewards float64, terminated, truncated).
        Actions are (num_envs, 2), clipped to [-1, 1]."""
        a = np.asarray(actions)
        if a.dtype != np.float32 and a.dtype != np.float64:
            a = a.astype(np.float64)
        if a.shape != (self.num_envs, 2):
            a = a.reshape(self.num_envs, 2)
        self.t += 1
        self._obs, rewards, terminated, truncated = terrain_core.step_rows(
            self.table,
            self.bases,
            self.max_cell,
            self.course_length,
            self.progress_scale,
            self.t >= self.max_steps,
            a,
            self._state,
            self.grounded,
            self.done,
            self.cell,
            self._obs,
        )
        return self._obs, rewards, terminated, truncated

    def close(self) -> None:
        """Nothing to release."""


def lay_out(courses: Sequence[Course]) -> tuple[np.ndarray, np.ndarray, int]:
    """What the compiled core reads of a batch's courses: each distinct course once, laid end
    to end (row r's cells start at table[bases[r]]), and the last cell a runner can stand on.
    Rows on one course (a pinned env's, from the course cache) share its cells, which then
    stay in the CPU's cache from one row to the next."""
    place: dict[int, int] = {}  # a distinct course's place in the table, by identity
    row_course = [place.setdefault(id(c), len(place)) for c in courses]
    table = np.concatenate([c.table for c in {id(c): c for c in courses}.values()])
    m = courses[0].n_cells
    return table, np.asarray(row_course, dtype=np.int64) * m, m - 1 - MAX_LOOKAHEAD


def kernel_data(courses: Sequence[Course]) -> KernelData:
    """The row kernel's data (`terrain_core.kernel_step`) for one row per course."""
    if not courses:
        return np.zeros((0, 4)), np.zeros(1, dtype=np.int64), np.zeros(2)
    if len({c.course_length for c in courses}) != 1:
        raise ValueError("all courses of a batch need the same course_length")
    table, bases, max_cell = lay_out(courses)
    course_length = float(courses[0].course_length)
    ints = np.append(bases, max_cell)
    return table, ints, np.array([course_length, PROGRESS_REWARD / course_length])


def terrain_kernel(course: Callable[[EnvParams, int], Course]) -> RowKernel:
    """The terrain core as a row kernel, on the courses `course(params, seed)` builds."""
    return RowKernel(
        obs_dim=OBS_DIM,
        act_dim=2,
        state_size=terrain_core.KERNEL_STATE,
        data=lambda params, seeds: kernel_data([course(p, int(s)) for p, s in zip(params, seeds)]),
        reset=terrain_core.kernel_reset,
        step=terrain_core.kernel_step,
    )


def observation_space() -> spaces.Box:
    """The observation space of one row."""
    return spaces.Box(-OBS_LIMIT, OBS_LIMIT, (OBS_DIM,), np.float32)


def action_space() -> spaces.Box:
    """The action space of one row: [drive, jump]."""
    return spaces.Box(-1.0, 1.0, (2,), np.float32)


# ================================================================ gymnasium env
class TerrainEnv(gym.Env):
    """gymnasium view of the terrain core with one row; same numbers as TerrainBatch."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        params: EnvParams,
        course_length: float = 80.0,
        max_episode_steps: int = 600,
        render_mode: str | None = None,
        course_of: Callable[[EnvParams, int], Course] | None = None,
    ):
        """`course_of(params, seed)` builds the course of an episode (another family's, whose
        params it checks itself); by default this family's `generate_course`."""
        if course_of is None:
            validate_params(params)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.params = params
        self.course_length = float(course_length)
        self.max_episode_steps = int(max_episode_steps)
        self.render_mode = render_mode
        self.observation_space = observation_space()
        self.action_space = action_space()
        self.course_seed: int | None = None
        self._core: TerrainBatch | None = None
        self._course_of = course_of

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode on the course of `seed` (or one drawn from self.np_random)."""
        super().reset(seed=seed)
        self.course_seed = int(seed) if seed is not None else int(self.np_random.integers(2**63 - 1))
        if self._course_of is None:
            course = generate_course(self.params, self.course_seed, self.course_length)
        else:
            course = self._course_of(self.params, self.course_seed)
        self._core = TerrainBatch([course], self.max_episode_steps)
        return self._core.reset()[0], {"x": 0.0, "course_seed": self.course_seed}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One DT step of the single row."""
        if self._core is None:
            raise RuntimeError("call reset() before step()")
        obs, reward, terminated, truncated = self._core.step(np.asarray(action).reshape(1, 2))
        info = {"x": float(self._core.x[0]), "finished": bool(self._core.x[0] >= self.course_length)}
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), info

    def render(self) -> np.ndarray | None:
        """An rgb_array frame (200 x 400) around the runner, or None without render_mode."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        if self._core is None:
            self.reset()
        assert self._core is not None
        return render_frame(self._core.courses[0], float(self._core.x[0]), float(self._core.y[0]))


# =================================================================== rendering
SKY, GRASS, DIRT, STUMP, RUNNER = (206, 228, 250), (96, 158, 72), (120, 90, 60), (140, 96, 50), (214, 48, 48)
MARKER = (60, 60, 60)


def render_frame(course: Course, x: float, y: float, height: int = 200, width: int = 400) -> np.ndarray:
    """The course around a runner at (x, y): 20 m wide, runner a quarter in from the left."""
    ppm = width / 20.0
    # The camera follows the ground under the runner, so jumps show as jumps.
    left, bottom = x - 5.0, float(course.base[min(max(int(x / RES), 0), course.n_cells - 1)]) - 3.5
    col_x = left + (np.arange(width) + 0.5) / ppm
    img = _raster.blank(height, width, SKY)
    _draw_ground(img, course, col_x, bottom, ppm)
    # Distance posts every 2 m along the bottom edge, so motion shows even on flat ground.
    for post in np.arange(np.ceil(left / 2.0) * 2.0, left + width / ppm, 2.0):
        px = (post - left) * ppm
        _raster.fill_rect(img, px - 1, height - 10, px + 1, height, MARKER)
    _raster.checkered_line(img, (course.course_length - left) * ppm)
    col, feet_row = (x - left) * ppm, height - (y - bottom) * ppm
    _raster.fill_rect(img, col - 5, feet_row - 0.8 * ppm, col + 5, feet_row, RUNNER)  # a 0.5 x 0.8 m block
    return img


def describe(values: dict[str, Any]) -> str:
    """The three parameter groups in words: 'roughness 2.4 · pit gap 0.8-2.4 · stump height 0.4-1.2'."""
    pit, stump = values["pit_gap"], values["stump_height"]
    return " · ".join(
        [
            f"roughness {float(values['roughness']):g}",
            f"pit gap {span_text(pit)}" if pit else "no pits",
            f"stump height {span_text(stump)}" if stump else "no stumps",
        ]
    )


def course_profile(course: Course, description: str = "", seed: int | None = None) -> CourseProfile:
    """The whole course (start pad to the end of the run-out) in metres: the ground (none over
    a pit: pits are bottomless here; over stairs, their steps' tops), the stumps standing on
    it, the start pad and the finish."""
    x = np.arange(course.n_cells) * RES
    ground = np.where(course.pit, np.nan, np.where(course.stair, course.height, course.base))
    pits = tuple((a * RES, b * RES) for a, b in runs(course.pit))
    stumps = tuple(
        (a * RES, b * RES, float(course.base[a:b].min()), float(course.height[a:b].max()))
        for a, b in runs(course.stump)
    )
    return CourseProfile(
        FAMILY, x, ground, (0.0, START_PAD), course.course_length, pits, stumps, description=description, seed=seed
    )


def _draw_ground(img: np.ndarray, course: Course, col_x: np.ndarray, bottom: float, ppm: float) -> None:
    """Grass-topped dirt under the ground, stumps in brown, pits left open."""
    h = img.shape[0]
    cells = np.clip(np.floor(col_x / RES).astype(np.int64), 0, course.n_cells - 1)
    solid = ~course.pit[cells]
    ground = np.where(course.stair[cells], course.height[cells], course.base[cells])  # a stair step is ground
    base_row = h - (ground - bottom) * ppm
    top_row = np.where(course.stump[cells], h - (course.height[cells] - bottom) * ppm, base_row)
    _raster.fill_columns(img, base_row, DIRT, mask=solid)
    _raster.fill_columns(img, base_row, GRASS, bottom=base_row + 3, mask=solid)
    _raster.fill_columns(img, top_row, STUMP, bottom=base_row, mask=solid & course.stump[cells])


# ==================================================================== difficulty
# The POET paper's difficulty classes (Wang et al. 2019, arXiv 1901.01753; restated in the
# ACCEL paper's Table 1, Parker-Holder et al. 2022, arXiv 2203.01302): an env is
# "challenging" if it meets one of three criteria, "very challenging" two, "extremely
# challenging" all three. Stumps and pits count by the upper end of their range (dcd's
# `walker_test_envs.py` draws its extremely challenging levels' upper ends from
# [2.4, 3], [6, 8] and roughness from [4.5, 8]); a group that is off meets nothing.
DIFFICULTY_CRITERIA = {"stump_height": 2.4, "pit_gap": 6.0, "roughness": 4.5}
DIFFICULTY_CLASSES = ("easy", "challenging", "very challenging", "extremely challenging")


def difficulty(values: dict[str, Any]) -> int:
    """The paper's class of a course: the number of criteria it meets, 0 (easy) to 3
    (extremely challenging); `DIFFICULTY_CLASSES` names them."""
    met = float(values["roughness"]) >= DIFFICULTY_CRITERIA["roughness"]
    for name in ("pit_gap", "stump_height"):
        span = values[name]
        met += bool(span) and float(span[-1]) >= DIFFICULTY_CRITERIA[name]
    return int(met)


def realised_sizes(course: Course) -> dict[str, float]:
    """The widest pit and the tallest stump a course holds, in the params' units (0 without)."""
    code, _, size, _ = course.obstacle_arrays
    pits, stumps = code == PIT_KIND, code == STUMP_KIND
    return {
        "widest_pit": float(size[pits].max()) / PIT_SCALE if pits.any() else 0.0,
        "tallest_stump": float(size[stumps].max()) / STUMP_SCALE if stumps.any() else 0.0,
    }


def course_difficulty(course: Course, roughness: float) -> int:
    """The paper's class of a course as built: the criteria its drawn obstacles meet (its
    widest pit and its tallest stump, `realised_sizes`) and its roughness. A range whose
    upper end sits at a threshold draws below it, so `difficulty` of the params (the label)
    can count a criterion their courses never meet."""
    sizes = realised_sizes(course)
    slack = 1e-9  # metres back to units: a gap drawn at its range's end reads as that end
    met = float(roughness) >= DIFFICULTY_CRITERIA["roughness"]
    met += sizes["widest_pit"] >= DIFFICULTY_CRITERIA["pit_gap"] - slack
    met += sizes["tallest_stump"] >= DIFFICULTY_CRITERIA["stump_height"] - slack
    return int(met)


# ====================================================================== family
EASY_ROUGHNESS = 0.6  # dcd PARAM_RANGES_EASY: ground roughness in [0, 0.6]

# Held-out courses (values): one obstacle type each, then all of them together, each beyond
# what the 120-iteration quickstart reaches (roughness 0.8, pits to 2.0, stumps to 1.0).
TEST_LEVELS: dict[str, dict[str, Any]] = {
    "flat": {"roughness": 0.0, "pit_gap": [], "stump_height": []},
    "pits": {"roughness": 0.0, "pit_gap": [1.2, 2.4], "stump_height": []},
    "stumps": {"roughness": 0.0, "pit_gap": [], "stump_height": [1.0, 1.6]},
    "rough": {"roughness": 4.0, "pit_gap": [], "stump_height": []},
    "combined": {"roughness": 2.0, "pit_gap": [0.8, 1.6], "stump_height": [0.6, 1.2]},
}


def _poet_values(values: dict[str, Any]) -> dict[str, Any]:
    """POET's 5-D view of a level (a dcd level: the pits, stumps and roughness it builds)."""
    return dcd.poet_view(values) if dcd.is_dcd_level(values) else values


class TerrainFamily:
    """POET's BipedalWalker terrain parameters on a fast numpy runner."""

    name = FAMILY
    # What the same params and seed build; a run made with another version is not resumed.
    # 1: the ground walk ran on under pits and stumps, pits 1 m and stumps 0.4 m a unit.
    # 2: POET's geometry (level banks, stumps on level ground) in units from the runner's limits.
    version = 2
    defaults = BIPEDAL_SCORES  # POET's thresholds

    def __init__(
        self,
        course_length: float = 80.0,
        max_episode_steps: int = 600,
        level_space: str = "poet",
        poet_mutation_8d: bool = False,
    ):
        # where new levels come from (`initial`, `sample`, `sample_easy`): POET's 5-D space or
        # dcd's 8-D one, stairs included (`envs.dcd_levels`, in this family's units)
        self.level_space = dcd.check_level_space(level_space)
        # POET's mutate of a dcd level: refused (the paper has none) or this project's op
        self.poet_mutation_8d = dcd.check_poet_mutation_8d(poet_mutation_8d)
        if isinstance(course_length, bool) or not isinstance(course_length, (int, float)):
            raise ValueError(f"option course_length must be a number, got {type(course_length).__name__}")
        if not (math.isfinite(course_length) and course_length >= 2 * START_PAD):
            raise ValueError(f"option course_length must be finite and >= {2 * START_PAD}, got {course_length!r}")
        steps_ok = isinstance(max_episode_steps, (int, np.integer)) and not isinstance(max_episode_steps, bool)
        if not steps_ok or max_episode_steps < 1:
            raise ValueError(f"option max_episode_steps must be a positive int, got {max_episode_steps!r}")
        self.course_length = float(course_length)
        self.max_episode_steps = int(max_episode_steps)
        self.observation_space = observation_space()
        self.action_space = action_space()

    def initial(self) -> EnvParams:
        """The flat course: no roughness, no pits, no stumps (no stairs)."""
        if self.level_space == "dcd":
            return EnvParams.create(FAMILY, dcd.level())
        return EnvParams.create(FAMILY, {"roughness": 0.0, "pit_gap": [], "stump_height": []})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """POET's reproduce op: all three groups move on every call. POET's paper defines no
        mutation of dcd's 8-D levels: one is refused, or with `poet_mutation_8d` moved by this
        project's op (`dcd_levels.poet_mutate`)."""
        self.validate(params)
        if dcd.is_dcd_level(params.values):
            return EnvParams.create(
                FAMILY, dcd.poet_mutate_or_refuse(FAMILY, params.values, rng, self.poet_mutation_8d)
            )
        v = params.values
        roughness = round(float(v["roughness"]) + rng.uniform(-ROUGH_STEP, ROUGH_STEP), 1)
        roughness = min(max(roughness, 0.0), ROUGH_MAX) + 0.0  # + 0.0 turns -0.0 into 0.0
        pit_gap = _mutate_range(v["pit_gap"], rng, PIT_STEP, PIT_DEFAULT, PIT_MAX)
        stump_height = _mutate_range(v["stump_height"], rng, STUMP_STEP, STUMP_DEFAULT, STUMP_MAX)
        return EnvParams.create(FAMILY, {"roughness": roughness, "pit_gap": pit_gap, "stump_height": stump_height})

    def edit(self, params: EnvParams, rng: np.random.Generator, edits: int = 1) -> EnvParams:
        """ACCEL's edit (dcd's BipedalWalker `mutate_level` in its POET mode): `edit_vector`
        on the course's [roughness, pit_lo, pit_hi, stump_lo, stump_hi]; of a dcd level, dcd's
        own `mutate_level` (`dcd_levels.edit`)."""
        self.validate(params)
        if dcd.is_dcd_level(params.values):
            return EnvParams.create(FAMILY, dcd.edit(params.values, rng, edits))
        return from_edit_vector(edit_vector(self.features(params), rng, edits))

    def sample(self, rng: np.random.Generator) -> EnvParams:
        """A random course, as dcd's BipedalWalker `reset_random` in its POET mode draws one:
        roughness, both pit-gap ends and both stump-height ends uniform over their ranges
        (ends sorted); a group whose upper end falls below its smallest enabled value (pits
        0.8, stumps this family's 0.4; dcd's 0.2) is off. With `level_space: dcd`, dcd's own
        `reset_random` over its 8 numbers (`dcd_levels.sample`)."""
        if self.level_space == "dcd":
            return EnvParams.create(FAMILY, dcd.sample(rng))
        roughness = float(rng.uniform(0.0, ROUGH_MAX))
        pit = sorted(float(x) for x in rng.uniform(0.0, PIT_MAX, size=2))
        stump = sorted(float(x) for x in rng.uniform(0.0, STUMP_MAX, size=2))
        return EnvParams.create(
            FAMILY,
            {
                "roughness": roughness,
                "pit_gap": pit if pit[1] >= PIT_DEFAULT[1] else [],
                "stump_height": stump if stump[1] >= STUMP_DEFAULT[1] else [],
            },
        )

    def sample_easy(self, rng: np.random.Generator) -> EnvParams:
        """A random easy course, as dcd's BipedalWalker "Easy" levels (where ACCEL starts):
        roughness uniform in [0, 0.6], pits [0, 0.8], stumps [0, 0.4] (dcd's easy stump range
        is [0, 0.4] too; its easy ranges fix the pit and stump ends). With `level_space: dcd`,
        dcd's easy ranges over its 8 numbers."""
        if self.level_space == "dcd":
            return EnvParams.create(FAMILY, dcd.sample_easy(rng))
        return EnvParams.create(
            FAMILY,
            {
                "roughness": float(rng.uniform(0.0, EASY_ROUGHNESS)),
                "pit_gap": list(PIT_DEFAULT),
                "stump_height": list(STUMP_DEFAULT),
            },
        )

    def interpolate(self, start: EnvParams, target: EnvParams, t: float) -> EnvParams:
        """The course a fraction `t` of the way from `start` to `target` (a direct path): every
        number moves linearly (an obstacle group that is off counts as [0, 0]), rounded to
        0.01; a group whose upper end is still below its smallest enabled value is off.
        t = 0 gives `start`, t = 1 gives `target`. Between two dcd levels: each of their 8
        numbers on the line."""
        self.validate(start)
        self.validate(target)
        if dcd.is_dcd_level(start.values) and dcd.is_dcd_level(target.values):
            return EnvParams.create(FAMILY, dcd.interpolate(start.values, target.values, t))
        if t <= 0.0 or t >= 1.0:
            return EnvParams.create(FAMILY, (start if t <= 0.0 else target).values)
        a, b = start.values, target.values

        def lerp(x: float, y: float) -> float:
            return round((1.0 - t) * float(x) + t * float(y), 2) + 0.0

        groups = {}
        for name, min_hi in (("pit_gap", PIT_DEFAULT[1]), ("stump_height", STUMP_DEFAULT[1])):
            lo, hi = (lerp(x, y) for x, y in zip(a[name] or [0.0, 0.0], b[name] or [0.0, 0.0]))
            groups[name] = [lo, hi] if hi >= min_hi else []
        return EnvParams.create(FAMILY, {"roughness": lerp(a["roughness"], b["roughness"]), **groups})

    def test_levels(self) -> dict[str, EnvParams]:
        """Hand-made held-out courses, by name, each harder in one way, then in all: the fixed
        set every curriculum is measured on (`evaluation.test_every`), whatever its level
        space, so that runs of every curriculum compare; dcd's test suite is a named set
        (`level_sets`, `poet score --levels dcd`)."""
        return {name: EnvParams.create(FAMILY, values) for name, values in TEST_LEVELS.items()}

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the bad field."""
        validate_params(params)

    def difficulty(self, params: EnvParams) -> int:
        """The POET paper's class of the course, 0 (easy) to 3 (extremely challenging): `difficulty`."""
        self.validate(params)
        return difficulty(_poet_values(params.values))

    def realised_difficulty(self, params: EnvParams, seed: int) -> int:
        """The class of the course these params build at this seed (`course_difficulty`)."""
        self.validate(params)
        return course_difficulty(self.course(params, seed), _poet_values(params.values)["roughness"])

    def features(self, params: EnvParams) -> np.ndarray:
        """[roughness, pit_lo, pit_hi, stump_lo, stump_hi]; a disabled group reads 0, 0. A dcd
        level's: its level vector (`dcd_levels.vector`)."""
        if dcd.is_dcd_level(params.values):
            return np.array(dcd.vector(params.values), dtype=np.float64)
        v = params.values
        groups = [*(v["pit_gap"] or [0.0, 0.0]), *(v["stump_height"] or [0.0, 0.0])]
        return np.array([v["roughness"], *groups], dtype=np.float64)

    def flat(self, params: EnvParams) -> dict[str, float]:
        """One scalar per column; a disabled group reads 0.0 with its *_enabled flag 0.0 (a dcd
        level's: `dcd_levels.flat`)."""
        if dcd.is_dcd_level(params.values):
            return dcd.flat(params.values)
        v = params.values
        out = {"roughness": float(v["roughness"])}
        for name in ("pit_gap", "stump_height"):
            lo, hi = v[name] or [0.0, 0.0]
            out[f"{name}_lo"], out[f"{name}_hi"] = float(lo), float(hi)
            out[f"{name}_enabled"] = 1.0 if v[name] else 0.0
        return out

    def curriculum_defaults(self, curriculum: str) -> dict:
        """dcd's curricula on dcd's 8-D levels in this family's units, the others on POET's
        (`dcd_levels.curriculum_defaults`)."""
        return dcd.curriculum_defaults(curriculum)

    def level_sets(self) -> dict[str, dict[str, list[EnvParams]]]:
        """dcd's named test levels as this family's analogues (`dcd_levels.level_sets`, without
        gym's hardcore course): set -> level -> the params of each episode, episode k pinned
        to course seed k."""
        return dcd.family_level_sets(FAMILY, hardcore=False)

    def course(self, params: EnvParams, seed: int) -> Course:
        """The course of (params, seed) at this family's course_length."""
        return generate_course(params, seed, self.course_length)

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> TerrainEnv:
        """A gymnasium env on these params (truncates at max_episode_steps)."""
        return TerrainEnv(params, self.course_length, self.max_episode_steps, render_mode)

    def row_kernel(self) -> RowKernel:
        """The compiled fast path the evaluators run (`envs.kernel`)."""
        return terrain_kernel(self.course)

    def make_batch(self, params: Sequence[EnvParams], seeds: Sequence[int], max_steps: int) -> TerrainBatch:
        """One row per (params, seed) episode, stepped together (tests and analysis; the
        evaluators run `row_kernel`)."""
        if len(params) != len(seeds):
            raise ValueError(f"got {len(params)} params but {len(seeds)} seeds")
        if int(max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
        return TerrainBatch([self.course(p, s) for p, s in zip(params, seeds)], int(max_steps))

    def course_profile(self, params: EnvParams, seed: int = 0) -> CourseProfile:
        """The whole course of (params, seed), in metres, for drawing (`envs.profile`)."""
        text = dcd.describe(params.values) if dcd.is_dcd_level(params.values) else describe(params.values)
        return course_profile(self.course(params, seed), text, int(seed))
