"""The terrain course's layout, compiled: obstacles, the ground walk and the cell table.

`build_course` draws a course's random numbers from numpy's PCG64 stream of the course seed
(in a fixed order; computed by `envs.seed_stream`) and lays the course out in one compiled
call (`_layout`):
where the obstacles go, the smoothed random walk of the ground (paused over obstacles, as
POET's generator holds the height while it places one), the pits cut and the stumps raised,
and the (cell, 4) table the physics reads. Every number is computed as the numpy code it
replaced computed it (tests/test_terrain_course.py holds that code, frozen, and checks the
two agree bit for bit over many params and seeds).

The geometry's constants live here; `envs.terrain` re-exports them.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from envs.seed_stream import coin_flips, entropy_words, generate_state, pcg64, random_doubles
from envs.terrain_core import FALL_DEPTH, KILL, NO_GROUND, PIT, RES, SLOPE, H

RUNOUT = 12.0  # flat grass after the finish so the look-ahead never leaves the arrays
START_PAD = 5.0
WALK_STEP = 0.5  # the roughness random walk is sampled this often, then interpolated
ROUGH_GAIN = 0.04  # metres per unit of roughness and of a kick
REVERSION = 0.3  # POET's pull to the start height, 0.01, in units of its kick, 1 / 30
GRASS_MIN, GRASS_MAX = 3.0, 6.0
# A criterion's domain maximum is the runner's own limit on level ground, measured by the
# planner (envs/terrain_planner.py, experiments/feasibility.py): the narrowest pit it never
# crosses, 6.5 m = 8 units, and the lowest stump it never gets over, 1.46 m = 5 units.
PIT_SCALE = 0.8125  # metres per pit_gap unit
STUMP_SCALE = 0.292  # metres per stump_height unit
STUMP_WIDTH = 1.0
_STUMP_CELLS = int(round(STUMP_WIDTH / RES))
# dcd's stairs on this runner: a step's height in the stumps' units, its width dcd's 4 steps
# in the pits' units (dcd: 4 TERRAIN_STEPs per stair step; here 4 x 0.8125 m)
STAIR_SCALE = STUMP_SCALE
STAIR_WIDTH = 4 * PIT_SCALE
_STAIR_CELLS = int(round(STAIR_WIDTH / RES))
STUMP_KIND, PIT_KIND, STAIRS_KIND = 0, 1, 2  # the kind codes of a course's obstacles


def n_cells_for(course_length: float) -> int:
    """Grid size covering the course plus the run-out."""
    return int(round((course_length + RUNOUT) / RES)) + 1


def walk_samples(n_cells: int) -> int:
    """How many walk samples (one every WALK_STEP m) a course of `n_cells` draws noise for."""
    return int(math.ceil((n_cells - 1) * RES / WALK_STEP)) + 1


def obstacle_kinds(
    pit_gap: tuple[float, ...], stump_height: tuple[float, ...], stair_height: tuple[float, ...] = ()
) -> np.ndarray:
    """One row per enabled kind, pits first, then stumps, then stairs: (kind code, lo, hi,
    metres per unit)."""
    rows = [(float(PIT_KIND), *pit_gap, PIT_SCALE)] * bool(pit_gap)
    rows += [(float(STUMP_KIND), *stump_height, STUMP_SCALE)] * bool(stump_height)
    rows += [(float(STAIRS_KIND), *stair_height, STAIR_SCALE)] * bool(stair_height)
    return np.array(rows, dtype=np.float64).reshape(-1, 4)


CourseArrays = tuple[np.ndarray, ...]


def build_course(
    roughness: float,
    pit_gap: tuple[float, ...],
    stump_height: tuple[float, ...],
    seed: int,
    course_length: float,
    stair_height: tuple[float, ...] = (),
    stair_steps: int = 0,
) -> CourseArrays:
    """The arrays of one course: (base, height, pit, rim, stump, stair, slope, table, obstacle
    kind code, obstacle first cell, obstacle size in metres, obstacle steps).

    The draws, in this order from numpy's PCG64 stream seeded with `seed`: a uniform kick in
    [-1, 1) per walk sample (drawn always, so roughness never shifts the obstacles); then,
    when an obstacle kind is enabled, per obstacle slot a grass length in [GRASS_MIN,
    GRASS_MAX), a kind and a uniform position within the kind's range; then, with stairs
    enabled, three numbers in [0, 1) per slot: the kind among three, the stairs' direction
    and their number of steps, from 0 to `stair_steps` - 1 as dcd draws `randint(stair_steps)`.
    A course without stairs draws nothing more, so it is the course these draws gave before
    stairs existed.
    """
    n = n_cells_for(course_length)
    kinds = obstacle_kinds(pit_gap, stump_height, stair_height)
    slots = int(course_length // GRASS_MIN) + 1 if len(kinds) else 0  # more than can fit
    finish = min(int(round(course_length / RES)), n - 1)
    walk = walk_samples(n)
    return _layout(
        entropy_words(seed), kinds, float(roughness), n, walk, slots, float(course_length), finish, int(stair_steps)
    )


@numba.njit(cache=True)
def _layout(
    entropy: np.ndarray,
    kinds: np.ndarray,
    roughness: float,
    n: int,
    walk_n: int,
    slots: int,
    course_length: float,
    finish: int,
    stair_steps: int,
) -> CourseArrays:
    # the draws, as `np.random.Generator(np.random.PCG64(seed))` gives them: the kicks and the
    # grass lengths follow each other in the stream (uniform(a, b) is a + (b - a) * random()),
    # then the kinds (integers(1) draws nothing) and the positions; then, only with stairs,
    # three doubles per slot (`build_course`)
    state = pcg64(generate_state(entropy, 8))
    doubles = random_doubles(state, walk_n + slots)
    n_kinds = kinds.shape[0]
    pick = coin_flips(state, slots) if n_kinds == 2 else np.zeros(slots, dtype=np.int64)
    position = random_doubles(state, slots)
    stairs_on = n_kinds > 0 and kinds[n_kinds - 1, 0] == STAIRS_KIND
    extra = random_doubles(state, 3 * slots) if stairs_on else np.zeros(3 * slots)
    if n_kinds == 3:
        for i in range(slots):
            pick[i] = min(np.int64(extra[3 * i] * 3.0), 2)

    # ---- obstacles: grass stretches alternating with obstacles, up to the finish
    code = np.zeros(slots, dtype=np.int64)
    size = np.zeros(slots)
    steps = np.zeros(slots, dtype=np.int64)
    rise = np.zeros(slots)  # a staircase's direction: +1 up, -1 down
    x0 = np.zeros(slots)
    fits, total = 0, 0.0
    for i in range(slots):
        kind = kinds[pick[i]]
        lo, hi = kind[1], kind[2]
        code[i] = np.int64(kind[0])
        size[i] = (lo + (hi - lo) * (0.0 + 1.0 * position[i])) * kind[3]
        if code[i] == PIT_KIND:
            extent = size[i]
        elif code[i] == STUMP_KIND:
            extent = STUMP_WIDTH
        else:
            rise[i] = 1.0 if extra[3 * i + 1] > 0.5 else -1.0
            steps[i] = min(np.int64(extra[3 * i + 2] * stair_steps), max(stair_steps - 1, 0))
            extent = steps[i] * STAIR_WIDTH
        grass = GRASS_MIN + (GRASS_MAX - GRASS_MIN) * doubles[walk_n + i]
        total = total + (grass + extent)
        end = START_PAD + total
        if end > course_length:
            break  # the ends increase: no later obstacle fits either
        x0[i] = end - extent
        fits = i + 1

    # ---- their cells; a pit narrower than half a cell is no pit, stairs of no step none
    first = np.zeros(fits, dtype=np.int64)
    last = np.zeros(fits, dtype=np.int64)
    kept = 0
    for i in range(fits):
        a = np.int64(np.rint(x0[i] / RES))
        if code[i] == PIT_KIND:
            b = a + np.int64(np.rint(size[i] / RES))
        elif code[i] == STUMP_KIND:
            b = a + _STUMP_CELLS
        else:
            b = a + steps[i] * _STAIR_CELLS
        if b > a:
            code[kept], size[kept], first[kept], last[kept] = code[i], size[i], a, b
            steps[kept], rise[kept] = steps[i], rise[i]
            kept += 1
    code, size, first, last, steps, rise = (
        code[:kept],
        size[:kept],
        first[:kept],
        last[:kept],
        steps[:kept],
        rise[:kept],
    )
    inside = np.zeros(n, dtype=np.int64)  # 1 + the obstacle covering a cell, 0 on open ground
    for k in range(kept):
        inside[first[k] : min(last[k], n)] = k + 1

    # ---- metres of open ground from the start to each cell, up to the finish line: the walk
    # runs on this distance, so it pauses over obstacles and stands still after the finish
    open_cells = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        open_cells[i] = open_cells[i - 1] + (inside[i - 1] == 0)
    at_finish = open_cells[finish]
    distance = np.empty(n)
    for i in range(n):
        distance[i] = min(open_cells[i], at_finish) * RES

    # ---- POET's smoothed random walk of the ground, one sample every WALK_STEP m of open
    # ground, linear in between. As in the reference generator (`bipedal_walker_custom.py`:
    # velocity = 0.8 velocity + 0.01 sign(-y) + U(-1, 1) / 30, then y += roughness * velocity),
    # the pull back to the start height is a fixed share (REVERSION) of a kick and both scale
    # with roughness: a course has the same shape at every roughness, its heights in proportion.
    base = np.zeros(n)
    walk_slope = np.zeros(n)
    if roughness != 0.0:  # else the walk stays at exactly 0
        amplitude = roughness * ROUGH_GAIN
        pad = int(START_PAD / WALK_STEP)
        stop = min(int(math.ceil(distance[n - 1] / WALK_STEP)) + 1, walk_n)
        count = max(stop, pad + 1)
        ys = np.zeros(count)  # on the start pad y = v = 0 stays exactly 0
        y = v = 0.0
        for j in range(pad + 1, stop):
            kick = -1.0 + 2.0 * doubles[j]
            pull = 1.0 if y < 0.0 else -1.0 if y > 0.0 else 0.0
            v = 0.8 * v + REVERSION * pull + kick
            y += amplitude * v
            ys[j] = y
        segment = np.zeros(count)
        for j in range(count - 1):
            segment[j] = (ys[j + 1] - ys[j]) / WALK_STEP
        j = 0
        for i in range(n):
            x = distance[i]
            # as np.interp over the samples at j * WALK_STEP: the last sample at or before x
            while j + 1 < count and (j + 1) * WALK_STEP <= x:
                j += 1
            at = j * WALK_STEP
            if x > (count - 1) * WALK_STEP or j == count - 1 or at == x:
                base[i] = ys[j]
            else:
                slope = (ys[j + 1] - ys[j]) / ((j + 1) * WALK_STEP - at)
                base[i] = slope * (x - at) + ys[j]
            walk_slope[i] = segment[min(np.int64(x / WALK_STEP + 1e-9), count - 1)]
        for i in range(n - 1):
            if distance[i + 1] == distance[i]:  # over an obstacle or on the run-out
                walk_slope[i] = 0.0
        walk_slope[n - 1] = 0.0

    # ---- stairs move the ground after them: up by their steps but the first, down by all
    # (dcd's stairs: the first step up is flush with the ground, the first step down below it)
    height = base.copy()
    if stairs_on:
        for k in range(kept):
            if code[k] == STAIRS_KIND:
                end = _stair_offset(steps[k] - 1, size[k], rise[k])
                for i in range(last[k], n):
                    height[i] += end
    ground = height.copy()  # the walk with every earlier staircase's shift

    # ---- cut the pits, raise the stumps, build the steps; the ground is level across each
    pit = np.zeros(n, dtype=np.bool_)
    rim = np.zeros(n)
    stump = np.zeros(n, dtype=np.bool_)
    stair = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        k = inside[i] - 1
        if k < 0:
            continue
        level = ground[first[k]]
        if code[k] == PIT_KIND:
            pit[i], rim[i], height[i] = True, level, NO_GROUND
        elif code[k] == STUMP_KIND:
            stump[i], height[i] = True, level + size[k]
        else:
            j = (i - first[k]) // _STAIR_CELLS
            stair[i], height[i] = True, level + _stair_offset(j, size[k], rise[k])
    slope = np.where(pit | stump | stair, 0.0, walk_slope)
    table = np.empty((n, 4))
    for i in range(n):
        table[i, H], table[i, SLOPE], table[i, PIT] = height[i], slope[i], 1.0 if pit[i] else 0.0
        table[i, KILL] = rim[i] - FALL_DEPTH if pit[i] else -np.inf
    return ground, height, pit, rim, stump, stair, slope, table, code, first, size, steps


@numba.njit(cache=True, inline="always")
def _stair_offset(j: int, height: float, rise: float) -> float:
    # step j's top against the ground before the stairs, as dcd's ground line runs over them
    return j * height * rise - (height if rise < 0.0 else 0.0)
