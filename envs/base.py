"""Contracts shared by every environment family: EnvParams, EnvFamily, EnvCache.

`envs` never imports `poet`: a family is usable on its own with gymnasium.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


class EnvParamError(ValueError):
    """A parameter of an environment family is missing, of the wrong type or out of range."""

    def __init__(self, family: str, field_name: str, message: str):
        self.family = family
        self.field = field_name
        super().__init__(f"env parameter {family}.{field_name}: {message}")


class _FrozenMap(tuple):
    """A dict frozen as sorted (key, value) items; a distinct type so lists of pairs stay lists."""

    # tuple equality ignores subclasses: a dict must never equal a list of pairs.
    def __eq__(self, other: object) -> bool:
        return type(other) is _FrozenMap and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("_FrozenMap", tuple(self)))


def _freeze(value: Any) -> Any:
    """Turn JSON-like data into a hashable, canonical form (lists -> tuples, dicts -> sorted items)."""
    if isinstance(value, Mapping):
        return _FrozenMap(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(f"non-finite value {f!r} in env params")
        # -0.0 and 0.0 must have one id.
        return f + 0.0
    raise TypeError(f"env params hold JSON-like values only, got {type(value).__name__}")


def _thaw(value: Any) -> Any:
    if isinstance(value, _FrozenMap):
        return {k: _thaw(v) for k, v in value}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class EnvParams:
    """Immutable, hashable parameters of one environment of a family.

    `values` maps parameter names to JSON-like values (numbers, strings, lists, nested
    dicts). The content `id` is stable across processes and versions: it is a hash of the
    canonical JSON text.

    `course_seed`, when set, pins the env to one course: every episode on it is reset with
    this seed (POET's niches each hold a seed and run every rollout on it). It is part of
    the JSON and the id; None (every episode draws its own course) leaves both as before.
    """

    family: str
    _items: tuple = field(repr=False)
    course_seed: int | None = None

    def __post_init__(self) -> None:
        seed = self.course_seed
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63
        ):
            raise ValueError(f"course_seed must be an integer in [0, 2**63) or None, got {seed!r}")
        if seed is not None:
            object.__setattr__(self, "course_seed", int(seed))

    @classmethod
    def create(cls, family: str, values: Mapping[str, Any], course_seed: int | None = None) -> EnvParams:
        """Build params from a plain mapping."""
        return cls(family=str(family), _items=_freeze(dict(values)), course_seed=course_seed)

    def __hash__(self) -> int:
        # Computed once: params are dict keys all over a wave's bookkeeping (hundreds per wave).
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.family, self._items, self.course_seed))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)  # string hashes differ between processes
        state.pop("_id", None)  # recomputed on first use: pickles hold the fields only
        return state

    def with_course_seed(self, seed: int | None) -> EnvParams:
        """The same params pinned to the course of `seed` (None: a new course every episode)."""
        return EnvParams(family=self.family, _items=self._items, course_seed=seed)

    def reset_seed(self, drawn: int) -> int:
        """The seed an episode is reset with: the pinned course seed, else the one drawn for it."""
        return int(drawn) if self.course_seed is None else self.course_seed

    @property
    def values(self) -> dict[str, Any]:
        """A fresh plain-dict copy of the parameter values (lists, not tuples)."""
        return {k: _thaw(v) for k, v in self._items}

    def __getitem__(self, name: str) -> Any:
        for k, v in self._items:
            if k == name:
                return _thaw(v)
        raise KeyError(name)

    def replace(self, **changes: Any) -> EnvParams:
        """A copy with some values changed."""
        vals = self.values
        vals.update(changes)
        return EnvParams.create(self.family, vals, self.course_seed)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form: {"family": ..., "values": {...}} (+ "course_seed" when pinned)."""
        out: dict[str, Any] = {"family": self.family, "values": self.values}
        if self.course_seed is not None:
            out["course_seed"] = self.course_seed
        return out

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no whitespace); the basis of `id`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvParams:
        """Inverse of `to_dict`."""
        if not isinstance(data, Mapping) or "family" not in data or "values" not in data:
            raise ValueError("env params JSON needs the keys 'family' and 'values'")
        extra = sorted(set(data) - {"family", "values", "course_seed"})
        if extra:
            raise ValueError(f"env params JSON has unknown key {extra[0]!r}")
        return cls.create(data["family"], data["values"], data.get("course_seed"))

    @classmethod
    def from_json(cls, text: str) -> EnvParams:
        """Inverse of `to_json`."""
        return cls.from_dict(json.loads(text))

    @property
    def id(self) -> str:
        """Stable content id: same params, same id, in any process."""
        # Computed once: scoring derives each episode's seed from it (thousands per iteration).
        cached = self.__dict__.get("_id")
        if cached is None:
            cached = hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
            object.__setattr__(self, "_id", cached)
        return cached


# A family's `defaults` when its returns are on BipedalWalker's scale (falling -100, a finished
# course about 300): it names no score scale of its own, so POET's thresholds apply.
BIPEDAL_SCORES: Mapping[str, Any] = MappingProxyType({})


@runtime_checkable
class EnvFamily(Protocol):
    """A parameterised family of environments that POET evolves.

    Optional, each enabling what needs it (docs/envs.md, "Adding a family"): `sample(rng)`,
    random params over the family's whole range (DR, robust PLR and ACCEL's new levels; all
    randomness from `rng`), `sample_easy`, `test_levels`, `difficulty`, `row_kernel` (a compiled
    fast path, `envs.kernel`), `renew`,
    `interpolate`, `course_profile`, `level_sets` (named sets of levels a run is scored on,
    `poet score --levels`: set name -> level name -> the EnvParams of each episode, each pinned
    to a course) and `published_results(name)` (the numbers a set's authors published for
    it, curriculum -> level -> {"solved_rate", "test_returns", "seeds"}, shown beside a run's);
    `version` (an int, 1 when absent), raised when the
    same params and seed start to build other episodes (a run records it and is not resumed
    under another); and `defaults`, the family's score scale as the config settings it fills
    where a run leaves them unset (`solved_threshold`, `reproduction.threshold`, `mc_lower`,
    `mc_upper`; `BIPEDAL_SCORES` for BipedalWalker's scale; absent: a warning, and POET's),
    with `curriculum_defaults(curriculum)` over them: the settings a curriculum's authors run
    it with on this family (the bipedal family's dcd curricula: `env.options.level_space: dcd`)."""

    name: str

    def initial(self) -> EnvParams:
        """The params of the first environment of a run."""
        ...

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """A child of `params`; all randomness from `rng`."""
        ...

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> gym.Env:
        """A gymnasium env for these params."""
        ...

    def features(self, params: EnvParams) -> np.ndarray:
        """Hand-designed characterisation for POET's novelty (1-D float array)."""
        ...

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the bad field if `params` are not valid."""
        ...

    def flat(self, params: EnvParams) -> dict[str, float]:
        """One scalar per parameter, for tidy record tables (column name -> value)."""
        ...


class EnvCache:
    """Used gymnasium envs kept for the next batches, for families that can make them as good as new.

    Building an env can cost as much as a tenth of a short episode (BipedalWalker-v3's
    Box2D world costs about ten of its steps). A family opts in with `renew(env) -> bool`: make an env that has
    run episodes give, from `reset(seed=s)`, exactly the episode a new env would (True), or
    say it cannot (False: the env is closed). Without `renew`, envs are closed after every
    batch, as without a cache. At most `max_idle` envs wait, the least recently used go first.
    """

    def __init__(self, family: EnvFamily, max_idle: int = 128):
        self.family = family
        self.max_idle = int(max_idle)
        self._renew = getattr(family, "renew", None)
        self._idle: OrderedDict[EnvParams, list[gym.Env]] = OrderedDict()  # least recently given back first

    def take(self, params: EnvParams) -> gym.Env:
        """A renewed env for `params`, or a new one."""
        envs = self._idle.get(params)
        if not envs:
            return self.family.make_env(params)
        env = envs.pop()
        if not envs:
            del self._idle[params]
        return env

    def give_back(self, params: EnvParams, env: gym.Env) -> None:
        """An env whose episode is over: kept if the family renews it, closed if not."""
        if self._renew is None or self.max_idle <= 0 or not self._renew(env):
            env.close()
            return
        self._idle.setdefault(params, []).append(env)
        self._idle.move_to_end(params)
        while self.idle > self.max_idle:
            oldest, envs = next(iter(self._idle.items()))
            envs.pop(0).close()
            if not envs:
                del self._idle[oldest]

    @property
    def idle(self) -> int:
        """How many envs wait for reuse."""
        return sum(len(envs) for envs in self._idle.values())

    def close(self) -> None:
        """Close every waiting env."""
        for envs in self._idle.values():
            for env in envs:
                env.close()
        self._idle.clear()
