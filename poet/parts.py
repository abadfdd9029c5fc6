"""The parts of a run, built from its config and checked before any work: the env family,
the policy spec, the trainer and its options, the curriculum. Errors are ConfigErrors
naming the field. Reading a run (`read_parts`) imports none of its author's code.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import envs
from envs import EnvFamily
from poet import config, heldout
from poet.config import ConfigError, RunConfig, TrainerConfig, build_dataclass
from poet.curricula import curriculum_defaults, resolve_curriculum
from poet.curricula.common import start_params
from poet.plugins import import_named
from poet.policies import MLP, PolicySpec, spec_for_spaces
from poet.policies.kinds import options_class, resolve_kind
from poet.trainers import TRAINERS, resolve_trainer


@dataclass
class RunParts:
    """The validated parts of a run, before any work."""

    cfg: RunConfig
    family: EnvFamily
    spec: PolicySpec
    trainer_cls: type | None  # None when only reading a run (`read_parts`)
    trainer_options: Any
    curriculum: Any = None  # the built curriculum; None when only reading a run

    @property
    def noise_table_size(self) -> int | None:
        """Entries of the shared noise table the trainer samples perturbations from (its options'
        `noise_table_size`, as ES declares one); None: the run needs no noise table."""
        return getattr(self.trainer_options, "noise_table_size", None)


FAMILY_METHODS = ("initial", "mutate", "make_env", "features", "validate", "flat")
TRUST_CODE_VAR = "POET_TRUST_CODE"  # set to 1 to let reading a run import its `env.family: module:Factory`


def load_config(
    path: str | Path | None = None, overrides: Sequence[str] = (), data: Mapping | None = None
) -> RunConfig:
    """Load, override and validate a run's config (`poet.config.load_config`), each setting it
    leaves unset taking its env family's or its curriculum's default (`run_defaults`)."""
    return config.load_config(path, overrides, data, defaults=run_defaults)


def run_defaults(raw: Mapping[str, Any]) -> dict:
    """What a run of the settings `raw` takes where they leave a setting unset: its env family's
    `defaults` (the family's score scale: solved_threshold, reproduction.threshold, mc_lower,
    mc_upper), over its curriculum's (`poet.curricula.curriculum_defaults`: the authors' shipped
    script, over POET's). Problems with the family or curriculum named are left for
    `check_parts` to state."""
    curriculum = raw.get("curriculum", RunConfig.curriculum)
    own = curriculum_defaults(curriculum) if isinstance(curriculum, str) else {}
    return config.under(own, _family_defaults(raw, curriculum))


SCORE_SCALE = ("solved_threshold", "reproduction.threshold", "reproduction.mc_lower", "reproduction.mc_upper")


def _family_defaults(raw: Mapping[str, Any], curriculum: Any) -> dict:
    """The family's `defaults`, under its `curriculum_defaults(curriculum)` where it has them
    (the settings its authors' scripts give that curriculum on this family)."""
    env = raw.get("env")
    try:
        family = build_family(build_dataclass(RunConfig, {"env": env} if isinstance(env, Mapping) else {}))
    except (ConfigError, TypeError, ValueError):
        return {}  # check_parts names the problem
    per_curriculum = getattr(family, "curriculum_defaults", None)
    extra = dict(per_curriculum(curriculum)) if callable(per_curriculum) and isinstance(curriculum, str) else {}
    return config.under(_declared_defaults(family, raw), copy.deepcopy(extra))


def _declared_defaults(family: EnvFamily, raw: Mapping[str, Any]) -> dict:
    declared = getattr(family, "defaults", None)
    if declared is None:
        unset = [key for key in SCORE_SCALE if _lookup(raw, key) is None]
        if unset:
            warnings.warn(
                f"env.family {family.name!r} declares no score scale (`defaults`, docs/envs.md), so "
                f"{', '.join(unset)} take POET's BipedalWalker values; set them for this family's returns",
                UserWarning,
                stacklevel=4,
            )
        return {}
    return copy.deepcopy(dict(declared))


def _lookup(raw: Mapping[str, Any], key: str) -> Any:
    node: Any = raw
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def build_family(cfg: RunConfig, import_code: bool = True) -> EnvFamily:
    """The configured env family, with errors naming env.family / env.options.

    `env.family` is a registered name or `package.module:Factory` (a callable taking the
    `env.options` as keyword arguments and returning an EnvFamily). Reading someone's run
    (`import_code=False`) never imports the module it names, unless POET_TRUST_CODE=1.
    """
    name = cfg.env.family
    env_id = _named_env_id(cfg)
    if env_id is not None and not import_code and os.environ.get(TRUST_CODE_VAR) != "1":
        raise ConfigError(
            f"env.options: the env id {env_id!r} imports the module the run's config names; reading a run "
            f"imports only registered envs (set {TRUST_CODE_VAR}=1 if you trust this run's author)"
        )
    if ":" in name:
        if not import_code and os.environ.get(TRUST_CODE_VAR) != "1":
            raise ConfigError(
                f"env.family: {name!r} is code named by the run's config; reading a run imports only "
                f"registered families (set {TRUST_CODE_VAR}=1 if you trust this run's author)"
            )
        try:
            factory = import_named(name, "env family factory")
        except ValueError as exc:
            raise ConfigError(f"env.family: {exc}") from None
    elif name not in envs.FAMILIES:
        raise ConfigError(
            f"env.family: unknown family {name!r}; registered: {', '.join(sorted(envs.FAMILIES))}, "
            "or name your own as 'package.module:Factory'"
        )
    else:
        factory = envs.FAMILIES[name]
    try:
        family = factory(**dict(cfg.env.options))
    except TypeError as exc:
        raise option_error(
            "env.options", f"family {name!r}", cfg.env.options, _family_signature(factory), exc
        ) from None
    except (ValueError, KeyError, FileNotFoundError) as exc:
        raise ConfigError(f"env.options: {exc}") from None
    missing = [m for m in FAMILY_METHODS if not callable(getattr(family, m, None))]
    if missing or not isinstance(getattr(family, "name", None), str):
        raise ConfigError(
            f"env.family: {name!r} did not give an env family (missing "
            f"{', '.join(missing) or 'a name'}; see envs.base.EnvFamily)"
        )
    return family


def _named_env_id(cfg: RunConfig) -> str | None:
    """A gymnasium env id of the `module:id` form that the config's `env.options` give, inline
    or in their spec file (building the family imports that module); None: none."""
    options = cfg.env.options
    env_id = options.get("env_id")
    if env_id is None and isinstance(options.get("spec"), (str, Path)):
        try:
            data = yaml.safe_load(Path(options["spec"]).read_text())
        except (OSError, yaml.YAMLError):
            return None  # building the family names the problem
        env_id = data.get("env_id") if isinstance(data, Mapping) else None
    return env_id if isinstance(env_id, str) and ":" in env_id else None


def read_parts(cfg: RunConfig, policy: bool = True) -> RunParts:
    """Family and policy spec only, for reading a run (report, render, profile): the trainer,
    which may name a module of the run's author (`module:Class`), is never imported, nor a
    policy kind of theirs unless POET_TRUST_CODE=1 (`policy`: the caller runs the policy;
    False: it reads only the family, and the spec is not to be used)."""
    family, spec = _family_and_spec(cfg, import_code=False, policy=policy)
    return RunParts(cfg, family, spec, None, None)


def _family_and_spec(cfg: RunConfig, import_code: bool = True, policy: bool = True) -> tuple[EnvFamily, PolicySpec]:
    family = build_family(cfg, import_code)
    options = policy_options(cfg, import_code) if policy else {}
    try:
        probe = family.make_env(family.initial())
        spec = spec_for_spaces(
            probe.observation_space,
            probe.action_space,
            tuple(cfg.policy.hidden or ()),
            cfg.policy.activation,
            cfg.policy.kind,
            options,
        )
        _check_env(probe)
        probe.close()
    except (ValueError, AssertionError) as exc:
        raise ConfigError(f"env.family {cfg.env.family!r}: {exc}") from None
    if policy and not spec.compiled:
        try:
            spec.num_params  # noqa: B018 - builds the network once: a kind that cannot read these observations says so now
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"policy.options: kind {cfg.policy.kind!r} on env.family {cfg.env.family!r}: {exc}"
            ) from None
    return family, spec


def policy_options(cfg: RunConfig, import_code: bool = True) -> dict[str, Any]:
    """The policy kind's options from `policy.options`, checked against its `Options` (plain
    values); ConfigErrors name policy.kind or policy.options.<key>."""
    kind, given = cfg.policy.kind, dict(cfg.policy.options)
    if kind == MLP:
        if given:
            raise ConfigError(
                f"policy.options.{next(iter(given))}: the mlp kind takes its options as policy.hidden and "
                "policy.activation; policy.options is for the other kinds"
            )
        return {}
    if ":" in kind and not import_code and os.environ.get(TRUST_CODE_VAR) != "1":
        raise ConfigError(
            f"policy.kind: {kind!r} is code named by the run's config; running this run's policies imports "
            f"it (set {TRUST_CODE_VAR}=1 if you trust this run's author)"
        )
    try:
        cls = resolve_kind(kind)
    except ValueError as exc:
        raise ConfigError(f"policy.kind: {exc}") from None
    built = build_options(cls, given, "policy.options", f"policy kind {kind!r}")
    if options_class(cls) is None:
        if given:
            raise ConfigError(f"policy.options.{next(iter(given))}: policy kind {kind!r} takes no options")
        return {}
    return dataclasses.asdict(built)


def _check_env(env: Any) -> None:
    """gymnasium's check_env, once per run: rollouts build their envs without the passive
    checker (an env per episode would pay for it every time). Its soft notes stay quiet;
    a broken env raises."""
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(getattr(env, "unwrapped", env), skip_render_check=True)


def check_parts(cfg: RunConfig) -> RunParts:
    """Resolve family, policy spec and trainer; every problem is a ConfigError naming its field."""
    family, spec = _family_and_spec(cfg)
    try:
        trainer_cls = resolve_trainer(cfg.trainer.name)
    except ValueError as exc:
        raise ConfigError(f"trainer.name: {exc}") from None
    options = trainer_options(cfg.trainer, trainer_cls, spec.num_params)
    check_policy = getattr(trainer_cls, "check_policy", None)
    for option, problem in check_policy(options, spec) if callable(check_policy) else []:
        where = f"trainer.{cfg.trainer.name}" if cfg.trainer.name in TRAINERS else "trainer.options"
        raise ConfigError(f"{where}.{option}: {problem}")
    if cfg.env.start is not None:
        try:
            family.validate(start_params(family, cfg.env.start))
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"env.start: {exc}") from None
    if cfg.evaluation.test_every > 0 and (problem := heldout.check(family)):
        raise ConfigError(f"evaluation.test_every: {problem}")
    curriculum = build_curriculum(cfg)
    if getattr(curriculum, "trains_on_levels", False) and not getattr(trainer_cls, "trains_on_levels", False):
        raise ConfigError(
            f"trainer.name: {cfg.trainer.name!r} does not say it trains on a batch of levels, which curriculum "
            f"{cfg.curriculum!r} gives it each iteration (TrainTask.levels); a trainer whose step spreads its "
            "rollouts over task.levels sets `trains_on_levels = True` (docs/trainers.md, your own trainer)"
        )
    check = getattr(curriculum, "check", None)
    problem = check(family) if callable(check) else None
    if problem:
        raise ConfigError(f"curriculum: {problem}")
    return RunParts(cfg, family, spec, trainer_cls, options, curriculum)


def trainer_options(trainer: TrainerConfig, trainer_cls: type, num_params: int) -> Any:
    """The named trainer's options built from its section; every other section given is checked
    too (a typo fails before any work, whichever trainer runs)."""
    unknown = [key for key in trainer.sections if key not in TRAINERS]
    if unknown:
        raise ConfigError(
            f"trainer.{unknown[0]}: unknown key (known in trainer: name, options, and a section for each "
            f"registered trainer: {', '.join(TRAINERS)})"
        )
    # one place for a trainer's options: with two, one would silently win over the other
    if trainer.name in TRAINERS and trainer.options:
        raise ConfigError(
            f"trainer.options: options of the registered trainer {trainer.name!r} go under "
            f"trainer.{trainer.name} (trainer.options is only for a package.module:Class trainer); "
            f"got {', '.join(map(str, trainer.options))}"
        )
    sections = {name: (TRAINERS[name], data, f"trainer.{name}") for name, data in trainer.sections.items()}
    if trainer.name in TRAINERS:
        sections.setdefault(trainer.name, (trainer_cls, {}, f"trainer.{trainer.name}"))
    else:
        sections[trainer.name] = (trainer_cls, trainer.options, "trainer.options")
    built = {}
    for name, (cls, data, where) in sections.items():
        built[name] = build_options(cls, data, where, name)
        size = getattr(built[name], "noise_table_size", None)
        if size is not None and size < num_params:
            raise ConfigError(f"{where}.noise_table_size: {size} is smaller than the policy ({num_params} parameters)")
    return built[trainer.name]


def build_curriculum(cfg: RunConfig) -> Any:
    """The configured curriculum, built with its checked `curriculum_options`."""
    try:
        cls = resolve_curriculum(cfg.curriculum)
    except ValueError as exc:
        raise ConfigError(f"curriculum: {exc}") from None
    if not _options_class(cls):
        if cfg.curriculum_options:
            key = next(iter(cfg.curriculum_options))
            raise ConfigError(f"curriculum_options.{key}: {cfg.curriculum} has no option {key!r}; it takes no options")
        return cls()
    return cls(build_options(cls, cfg.curriculum_options, "curriculum_options", cfg.curriculum))


def _signature(target: Any) -> inspect.Signature | None:
    """The keyword options `target` takes; None when it cannot tell (**kwargs, no signature)."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return sig


def _family_signature(factory: Callable[..., Any]) -> inspect.Signature | None:
    """The options a family factory takes. A factory that passes `**options` on (the registry's)
    says nothing itself: the family it builds with no options does, if it can be built so."""
    sig = _signature(factory)
    if sig is not None:
        return sig
    try:
        return _signature(type(factory()))
    except Exception:  # noqa: BLE001 - a family that needs options: nothing more to say
        return None


def _unknown_option(
    field: str, what: str, given: Mapping[str, Any], sig: inspect.Signature
) -> tuple[ConfigError | None, list[inspect.Parameter], str]:
    """The error naming the first option of `given` that `sig` does not take (None: all known),
    with the known options and their listing (name=default)."""
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    known = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)
    listing = f"its options: {known}" if params else "it takes no options"
    unknown = [k for k in given if k not in {p.name for p in params}]
    error = ConfigError(f"{field}.{unknown[0]}: {what} has no option {unknown[0]!r}; {listing}") if unknown else None
    return error, params, listing


def option_error(
    field: str, what: str, given: Mapping[str, Any], sig: inspect.Signature | None, exc: TypeError
) -> ConfigError:
    """A ConfigError for options `what` (a family, a curriculum) refused with a TypeError: it names
    the unknown or missing option and lists the known ones with their defaults, from `sig`."""
    if sig is None:
        return ConfigError(f"{field}: {what}: {exc}")
    unknown, params, listing = _unknown_option(field, what, given, sig)
    if unknown is not None:
        return unknown
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing:
        return ConfigError(f"{field}: {what} needs option {missing[0]!r}; {listing}")
    return ConfigError(f"{field}: {what}: {exc}")


def _fields_signature(options_cls: type) -> inspect.Signature:
    """An Options dataclass's fields as keyword parameters, a default factory's value as the default."""

    def default(f: dataclasses.Field) -> Any:
        if f.default is not dataclasses.MISSING:
            return f.default
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty

    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [inspect.Parameter(f.name, kind, default=default(f)) for f in dataclasses.fields(options_cls) if f.init]
    )


def _options_class(plugin: type) -> type | None:
    options_cls = getattr(plugin, "Options", None)
    return options_cls if options_cls is not None and dataclasses.is_dataclass(options_cls) else None


def build_options(plugin: type, data: Mapping[str, Any], where: str, what: str) -> Any:
    """A plug-in's (trainer's, curriculum's) `Options` dataclass built from `data` and checked
    (a plain dict for a plug-in that declares none). Errors name the field as `where.key`
    (where: the config section, e.g. trainer.es) and say the bound broken."""
    options_cls = _options_class(plugin)
    if options_cls is None:
        return dict(data)
    unknown = _unknown_option(where, what, data, _fields_signature(options_cls))[0]
    if unknown is not None:
        raise unknown
    options = build_dataclass(options_cls, data, where)
    problems = options.check() if hasattr(options, "check") else []
    if problems:
        name, msg = problems[0]
        raise ConfigError(f"{where}.{name}: {msg}")
    return options
