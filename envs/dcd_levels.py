"""dcd's 8-D BipedalWalker levels: the parameters the UED papers train on, and the course
built from them as facebookresearch/dcd builds it (`envs/bipedalwalker/walker_env.py` and
`adversarial.py`).

A level is dcd's *level vector* and a level seed. Its values here, in dcd's order:

* `roughness`: ground roughness, in [0, 10];
* `pit_gap`: two numbers in [0, 10], the ends of the pit range in either order (dcd keeps
  the vector's order, which its edits act on, and sorts a copy to build the course);
* `stump_height`: two numbers in [0, 5];
* `stair_height`: two numbers in [0, 5];
* `stair_steps`: a number in [1, 9], rounded to an integer to build the course.

What dcd builds from the vector (`config_of`):

* an obstacle kind is off when its range's upper end is under dcd's threshold: pits under
  0.8, stumps and stairs under 0.2;
* stumps are `randint(1, 2)` = 1 step wide and float `randint(0, 1)` = 0 steps: dcd fixes
  these two ranges, so every stump is 1 step wide and on the ground;
* stairs are `randint(4, 5)` = 4 steps wide per step, and have `randint(stair_steps)` steps:
  from 0 to `stair_steps` - 1 (dcd's draw; a level with `stair_steps` 1 has no stairs on its
  course), each `uniform(lo, hi)` high, up or down at random;
* after each grass stretch an obstacle kind is drawn among the enabled ones, numbered stump,
  stairs, pit, as dcd numbers them.

The random stream is dcd's: a numpy `RandomState` seeded from the level seed as gym 0.15's
`seeding.np_random` seeds it (`legacy_gym_rng`), which draws the course, the clouds and the
start push in that order. Where Box2D refuses a stump's polygon, dcd reseeds with the level
seed + 1 and draws again; this module does the same. Everything else (walker, observation,
reward, falling) is gymnasium's `BipedalWalker`, as for POET's 5-D levels (`envs.bipedal`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from envs.base import EnvParamError, EnvParams

KIND = "dcd"  # the level kind: what `is_dcd_level` recognises
# dcd's PARAM_RANGES_FULL, by value name: [low, high] of each number of the vector
RANGES: Mapping[str, tuple[float, float]] = {
    "roughness": (0.0, 10.0),
    "pit_gap": (0.0, 10.0),
    "stump_height": (0.0, 5.0),
    "stair_height": (0.0, 5.0),
    "stair_steps": (1.0, 9.0),
}
RANGE_PAIRS = ("pit_gap", "stump_height", "stair_height")
# dcd's get_config: a kind whose range ends under this is off
OFF_BELOW = {"pit_gap": 0.8, "stump_height": 0.2, "stair_height": 0.2}
STUMP_WIDTH = (1, 2)  # dcd's STUMP_WIDTH_RANGE, a randint range: always 1
STUMP_FLOAT = (0, 1)  # dcd's STUMP_FLOAT_RANGE: always 0
STAIR_WIDTH = (4, 5)  # dcd's STAIR_WIDTH_RANGE: always 4
STAIR_HEIGHT_EPS = 1e-2  # walker_env.py: stairs lower than this are not built

# Where a family's new levels come from: POET's 5-D space or this module's 8-D one.
LEVEL_SPACES = ("poet", "dcd")
DCD_CURRICULA = ("accel", "robust_plr", "dr")  # trained on dcd's level space by dcd's own configs


# dcd's PARAM_RANGES_EASY, in vector order: ACCEL's start from easy levels (pits, stumps and
# stairs at ends under their thresholds, so off: roughness alone varies)
EASY_RANGES: tuple[tuple[float, float], ...] = (
    (0.0, 0.6),
    (0.0, 0.0),
    (0.8, 0.8),
    (0.0, 0.0),
    (0.4, 0.4),
    (0.0, 0.0),
    (0.4, 0.4),
    (1.0, 1.0),
)
# dcd's PARAM_MUTATIONS, in vector order: an edit's size, fixed or (for roughness) drawn
# uniform from the range
MUTATIONS: tuple[tuple[float, ...], ...] = ((0.0, 0.6), (0.4,), (0.4,), (0.2,), (0.2,), (0.2,), (0.2,), (1.0,))


# POET's reproduce steps carried to the 8 numbers (this project's, not the paper's: an
# option, `poet_mutation_8d`): roughness and each range's ends as POET moves them, stairs'
# heights as stumps', and the step count by one.
POET_ROUGH_STEP = 0.6
POET_RANGE_STEPS = {"pit_gap": 0.4, "stump_height": 0.2, "stair_height": 0.2}
POET_STAIR_STEPS_STEP = 1.0


def poet_mutate(values: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """POET's reproduce op over dcd's 8 numbers, every group moving on each call as POET's
    does: roughness by U(-0.6, 0.6); each range's (sorted) ends by one of the 8 moves of
    +-step or 0 that keep 0 <= lo <= hi <= its bound, drawn uniform (POET's `_mutate_range`
    without its off state: a dcd range is off by dcd's thresholds); stair steps by +-1 within
    [1, 9]; everything clipped to dcd's full ranges."""
    lo_r, hi_r = RANGES["roughness"]
    out: dict[str, Any] = {
        "roughness": float(
            np.clip(float(values["roughness"]) + rng.uniform(-POET_ROUGH_STEP, POET_ROUGH_STEP), lo_r, hi_r)
        )
    }
    for name, step in POET_RANGE_STEPS.items():
        lo, hi = sorted(float(x) for x in values[name])
        bound = RANGES[name][1]
        moves = [
            [lo + d_lo, hi + d_hi]
            for d_lo in (step, 0.0, -step)
            for d_hi in (step, 0.0, -step)
            if (d_lo, d_hi) != (0.0, 0.0) and 0.0 <= lo + d_lo <= hi + d_hi <= bound
        ]
        out[name] = moves[int(rng.integers(len(moves)))] if moves else [lo, hi]
    lo_s, hi_s = RANGES["stair_steps"]
    steps = float(values["stair_steps"])
    options = [x for x in (steps + POET_STAIR_STEPS_STEP, steps - POET_STAIR_STEPS_STEP) if lo_s <= x <= hi_s]
    out["stair_steps"] = options[int(rng.integers(len(options)))]
    return out


def full_ranges() -> tuple[tuple[float, float], ...]:
    """dcd's PARAM_RANGES_FULL in vector order (the bounds edits clip to)."""
    return (RANGES["roughness"], *(RANGES[k] for k in RANGE_PAIRS for _ in range(2)), RANGES["stair_steps"])


def sample_vector(rng: np.random.Generator, ranges: Sequence[tuple[float, float]]) -> list[float]:
    """A random level vector as dcd's `reset_random` draws one: 8 uniform numbers in [0, 1)
    at once, each scaled to its range."""
    unit = rng.random(len(ranges))
    return [float(u * (hi - lo) + lo) for u, (lo, hi) in zip(unit, ranges)]


def edit_vector(vec: Sequence[float], rng: np.random.Generator, edits: int) -> list[float]:
    """`edits` edits of a level vector as dcd's `mutate_level` draws them: every entry to edit
    (1-8, uniform), then every direction (-1, 0 or +1), then for each roughness edit its size;
    each moves its entry by its size times the direction, clipped to dcd's full range."""
    out = [float(x) for x in vec]
    bounds = full_ranges()
    entries = rng.integers(1, len(MUTATIONS) + 1, size=edits)
    directions = rng.integers(0, 3, size=edits) - 1
    for entry, direction in zip(entries, directions):
        step = MUTATIONS[entry - 1]
        size = step[0] if len(step) == 1 else rng.uniform(*step)
        lo, hi = bounds[entry - 1]
        out[entry - 1] = float(np.clip(out[entry - 1] + direction * size, lo, hi))
    return out


# gym's BipedalWalkerHardcore-v3, one of dcd's test envs: gym's own hardcore course (stumps,
# stairs and pits of its fixed sizes), drawn from gym 0.15's stream of the course seed
HARDCORE: Mapping[str, Any] = {"gym_hardcore": True}


def is_gym_hardcore(values: Mapping[str, Any]) -> bool:
    """Whether a level is gym's hardcore course (`HARDCORE`)."""
    return dict(values) == dict(HARDCORE)


def is_dcd_level(values: Mapping[str, Any]) -> bool:
    """Whether a level's values are dcd's 8-D vector (they name stairs) rather than POET's 5-D."""
    return "stair_height" in values


def vector(values: Mapping[str, Any]) -> list[float]:
    """dcd's level vector: roughness, pit gap x2, stump height x2, stair height x2, stair steps."""
    return [
        float(values["roughness"]),
        *(float(x) for k in RANGE_PAIRS for x in values[k]),
        float(values["stair_steps"]),
    ]


def from_vector(vec: Sequence[float]) -> dict[str, Any]:
    """The values of dcd's level vector (the inverse of `vector`)."""
    v = [float(x) for x in vec]
    if len(v) != 8:
        raise ValueError(f"dcd's level vector has 8 numbers, got {len(v)}")
    return {"roughness": v[0], "pit_gap": v[1:3], "stump_height": v[3:5], "stair_height": v[5:7], "stair_steps": v[7]}


def problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for every value outside dcd's level space."""
    found = []
    want = set(RANGES)
    if set(values) != want:
        found.append(("values", f"dcd's levels have exactly {sorted(want)}, got {sorted(values)}"))
        return found
    for name, (lo, hi) in RANGES.items():
        value = values[name]
        items = value if name in RANGE_PAIRS else [value]
        if name in RANGE_PAIRS and (not isinstance(value, (list, tuple)) or len(value) != 2):
            found.append((name, f"must be two numbers in [{lo:g}, {hi:g}], got {value!r}"))
            continue
        for x in items:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not lo <= float(x) <= hi:
                found.append((name, f"must be in [{lo:g}, {hi:g}], got {x!r}"))
                break
    return found


def config_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """What dcd builds the course from (its `get_config`): each range sorted, or [] when the
    kind is off, and the fixed stump and stair ranges of an enabled kind."""
    config: dict[str, Any] = {"roughness": float(values["roughness"])}
    for name in RANGE_PAIRS:
        lo, hi = sorted(float(x) for x in values[name])
        config[name] = [lo, hi] if hi >= OFF_BELOW[name] else []
    config["stump_width"] = list(STUMP_WIDTH) if config["stump_height"] else []
    config["stump_float"] = list(STUMP_FLOAT) if config["stump_height"] else []
    config["stair_width"] = list(STAIR_WIDTH) if config["stair_height"] else []
    config["stair_steps"] = [int(round(float(values["stair_steps"])))] if config["stair_height"] else []
    return config


class LegacyGymStream(np.random.RandomState):
    """gym 0.15's stream (a RandomState), also answering the Generator names gymnasium's
    walker calls (`integers` for `randint`; `random` and `uniform` are the same), so that
    gymnasium's own code draws what gym 0.15's drew."""

    def integers(self, low: int, high: int | None = None, size: Any = None) -> Any:
        return self.randint(low, high, size)


def legacy_gym_rng(seed: int) -> LegacyGymStream:
    """A RandomState seeded as gym 0.15's `seeding.np_random(seed)` seeds it: the seed taken
    modulo 2**64, its decimal digits hashed with SHA-512, the first 8 bytes read as two
    little-endian 32-bit words (low first), and the words given to `RandomState.seed` (one word
    when the high one is 0)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"a dcd level seed is a non-negative integer, got {seed!r}")
    digest = hashlib.sha512(str(int(seed) % 2**64).encode("utf8")).digest()
    low, high = struct.unpack("<II", digest[:8])
    return LegacyGymStream([low, high] if high else [low])


def describe(values: Mapping[str, Any]) -> str:
    """One line for a dcd level: its built obstacles."""
    c = config_of(values)
    parts = [f"roughness {c['roughness']:.2f}"]
    for name, label in (("pit_gap", "pits"), ("stump_height", "stumps"), ("stair_height", "stairs")):
        if c[name]:
            parts.append(f"{label} {c[name][0]:.2f}-{c[name][1]:.2f}")
    if c["stair_height"]:
        parts.append(f"up to {max(0, c['stair_steps'][0] - 1)} stair steps")
    return ", ".join(parts)


# ================================================================= named level sets
def level(
    roughness: float = 0.0,
    pit_gap: tuple[float, float] = (0.0, 0.0),
    stump_height: tuple[float, float] = (0.0, 0.0),
    stair_height: tuple[float, float] = (0.0, 0.0),
    stair_steps: float = 1.0,
) -> dict[str, Any]:
    """A dcd level's values; a range left at (0, 0) is off."""
    return {
        "roughness": float(roughness),
        "pit_gap": [float(x) for x in pit_gap],
        "stump_height": [float(x) for x in stump_height],
        "stair_height": [float(x) for x in stair_height],
        "stair_steps": float(stair_steps),
    }


# dcd's test envs (envs/bipedalwalker/walker_test_envs.py), by the names its papers' tables
# use, as levels of its 8-D space: each builds the config its class passes to the walker.
# "BipedalWalker" is gym's BipedalWalker-v3, whose ground is dcd's at roughness 1 (the same
# course for the same seed: checked against gym 0.15.7); "Hardcore" is gym's
# BipedalWalkerHardcore-v3, outside the 8-D space (`HARDCORE`).
SUITE: Mapping[str, dict[str, Any]] = {
    "BipedalWalker": level(roughness=1.0),
    "Hardcore": dict(HARDCORE),
    "Med-Stairs": level(stair_height=(2.0, 2.0), stair_steps=5),
    "Med-PitGap": level(pit_gap=(5.0, 5.0)),
    "Med-StumpHeight": level(stump_height=(2.0, 2.0)),
    "Med-Roughness": level(roughness=5.0),
}
EXTENDED: Mapping[str, dict[str, Any]] = {
    "High-StumpHeight": level(stump_height=(5.0, 5.0)),
    "High-Stairs": level(stair_height=(5.0, 5.0), stair_steps=9),
    "Wide-PitGap": level(pit_gap=(10.0, 10.0)),
    "High-Roughness": level(roughness=9.0),
    "Insane": level(
        roughness=9.0, pit_gap=(10.0, 10.0), stump_height=(5.0, 5.0), stair_height=(5.0, 5.0), stair_steps=9
    ),
}
# POET's paper's rose levels as dcd's test envs define them: roughness, stump height's two
# ends, pit gap's upper and lower end (dcd's `roses` table, in its order)
ROSE_TABLE: Mapping[str, tuple[float, float, float, float, float]] = {
    "1a": (5.6, 2.4, 2.82, 6.4, 4.48),
    "1b": (5.44, 1.8, 2.82, 6.72, 4.48),
    "2a": (7.2, 1.98, 2.82, 7.2, 5.6),
    "2b": (5.76, 2.16, 2.76, 7.2, 1.6),
    "3a": (5.28, 1.98, 2.76, 7.2, 4.8),
    "3b": (4.8, 2.4, 2.76, 4.48, 4.8),
}
POET_ROSE: Mapping[str, dict[str, Any]] = {
    f"POET-Rose-{name}": level(roughness=r, stump_height=(s_lo, s_hi), pit_gap=(p_lo, p_hi))
    for name, (r, s_lo, s_hi, p_hi, p_lo) in ROSE_TABLE.items()
}
# dcd's eval.py scores each test env over 100 episodes; dcd seeds each from the wall clock,
# these from a fixed list: episode k of a level runs on course seed k
COURSE_SEEDS = tuple(range(100))
XCHAL_SEED = 2022  # the generator of XChal's levels here (dcd draws them from the global numpy stream)


def xchal_levels(count: int = len(COURSE_SEEDS), seed: int = XCHAL_SEED) -> list[dict[str, Any]]:
    """dcd's XChal test env as `count` fixed levels: each draws the tallest stump from
    uniform(2.4, 3), the widest pit from uniform(6, 8) and the roughness from uniform(4.5, 8),
    as dcd's `BipedalWalkerXChal.reset` does, here from numpy's `default_rng(seed)`."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        stump, gap, rough = rng.uniform(2.4, 3.0), rng.uniform(6.0, 8.0), rng.uniform(4.5, 8.0)
        out.append(level(roughness=rough, pit_gap=(0.0, gap), stump_height=(0.0, stump)))
    return out


def level_sets(hardcore: bool = True) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The named sets, each level as the values of its episodes, one per course seed of
    `COURSE_SEEDS` (XChal: a level of its own per episode): "dcd" (the test suite of dcd's
    papers' tables, `SUITE`; without gym's hardcore course unless `hardcore`),
    "dcd-extended" (`EXTENDED` and XChal), "poet-rose"."""
    suite = {name: v for name, v in SUITE.items() if hardcore or not is_gym_hardcore(v)}
    each = {name: [values] * len(COURSE_SEEDS) for name, values in suite.items()}
    return {
        "dcd": each,
        "dcd-extended": {
            **{name: [values] * len(COURSE_SEEDS) for name, values in EXTENDED.items()},
            "XChal": xchal_levels(),
        },
        "poet-rose": {name: [values] * len(COURSE_SEEDS) for name, values in POET_ROSE.items()},
    }


def check_level_space(level_space: str) -> str:
    """`level_space` when it names one of `LEVEL_SPACES` (a family's option), else a ValueError."""
    if level_space not in LEVEL_SPACES:
        raise ValueError(f"option level_space must be one of {', '.join(LEVEL_SPACES)}, got {level_space!r}")
    return level_space


def check_poet_mutation_8d(value: bool) -> bool:
    """`value` when it is a bool (a family's `poet_mutation_8d` option), else a ValueError."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"option poet_mutation_8d must be true or false, got {value!r}")
    return bool(value)


def poet_mutate_or_refuse(
    family: str, values: Mapping[str, Any], rng: np.random.Generator, allowed: bool
) -> dict[str, Any]:
    """`poet_mutate(values, rng)` when the family's `poet_mutation_8d` is on; else the error
    that says POET's paper has no such op and how to turn this project's on."""
    if not allowed:
        raise EnvParamError(
            family,
            "level_space",
            "POET's paper defines no mutation of dcd's 8-D levels; use level_space: poet, or set "
            "env.options.poet_mutation_8d: true for this project's (docs/envs.md#dcds-8-d-levels)",
        )
    return poet_mutate(values, rng)


def curriculum_defaults(curriculum: str) -> dict[str, Any]:
    """A family's config defaults for `curriculum`: dcd's curricula on dcd's 8-D levels, as
    its BipedalWalker configs run them (`bipedal_accel.json`: `BipedalWalker-Adversarial-Easy-v0`;
    `bipedal_dr.json` and `bipedal_robust_plr.json`: `BipedalWalker-Adversarial-v0`), every
    other curriculum on POET's 5-D levels. A config that sets `env.options.level_space`
    keeps its own."""
    return {"env": {"options": {"level_space": "dcd"}}} if curriculum in DCD_CURRICULA else {}


def family_level_sets(family: str, hardcore: bool) -> dict[str, dict[str, list[EnvParams]]]:
    """`level_sets` as `family`'s `EnvParams`: set -> level -> the params of each episode,
    episode k pinned to course seed k."""
    return {
        name: {
            level: [EnvParams.create(family, values, seed) for seed, values in enumerate(episodes)]
            for level, episodes in levels.items()
        }
        for name, levels in level_sets(hardcore).items()
    }


# dcd's test env ids in its results files, by this module's level names
PUBLISHED_NAMES = {
    "BipedalWalker-v3": "BipedalWalker",
    "BipedalWalkerHardcore-v3": "Hardcore",
    "BipedalWalker-Med-Stairs-v0": "Med-Stairs",
    "BipedalWalker-Med-PitGap-v0": "Med-PitGap",
    "BipedalWalker-Med-StumpHeight-v0": "Med-StumpHeight",
    "BipedalWalker-Med-Roughness-v0": "Med-Roughness",
}
PUBLISHED_FILES = {
    "accel": "bipedal8d-accel_20k-updates.csv",
    "dr": "bipedal8d-dr_20k-updates.csv",
    "robust_plr": "bipedal8d-robust_plr-20k_updates.csv",
}


def published_results() -> dict[str, dict[str, dict[str, float]]]:
    """dcd's own numbers at 20,000 updates (`envs/published/dcd_bipedal8d/`, shipped as data):
    per curriculum and test env, the mean over its 10 seeds of the solved rate and of the test
    return, and the number of seeds."""
    import csv
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "published" / "dcd_bipedal8d"
    out: dict[str, dict[str, dict[str, float]]] = {}
    for curriculum, file in PUBLISHED_FILES.items():
        with open(folder / file, newline="") as f:
            rows = list(csv.reader(f))
        table: dict[str, dict[str, float]] = {}
        for row in rows[1:]:
            metric, env = row[0].split(":", 1)
            values = [float(x) for x in row[1:] if x != ""]
            entry = table.setdefault(PUBLISHED_NAMES.get(env, env), {"seeds": float(len(values))})
            entry[metric] = float(np.mean(values))
        out[curriculum] = table
    return out


# ============================================================ the level space's operations
# (each family that offers dcd's levels wraps these in EnvParams of its own name)
def sample(rng: np.random.Generator) -> dict[str, Any]:
    """A random level, dcd's `reset_random` over its full ranges (`sample_vector`)."""
    return from_vector(sample_vector(rng, full_ranges()))


def sample_easy(rng: np.random.Generator) -> dict[str, Any]:
    """A random easy level, dcd's `reset_random` over its easy ranges (ACCEL's start)."""
    return from_vector(sample_vector(rng, EASY_RANGES))


def edit(values: Mapping[str, Any], rng: np.random.Generator, edits: int) -> dict[str, Any]:
    """dcd's `mutate_level` of a level (`edit_vector`)."""
    return from_vector(edit_vector(vector(values), rng, edits))


def interpolate(start: Mapping[str, Any], target: Mapping[str, Any], t: float) -> dict[str, Any]:
    """The level a fraction `t` of the way from `start` to `target`: each number on the line."""
    a, b = np.array(vector(start)), np.array(vector(target))
    return from_vector((1 - t) * a + t * b)


def flat(values: Mapping[str, Any]) -> dict[str, float]:
    """One scalar per column: the built ranges (0, 0 and *_enabled 0 when off), the steps."""
    c = config_of(values)
    out = {"roughness": c["roughness"]}
    for name in RANGE_PAIRS:
        lo, hi = c[name] or [0.0, 0.0]
        out[f"{name}_lo"], out[f"{name}_hi"], out[f"{name}_enabled"] = lo, hi, float(bool(c[name]))
    out["stair_steps"] = float(values["stair_steps"])
    return out


def poet_view(values: Mapping[str, Any]) -> dict[str, Any]:
    """The pits, stumps and roughness a level builds, as POET's 5-D values (ranges or []): what
    the paper's difficulty classes read (its criteria name no stairs)."""
    c = config_of(values)
    return {k: c[k] for k in ("roughness", "pit_gap", "stump_height")}
