"""Checkpoint and resume: a run killed hard and resumed equals the run that never stopped;
broken newest checkpoints are skipped; checkpoints cannot carry code."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import poet
from poet.analysis import load_run
from poet.runtime import checkpoint
from poet.scoring import ScoreCache
from tests.conftest import ROOT, poet_in_process

TABLES = ("iterations", "envs", "transfers", "events")


def _write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg))
    return path


def _final_state(run_dir: Path) -> tuple[str, dict[str, np.ndarray]]:
    last = checkpoint.checkpoints(run_dir)[-1]
    with np.load(last / "arrays.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return (last / "state.json").read_text(), arrays


def _assert_same_run(a: Path, b: Path) -> None:
    ra, rb = load_run(a), load_run(b)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(ra, table), getattr(rb, table), check_exact=True, obj=table)
    sa, xa = _final_state(a)
    sb, xb = _final_state(b)
    assert sa == sb
    assert xa.keys() == xb.keys() and all(np.array_equal(xa[k], xb[k]) for k in xa)


def _kill_after_checkpoint(
    cmd: list[str], run_dir: Path, iteration: int, timeout: float = 240, path: str = str(ROOT)
) -> int:
    """Start `cmd` (with PYTHONPATH `path`), wait until a checkpoint of `iteration` or later exists,
    SIGKILL the whole process tree while it still runs, and return the newest checkpoint's iteration."""
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    try:
        while _newest_checkpoint(run_dir) < iteration:
            if proc.poll() is not None:
                raise AssertionError(f"run ended before the kill: {proc.stderr.read().decode()[-2000:]}")
            assert time.monotonic() < deadline, "no checkpoint appeared in time"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the run and every Ray process it started
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended on its own: nothing was killed"
    return _newest_checkpoint(run_dir)


def _newest_checkpoint(run_dir: Path) -> int:
    """Iteration of the newest checkpoint folder (-1 if none); folders appear whole, by rename."""
    found = checkpoint.checkpoints(run_dir)
    return int(found[-1].name[len(checkpoint.PREFIX) :]) if found else -1


PPO_TINY = {"name": "ppo", "ppo": {"n_envs": 2, "n_steps": 32, "epochs": 2, "minibatch_size": 32}}


@pytest.mark.slow
@pytest.mark.parametrize("backend, trainer", [("inprocess", "es"), ("ray", "es"), ("inprocess", "ppo")])
def test_hard_kill_then_resume_equals_straight_run(tiny, tmp_path, backend, trainer, request):
    """PPO's state (Adam moments, normaliser, return scaler, value net) resumes exactly too."""
    if backend == "ray":  # the straight run in this process, on the tests' Ray instance
        request.getfixturevalue("ray_local")
    k, total = 8, 24
    # the killed run is set to go on far past `total`, so that it is still running when killed
    # however fast its iterations are; its resume stops at `total`
    cfg = tiny(
        curriculum="enhanced_poet",
        iterations=total,
        evaluation={"backend": backend},
        ray={"workers": 2},
        checkpoint={"every": 2, "keep": 2},
        **({"trainer": PPO_TINY} if trainer == "ppo" else {}),
    )
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    base = [sys.executable, "-m", "poet.cli"]
    poet.run(cfg, out=straight, progress=False)
    long_config = _write_config(tmp_path / "long.yaml", {**cfg, "iterations": 100_000})
    killed_at = _kill_after_checkpoint(base + ["run", str(long_config), "--out", str(killed), "--quiet"], killed, k)
    assert killed_at < total, f"the run got to iteration {killed_at} before the kill; raise `total`"
    assert len(load_run(killed).iterations) > 0
    poet.resume(killed, iterations=total, progress=False)
    _assert_same_run(straight, killed)
    run = load_run(killed)
    assert not run.iterations.duplicated(["iteration", "pair_id"]).any()
    assert sorted(run.iterations["iteration"].unique()) == list(range(total))


def test_resume_to_more_iterations_equals_longer_run(tiny, tmp_path):
    short, long_ = tmp_path / "short", tmp_path / "long"
    poet.run(tiny(iterations=6), out=short, progress=False)
    poet.resume(short, iterations=11, progress=False)
    poet.run(tiny(iterations=11), out=long_, progress=False)
    _assert_same_run(long_, short)
    assert yaml.safe_load((short / "config.yaml").read_text())["iterations"] == 11


def test_sigterm_checkpoints_and_resume_completes(tiny, tmp_path):
    cfg = tiny(iterations=400, checkpoint={"every": 0})
    config = _write_config(tmp_path / "cfg.yaml", cfg)
    out = tmp_path / "r"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "poet.cli", "run", str(config), "--out", str(out), "--quiet"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "records" / "iterations.jsonl").exists() or len(load_run(out).iterations) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "checkpoint saved" in err and "poet resume" in err
    saved = checkpoint.checkpoints(out)
    assert len(saved) == 1
    stopped_at = checkpoint.load(saved[0]).iteration
    assert len(load_run(out).iterations["iteration"].unique()) == stopped_at
    poet.resume(out, iterations=stopped_at + 2, progress=False)
    assert sorted(load_run(out).iterations["iteration"].unique()) == list(range(stopped_at + 2))


def test_corrupt_newest_checkpoint_is_skipped(tiny, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    cfg = tiny(iterations=9, checkpoint={"every": 3, "keep": 5})
    poet.run(cfg, out=a, progress=False)
    poet.run(cfg, out=b, progress=False)
    newest = checkpoint.checkpoints(b)[-1]
    data = bytearray((newest / "arrays.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (newest / "arrays.npz").write_bytes(bytes(data))
    # A half-written one (no manifest) is also left behind by a crash in the old layout.
    (b / "checkpoints" / f"{checkpoint.PREFIX}{99:09d}").mkdir()
    with pytest.warns(UserWarning, match=rf"{checkpoint.PREFIX}000000009.*corrupt"):
        snap = checkpoint.latest(b)
    assert snap.iteration == 6
    with pytest.warns(UserWarning):
        poet.resume(b, progress=False)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(load_run(a), table), getattr(load_run(b), table), check_exact=True)


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {_Boom.marker}",))


def test_tampered_checkpoint_cannot_run_code(tiny, tmp_path):
    run = tmp_path / "r"
    poet.run(tiny(iterations=3), out=run, progress=False)
    ckpt = checkpoint.checkpoints(run)[-1]
    marker = tmp_path / "pwned"
    _Boom.marker = marker
    # An attacker replaces the arrays with a pickled object array and fixes the checksums.
    payload = np.empty(1, dtype=object)
    payload[0] = _Boom()
    np.savez(ckpt / "arrays.npz", evil=payload)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["sha256"]["arrays.npz"] = checkpoint._sha(ckpt / "arrays.npz")
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(checkpoint.CheckpointError, match="unreadable state"):
        checkpoint.load(ckpt)
    assert not marker.exists(), "loading a checkpoint executed code"
    # state.json is plain JSON: a pickle there is just unreadable text.
    (ckpt / "state.json").write_bytes(pickle.dumps(_Boom()))
    manifest["sha256"]["state.json"] = checkpoint._sha(ckpt / "state.json")
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.load(ckpt)
    assert not marker.exists()


def test_unknown_format_version_is_a_clear_error(tiny, tmp_path):
    run = tmp_path / "r"
    poet.run(tiny(iterations=3), out=run, progress=False)
    ckpt = checkpoint.checkpoints(run)[-1]
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["format_version"] = 99
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(poet.ConfigError, match="format version 99"):
        poet.resume(run, progress=False)
    proc = poet_in_process(["resume", str(run)])
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "format version 99" in proc.stderr


def _as_format_1(ckpt: Path) -> None:
    """Rewrite a checkpoint as format 1 wrote it: the score cache as sorted [agent, env, score]
    triples in state.json, no score columns among the arrays."""
    state = json.loads((ckpt / "state.json").read_text())
    with np.load(ckpt / "arrays.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    ids = state["score_cache"]
    agents, envs, scores = (arrays.pop(f"score_cache/{k}").tolist() for k in ("agent", "env", "score"))
    state["score_cache"] = [[ids["agents"][a], ids["envs"][e], s] for a, e, s in zip(agents, envs, scores)]
    (ckpt / "state.json").write_text(json.dumps(state, sort_keys=True))
    np.savez(ckpt / "arrays.npz", **arrays)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["format_version"] = 1
    manifest["sha256"] = {name: checkpoint._sha(ckpt / name) for name in ("state.json", "arrays.npz")}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


def test_a_format_1_checkpoint_resumes_as_the_run_that_never_stopped(tiny, tmp_path):
    """Runs checkpointed before the score cache moved into columns resume unchanged."""
    cfg = tiny(curriculum="enhanced_poet", iterations=12, reproduction={"capacity": 2, "every": 4})
    poet.run(cfg, out=tmp_path / "straight", progress=False)
    poet.run({**cfg, "iterations": 8}, out=tmp_path / "old", progress=False)
    ckpt = checkpoint.checkpoints(tmp_path / "old")[-1]
    cache = checkpoint.load(ckpt).state.scores.by_agent
    _as_format_1(ckpt)
    assert checkpoint.load(ckpt).state.scores.by_agent == cache and sum(map(len, cache.values())) > 0
    poet.resume(tmp_path / "old", iterations=12, progress=False)
    _assert_same_run(tmp_path / "straight", tmp_path / "old")


def test_a_score_cache_snapshot_never_sees_later_changes():
    cache = ScoreCache()
    cache.put_many([("a", "e1", 1.0), ("b", "e1", 2.0)])
    before = cache.snapshot()
    cache.put_many([("a", "e2", 3.0), ("c", "e1", 4.0)])
    cache.keep_agents({"a", "c"})
    assert {k: dict(v) for k, v in before.items()} == {"a": {"e1": 1.0}, "b": {"e1": 2.0}}
    assert {k: dict(v) for k, v in cache.snapshot().items()} == {"a": {"e1": 1.0, "e2": 3.0}, "c": {"e1": 4.0}}
    assert cache.get("a", "e2") == 3.0 and cache.get("b", "e1") is None
    with pytest.raises(TypeError):
        cache.by_agent["a"]["e3"] = 5.0  # an agent's scores are replaced, never changed


def test_resume_of_a_directory_without_a_run(tmp_path):
    with pytest.raises(poet.ConfigError, match="not a poet run directory"):
        poet.resume(tmp_path, progress=False)


def test_resume_of_another_tools_run_says_it_is_not_a_poet_run(tmp_path):
    # it used to complain about the foreign config's keys ("model: unknown key ...")
    (tmp_path / "config.yaml").write_text("model: resnet50\nlr: 0.1\n")
    proc = poet_in_process(["resume", str(tmp_path)])
    assert proc.returncode == 2
    assert proc.stderr == (
        f"poet: error: {str(tmp_path)!r} is not a poet run directory (no run.json); `poet run` makes one\n"
    )


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poet.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout,
    )


def test_resume_saves_a_new_target_but_never_where_the_run_goes(tiny, tmp_path):
    run_dir = tmp_path / "r"
    poet.run(tiny(iterations=2, ray={"workers": 2}), out=run_dir, progress=False)
    before = yaml.safe_load((run_dir / "config.yaml").read_text())
    # the run is in-process: --workers and --address are taken and not used; none may stay behind
    proc = _cli("resume", str(run_dir), "--iterations", "3", "--workers", "1", "--address", "auto", "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert after == {**before, "iterations": 3}  # ray.workers still 2, ray.address still unset
    poet.resume(
        run_dir, iterations=4, overrides=["ray.workers=1", "checkpoint.keep=7", "progress=true"], progress=False
    )
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == {**before, "iterations": 4}


def test_resume_of_a_run_at_its_target_returns_at_once_saying_so(tiny, tmp_path):
    run_dir = tmp_path / "r"
    poet.run(tiny(iterations=3), out=run_dir, progress=False)
    rows = (run_dir / "records" / "iterations.jsonl").read_bytes()
    # an unreachable Ray address: a resume that started Ray or an evaluator would fail or hang
    proc = _cli("resume", str(run_dir), "--backend", "ray", "--address", "127.0.0.1:9")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        f"poet: {run_dir} is already at its target, iteration 3: nothing to run; "
        f"`poet resume {run_dir} --iterations N` (N > 3) goes further\n"
    )
    proc = _cli("resume", str(run_dir), "--iterations", "2", "--quiet")
    assert proc.returncode == 0 and "at iteration 3, past the target 2: nothing to run" in proc.stderr
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["iterations"] == 3
    assert (run_dir / "records" / "iterations.jsonl").read_bytes() == rows
    result = poet.resume(run_dir, progress=False)
    assert (result.iterations, result.seconds, result.active) == (
        3,
        0.0,
        len(checkpoint.latest(run_dir).state.population.active),
    )


@pytest.mark.parametrize("rows", [0, 3])
def test_a_run_killed_before_its_first_checkpoint_resumes_from_iteration_0(tiny, tmp_path, rows):
    """Killed at once (rows=0) or after a few iterations, with no checkpoint yet: `poet resume`
    starts it again from iteration 0, and it ends as a straight run does."""
    cfg = tiny(iterations=400, checkpoint={"every": 100})
    config = _write_config(tmp_path / "cfg.yaml", cfg)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "poet.cli", "run", str(config), "--out", str(killed), "--quiet"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    table = killed / "records" / "iterations.jsonl"
    deadline = time.monotonic() + 240
    try:
        while not (killed / "run.json").exists() or (
            rows and (not table.exists() or len(table.read_text().splitlines()) < rows)
        ):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not checkpoint.checkpoints(killed)
    out = _cli("resume", str(killed), "--iterations", "5", "--quiet")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no checkpoint yet: starting again from iteration 0 of 5 iterations" in out.stderr
    poet.run({**cfg, "iterations": 5}, out=tmp_path / "straight", progress=False)
    _assert_same_run(tmp_path / "straight", killed)


def test_checkpoint_keeps_the_last_k(tiny, tmp_path):
    run = tmp_path / "r"
    poet.run(tiny(iterations=10, checkpoint={"every": 2, "keep": 2}), out=run, progress=False)
    assert [p.name for p in checkpoint.checkpoints(run)] == [f"{checkpoint.PREFIX}{i:09d}" for i in (8, 10)]
    assert not list((run / "checkpoints").glob(".tmp-*"))


def _cut_rows(run_dir: Path, table: str, keep: int) -> None:
    path = run_dir / "records" / f"{table}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:keep]) + '{"iteration": 9, "pair_i')  # and a torn last line


def test_rows_cut_from_a_table_after_a_checkpoint_fall_back_or_refuse(tiny, tmp_path):
    """A table that lost rows a checkpoint counted: resume falls back to an older checkpoint whose
    rows are all there (and then equals the straight run), or refuses with one line; never a gap."""
    cfg = tiny(iterations=6, checkpoint={"every": 2, "keep": 3})
    run_dir = tmp_path / "r"
    poet.run(cfg, out=run_dir, progress=False)
    counted = {
        p.name: json.loads((p / "manifest.json").read_text())["table_rows"]["iterations"]
        for p in checkpoint.checkpoints(run_dir)
    }
    assert sorted(counted) == ["ckpt-000000002", "ckpt-000000004", "ckpt-000000006"]
    # lose the rows after checkpoint 4: checkpoint 6 counted them, 4 did not
    _cut_rows(run_dir, "iterations", counted["ckpt-000000004"])
    with pytest.warns(UserWarning, match=r"ckpt-000000006: records/iterations.jsonl holds \d+ complete rows"):
        result = poet.resume(run_dir, iterations=6, progress=False)
    assert result.iterations == 6
    straight = tmp_path / "straight"
    poet.run(cfg, out=straight, progress=False)
    _assert_same_run(run_dir, straight)
    # lose rows every checkpoint counted: one line, exit 2, tables left as they were
    _cut_rows(run_dir, "iterations", counted["ckpt-000000002"] - 1)
    before = (run_dir / "records" / "iterations.jsonl").read_bytes()
    out = poet_in_process(["resume", str(run_dir)])
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("poet: error:")]
    assert len(errors) == 1 and "no usable checkpoint" in errors[0] and "records/iterations.jsonl holds" in errors[0]
    assert (run_dir / "records" / "iterations.jsonl").read_bytes() == before


def test_resume_on_any_pool_equals_the_straight_run(ray_local, tiny, tmp_path):
    """A 2-worker run continued with 1 worker, with 3 workers (the CLI's own new Ray instance),
    and in-process: the same tables."""
    cfg = tiny(iterations=6, evaluation={"backend": "ray"}, ray={"workers": 2})
    poet.run(cfg, out=tmp_path / "straight", progress=False)
    poet.run({**cfg, "iterations": 3}, out=tmp_path / "half", progress=False)
    for name in ("one", "three", "local"):
        shutil.copytree(tmp_path / "half", tmp_path / name)
    poet.resume(tmp_path / "one", iterations=6, overrides=["ray.workers=1"], progress=False)
    poet.resume(tmp_path / "local", iterations=6, overrides=["evaluation.backend=inprocess"], progress=False)
    out = _cli("resume", str(tmp_path / "three"), "--iterations", "6", "--quiet", "--workers", "3")
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("one", "three", "local"):
        _assert_same_run(tmp_path / "straight", tmp_path / name)
    saved = yaml.safe_load((tmp_path / "local" / "config.yaml").read_text())
    # where a resume ran is its own: a later plain resume goes where the run was started
    assert (saved["evaluation"]["backend"], saved["ray"]["workers"], saved["iterations"]) == ("ray", 2, 6)


def test_resume_refuses_to_change_what_changes_results(tiny, tmp_path):
    poet.run(tiny(iterations=2), out=tmp_path / "r", progress=False)
    with pytest.raises(poet.ConfigError, match=r"--set trainer.es.lr: a resumed run keeps every setting"):
        poet.resume(tmp_path / "r", overrides=["trainer.es.lr=0.5"], progress=False)
    with pytest.raises(poet.ConfigError, match=r"--set evaluation.max_steps"):
        poet.resume(tmp_path / "r", overrides=["evaluation.max_steps=3"], progress=False)


def test_checkpoint_identity_covers_the_spec_file_a_family_reads(tiny, tmp_path):
    spec = tmp_path / "cartpole.yaml"
    spec.write_text((ROOT / "envs" / "specs" / "cartpole.yaml").read_text())
    cfg = tiny(
        iterations=2,
        env={"family": "gym", "options": {"spec": str(spec)}},
        evaluation={"max_steps": 50},
        policy={"hidden": [4]},
    )
    poet.run(cfg, out=tmp_path / "r", progress=False)
    spec.write_text(spec.read_text().replace("high: 20.0, step: 1.0}", "high: 30.0, step: 1.0}", 1))
    with pytest.raises(poet.ConfigError, match="different config"):
        poet.resume(tmp_path / "r", iterations=3, progress=False)


def test_a_capture_copies_every_pair_and_a_checkpoint_gives_them_back(tmp_path):
    """Pairs are captured without the generic walk (their envs made plain once): a checkpoint
    still holds each field as it was at the capture, numpy scores as floats, a CPPN env whole."""
    from types import SimpleNamespace

    from envs import make_family
    from poet.pair import Pair
    from poet.state import RunState

    rng = np.random.default_rng(0)
    cppn = make_family("terrain_cppn").sample(rng).with_course_seed(7)
    terrain = make_family("terrain").sample(rng)
    state = RunState()
    pop = state.population
    pop.active.append(
        Pair("p1", 1, cppn, rng.normal(size=5).astype(np.float32), {"m": np.zeros(5), "t": 3}, "e0", 4, [1.5])
    )
    pop.active[0].scores += [np.float32(2.25), np.float64(3.0), 4]
    pop.archive.append(Pair("p0", 0, terrain, np.ones(5, np.float32), {"t": 9}, None, 0, [0.5], retired_iteration=8))
    state.iteration = 12
    records = SimpleNamespace(row_counts=lambda: {}, sync=lambda: None)
    ctx = SimpleNamespace(state=state, records=records)
    captured = checkpoint.capture(ctx)
    pop.active[0].scores.append(9.0)  # after the capture: not in it
    pop.active[0].theta[0] = 100.0
    path = checkpoint.write(ctx, captured, tmp_path, "config", keep=1)
    back = checkpoint.load(path).state.population
    (active,), (archived,) = back.active, back.archive
    assert active.env == cppn and active.env.id == cppn.id and archived.env == terrain
    assert active.scores == [1.5, 2.25, 3.0, 4.0] and all(type(s) is float for s in active.scores)
    assert active.theta[0] != 100.0 and np.array_equal(active.state["m"], np.zeros(5)) and active.state["t"] == 3
    assert (active.pair_id, active.index, active.parent_env_id, active.created_iteration) == ("p1", 1, "e0", 4)
    assert (archived.parent_env_id, archived.retired_iteration, archived.scores) == (None, 8, [0.5])
