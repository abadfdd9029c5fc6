"""Build a run from its config (checking everything before any work) and run it.

`poet.run(config)` is the Python API; `poet run` on the command line calls the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from envs import EnvFamily
from poet.config import ConfigError, RunConfig, changes_results, save_config, where_only_settings
from poet.config import load_config as load_as_saved
from poet.context import RunContext
from poet.evaluation import Evaluator, InProcessEvaluator, NoiseTable
from poet.parts import RunParts, check_parts, load_config
from poet.records import RecordWriter, complete_rows, read_rows, truncate_tables
from poet.runtime import checkpoint
from poet.runtime.loop import Progress, RunLoop, RunResult
from poet.runtime.provenance import record_start
from poet.runtime.rundir_lock import RunDirLock
from poet.scoring import ScoreCache, Scorer
from poet.seeding import Seeds
from poet.trainers import ErrorPolicy, TrainerContext
from poet.version import __version__


def default_out_dir(config_path: str | Path | None) -> Path:
    """runs/<config name>-<date-time>, with -2, -3, ... after it when a run started earlier in
    the same second holds that name."""
    stem = Path(config_path).stem if config_path else "run"
    base = Path("runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def prepare_out_dir(out: str | Path) -> Path:
    """Create the run directory; refuse one that already holds a run (nothing computed is overwritten)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {str(path)!r} is a file, not a directory")
    if path.exists() and any(path.iterdir()):
        raise ConfigError(f"--out {str(path)!r} already holds files; choose a new directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {str(path)!r}: cannot create the run directory ({exc.strerror})") from None
    return path


def check_cluster_address(cfg: RunConfig) -> None:
    """A cluster to join that does not answer, or refuses this driver, is a ConfigError naming
    ray.address before the run directory is touched (Ray's own join retries for minutes)."""
    if cfg.evaluation.backend != "ray" or cfg.ray.address is None:
        return
    import ray

    from poet.runtime.ray_session import ClusterError, check_cluster, join_check

    if ray.is_initialized():  # this process already joined (the Python API, tests)
        return
    try:
        check_cluster(cfg.ray.address)
        join_check(cfg.ray.address)
    except ClusterError as exc:
        raise ConfigError(str(exc)) from None


@contextlib.contextmanager
def workers_checked(cfg: RunConfig, family: EnvFamily | None = None) -> Iterator[None]:
    """Before the run directory is touched: a `module:Name` of the user's that the Ray workers
    need (the family's, a trainer's, the module of the `family`'s own gymnasium env) and cannot
    import is a ConfigError naming the field, the module and `ray.runtime_env`. Only a config
    that names such code starts or joins Ray to ask them; a Ray started here is shut down when
    the block ends."""
    named = (("env.family", cfg.env.family), ("trainer.name", cfg.trainer.name), ("policy.kind", cfg.policy.kind))
    needed = {field: value.split(":", 1)[0] for field, value in named if ":" in str(value)}
    needed.update(_env_module(cfg, family))
    if cfg.evaluation.backend != "ray" or not needed:
        yield
        return
    import ray

    from poet.runtime.ray_session import ensure_ray, workers_import_errors

    rc = cfg.ray
    started = ensure_ray(rc.address, rc.workers, rc.log_to_driver, rc.runtime_env)
    try:
        errors = workers_import_errors(sorted(set(needed.values())))
        for field, module in needed.items():
            if module in errors:
                raise ConfigError(
                    f"{field}: the Ray workers cannot import {module!r} ({errors[module]}); they need the "
                    f"code too: install it where they run, or ship it with the run, e.g. --set 'ray.runtime_env="
                    f"{{py_modules: [path/to/{module.split('.')[0]}]}}' or {{working_dir: .}} (docs/cluster.md)"
                )
        yield
    finally:
        if started:
            ray.shutdown()


def _env_module(cfg: RunConfig, family: EnvFamily | None) -> dict[str, str]:
    """{config field: module} for the user's module the family's envs are made from (a gymnasium
    env id of theirs, `GymFamily.worker_module`), under the field that names the id."""
    module = getattr(family, "worker_module", None)
    if not isinstance(module, str) or not module:
        return {}
    options = cfg.env.options
    if "env_id" in options:
        field = "env.options.env_id"
    elif "spec" in options:
        field = "env.options.spec (its env_id)"
    else:  # the user's factory chose the id; a field of its own beside env.family's module
        field = "env.family (its env id)"
    return {field: module}


def make_evaluator(parts: RunParts, noise: NoiseTable | None) -> Evaluator:
    """The configured evaluation backend."""
    cfg = parts.cfg
    if cfg.evaluation.backend == "inprocess":
        return InProcessEvaluator(parts.family, parts.spec, noise, batch_rows=cfg.evaluation.batch_rows)
    import ray

    from poet.evaluation.planning import Deadlines
    from poet.evaluation.ray_pool import RayEvaluator
    from poet.runtime.ray_session import ClusterError, ensure_ray

    rc = cfg.ray
    try:
        started = ensure_ray(rc.address, rc.workers, rc.log_to_driver, rc.runtime_env)
    except ClusterError as exc:  # checked before joining: one line naming ray.address already
        raise ConfigError(str(exc)) from None
    except ConnectionError as exc:
        raise ConfigError(f"ray.address: cannot connect to Ray at {rc.address!r} ({exc})") from None
    try:
        return RayEvaluator(
            parts.family,
            parts.spec,
            noise,
            workers=rc.workers,
            batch_rows=cfg.evaluation.batch_rows,
            chunks_per_worker=rc.chunks_per_worker,
            inflight_per_worker=rc.inflight_per_worker,
            max_chunk_retries=rc.max_chunk_retries,
            deadlines=Deadlines(rc.deadline_s, rc.deadline_floor_s, rc.deadline_factor),
            local_wave_steps=rc.local_wave_steps,
            driver_share=rc.driver_share,
            owns_ray=started,
        )
    except BaseException:
        if started:
            ray.shutdown()
        raise


def build_context(parts: RunParts, run_dir: Path, log: Callable[[str], None]) -> RunContext:
    """Create noise table, evaluator, trainer, scorer and records for a run."""
    cfg = parts.cfg
    seeds = Seeds(cfg.seed)
    size = parts.noise_table_size
    noise = NoiseTable(seeds.sequence("es.noise_table"), size) if size else None
    errors = ErrorPolicy(cfg.evaluation.on_error, cfg.evaluation.failure_score)
    evaluator = make_evaluator(parts, noise)
    try:  # from here on, a failure must not leave the pool (and a Ray it started) running
        tctx = TrainerContext(spec=parts.spec, max_steps=cfg.evaluation.max_steps, errors=errors, noise=noise)
        trainer = parts.trainer_cls(parts.trainer_options, tctx)
        scorer = Scorer(evaluator, seeds, cfg.evaluation.eval_episodes, cfg.evaluation.max_steps, errors, ScoreCache())
        return RunContext(
            cfg=cfg,
            family=parts.family,
            spec=parts.spec,
            trainer=trainer,
            evaluator=evaluator,
            seeds=seeds,
            scorer=scorer,
            records=RecordWriter(run_dir),
            log=log,
        )
    except BaseException:
        evaluator.close()
        raise


def report_traits(curriculum: object) -> dict:
    """What the curriculum's runs record (its `report_traits()`; empty: the report reads the tables)."""
    describe = getattr(curriculum, "report_traits", None)
    return dict(describe()) if callable(describe) else {}


def identity_text(cfg: RunConfig, family: EnvFamily | None = None) -> str:
    """What a checkpoint is valid for: every setting that changes results, plus the content of
    whatever the env family reads besides the config (e.g. a generic family's spec file)."""
    data = cfg.to_dict()
    for setting in where_only_settings():
        *sections, name = setting.removesuffix(".*").split(".")
        table = data
        for section in sections:
            table = table[section]
        table.pop(name)
    fingerprint = getattr(family, "fingerprint", None)
    if callable(fingerprint):
        data["family_fingerprint"] = fingerprint()
    return json.dumps(data, sort_keys=True)


def _resolve(config: RunConfig | str | Path | Mapping | None, overrides: Sequence[str]) -> RunConfig:
    if isinstance(config, RunConfig):
        return load_config(data=config.to_dict(), overrides=overrides)
    if isinstance(config, Mapping):
        return load_config(data=config, overrides=overrides)
    return load_config(config, overrides=overrides)


def run(
    config: RunConfig | str | Path | Mapping | None = None,
    out: str | Path | None = None,
    overrides: Sequence[str] = (),
    progress: bool | None = None,
) -> RunResult:
    """Run POET from a RunConfig, a YAML path or a mapping; returns where the run directory is.

    `overrides` are `key=value` strings as `--set` takes them (a later one wins). Every problem
    is a ConfigError before any work. `progress` (default: the config's) shows the progress bar
    and phase lines; without it the run still prints its first line (run directory) and its
    closing line to stderr. The run directory's config.yaml is the resolved config.
    """
    cfg = _resolve(config, overrides)
    parts = check_parts(cfg)
    check_cluster_address(cfg)
    config_path = config if isinstance(config, (str, Path)) else None
    with workers_checked(cfg, parts.family):
        run_dir = prepare_out_dir(out if out is not None else default_out_dir(config_path))
        with RunDirLock(run_dir):  # one writer per run directory
            save_config(cfg, run_dir / "config.yaml")
            (run_dir / "run.json").write_text(
                json.dumps(
                    {
                        "poet_version": __version__,
                        "family": cfg.env.family,
                        "family_version": family_version(parts.family),
                        "curriculum": cfg.curriculum,
                        "seed": cfg.seed,
                        "policy": parts.spec.to_dict(),
                        "numpy": np.__version__,
                        "report_traits": report_traits(parts.curriculum),
                    },
                    indent=2,
                )
            )
            return _drive(parts, run_dir, None, progress)


def resume(
    run_dir: str | Path, iterations: int | None = None, progress: bool | None = None, overrides: Sequence[str] = ()
) -> RunResult:
    """Continue a run from its newest usable checkpoint, to `iterations` (default: the config's).

    `overrides` may change only what does not change results (the settings marked
    `WHERE_ONLY` in poet/config.py: `ray.*`, `evaluation.backend`, ...): continue on another pool. They hold for this resume only; of what it is given, only a new `iterations`
    target is saved in the run's config.yaml (a later plain resume goes on to it).

    A run already at its target returns at once, saying so. A run stopped before its first
    checkpoint starts again from iteration 0 (its tables emptied), as a fresh run would.
    """
    run_dir = Path(run_dir)
    config_path = run_dir / "config.yaml"
    missing = [name for name in ("config.yaml", "run.json") if not (run_dir / name).is_file()]
    if missing:  # before reading its config: another tool's config.yaml has other keys
        raise ConfigError(
            f"{str(run_dir)!r} is not a poet run directory (no {' or '.join(missing)}); `poet run` makes one"
        )
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if changes_results(key):
            raise ConfigError(
                f"--set {key}: a resumed run keeps every setting that changes results; only "
                f"{', '.join(where_only_settings())} may change"
            )
    # As saved: a run's config.yaml holds every setting resolved, and a curriculum's defaults
    # changed since (a newer version) must not change a run half-way.
    saved = load_as_saved(config_path)
    extra = [f"iterations={iterations}"] if iterations is not None else []
    cfg = load_as_saved(data=saved.to_dict(), overrides=[*overrides, *extra])
    parts = check_parts(cfg)
    _check_family_version(run_dir, parts.family)
    with RunDirLock(run_dir):  # before touching tables: another process may be writing them
        checkpoint.remove_partial(run_dir)
        if checkpoint.checkpoints(run_dir):
            try:
                snapshot = checkpoint.latest(
                    run_dir, identity_text(cfg, parts.family), rows_on_disk=complete_rows(run_dir)
                )
            except checkpoint.CheckpointError as exc:
                raise ConfigError(str(exc)) from None
        else:  # stopped before its first checkpoint: nothing to keep, start again as a fresh run
            snapshot = None
        if snapshot is not None and snapshot.iteration >= cfg.iterations:
            return _already_done(run_dir, snapshot, cfg.iterations)
        check_cluster_address(cfg)
        with workers_checked(cfg, parts.family):
            truncate_tables(run_dir, snapshot.table_rows if snapshot is not None else {})
            if snapshot is not None and snapshot.state.env_steps < 0:  # saved before the count was kept
                snapshot.state.env_steps = sum(int(r["env_steps"]) for r in read_rows(run_dir, "phases"))
            if cfg.iterations != saved.iterations:  # only the target: where this resume runs is its own
                save_config(dataclasses.replace(saved, iterations=cfg.iterations), config_path)
            return _drive(parts, run_dir, snapshot, progress, restart=snapshot is None)


def family_version(family: EnvFamily) -> int:
    """The version of what a family builds from params and a seed (its `version`, else 1)."""
    return int(getattr(family, "version", 1))


def _check_family_version(run_dir: Path, family: EnvFamily) -> None:
    """Refuse to resume a run whose family now builds other episodes from the same params."""
    try:
        made = int(json.loads((run_dir / "run.json").read_text()).get("family_version", 1))
    except (OSError, ValueError, TypeError, AttributeError):
        raise ConfigError(f"{run_dir / 'run.json'}: unreadable; is this a poet run directory?") from None
    now = family_version(family)
    if made != now:
        raise ConfigError(
            f"{run_dir}: made with version {made} of the {family.name!r} family, whose episodes this poet "
            f"builds differently (version {now}); resuming would change its envs half-way. Its records "
            f"still load for analysis; finish it with the poet it was made with, or start a new run"
        )


def _already_done(run_dir: Path, snapshot: checkpoint.Snapshot, target: int) -> RunResult:
    """The result of a resume with nothing to run (no Ray, no evaluator), with one line saying so."""
    state, done = snapshot.state, snapshot.iteration
    pop = state.population
    where = (
        f"already at its target, iteration {done}"
        if done == target
        else (f"at iteration {done}, past the target {target}")
    )
    print(
        f"poet: {run_dir} is {where}: nothing to run; `poet resume {run_dir} --iterations N` (N > {done}) goes further",
        file=sys.stderr,
    )
    return RunResult(run_dir, done, len(pop.active), len(pop.archive), state.annecs(), 0.0, state.annecs_reference)


def _drive(
    parts: RunParts, run_dir: Path, snapshot: checkpoint.Snapshot | None, progress: bool | None, restart: bool = False
) -> RunResult:
    """Run (or continue) the schedule (`restart`: a run without a checkpoint, started again)."""
    cfg = parts.cfg
    start = snapshot.iteration if snapshot is not None else 0
    record_start(run_dir / "run.json", start)
    # The first and the closing line print even without progress (--quiet): where the run is, how it ended.
    where = (
        "in this process"
        if cfg.evaluation.backend == "inprocess"
        else (f"on Ray at {cfg.ray.address}" if cfg.ray.address else "on a local Ray pool")
    )
    if snapshot is not None:
        verb = f"resuming at iteration {start} of"
    elif restart:
        verb = "no checkpoint yet: starting again from iteration 0 of"
    else:
        verb = "running"
    print(
        f"poet: {verb} {cfg.iterations} iterations of {cfg.curriculum} on {cfg.env.family}, seed {cfg.seed}, "
        f"rollouts {where}; run directory {run_dir}",
        file=sys.stderr,
    )
    bar = Progress(cfg.iterations, start, cfg.progress if progress is None else progress)
    t_start = time.perf_counter()
    ctx = build_context(parts, run_dir, bar.log)
    ray_start = time.perf_counter() - t_start if cfg.evaluation.backend == "ray" else 0.0
    return RunLoop(parts, ctx, run_dir, bar, snapshot, identity_text(cfg, parts.family), ray_start).run()
