"""The compiled course layout gives the courses of the numpy layout it replaced, bit for bit.

`frozen_course` below is the numpy course generator of `envs/terrain.py` as it was before
the layout was compiled (kept here, frozen, as the reference; the package no longer has it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs import terrain
from envs.base import EnvParams
from envs.terrain import TerrainFamily, generate_course

# The frozen generator's constants, as they were.
RES, NO_GROUND, FALL_DEPTH = 0.1, -1000.0, 0.5
RUNOUT, START_PAD, WALK_STEP, ROUGH_GAIN, REVERSION = 12.0, 5.0, 0.5, 0.04, 0.3
GRASS_MIN, GRASS_MAX, PIT_SCALE, STUMP_SCALE, STUMP_WIDTH = 3.0, 6.0, 0.8125, 0.292, 1.0


def frozen_course(roughness, pit_gap, stump_height, seed, course_length):
    """(base, height, pit, rim, stump, slope, table, obstacles) as the numpy generator built them."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n = int(round((course_length + RUNOUT) / RES)) + 1
    walk = int(math.ceil((n - 1) * RES / WALK_STEP)) + 1
    noise = rng.uniform(-1.0, 1.0, size=walk)
    is_pit, x0, size = _place_obstacles(rng, pit_gap, stump_height, course_length)
    first = np.rint(x0 / RES).astype(np.int64)
    last = first + np.where(is_pit, np.rint(size / RES).astype(np.int64), int(round(STUMP_WIDTH / RES)))
    keep = last > first
    is_pit, first, last, size = is_pit[keep], first[keep], last[keep], size[keep]
    marks = np.zeros(n + 1, dtype=np.int64)
    marks[first] = np.arange(1, first.size + 1)
    marks[last] = -np.arange(1, first.size + 1)
    inside = np.cumsum(marks)[:n]
    open_cells = np.concatenate([[0], np.cumsum(inside == 0)[:-1]])
    finish = min(int(round(course_length / RES)), inside.size - 1)
    distance = np.minimum(open_cells, open_cells[finish]) * RES
    base, walk_slope = _ground_walk(noise, roughness, distance)
    if first.size == 0:
        height, pit, rim, stump = base.copy(), np.zeros(n, bool), np.zeros(n), np.zeros(n, bool)
    else:
        which = np.maximum(inside - 1, 0)
        pit = (inside > 0) & is_pit[which]
        stump = (inside > 0) & ~pit
        level = base[first][which]
        rim = np.where(pit, level, 0.0)
        height = np.where(pit, NO_GROUND, np.where(stump, level + size[which], base))
    slope = np.where(pit | stump, 0.0, walk_slope)
    table = np.empty((n, 4))
    table[:, 0], table[:, 1], table[:, 2] = height, slope, pit
    table[:, 3] = np.where(pit, rim - FALL_DEPTH, -np.inf)
    obstacles = tuple(
        ("pit" if p else "stump", float(i * RES), float(z))
        for p, i, z in zip(is_pit.tolist(), first.tolist(), size.tolist())
    )
    return base, height, pit, rim, stump, slope, table, obstacles


def _ground_walk(noise, roughness, distance):
    n_cells = distance.size
    if roughness == 0.0:
        return np.zeros(n_cells), np.zeros(n_cells)
    amplitude = roughness * ROUGH_GAIN
    pad, last = int(START_PAD / WALK_STEP), int(math.ceil(distance[-1] / WALK_STEP))
    ys = [0.0] * (pad + 1)
    y = v = 0.0
    for kick in noise[pad + 1 : last + 1].tolist():
        v = 0.8 * v + REVERSION * (1.0 if y < 0.0 else -1.0 if y > 0.0 else 0.0) + kick
        y += amplitude * v
        ys.append(y)
    ys_arr = np.asarray(ys)
    height = np.interp(distance, np.arange(ys_arr.size) * WALK_STEP, ys_arr)
    segment_slope = np.append(np.diff(ys_arr) / WALK_STEP, 0.0)
    slope = segment_slope[np.minimum((distance / WALK_STEP + 1e-9).astype(np.int64), ys_arr.size - 1)]
    still = np.append(distance[1:] == distance[:-1], True)
    return height, np.where(still, 0.0, slope)


def _place_obstacles(rng, pit_gap, stump_height, course_length):
    kinds = np.array(
        [(1.0, *pit_gap, PIT_SCALE)] * bool(pit_gap) + [(0.0, *stump_height, STUMP_SCALE)] * bool(stump_height)
    ).reshape(-1, 4)
    if not len(kinds):
        return np.zeros(0, bool), np.zeros(0), np.zeros(0)
    k = int(course_length // GRASS_MIN) + 1
    grass = rng.uniform(GRASS_MIN, GRASS_MAX, size=k)
    pick = kinds[rng.integers(len(kinds), size=k)]
    u = rng.uniform(0.0, 1.0, size=k)
    is_pit, lo, hi, scale = pick[:, 0] > 0.5, pick[:, 1], pick[:, 2], pick[:, 3]
    size = (lo + (hi - lo) * u) * scale
    extent = np.where(is_pit, size, STUMP_WIDTH)
    end = START_PAD + np.cumsum(grass + extent)
    fits = int(np.searchsorted(end, course_length, side="right"))
    return is_pit[:fits], (end - extent)[:fits], size[:fits]


def random_params(rng: np.random.Generator) -> EnvParams:
    """Params over the whole domain, with each obstacle group on or off, and some exact edges."""
    roughness = float(rng.choice([0.0, rng.uniform(0, 10), round(rng.uniform(0, 10), 1), 10.0]))
    values = {"roughness": roughness}
    for name, top, min_hi in (
        ("pit_gap", terrain.PIT_MAX, terrain.PIT_DEFAULT[1]),
        ("stump_height", terrain.STUMP_MAX, terrain.STUMP_DEFAULT[1]),
    ):
        lo, hi = sorted(float(x) for x in rng.uniform(0, top, size=2))
        hi = max(hi, min_hi)
        values[name] = [] if rng.random() < 0.3 else [round(lo, 1), round(hi, 1)] if rng.random() < 0.5 else [lo, hi]
    return EnvParams.create("terrain", values)


FIELDS = ("base", "height", "pit", "rim", "stump", "slope", "table")


def assert_same_course(params: EnvParams, seed: int, course_length: float) -> None:
    v = params.values
    want = frozen_course(float(v["roughness"]), tuple(v["pit_gap"]), tuple(v["stump_height"]), seed, course_length)
    got = generate_course(params, seed, course_length)
    for name, expected in zip(FIELDS, want):
        actual = getattr(got, name)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (name, params, seed)
        # bytes: bit for bit, NaN, -inf and the sign of zero included
        assert actual.tobytes() == expected.tobytes(), (name, params, seed)
    assert got.obstacles == want[-1], (params, seed)


@pytest.mark.parametrize("course_length", [80.0, 10.0, 33.3, 200.0])
def test_compiled_courses_equal_the_numpy_generator_bit_for_bit(course_length: float) -> None:
    rng = np.random.default_rng(int(course_length * 10))
    for i in range(300 if course_length == 80.0 else 60):
        assert_same_course(random_params(rng), int(rng.integers(0, 2**63)) if i % 3 else i, course_length)


def test_compiled_courses_equal_the_numpy_generator_on_the_families_levels() -> None:
    fam = TerrainFamily()
    edges = [
        {"roughness": 10.0, "pit_gap": [8.0, 8.0], "stump_height": [5.0, 5.0]},
        {"roughness": 0.1, "pit_gap": [0.0, 0.8], "stump_height": []},
        {"roughness": 0.0, "pit_gap": [], "stump_height": [0.0, 0.4]},
    ]
    levels = [fam.initial(), *fam.test_levels().values(), *(EnvParams.create("terrain", v) for v in edges)]
    rng = np.random.default_rng(3)
    for _ in range(40):
        levels.append(fam.mutate(levels[-1], rng))
    for params in levels:
        for seed in range(5):
            assert_same_course(params, seed, fam.course_length)
