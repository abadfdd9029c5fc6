"""Versioned, atomic, complete and safe checkpoints of a run.

A checkpoint is a folder `checkpoints/ckpt-<iteration>` holding:
- `state.json`: everything that is not a big array (population, archive, lineage, scores,
  trainer scalars, the agent and env ids of the score cache, solved envs, counters, the
  iteration);
- `arrays.npz`: every numpy array (weights, optimizer moments, the score cache's columns),
  loaded with `allow_pickle=False`, so opening a checkpoint cannot run code;
- `manifest.json`: format version, library versions, config hash, the record tables'
  row counts at that moment, and a SHA-256 of the two files above.

It is written into a temporary folder and renamed into place, so a crash never leaves
a half-written checkpoint under a final name. Random streams need no saving: every draw
comes from the root seed and the (phase, iteration, pair) it is for.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs import EnvParams
from poet.context import RunContext
from poet.errors import StorageError, is_storage_error
from poet.pair import Pair
from poet.population import Population
from poet.records import TABLES, fsync_dir
from poet.scoring import ScoreCache
from poet.state import RunState
from poet.version import __version__

FORMAT_VERSION = 2
READS = (1, 2)  # version 1 held the score cache as [agent, env, score] triples in state.json
PREFIX = "ckpt-"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt or of an unknown format."""


def config_hash(config_text: str) -> str:
    """Hash of the resolved config text."""
    return hashlib.sha256(config_text.encode()).hexdigest()[:16]


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- plain data <-> (json, arrays)


_PLAIN = frozenset({float, int, str, bool, type(None)})  # JSON values as they are


def _split(value: Any, prefix: str, arrays: dict[str, np.ndarray]) -> Any:
    """JSON-able form of nested data; arrays are moved to `arrays` and referenced by key."""
    if isinstance(value, np.ndarray):
        arrays[prefix] = value
        return {"__array__": prefix}
    if isinstance(value, dict):
        return {str(k): _split(v, f"{prefix}/{k}", arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if all(type(v) in _PLAIN for v in value):
            return list(value)
        return [_split(v, f"{prefix}/{i}", arrays) for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"checkpoint cannot hold a {type(value).__name__} at {prefix}")


def _join(value: Any, arrays: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return np.array(arrays[value["__array__"]])
        return {k: _join(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, arrays) for v in value]
    return value


def _pair_data(p: Pair, prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """A pair as checkpoint data, its arrays moved to `arrays` under `prefix`.

    Only its trainer state and weights go through `_split`'s walk: a run captures every pair
    at every iteration, and walking hundreds of archived pairs, their envs (a CPPN's genome
    each) and score histories took tens of milliseconds an iteration. An env is immutable,
    so its plain form is made once (`_env_data`); the scores are floats, one per iteration
    the pair trained."""
    retired = p.retired_iteration
    return {
        "pair_id": str(p.pair_id),
        "index": int(p.index),
        "env": _env_data(p.env),
        "theta": _split(p.theta, f"{prefix}/theta", arrays),
        "state": _split(p.state, f"{prefix}/state", arrays),
        "parent_env_id": None if p.parent_env_id is None else str(p.parent_env_id),
        "created_iteration": int(p.created_iteration),
        "scores": list(map(float, p.scores)),
        "retired_iteration": None if retired is None else int(retired),
    }


def score_columns(scores: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, list[str]], dict[str, np.ndarray]]:
    """The score cache as JSON (its agent and env ids, sorted, once each) and three columns
    (agent index, env index, score) in that order: a long run's cache holds millions of
    scores, and as numbers in the npz none of them is spelt out in JSON."""
    agents = sorted(scores)
    envs = sorted({env for by_env in scores.values() for env in by_env})
    env_index = {env: i for i, env in enumerate(envs)}
    sizes = [len(scores[agent]) for agent in agents]
    total = sum(sizes)
    agent_col = np.repeat(np.arange(len(agents), dtype=np.int32), sizes)
    env_col = np.fromiter((env_index[e] for a in agents for e in scores[a]), dtype=np.int32, count=total)
    score_col = np.fromiter((v for a in agents for v in scores[a].values()), dtype=np.float64, count=total)
    order = np.lexsort((env_col, agent_col))
    columns = {"agent": agent_col[order], "env": env_col[order], "score": score_col[order]}
    return {"agents": agents, "envs": envs}, {f"score_cache/{k}": v for k, v in columns.items()}


def read_score_cache(data: Any, arrays: dict[str, np.ndarray]) -> ScoreCache:
    """The score cache a checkpoint holds, in either format."""
    if isinstance(data, list):  # format 1
        triples: Iterable[tuple[str, str, float]] = ((a, e, float(s)) for a, e, s in data)
    else:
        agents, envs = data["agents"], data["envs"]
        triples = zip(
            [agents[i] for i in arrays["score_cache/agent"].tolist()],
            [envs[j] for j in arrays["score_cache/env"].tolist()],
            arrays["score_cache/score"].tolist(),
        )
    cache = ScoreCache()
    cache.put_many(triples)
    return cache


@functools.lru_cache(maxsize=1 << 16)
def _env_data(env: EnvParams) -> dict[str, Any]:
    """`env.to_dict()`, made once per env: shared by every capture, which only reads it."""
    return env.to_dict()


def _pair_from(d: dict[str, Any]) -> Pair:
    return Pair(
        pair_id=d["pair_id"],
        index=int(d["index"]),
        env=EnvParams.from_dict(d["env"]),
        theta=np.asarray(d["theta"], dtype=np.float32),
        state=d["state"],
        parent_env_id=d["parent_env_id"],
        created_iteration=int(d["created_iteration"]),
        scores=[float(s) for s in d["scores"]],
        retired_iteration=d["retired_iteration"],
    )


@dataclass
class Snapshot:
    """What a checkpoint holds, in memory: the run's state and the record tables' row counts."""

    state: RunState
    table_rows: dict[str, int]

    @property
    def iteration(self) -> int:
        """The next iteration to run."""
        return self.state.iteration


# ---------------------------------------------------------------- write


@dataclass
class Captured:
    """A run's state at an iteration boundary, copied out of the live objects: the run can go
    on (and be abandoned half-way through an iteration) and this still writes the boundary."""

    iteration: int
    state: dict[str, Any]
    arrays: dict[str, np.ndarray]
    table_rows: dict[str, int]


def capture(ctx: RunContext) -> Captured:
    """Copy what a checkpoint of the run's state holds (cheap: no disk)."""
    arrays: dict[str, np.ndarray] = {}
    run = ctx.state
    pop, iteration = run.population, run.iteration
    state = {
        "iteration": iteration,
        "population": {
            "active": [_pair_data(p, f"active/{p.pair_id}", arrays) for p in pop.active],
            "archive": [_pair_data(p, f"archive/{p.pair_id}", arrays) for p in pop.archive],
            "next_index": pop.next_index,
        },
        "solved": dict(run.solved),
        "annecs_reference": run.annecs_reference,
        "env_steps": run.env_steps,
        "score_cache": run.scores.snapshot(),
        "curriculum_data": _split(run.curriculum_data, "curriculum", arrays),
    }
    # copies: a trainer may update its arrays in place during the next iteration
    return Captured(iteration, state, {k: np.array(v) for k, v in arrays.items()}, ctx.records.row_counts())


def write(ctx: RunContext, captured: Captured, run_dir: Path, config_text: str, keep: int) -> Path:
    """Write a captured state as a checkpoint; keep the newest `keep` ones.

    Durable in order: the records it counts are fsynced first, then its own files and
    folder, then the rename into place and the folder that holds it.
    """
    root = Path(run_dir) / "checkpoints"
    iteration = captured.iteration
    tmp = root / f".tmp-{os.getpid()}-{PREFIX}{iteration:09d}"  # per process: never another writer's
    try:
        return _write(ctx, captured, root, tmp, config_text, keep)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # a partial checkpoint is never read; it only takes space
        if is_storage_error(exc):
            raise StorageError(exc, Path(run_dir), tmp) from None
        raise


def remove_partial(run_dir: Path) -> None:
    """Remove the temporary folders of checkpoints whose writing never finished (the caller
    holds the run directory's lock, so no other process is writing one)."""
    root = Path(run_dir) / "checkpoints"
    if root.is_dir():
        for path in root.glob(".tmp-*"):
            shutil.rmtree(path, ignore_errors=True)


def _write(ctx: RunContext, captured: Captured, root: Path, tmp: Path, config_text: str, keep: int) -> Path:
    ctx.records.sync()
    root.mkdir(exist_ok=True)
    iteration = captured.iteration
    final = root / f"{PREFIX}{iteration:09d}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    state = dict(captured.state)
    state["score_cache"], score_arrays = score_columns(state["score_cache"])
    (tmp / "state.json").write_text(json.dumps(state, sort_keys=True))
    np.savez(tmp / "arrays.npz", **captured.arrays, **score_arrays)
    manifest = {
        "format_version": FORMAT_VERSION,
        "iteration": iteration,
        "config_hash": config_hash(config_text),
        "versions": _versions(),
        "table_rows": captured.table_rows,
        "sha256": {name: _sha(tmp / name) for name in ("state.json", "arrays.npz")},
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    for name in ("state.json", "arrays.npz", "manifest.json"):
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    fsync_dir(root)
    _prune(root, keep)
    return final


@functools.cache
def _versions() -> dict[str, str]:
    """The installed versions that shape a run's numbers. torch's comes from its package
    metadata: importing torch to read it would load torch into runs that never use it.
    Read once per process (the metadata takes milliseconds, a checkpoint's share of them)."""
    return {
        "poet": __version__,
        "numpy": np.__version__,
        "torch": importlib.metadata.version("torch"),
        "gymnasium": importlib.metadata.version("gymnasium"),
    }


def _prune(root: Path, keep: int) -> None:
    done = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))
    for old in done[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- read


def load(path: Path, config_text: str | None = None) -> Snapshot:
    """Read and verify one checkpoint folder (raises CheckpointError if it is not usable)."""
    path = Path(path)
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable manifest ({exc.__class__.__name__})") from None
    version = manifest.get("format_version")
    if version not in READS:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r}; this poet {__version__} reads versions "
            f"{', '.join(map(str, READS))}"
        )
    for name, digest in manifest.get("sha256", {}).items():
        if not (path / name).exists() or _sha(path / name) != digest:
            raise CheckpointError(f"{path}: {name} is missing or corrupt (checksum mismatch)")
    if config_text is not None and manifest.get("config_hash") != config_hash(config_text):
        raise CheckpointError(f"{path}: written for a different config than {path.parents[1] / 'config.yaml'}")
    try:
        state = json.loads((path / "state.json").read_text())
        # allow_pickle=False: an object array (the only way a .npz can carry code) is refused.
        with np.load(path / "arrays.npz", allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: unreadable state ({exc})") from None
    pop_data = state["population"]
    population = Population(
        active=[_pair_from(_join(d, arrays)) for d in pop_data["active"]],
        archive=[_pair_from(_join(d, arrays)) for d in pop_data["archive"]],
        next_index=int(pop_data["next_index"]),
    )
    run = RunState(
        population=population,
        solved={k: int(v) for k, v in state["solved"].items()},
        annecs_reference=int(state.get("annecs_reference", 0)),
        scores=read_score_cache(state["score_cache"], arrays),
        iteration=int(state["iteration"]),
        # -1: a checkpoint from before the count was kept (the resume counts its phases table)
        env_steps=int(state.get("env_steps", -1)),
        curriculum_data=_join(state.get("curriculum_data", {}), arrays),
    )
    return Snapshot(run, {t: int(manifest["table_rows"].get(t, 0)) for t in TABLES})


def checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint folders of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def latest(run_dir: Path, config_text: str | None = None, rows_on_disk: dict[str, int] | None = None) -> Snapshot:
    """The newest usable checkpoint; broken newer ones are skipped with a warning naming them.

    With `rows_on_disk` (complete rows per table), a checkpoint whose tables lost rows it
    counted (a power loss after the checkpoint, a hand edit) is skipped too: resuming from it
    would leave a silent gap in the records.
    """
    found = checkpoints(run_dir)
    if not found:
        raise CheckpointError(f"{run_dir}: no checkpoints to resume from")
    reasons = []
    for path in reversed(found):
        try:
            snap = load(path, config_text)
        except CheckpointError as exc:
            if "format version" in str(exc):
                raise
            warnings.warn(f"skipping checkpoint {exc}", stacklevel=2)
            reasons.append(str(exc))
            continue
        short = [t for t in TABLES if rows_on_disk is not None and rows_on_disk.get(t, 0) < snap.table_rows[t]]
        if not short:
            return snap
        t = short[0]
        reason = (
            f"{path}: records/{t}.jsonl holds {rows_on_disk[t]} complete rows, the checkpoint counted "
            f"{snap.table_rows[t]}"
        )
        warnings.warn(f"skipping checkpoint {reason}", stacklevel=2)
        reasons.append(reason)
    raise CheckpointError(f"{run_dir}: no usable checkpoint of {len(found)}; newest: {reasons[0]}")
