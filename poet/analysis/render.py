"""Animated GIFs of a run's agents (one deterministic episode of a pair's agent on an env),
and the course profile of any env a run admitted.

    render_gif("runs/demo", "p3", "p3.gif")                    # the pair's own env
    render_gif("runs/demo", "p3", "p3-on-p5.gif", env_id=...)  # any env the run admitted
    render_profile_png("runs/demo", "p3", "course.png")        # the whole course of p3's env
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from envs import EnvFamily, EnvParams
from poet.analysis import load_run
from poet.analysis.images import check_figure_out, course_figure, write_figure, write_gif
from poet.config import ConfigError, load_config
from poet.evaluation.requests import Rows
from poet.evaluation.slots import step_slots
from poet.pair import Pair
from poet.parts import RunParts, read_parts
from poet.policies import PolicySpec, batched_policy
from poet.runtime import checkpoint

MAX_FRAMES = 300  # longer episodes are subsampled so GIFs stay small
LISTED = 20  # ids named in an error message
GIF_FORMATS = (".gif",)  # what `render_gif` writes


@dataclass
class Episode:
    """One rendered episode: its frames (reset, then every step), return and length in steps."""

    frames: list[np.ndarray] = field(repr=False)
    ret: float
    length: int
    seed: int  # the env's reset seed (a pinned env's course seed)
    env_id: str  # the env's content id


def _listing(ids: Sequence[str]) -> str:
    """Up to LISTED ids, comma-separated, with how many there are in all if more."""
    shown = ", ".join(ids[:LISTED]) or "none"
    return shown if len(ids) <= LISTED else f"{shown}, ... ({len(ids)} in all)"


def _check_run_dir(run_dir: Path) -> None:
    """ConfigError unless `run_dir` holds config.yaml and records/."""
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "records").is_dir():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml and records/)")


def load_agents(run_dir: str | Path) -> tuple[RunParts, checkpoint.Snapshot]:
    """The run's parts (family, policy spec) and its newest checkpoint (the agents)."""
    path = Path(run_dir)
    _check_run_dir(path)
    parts = read_parts(load_config(path / "config.yaml"))
    if not checkpoint.checkpoints(path):
        raise ConfigError(f"{str(path)!r} has no checkpoints (agents' weights are saved only in checkpoints)")
    try:
        snapshot = checkpoint.latest(path)
    except checkpoint.CheckpointError as exc:
        raise ConfigError(str(exc)) from None
    return parts, snapshot


def find_pair(snapshot: checkpoint.Snapshot, pair_id: str) -> Pair:
    """The active or archived pair with this id (ConfigError listing the known ids)."""
    pairs = [*snapshot.state.population.active, *snapshot.state.population.archive]
    for pair in pairs:
        if pair.pair_id == pair_id:
            return pair
    known = _listing([p.pair_id for p in sorted(pairs, key=lambda p: p.index)])
    raise ConfigError(f"--pair: unknown pair {pair_id!r}; pairs in the newest checkpoint: {known}")


def find_env(run_dir: str | Path, env_id: str) -> EnvParams:
    """Params of any env the run admitted, by env id or by the id of the pair it was made for
    (ConfigError listing the known ids)."""
    envs = load_run(run_dir).envs
    rows = envs[envs["env_id"] == env_id]
    if not len(rows):
        rows = envs[envs["pair_id"] == env_id]  # a pair's own env: the one made for it
    if not len(rows):
        known = _listing([f"{e} ({p})" for e, p in zip(envs["env_id"], envs["pair_id"])])
        raise ConfigError(
            f"--env: unknown env {env_id!r} (neither an env id nor a pair id of this run); envs of this run: {known}"
        )
    return EnvParams.from_json(rows["params_json"].iloc[-1])


def _make_rgb_env(family: EnvFamily, params: EnvParams, name: str) -> gym.Env:
    """family.make_env(params, render_mode='rgb_array'), or ConfigError naming the family."""
    cannot = ConfigError(f"env family {name!r} cannot render rgb_array frames")
    try:
        env = family.make_env(params, render_mode="rgb_array")
    except (ValueError, TypeError, gym.error.Error):
        raise cannot from None
    if "rgb_array" not in (getattr(env, "metadata", None) or {}).get("render_modes", []):
        env.close()
        raise cannot
    return env


def _frame(env: gym.Env, name: str) -> np.ndarray:
    """One rgb frame of the env (ConfigError if it gives none)."""
    try:
        frame = env.render()
    except gym.error.Error:
        frame = None
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise ConfigError(f"env family {name!r} cannot render rgb_array frames")
    return np.ascontiguousarray(frame[:, :, :3], dtype=np.uint8)


def play_episode(
    family: EnvFamily,
    spec: PolicySpec,
    theta: np.ndarray,
    params: EnvParams,
    seed: int,
    max_steps: int,
    name: str = "?",
) -> Episode:
    """One deterministic episode of the policy `theta` on `params`: frames, return and length.

    The episode runs through the evaluators' own gymnasium episode loop (`step_slots`: the
    same forward, the same ends: termination, truncation, `max_steps`, a non-finite value),
    so its return is the score of the same episode (tests/test_report.py). An env pinned to a
    course (`params.course_seed`) runs that course whatever `seed` says.
    """
    policy = batched_policy(spec, np.asarray(theta, dtype=np.float32)[None, :])
    reset_seed = params.reset_seed(seed)
    recorder = _Recorder(_make_rgb_env(family, params, name), name)
    try:
        rows = Rows([params], [reset_seed], np.array([int(max_steps)], dtype=np.int64), policy)
        returns, lengths, _ = step_slots(family, rows, None, recorder)
    finally:
        recorder.env.close()
    return Episode(recorder.env.frames, float(returns[0]), int(lengths[0]), reset_seed, params.id)


class _Frames(gym.Wrapper):
    """An env that keeps an rgb frame after its reset and after every step."""

    def __init__(self, env: gym.Env, name: str):
        super().__init__(env)
        self.name = name
        self.frames: list[np.ndarray] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        out = self.env.reset(**kwargs)
        self.frames = [_frame(self.env, self.name)]
        return out

    def step(self, action: Any) -> tuple[Any, ...]:
        out = self.env.step(action)
        self.frames.append(_frame(self.env, self.name))
        return out


class _Recorder:
    """The one env the episode loop takes (and gives back), recording its frames."""

    def __init__(self, env: gym.Env, name: str):
        self.env = _Frames(env, name)

    def take(self, params: EnvParams) -> gym.Env:
        return self.env

    def give_back(self, params: EnvParams, env: gym.Env) -> None:
        pass


def episode_frames(
    family: EnvFamily,
    spec: PolicySpec,
    theta: np.ndarray,
    params: EnvParams,
    seed: int,
    max_steps: int,
    name: str = "?",
) -> list[np.ndarray]:
    """Frames of one deterministic episode (`play_episode`): reset, then every step."""
    return play_episode(family, spec, theta, params, seed, max_steps, name).frames


def subsample(frames: Sequence[np.ndarray], limit: int = MAX_FRAMES) -> tuple[list[np.ndarray], int]:
    """At most `limit` frames (every k-th, always keeping the last) and the step k."""
    k = max(1, math.ceil(len(frames) / limit))
    kept = list(frames[::k])
    if (len(frames) - 1) % k:
        kept[-1] = frames[-1]
    return kept, k


def check_gif_out(out: str | Path) -> Path:
    """`out` if it names a GIF file, else ConfigError naming the supported extensions."""
    path = Path(out)
    if path.suffix.lower() not in GIF_FORMATS:
        raise ConfigError(
            f"--out {str(path)!r}: poet render writes an animated GIF; supported extensions: "
            f"{', '.join(GIF_FORMATS)} (got {path.suffix or 'none'})"
        )
    return path


def render_gif(
    run_dir: str | Path,
    pair_id: str,
    out: str | Path,
    env_id: str | None = None,
    seed: int = 0,
    max_steps: int | None = None,
    fps: float = 20,
    on_episode: Callable[[Episode], None] | None = None,
) -> Path:
    """One episode of a pair's agent (newest checkpoint) on its own env or on `env_id`, as an animated GIF.

    `on_episode` is called with the episode as soon as it ends, before the GIF is written.
    """
    check_gif_out(out)
    if fps <= 0:
        raise ConfigError(f"fps must be > 0, got {fps}")
    parts, snapshot = load_agents(run_dir)
    pair = find_pair(snapshot, pair_id)
    params = pair.env if env_id is None else find_env(run_dir, env_id)
    steps = parts.cfg.evaluation.max_steps if max_steps is None else int(max_steps)
    episode = play_episode(parts.family, parts.spec, pair.theta, params, seed, steps, parts.cfg.env.family)
    if on_episode is not None:
        on_episode(episode)
    kept, k = subsample(episode.frames)
    return write_gif(kept, out, fps, k)


def render_profile_png(run_dir: str | Path, env_id: str, out: str | Path, seed: int = 0) -> Path:
    """The whole course of one env the run admitted (by env id or pair id, see `find_env`; its own
    course when pinned, else `seed`'s) as a figure: PNG, SVG or PDF by the extension of `out`."""
    check_figure_out(out)
    path = Path(run_dir)
    _check_run_dir(path)
    parts = read_parts(load_config(path / "config.yaml"))
    params = find_env(path, env_id)
    return write_figure(course_figure(parts.family, params, seed, params.id, parts.cfg.env.family), out)
