"""Typed, validated run configuration: YAML file + `--set a.b=value` overrides.

Every problem (bad YAML, unknown key, wrong type, impossible value) raises ConfigError
naming the field, before any work starts.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

# Marks a setting that changes where and how fast a run goes, never its numbers: a resumed
# run may change it (a laptop run continues on a cluster, with more workers, ...), and a
# checkpoint's identity leaves it out. Every other setting is fixed for the run's life.
WHERE_ONLY = {"changes_results": False}
# Marks a mapping field whose entries are written as keys of its own section, beside the
# section's other fields (`trainer.es` is `TrainerConfig.sections["es"]`).
INLINE = {"inline": True}


class ConfigError(ValueError):
    """A configuration problem; the message names the field."""


class NotARunDirectory(ConfigError, FileNotFoundError):
    """A path given as a run directory holds none (a FileNotFoundError too, for callers that
    catch that)."""


@dataclass
class EnvConfig:
    """Which environment family the run evolves."""

    # a registered family (envs.FAMILIES: terrain, bipedal, bipedal_cppn, ...) or
    # package.module:Factory; `terrain` is this project's fast stand-in for the papers' `bipedal`
    family: str = "terrain"
    options: dict[str, Any] = field(default_factory=dict)  # passed to the family factory
    # the params a run starts from (the family's values, e.g. {roughness: 2.0, pit_gap: [],
    # stump_height: []}), checked by the family; unset: the family's initial params
    start: dict[str, Any] | None = None


@dataclass
class PolicyConfig:
    """Policy architecture (POET: 40-40 hidden units, tanh)."""

    # the network: "mlp" (POET's and dcd's walker policy, a compiled forward), "cnn", "lstm",
    # "cnn_lstm" (dcd's maze agent), or a torch module of your own as package.module:Name
    # (docs/policies.md)
    kind: str = "mlp"
    # the kind's options (its `Options`, docs/policies.md); the mlp's are hidden and activation
    options: dict[str, Any] = field(default_factory=dict)
    # hidden layer sizes; unset: the curriculum's default (POET's model.py: 40-40; dcd's
    # BipedalWalker policy for ACCEL, robust PLR and DR: 64-64)
    hidden: list[int] | None = None
    # the hidden layers' nonlinearity; the output is squashed by tanh to the action bounds
    # (argmax for discrete actions) whatever this is
    activation: Literal["tanh", "relu"] = "tanh"
    # initial weights: "reference" i.i.d. N(0, 0.1) (uber-research/poet `get_random_model_params`),
    # "normc" (normalised columns, small last layer, zero biases; OpenAI ES) or "orthogonal"
    # (gain sqrt 2, last layer 1, zero biases: dcd's BipedalWalker policy); unset: the curriculum's
    init: Literal["reference", "normc", "orthogonal"] | None = None


@dataclass
class EvaluationConfig:
    """How agents are scored and where rollouts run."""

    # "ray": rollouts on the Ray worker pool (the `ray` section); "inprocess": in the driver
    # process, no Ray
    backend: Literal["ray", "inprocess"] = field(default="ray", metadata=WHERE_ONLY)
    max_steps: int = 2000  # step cap of every episode
    eval_episodes: int = 5  # episodes behind each agent-on-env score (eligibility, MC, novelty, transfer)
    # a failed evaluation (an env that raised or returned a non-finite reward or observation,
    # a Ray chunk out of retries): "stop" ends the run with the error; "score_as_failure"
    # scores it failure_score and goes on
    on_error: Literal["stop", "score_as_failure"] = "stop"
    failure_score: float = -100.0  # the score a failed evaluation gets with on_error=score_as_failure
    batch_rows: int = field(default=4096, metadata=WHERE_ONLY)  # most episodes stepped together in one batch
    # "fixed": each env carries one course seed, drawn when the env is created, and every
    # rollout on it runs that course (the reference's Box2DNiche, stochastic=False);
    # "per_episode": every episode draws a new course (tests generalisation over the family)
    course: Literal["fixed", "per_episode"] = "fixed"
    # when a pair's per-iteration score is taken: "after_step" scores the updated agent (the
    # reference's ind_es_step), "before_step" scores the starting agent in the trainer's own
    # wave (one evaluator wave per iteration instead of two)
    self_score: Literal["after_step", "before_step"] = "after_step"
    # every this many iterations, score the active agents on the family's held-out levels
    # (poet.heldout; the `heldout` table); 0: never
    test_every: int = 0


@dataclass
class RayConfig:
    """The Ray worker pool (evaluation.backend: ray)."""

    address: str | None = None  # join an existing cluster ("auto", "ray://host:10001"); None starts a local Ray
    workers: int | None = None  # default: the CPUs Ray sees
    # chunks per worker and wave (fewer: bigger batches, more: better balance); unset, one
    # per worker for a batched family, shrinking chunks for gymnasium envs
    chunks_per_worker: int | None = None
    inflight_per_worker: int = 2  # chunks queued on a worker so it never waits for the driver
    # a wave of a compiled family and policy (the mlp) expected to take at most this many env
    # steps runs in the driver, where it ends sooner than a round trip to the workers (0:
    # every wave on the pool)
    local_wave_steps: int = 8192
    # the driver runs one worker's share of a compiled family's bigger waves beside the other
    # workers (that worker sits the wave out); unset: when every worker runs on the driver's node
    driver_share: bool | None = None
    max_chunk_retries: int = 3  # a chunk whose worker dies (or that overruns its deadline) is re-run this many times
    # A chunk or job that runs longer than its deadline has its worker killed and is retried.
    # Unset, the deadline is deadline_factor x its work (env steps at its step caps) at the
    # rate measured for its kind (chunk or job), never under deadline_floor_s.
    deadline_s: float | None = None
    deadline_floor_s: float = 60.0  # seconds: the shortest deadline when deadline_s is unset
    deadline_factor: float = 10.0  # the deadline over a unit's work at the measured rate, when deadline_s is unset
    log_to_driver: bool = False  # show the workers' stdout/stderr and Ray's logs
    # Ray's runtime environment for the run's workers, e.g. {working_dir: ".", py_modules: [...]}
    # to ship a user's trainer, curriculum or family code to a cluster's nodes
    runtime_env: dict[str, Any] | None = None


@dataclass
class TrainerConfig:
    """Trainer by registered name or `package.module:Class`, with its options.

    A registered trainer's options go in a section under its name (`trainer.es`, `trainer.ppo`;
    `poet.trainers.TRAINERS`), so one config can switch trainer with `--set trainer.name=ppo`;
    `options` holds only the options of a user's `package.module:Class` trainer. Each section is
    checked against its trainer's `Options` class when the run's parts are built (`poet.parts`).
    """

    # a registered trainer ("es", "ppo"; poet.trainers.TRAINERS) or package.module:Class; unset:
    # the curriculum's default (ES for the POETs and their controls, PPO for dcd's curricula)
    name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # a package.module:Class trainer's options
    # each registered trainer's options, written as a section under its name (trainer.es.sigma:
    # ESOptions, trainer.ppo.lr: PPOOptions, tables below); every section given is checked, used or not
    sections: dict[str, dict[str, Any]] = field(default_factory=dict, metadata=INLINE)

    def section(self, name: str) -> dict[str, Any]:
        """The options given for the registered trainer `name` (empty when none)."""
        return self.sections.get(name, {})


@dataclass
class ReproductionConfig:
    """POET's reproduction step: eligibility, mutation, minimal criterion, novelty, capacity."""

    # iterations between reproduction steps, none at iteration 0; unset: the curriculum's default
    # (POET's run_poet_local.sh: --adjust_interval=8 x --steps_before_transfer=25 = 200;
    # Enhanced POET's: 6 x 25 = 150)
    every: int | None = None
    # a pair may reproduce when its agent scores at least this on its env; unset: the env family's
    # `defaults` (its score scale), else POET's 200 (--repro_threshold); so are mc_lower and mc_upper
    threshold: float | None = None
    # mutations of random eligible parents proposed per reproduction step; a duplicate env is
    # dropped (the reference's adjust_envs_niches, max_children=8)
    max_children: int = 8
    # most children admitted per reproduction step, most novel first (adjust_envs_niches, max_admitted=1)
    max_admitted: int = 1
    # the minimal criterion: a child passes when the agent tested on it scores in
    # [mc_lower, mc_upper] (POET's 25 and 340: master.py --mc_lower / --mc_upper); also PATA-EC's
    # clipping bounds
    mc_lower: float | None = None
    mc_upper: float | None = None  # the minimal criterion's upper bound: above it a child is too easy
    # most active pairs: beyond it the oldest move to the archive at the end of a reproduction
    # step; unset: the curriculum's default (--max_num_envs: 25 in POET's run script, 40 in
    # Enhanced POET's; the POET paper's text says 20)
    capacity: int | None = None
    # nearest neighbours a child's novelty averages the distance to (compute_novelty_vs_archive,
    # k=5): env features for POET, PATA-EC vectors for Enhanced POET
    novelty_k: int = 5
    # PATA-EC (Enhanced POET): tied clipped scores ranked by position ("ordinal", the
    # reference's compute_centered_ranks) or sharing their mean rank ("average")
    pata_ec_ties: Literal["ordinal", "average"] = "ordinal"
    # the agent a new env starts with: "best_transfer", the best of every active agent
    # directly and after one plain ES step on the child, which must pass the MC again
    # (the reference's evaluate_transfer, both POET and Enhanced POET); "parent": the
    # parent's agent, no second check
    child_agent: Literal["best_transfer", "parent"] = "best_transfer"


@dataclass
class TransferConfig:
    """Transfer tournaments: direct and fine-tuned (one trainer step) candidates."""

    every: int = 25  # iterations between transfer tournaments, given two active pairs (--steps_before_transfer=25)
    # also try each source after one uncommitted trainer step on the target (the reference's
    # proposals); false: direct transfers only
    fine_tune: bool = True


@dataclass
class CheckpointConfig:
    """When to write checkpoints and how many to keep."""

    every: int = 25  # iterations between checkpoints (0: only at the end and on SIGINT/SIGTERM)
    keep: int = 3  # newest checkpoints kept


@dataclass
class LoggingConfig:
    """Live curves in TensorBoard and MLflow (poet.runtime.sinks; `pip install -e .[logging]`)."""

    tensorboard: bool = False  # event files under RUN_DIR/tensorboard
    mlflow: bool = False  # a local file store under RUN_DIR/mlruns, unless mlflow_uri
    # another MLflow tracking store (e.g. a server's URI); a remote store's curves may repeat
    # steps after a resume
    mlflow_uri: str | None = None
    mlflow_experiment: str = "poet"  # the MLflow experiment the run is logged under (created if missing)


@dataclass
class RunConfig:
    """A whole run."""

    # poet | enhanced_poet | accel | robust_plr | dr | direct | path, or a curriculum of your own as
    # package.module:Class; curriculum_options fill its `Options` dataclass (poet.curricula.base).
    curriculum: str = "poet"
    curriculum_options: dict[str, Any] = field(default_factory=dict)  # the curriculum's options (tables below)
    seed: int = 0  # the root seed every random stream derives from (poet.seeding)
    iterations: int = field(default=1000, metadata=WHERE_ONLY)  # the iteration the run stops at; a resume may raise it
    # a score at or above which an env counts as solved, for ANNECS and the report; unset: the env
    # family's `defaults` (its score scale), else POET's 230 (the paper's)
    solved_threshold: float | None = None
    progress: bool = field(default=True, metadata=WHERE_ONLY)  # a progress bar with ETA on stderr
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    ray: RayConfig = field(default_factory=RayConfig, metadata=WHERE_ONLY)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    reproduction: ReproductionConfig = field(default_factory=ReproductionConfig)
    transfer: TransferConfig = field(default_factory=TransferConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig, metadata=WHERE_ONLY)
    logging: LoggingConfig = field(default_factory=LoggingConfig, metadata=WHERE_ONLY)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (what is saved in the run directory)."""
        return _as_dict(self)


def _as_dict(obj: Any) -> Any:
    """A config dataclass as the nested dict it was built from (inline fields spread out)."""
    if not dataclasses.is_dataclass(obj):
        return copy.deepcopy(obj)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = _as_dict(getattr(obj, f.name))
        if f.metadata.get("inline"):
            out.update(value)
        else:
            out[f.name] = value
    return out


def where_only_settings(cls: type = RunConfig, prefix: str = "") -> list[str]:
    """The dotted keys marked WHERE_ONLY (a whole section as `name.*`), in declaration order."""
    keys = []
    for f in dataclasses.fields(cls):
        section = f.default_factory if dataclasses.is_dataclass(f.default_factory) else None
        if f.metadata.get("changes_results", True) is False:
            keys.append(f"{prefix}{f.name}" + (".*" if section else ""))
        elif section:
            keys += where_only_settings(section, f"{prefix}{f.name}.")
    return keys


def changes_results(key: str) -> bool:
    """Whether the config field `key` (dotted) can change a run's numbers."""
    for setting in where_only_settings():
        section = setting.removesuffix(".*")
        if key == setting or key == section or (setting.endswith(".*") and key.startswith(section + ".")):
            return False
    return True


# ---------------------------------------------------------------- type-checked building


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, Sequence):
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict or tp is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def convert(tp: Any, value: Any, path: str) -> Any:
    """Check `value` against type `tp` and build it (dataclasses from mappings)."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return build_dataclass(tp, value, path)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return convert(inner[0], value, path)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{path}: expected {_type_name(tp)}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected {_type_name(tp)}, got {value!r}")
        (item,) = typing.get_args(tp)
        return [convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            raise ConfigError(f"{path}: {value} is too large for a number") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if tp is Any:
        return value
    raise TypeError(f"unsupported config type {tp!r} at {path}")


def build_dataclass(cls: type, data: Any, path: str = "") -> Any:
    """Build dataclass `cls` from a mapping, rejecting unknown keys and wrong types."""
    where = path or "config"
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields if not f.metadata.get("inline")]
    inline = next((f.name for f in fields if f.metadata.get("inline")), None)
    kwargs: dict[str, Any] = {inline: {}} if inline else {}
    for key in data:
        sub = f"{path}.{key}" if path else str(key)
        if key in names:
            kwargs[key] = convert(hints[key], data[key], sub)
        elif inline:
            kwargs[inline][key] = convert(typing.get_args(hints[inline])[1], data[key], sub)
        else:
            raise ConfigError(f"{sub}: unknown key (known in {where}: {', '.join(names)})")
    return cls(**kwargs)


def out_of_range(options: Any, names: Sequence[str], ok: Callable[[Any], bool], rule: str) -> list[tuple[str, str]]:
    """(field, problem) for each of `names` whose value on `options` fails `ok` ('must be <rule>')."""
    return [(n, f"must be {rule}, got {getattr(options, n)}") for n in names if not ok(getattr(options, n))]


# ---------------------------------------------------------------- semantic checks

# Sanity bounds: beyond them a value is a typo, and would fail only after the run directory
# exists (an episode cap that overflows an int64 array, a pool no cluster can hold).
MAX_STEPS = 10_000_000
MAX_WORKERS = 100_000


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ConfigError(message)


def validate(cfg: RunConfig) -> RunConfig:
    """Reject impossible values; returns cfg unchanged."""
    _check(cfg.seed >= 0, f"seed: must be >= 0, got {cfg.seed}")
    _check(cfg.iterations >= 0, f"iterations: must be >= 0, got {cfg.iterations}")
    hidden = cfg.policy.hidden
    _check(
        hidden is None or (len(hidden) >= 1 and all(h >= 1 for h in hidden)),
        f"policy.hidden: needs at least one layer, all sizes >= 1, got {hidden}",
    )
    ev = cfg.evaluation
    _check(1 <= ev.max_steps <= MAX_STEPS, f"evaluation.max_steps: must be in [1, {MAX_STEPS:,}], got {ev.max_steps}")
    _check(ev.eval_episodes >= 1, f"evaluation.eval_episodes: must be >= 1, got {ev.eval_episodes}")
    _check(ev.batch_rows >= 1, f"evaluation.batch_rows: must be >= 1, got {ev.batch_rows}")
    _check(ev.test_every >= 0, f"evaluation.test_every: must be >= 0 (0: never), got {ev.test_every}")
    rc = cfg.ray
    _check(
        rc.workers is None or 1 <= rc.workers <= MAX_WORKERS,
        f"ray.workers: must be in [1, {MAX_WORKERS:,}], got {rc.workers}",
    )
    _check(
        rc.chunks_per_worker is None or rc.chunks_per_worker >= 1,
        f"ray.chunks_per_worker: must be >= 1 (or unset: the pool's own rule), got {rc.chunks_per_worker}",
    )
    _check(rc.local_wave_steps >= 0, f"ray.local_wave_steps: must be >= 0 (0: never), got {rc.local_wave_steps}")
    _check(rc.inflight_per_worker >= 1, f"ray.inflight_per_worker: must be >= 1, got {rc.inflight_per_worker}")
    _check(rc.max_chunk_retries >= 0, f"ray.max_chunk_retries: must be >= 0, got {rc.max_chunk_retries}")
    _check(rc.deadline_s is None or rc.deadline_s > 0, f"ray.deadline_s: must be > 0 (or unset), got {rc.deadline_s}")
    _check(rc.deadline_floor_s > 0, f"ray.deadline_floor_s: must be > 0, got {rc.deadline_floor_s}")
    _check(rc.deadline_factor >= 1, f"ray.deadline_factor: must be >= 1, got {rc.deadline_factor}")
    rp = cfg.reproduction
    _check(rp.every is None or rp.every >= 1, f"reproduction.every: must be >= 1, got {rp.every}")
    _check(rp.max_children >= 1, f"reproduction.max_children: must be >= 1, got {rp.max_children}")
    _check(rp.max_admitted >= 1, f"reproduction.max_admitted: must be >= 1, got {rp.max_admitted}")
    _check(
        rp.capacity is None or rp.capacity >= 2,
        f"reproduction.capacity: the population needs room for at least 2 pairs, got {rp.capacity}",
    )
    _check(rp.novelty_k >= 1, f"reproduction.novelty_k: must be >= 1, got {rp.novelty_k}")
    _check(
        rp.mc_lower is None or rp.mc_upper is None or rp.mc_lower <= rp.mc_upper,
        f"reproduction.mc_lower ({rp.mc_lower}) must be <= reproduction.mc_upper ({rp.mc_upper})",
    )
    _check(cfg.transfer.every >= 1, f"transfer.every: must be >= 1, got {cfg.transfer.every}")
    _check(cfg.checkpoint.every >= 0, f"checkpoint.every: must be >= 0, got {cfg.checkpoint.every}")
    _check(cfg.checkpoint.keep >= 1, f"checkpoint.keep: must be >= 1, got {cfg.checkpoint.keep}")
    return cfg


# ---------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse one `a.b.c=value` override; the value is read as YAML (so 3, 0.5, true, [1,2] work)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. reproduction.every=50")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"--set {text!r}: malformed key {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML ({exc.__class__.__name__})") from None
    return parts, value


def check_overrides(given: Sequence[tuple[str, str]]) -> None:
    """Check command-line overrides before anything is read: each `(as written, key=value)`
    must parse, and no config field may be given twice (a later value would silently win).

    A field inside another (`trainer.es.population` and `trainer.es={...}`) counts as given twice.
    """
    seen: list[tuple[list[str], str]] = []
    for written, text in given:
        parts, _ = parse_override(text)
        for other_parts, other in seen:
            n = min(len(parts), len(other_parts))
            if parts[:n] == other_parts[:n]:
                inner = ".".join(parts if len(parts) >= len(other_parts) else other_parts)
                raise ConfigError(f"{inner}: given twice on the command line ({other} and {written}); give it once")
        seen.append((parts, written))


def apply_override(data: dict, parts: list[str], value: Any) -> None:
    """Set a nested key in raw config data, creating sections as needed."""
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(parts)}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml's SafeLoader, except that a mapping giving one key twice is an error naming the key
    (dotted from the top) and both lines: plain YAML keeps the last value without a word."""

    def construct_document(self, node: yaml.Node) -> Any:
        self._paths: dict[int, str] = {}
        self._name_mappings(node, "")
        return super().construct_document(node)

    def _name_mappings(self, node: yaml.Node, path: str) -> None:
        if id(node) in self._paths:  # an alias of a node already named
            return
        self._paths[id(node)] = path
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                self._name_mappings(value, f"{path}.{name}" if path else str(name))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._name_mappings(item, f"{path}[{i}]")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` then own keys: overriding is its point
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first:
                    path = self._paths.get(id(node), "")
                    raise DuplicateKeyError(f"{path}.{key}" if path else str(key), first[key], line)
                first[key] = line
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    """A key given twice in one mapping."""

    def __init__(self, key: str, first: int, second: int):
        where = f"both on line {first}" if first == second else f"lines {first} and {second}"
        super().__init__(f"key {key!r} is given twice ({where})")
        self.key, self.first, self.second = key, first, second


def read_yaml(path: str | Path) -> dict:
    """Read a YAML config file into raw data, with errors naming the file."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} is not a file")
    try:
        data = yaml.load(p.read_text(), Loader=UniqueKeyLoader)
    except DuplicateKeyError as exc:
        raise ConfigError(f"config file {str(p)!r}: {exc}; keep one") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(p)!r} is not a text file") from None
    if data is None:  # an empty file, or only comments: most likely not the file meant
        raise ConfigError(
            f"config file {str(p)!r} holds no settings (empty, or only comments); write the settings "
            "there (e.g. start from a copy of experiments/quickstart.yaml), or leave CONFIG out to run "
            "experiments/quickstart.yaml"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r}: the top level must be a mapping of sections")
    return data


def load_config(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    data: Mapping | None = None,
    defaults: Callable[[Mapping], Mapping] | None = None,
) -> RunConfig:
    """Load, override and validate a RunConfig from a YAML file and/or a mapping.

    `defaults(raw)` gives the settings a run of the loaded (unresolved) settings `raw` takes where
    they leave them unset (absent or None; `poet.load_config` passes `poet.parts.run_defaults`:
    its env family's and its curriculum's). Without it, such settings stay None.
    """
    raw: dict = read_yaml(path) if path is not None else {}
    if data is not None:
        raw = _deep_merge(raw, dict(data))
    for text in overrides:
        parts, value = parse_override(text)
        apply_override(raw, parts, value)
    if defaults is not None:
        raw = under(defaults(raw), raw)
    return validate(build_dataclass(RunConfig, _drop_retired(raw)))


def under(defaults: Mapping, raw: Mapping) -> dict:
    """`raw` with `defaults` filling what it leaves unset (absent or None), section by section."""
    out = dict(raw)
    for key, value in defaults.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = under(value, out[key])
        elif out.get(key) is None:
            out[key] = copy.deepcopy(value)  # a run's config never shares a list with a class's defaults
    return out


# Where-only settings of earlier versions, no longer read: a run saved with one still resumes.
RETIRED = {
    ("ray", "transport"): "chunks always travel as Ray actor tasks",
    ("evaluation", "run_ahead"): "each wave runs when it is asked for; running ahead changed no number",
}


def _drop_retired(raw: dict) -> dict:
    for (section, name), why in RETIRED.items():
        if isinstance(raw.get(section), Mapping) and name in raw[section]:
            raw = {**raw, section: {k: v for k, v in raw[section].items() if k != name}}
            warnings.warn(f"config: {section}.{name} is no longer read ({why})", UserWarning, stacklevel=3)
    return raw


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), dict(v))
        else:
            out[k] = v
    return out


def save_config(cfg: RunConfig, path: str | Path) -> None:
    """Write the resolved config as YAML."""
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
