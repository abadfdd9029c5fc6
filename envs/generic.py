"""GymFamily: a POET env family over any gymnasium env whose constructor takes numeric kwargs.

A spec (YAML file or inline mapping) names the gymnasium id, fixed constructor kwargs and
the evolved numeric parameters with their ranges:

    name: lunar_lander
    env_id: LunarLander-v3
    kwargs: {continuous: true, enable_wind: true}
    max_episode_steps: 1000          # optional
    params:
      gravity: {initial: -10.0, low: -11.99, high: -2.0, step: 0.5}
      n_legs:  {initial: 2, low: 1, high: 6, step: 1, type: int}

`env_id` may be gymnasium's own `module:id` form (`mymodule:MyEnv-v0`): the module, which
registers the id when imported, is imported at parsing and by every `gymnasium.make` of the
family's envs, so any process that makes them (a Ray worker) imports it first.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import numbers
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import yaml

from envs import cartpole_physics
from envs.base import EnvParamError, EnvParams

if TYPE_CHECKING:
    from gymnasium.envs.registration import EnvSpec

SPEC_KEYS = ("name", "env_id", "kwargs", "max_episode_steps", "params", "scores")
# A spec's `scores`: the family's score scale, the config setting each fills where a run leaves it unset.
SCORE_KEYS = {
    "solved": ("solved_threshold",),
    "reproduce": ("reproduction", "threshold"),
    "mc_lower": ("reproduction", "mc_lower"),
    "mc_upper": ("reproduction", "mc_upper"),
}
REQUIRED_SPEC_KEYS = ("name", "env_id", "params")
PARAM_KEYS = ("initial", "low", "high", "step", "type")
REQUIRED_PARAM_KEYS = ("initial", "low", "high", "step")
PARAM_TYPES = ("float", "int")
# gym.make consumes these itself, so they can be neither fixed nor evolved constructor kwargs.
RESERVED_NAMES = ("render_mode", "max_episode_steps", "disable_env_checker", "autoreset", "apply_api_compatibility")
DECIMALS = 6

# Registering here means a spec can name poet/CartPolePhysics-v1 without importing it.
cartpole_physics.register()


@dataclass(frozen=True)
class ParamSpec:
    """Range and mutation step of one evolved constructor kwarg."""

    name: str
    initial: float
    low: float
    high: float
    step: float
    type: str = "float"

    def cast(self, value: float) -> float | int:
        """The value in this parameter's type (int params are rounded)."""
        return int(round(value)) if self.type == "int" else float(value)

    def normalise(self, value: float) -> float:
        """The value mapped to [0, 1] over [low, high]; 0 for a fixed (low == high) range."""
        span = self.high - self.low
        return 0.0 if span == 0 else (float(value) - self.low) / span


@dataclass(frozen=True)
class GymSpec:
    """A validated family spec."""

    name: str
    env_id: str
    kwargs: Mapping[str, Any]
    max_episode_steps: int | None
    params: tuple[ParamSpec, ...]
    source: str = "<inline spec>"
    scores: Mapping[str, float] | None = None  # SCORE_KEYS -> value; None: the spec names no score scale


# ---------------------------------------------------------------- spec parsing


def _fail(source: str, key: str, message: str) -> ValueError:
    """A spec error that names where the spec came from and the bad key."""
    return ValueError(f"{source}: spec key {key!r}: {message}")


def _is_number(value: Any) -> bool:
    """True for finite real numbers; bools are rejected because YAML `yes` is not a range."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_keys(
    data: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...], source: str, prefix: str
) -> None:
    """Unknown and missing keys of one mapping, each named with its dotted path."""
    for key in data:
        if key not in allowed:
            raise _fail(source, f"{prefix}{key}", f"unknown key (allowed: {', '.join(allowed)})")
    for key in required:
        if key not in data:
            raise _fail(source, f"{prefix}{key}", "missing required key")


def _parse_param(name: Any, data: Any, source: str) -> ParamSpec:
    """One entry of `params`, with its range checked."""
    key = f"params.{name}"
    if not isinstance(name, str) or not name.isidentifier():
        raise _fail(source, key, "parameter names must be Python identifiers (they are constructor kwargs)")
    if name in RESERVED_NAMES:
        raise _fail(source, key, "this name is reserved by gymnasium.make")
    if not isinstance(data, Mapping):
        raise _fail(source, key, f"must be a mapping with keys {', '.join(REQUIRED_PARAM_KEYS)}, got {data!r}")
    _check_keys(data, PARAM_KEYS, REQUIRED_PARAM_KEYS, source, f"{key}.")
    kind = data.get("type", "float")
    if kind not in PARAM_TYPES:
        raise _fail(source, f"{key}.type", f"must be one of {', '.join(PARAM_TYPES)}, got {kind!r}")
    for field in REQUIRED_PARAM_KEYS:
        if not _is_number(data[field]):
            raise _fail(source, f"{key}.{field}", f"must be a finite number, got {data[field]!r}")
    initial, low, high, step = (float(data[f]) for f in REQUIRED_PARAM_KEYS)
    if low > high:
        raise _fail(source, f"{key}.low", f"low ({low}) > high ({high})")
    if not low <= initial <= high:
        raise _fail(source, f"{key}.initial", f"initial ({initial}) is outside [low, high] = [{low}, {high}]")
    if step <= 0:
        raise _fail(source, f"{key}.step", f"step must be > 0, got {step}")
    if kind == "int":
        _check_int_param(key, initial, low, high, step, source)
    return ParamSpec(name, initial, low, high, step, kind)


def _check_int_param(key: str, initial: float, low: float, high: float, step: float, source: str) -> None:
    """Integer params need integral bounds, and a step < 1 would round every move back to zero."""
    for field, value in (("initial", initial), ("low", low), ("high", high)):
        if value != int(value):
            raise _fail(source, f"{key}.{field}", f"must be an integer for type int, got {value}")
    if step < 1:
        raise _fail(source, f"{key}.step", f"must be >= 1 for type int, got {step}")


def _parse_kwargs(data: Any, source: str) -> dict[str, Any]:
    """The fixed constructor kwargs (any YAML values, never mutated)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise _fail(source, "kwargs", f"must be a mapping, got {data!r}")
    for name in data:
        if not isinstance(name, str) or not name.isidentifier():
            raise _fail(source, f"kwargs.{name}", "kwarg names must be Python identifiers")
        if name in RESERVED_NAMES:
            raise _fail(source, f"kwargs.{name}", "this name is reserved by gymnasium.make")
    return dict(data)


def _parse_max_steps(value: Any, source: str) -> int | None:
    """Optional positive episode length."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise _fail(source, "max_episode_steps", f"must be a positive integer or null, got {value!r}")
    return int(value)


def _parse_env_id(value: Any, source: str) -> str:
    """The gymnasium id, registered (after our own registrations), or `module:id` whose module
    registers it when imported; kept as given, so that every `gymnasium.make` imports the module."""
    if not isinstance(value, str) or not value:
        raise _fail(source, "env_id", f"must be a non-empty string, got {value!r}")
    cartpole_physics.register()
    if ":" not in value:
        if value not in gym.registry:
            raise _fail(
                source,
                "env_id",
                f"{value!r} is not a registered gymnasium env id (an id your own module registers: "
                "'module:id', e.g. 'mymodule:MyEnv-v0', imports the module first)",
            )
        return value
    module, _, env_id = value.partition(":")
    if not module or not env_id or ":" in env_id:
        raise _fail(source, "env_id", f"{value!r}: the module form is 'module:id', e.g. 'mymodule:MyEnv-v0'")
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's module may fail in any way at import
        raise _fail(
            source, "env_id", f"{value!r}: cannot import module {module!r} ({type(exc).__name__}: {exc})"
        ) from None
    if env_id not in gym.registry:
        raise _fail(
            source,
            "env_id",
            f"{value!r}: importing module {module!r} did not register the gymnasium env id {env_id!r} "
            "(it should call gymnasium.register(id=...) when imported)",
        )
    return value


def _registered_id(env_id: str) -> str:
    """The id in gymnasium's registry of a spec's `env_id` (`module:id` gives `id`)."""
    return env_id.partition(":")[2] or env_id


def parse_spec(data: Any, source: str = "<inline spec>") -> GymSpec:
    """Validate a spec mapping; raises ValueError naming the bad key."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: a GymFamily spec must be a mapping, got {type(data).__name__}")
    _check_keys(data, SPEC_KEYS, REQUIRED_SPEC_KEYS, source, "")
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise _fail(source, "name", f"must be a non-empty string, got {name!r}")
    env_id = _parse_env_id(data["env_id"], source)
    kwargs = _parse_kwargs(data.get("kwargs"), source)
    raw_params = data["params"]
    if not isinstance(raw_params, Mapping) or not raw_params:
        raise _fail(source, "params", "must be a non-empty mapping of parameter name -> range")
    params = tuple(_parse_param(k, v, source) for k, v in raw_params.items())
    for p in params:
        if p.name in kwargs:
            raise _fail(source, f"params.{p.name}", "also given in kwargs; a name is either fixed or evolved")
    max_steps = _parse_max_steps(data.get("max_episode_steps"), source)
    return GymSpec(name, env_id, kwargs, max_steps, params, source, _parse_scores(data.get("scores"), source))


def _parse_scores(data: Any, source: str) -> dict[str, float] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise _fail(source, "scores", f"must be a mapping ({', '.join(SCORE_KEYS)}), got {type(data).__name__}")
    _check_keys(data, tuple(SCORE_KEYS), (), source, "scores.")
    for key, value in data.items():
        if not _is_number(value):
            raise _fail(source, f"scores.{key}", f"must be a number, got {value!r}")
    if "mc_lower" in data and "mc_upper" in data and data["mc_lower"] > data["mc_upper"]:
        raise _fail(source, "scores.mc_lower", f"({data['mc_lower']}) must be <= scores.mc_upper ({data['mc_upper']})")
    return {key: float(value) for key, value in data.items()}


def _deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`overrides` on top of `base`; nested mappings merge so one bound can be overridden."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


# ---------------------------------------------------------------- early env checks


def _constructor_parameters(env_id: str) -> set[str] | None:
    """Keyword names the env's constructor accepts, or None if it takes **kwargs or is opaque."""
    entry = gym.spec(_registered_id(env_id)).entry_point
    try:
        creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        signature = inspect.signature(creator)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return set(signature.parameters)


def _check_constructor_accepts(spec: GymSpec) -> None:
    """Name the kwarg the constructor does not take, rather than fail on the first mutation."""
    accepted = _constructor_parameters(spec.env_id)
    if accepted is None:
        return
    names = [(f"kwargs.{k}", k) for k in spec.kwargs] + [(f"params.{p.name}", p.name) for p in spec.params]
    for key, name in names:
        if name not in accepted:
            known = ", ".join(sorted(accepted - {"self"}))
            raise _fail(
                spec.source,
                key,
                f"env {spec.env_id!r} does not accept the constructor keyword {name!r} (it accepts: {known})",
            )


def _probe_construction(spec: GymSpec) -> None:
    """Build the env at the initial, all-low and all-high params so bad ranges fail now."""
    probes = {
        "initial": {p.name: p.cast(p.initial) for p in spec.params},
        "low": {p.name: p.cast(p.low) for p in spec.params},
        "high": {p.name: p.cast(p.high) for p in spec.params},
    }
    for label, values in probes.items():
        try:
            _make(spec, values, render_mode=None).close()
        except Exception as exc:  # noqa: BLE001 - any constructor failure is a spec error
            raise ValueError(
                f"{spec.source}: building env {spec.env_id!r} with the {label} params {values} "
                f"and kwargs {dict(spec.kwargs)} failed: {type(exc).__name__}: {exc}"
            ) from exc


def _make(spec: GymSpec, values: Mapping[str, Any], render_mode: str | None) -> gym.Env:
    """gymnasium.make with the fixed kwargs, the evolved values and the episode limit.

    Without gymnasium's passive env checker: rollouts build new envs where an env cannot be
    reused (`renew_gym_env`), and the checker would redo its checks on each (a third of
    BipedalWalker-v3's construction time). A run checks the family's env once, in full,
    before any work (`poet.runtime.runner`).
    """
    limit = {} if spec.max_episode_steps is None else {"max_episode_steps": spec.max_episode_steps}
    return gym.make(
        spec.env_id, render_mode=render_mode, disable_env_checker=True, **limit, **dict(spec.kwargs), **dict(values)
    )


# ---------------------------------------------------------------- reusing envs

# Wrappers gym.make adds whose state `reset` clears.
_RESET_CLEAN_WRAPPERS = ("TimeLimit", "OrderEnforcing", "PassiveEnvChecker")
# Envs whose `reset(seed=s)` sets every piece of state their episodes read.
_EXACT_RESET = (
    "gymnasium.envs.classic_control.cartpole:CartPoleEnv",
    "gymnasium.envs.classic_control.pendulum:PendulumEnv",
    "gymnasium.envs.classic_control.mountain_car:MountainCarEnv",
    "gymnasium.envs.classic_control.continuous_mountain_car:Continuous_MountainCarEnv",
    "gymnasium.envs.classic_control.acrobot:AcrobotEnv",
    "envs.cartpole_physics:CartPolePhysicsEnv",
)
# Box2D envs whose `reset` rebuilds every body but keeps the world: a kept world carries
# broad-phase and contact state over, and the same seed gives another episode (BipedalWalker-v3
# reused as it is: 15 of 30 episodes differ), so the world is replaced before the next reset.
_BOX2D_WORLD_RESET = (
    "gymnasium.envs.box2d.bipedal_walker:BipedalWalker",
    "gymnasium.envs.box2d.lunar_lander:LunarLander",
)


def renew_gym_env(env: gym.Env) -> bool:
    """Ready a used env so that `reset(seed=s)` gives exactly the episode a new env would.

    True only for the envs known to allow it (classic control, and BipedalWalker and
    LunarLander with a new Box2D world) behind the wrappers gym.make adds, without
    rendering; False for every other env, which must then not be reused.
    """
    layer = env
    while isinstance(layer, gym.Wrapper):
        if type(layer).__name__ not in _RESET_CLEAN_WRAPPERS or type(layer).__module__.split(".")[0] != "gymnasium":
            return False
        layer = layer.env
    cls = type(layer)
    name = f"{cls.__module__}:{cls.__qualname__}"
    if getattr(layer, "render_mode", None) is not None:
        return False
    if name in _EXACT_RESET:
        return True
    if name in _BOX2D_WORLD_RESET:
        import Box2D

        layer._destroy()
        layer.world = Box2D.b2World(gravity=layer.world.gravity)
        return True
    return False


# ---------------------------------------------------------------- ids registered by the user's code

# Top-level packages that any process unpickling a GymFamily has imported: an id whose entry
# point is theirs needs nothing of the user's there.
_OWN_PACKAGES = ("gymnasium", __name__.split(".")[0])


def _entry_point_name(entry: Any) -> str | None:
    """`module:Name` for an entry point, or None where a class or function cannot be found by
    that name in another process (a lambda, a local class, one defined in `__main__`)."""
    if isinstance(entry, str):
        return entry
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):  # `<locals>` in a qualname is never an attribute
        found = getattr(found, part, None)
    return f"{module}:{qualname}" if found is entry else None


def _recorded_registration(env_id: str) -> tuple[EnvSpec | None, str | None]:
    """What re-registers a plain id in a process where the module that registered it was never
    imported: its EnvSpec with named entry points, or None and why it cannot be recorded."""
    if ":" in env_id:  # gymnasium.make imports the module, wherever the env is made
        return None, None
    spec = gym.spec(env_id)
    entry = _entry_point_name(spec.entry_point)
    if entry is None:
        return None, (
            f"its entry point {spec.entry_point!r} cannot be named as 'module:Name' for another process; "
            "register it with entry_point='module:Class', or name it as env_id 'module:id'"
        )
    vector = spec.vector_entry_point
    vector = vector if vector is None or isinstance(vector, str) else _entry_point_name(vector)
    return dataclasses.replace(spec, entry_point=entry, vector_entry_point=vector), None


def _ensure_registered(env_id: str, registration: EnvSpec | None, unrecorded: str | None) -> None:
    """Make a plain id known in this process: import its entry point's module, whose import may
    register it, and otherwise register the recorded spec."""
    if ":" in env_id or env_id in gym.registry:
        return
    if registration is None:
        raise ValueError(
            f"gymnasium env id {env_id!r} is not registered in this process (a worker?), and the family "
            f"built where it was could not record how to register it: {unrecorded or 'nothing recorded'}"
        )
    importlib.import_module(str(registration.entry_point).partition(":")[0])
    if env_id not in gym.registry:
        gym.registry[env_id] = registration  # what gymnasium.register stores, field for field


# ---------------------------------------------------------------- the family


class GymFamily:
    """An EnvFamily whose params are numeric constructor kwargs of a gymnasium env.

    The family travels to Ray workers pickled, and a worker knows only the ids that gymnasium,
    this project and whatever it has imported registered. An id in `module:id` form needs
    nothing more: every `gymnasium.make` imports the module. For a plain id, the family records
    when built the id's EnvSpec with its entry point as a `module:Name` string (no code
    objects), and unpickling it where the id is unknown imports that module (which may register
    the id itself) and otherwise registers the recorded spec. An entry point that cannot be
    named (a lambda, a local class) is an error where the family is unpickled without the id.
    """

    def fingerprint(self) -> str:
        """What this family does, beyond its name in a config: the parsed spec (not where it was read)."""
        return repr(
            (
                self.spec.name,
                self.spec.env_id,
                sorted(self.spec.kwargs.items()),
                self.spec.max_episode_steps,
                self.spec.params,
            )
        )

    def __init__(self, spec: GymSpec | Mapping[str, Any]):
        self.spec = spec if isinstance(spec, GymSpec) else parse_spec(spec)
        self.name = self.spec.name
        self._params = {p.name: p for p in self.spec.params}
        _check_constructor_accepts(self.spec)
        _probe_construction(self.spec)
        self._registration, self._unrecorded = _recorded_registration(self.spec.env_id)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (on a worker): the env id is made known here before any env is made."""
        self.__dict__.update(state)
        _ensure_registered(self.spec.env_id, state.get("_registration"), state.get("_unrecorded"))

    @property
    def worker_module(self) -> str | None:
        """The module of the user's that a process imports to make this family's envs (None: only
        gymnasium's and this project's, or an entry point that cannot be named)."""
        if ":" in self.spec.env_id:
            return self.spec.env_id.partition(":")[0]
        registration = getattr(self, "_registration", None)
        if registration is None:
            return None
        module = str(registration.entry_point).partition(":")[0]
        return None if module.split(".")[0] in _OWN_PACKAGES else module

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> GymFamily:
        """A family from a YAML spec file; `overrides` deep-merge over its keys."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise ValueError(f"cannot read GymFamily spec {path}: {exc}") from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or exc.__class__.__name__
            raise ValueError(f"GymFamily spec {path} is not valid YAML{where}: {problem}") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: a GymFamily spec must be a mapping, got {type(data).__name__}")
        return cls(parse_spec(_deep_merge(data, overrides), source=str(path)))

    @classmethod
    def from_options(cls, spec: str | Path | None = None, **inline_spec: Any) -> GymFamily:
        """A family from `spec=<yaml path>` (other options override it) or an inline spec."""
        if spec is not None:
            return cls.from_yaml(spec, **inline_spec)
        if not inline_spec:
            raise ValueError(
                "the gym family needs options: spec=<path to yaml> or an inline spec (name, env_id, params, ...)"
            )
        return cls(parse_spec(inline_spec))

    @property
    def defaults(self) -> dict[str, Any] | None:
        """The run settings the spec's `scores` fill where a config leaves them unset (None: no scale)."""
        if self.spec.scores is None:
            return None
        out: dict[str, Any] = {}
        for key, value in self.spec.scores.items():
            *sections, name = SCORE_KEYS[key]
            node = out
            for section in sections:
                node = node.setdefault(section, {})
            node[name] = value
        return out

    @property
    def param_specs(self) -> tuple[ParamSpec, ...]:
        """The evolved parameters in spec order."""
        return self.spec.params

    def initial(self) -> EnvParams:
        """The spec's initial values."""
        return EnvParams.create(self.name, {p.name: p.cast(p.initial) for p in self.spec.params})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        """Each parameter moves by U(-step, step), clipped to its range; one draw per param in spec order."""
        self.validate(params)
        values = params.values
        child = {p.name: self._mutate_one(p, values[p.name], rng) for p in self.spec.params}
        return EnvParams.create(self.name, child)

    def sample(self, rng: np.random.Generator) -> EnvParams:
        """Each parameter uniform over [low, high] (ints: each value equally likely); one draw
        per param in spec order."""
        child = {}
        for p in self.spec.params:
            if p.type == "int":
                value = int(rng.integers(int(p.low), int(p.high) + 1))
            else:
                value = round(float(rng.uniform(p.low, p.high)), DECIMALS)
            child[p.name] = p.cast(min(max(value, p.low), p.high))
        return EnvParams.create(self.name, child)

    def interpolate(self, start: EnvParams, target: EnvParams, t: float) -> EnvParams:
        """Each parameter a fraction `t` of the way from `start` to `target` (ints rounded)."""
        self.validate(start)
        self.validate(target)
        t = min(max(float(t), 0.0), 1.0)
        values = {}
        for p in self.spec.params:
            value = (1.0 - t) * float(start[p.name]) + t * float(target[p.name])
            values[p.name] = p.cast(round(value) if p.type == "int" else round(value, DECIMALS))
        return EnvParams.create(self.name, values)

    @staticmethod
    def _mutate_one(p: ParamSpec, value: float, rng: np.random.Generator) -> float | int:
        """One parameter's move; clipped again after rounding in case a bound has more decimals."""
        moved = float(np.clip(value + rng.uniform(-p.step, p.step), p.low, p.high))
        moved = round(moved) if p.type == "int" else round(moved, DECIMALS)
        return p.cast(min(max(moved, p.low), p.high))

    def features(self, params: EnvParams) -> np.ndarray:
        """Values normalised to [0, 1] over their ranges, in spec order."""
        self.validate(params)
        return np.array([p.normalise(params[p.name]) for p in self.spec.params], dtype=np.float64)

    def flat(self, params: EnvParams) -> dict[str, float]:
        """{param name: value} as floats."""
        self.validate(params)
        return {p.name: float(params[p.name]) for p in self.spec.params}

    def validate(self, params: EnvParams) -> None:
        """Raise EnvParamError naming the field: wrong family, missing/unknown, non-numeric, out of range."""
        if params.family != self.name:
            raise EnvParamError(self.name, "family", f"params are for family {params.family!r}, not {self.name!r}")
        values = params.values
        for name in values:
            if name not in self._params:
                raise EnvParamError(self.name, name, f"unknown parameter (known: {', '.join(self._params)})")
        for p in self.spec.params:
            if p.name not in values:
                raise EnvParamError(self.name, p.name, "missing parameter")
            _validate_value(self.name, p, values[p.name])

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> gym.Env:
        """gymnasium.make(env_id, render_mode, max_episode_steps, **kwargs, **params)."""
        self.validate(params)
        values = {p.name: p.cast(params[p.name]) for p in self.spec.params}
        return _make(self.spec, values, render_mode)

    def renew(self, env: gym.Env) -> bool:
        """Ready a used env for reuse, where its reset is known to be exact (`renew_gym_env`)."""
        return renew_gym_env(env)

    def __repr__(self) -> str:
        return f"GymFamily(name={self.name!r}, env_id={self.spec.env_id!r}, params={list(self._params)})"


def _validate_value(family: str, p: ParamSpec, value: Any) -> None:
    """One value: a finite number of the right type inside [low, high]."""
    if not _is_number(value):
        raise EnvParamError(family, p.name, f"must be a finite number, got {value!r}")
    if p.type == "int" and not isinstance(value, numbers.Integral):
        raise EnvParamError(family, p.name, f"must be an integer, got {value!r}")
    if not p.low <= value <= p.high:
        raise EnvParamError(family, p.name, f"{value} is outside [{p.low}, {p.high}]")
