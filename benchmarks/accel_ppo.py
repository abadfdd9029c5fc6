"""PPO at dcd's sizes and its limits: ACCEL's PPO by phase, the commit before, a plain PyTorch
PPO loop, and the compiled rollout alone.

    python benchmarks/accel_ppo.py [--sizes dcd|laptop] [--iterations 20] [--plain-updates 6]
        [--repeats 3] [--before REV] [--json PATH]

1. accel: `experiments/ued_terrain.yaml` (ACCEL with dcd's PPO settings), at dcd's PPO sizes
   with `--sizes dcd` (16 levels x 2,048 steps per update, 5 epochs of 32 minibatches of
   1,024; the config's own 400-step episodes) or at the config's (`laptop`: 400 steps,
   minibatches of 200), run in this process (`evaluation.backend: inprocess`) so that its
   parts can be timed by wrapping the functions that do them: each PPO update's rollout
   (`collect`), its GAE (`gae`), its minibatch epochs (`_update` less GAE), the rollouts that
   score new levels by regret (`ppo_regret_job`, its rollout included), the evaluator's
   scoring waves (`evaluate`: the held-out levels) and the rest (the curriculum, records,
   checkpoints).
2. accel_before (with `--before REV`): the same run from the code at REV, checked out into a
   temporary git worktree and run in a fresh process whose PYTHONPATH puts it first.
3. plain: the same PPO work written as plain PyTorch, top to bottom, CleanRL-style, no
   framework and no Ray: as many levels as ACCEL trains on per update, each stepped as a
   gymnasium env (the family's `make_env`), `n_steps` steps each with an episode restarted
   where it ends, one torch forward for all levels per step, GAE (the framework's own numpy
   `gae`, so that part times the same code), then the same epochs and minibatch size with
   torch's Adam and gradient clipping. Its levels are drawn at random each update (domain
   randomisation), so no curriculum work is in it.
4. rollout_alone: the upper bound of a rollout, the evaluator's compiled rollout of a fixed
   policy (the run's initial one) on the same number of levels and about as many steps as
   one update's rollout, in this process.
5. After the runs, one minibatch step at the minibatch size, three ways on the same data:
   the mlp learner's written-out gradient, the same loss by autograd, and the plain loop's.

The script prints, for each, the seconds per PPO update by part and the rates: every env step
taken per second of the whole run (ACCEL's scoring rollouts included), the env steps PPO
trained on per second, and the rollout phase's own steps per second beside the compiled
rollout alone. Runs alternate (accel, accel_before, plain, rollout_alone, accel, ...) after an untimed
short ACCEL run from each tree (a fresh worktree compiles its kernels on first use), and
the medians are reported. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

import poet
from envs import make_family
from poet.evaluation import EvalRequest, InProcessEvaluator
from poet.policies import init_flat, spec_for_spaces
from poet.trainers import ppo_job
from poet.trainers.ppo import PPOOptions, gae

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "ued_terrain.yaml"
PARTS = ("rollout", "gae", "update", "level_scoring", "evaluations", "rest")
# dcd's bipedal configs: 16 processes x 2,048 steps, ppo_epoch 5, num_mini_batch 32; `laptop`:
# the config's own (experiments/ued_terrain.yaml)
SIZES = {"dcd": {"n_steps": 2048, "minibatch_size": 1024}, "laptop": {}}
WARM_UP_ITERATIONS = 6  # enough for ACCEL's first PPO update


# ============================================================== ACCEL through the framework
class PartTimer:
    """Seconds spent inside wrapped functions, by part (an inner part is not counted twice)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.calls = dict.fromkeys(PARTS, 0)
        self._stack: list[str] = []

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if "level_scoring" in self._stack:  # a scoring job's own rollout is scoring
                return fn(*args, **kwargs)
            outer = self._stack[-1] if self._stack else None
            self._stack.append(part)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                self._stack.pop()
                self.seconds[part] += spent
                self.calls[part] += 1
                if outer is not None:
                    self.seconds[outer] -= spent  # the outer part's own time only

        return timed


@contextmanager
def timed_framework(timer: PartTimer):
    """Wrap the framework's functions for one run. Job functions are resolved by name once per
    process, so that cache is emptied on the way in and out: a run finds this run's wrappers."""
    from poet.evaluation import inprocess, jobs

    wrapped = [
        (ppo_job._Rollouts, "collect", "rollout"),
        (getattr(ppo_job, "_KernelRollouts", None), "collect", "rollout"),  # absent before the compiled rollouts
        (ppo_job, "gae", "gae"),
        (ppo_job, "_update", "update"),
        (ppo_job, "ppo_regret_job", "level_scoring"),
        (inprocess.InProcessEvaluator, "evaluate", "evaluations"),
    ]
    saved = [(owner, name) for owner, name, _ in wrapped if owner is not None]
    parts = [part for owner, _, part in wrapped if owner is not None]
    originals = [getattr(owner, name) for owner, name in saved]
    for (owner, name), original, part in zip(saved, originals, parts):
        setattr(owner, name, timer.wrap(part, original))
    jobs.resolve_job_fn.cache_clear()
    try:
        yield
    finally:
        for (owner, name), original in zip(saved, originals):
            setattr(owner, name, original)
        jobs.resolve_job_fn.cache_clear()


def run_accel(iterations: int, sizes: str) -> dict[str, Any]:
    """One ACCEL run in this process: wall seconds, env steps and seconds by part."""
    timer = PartTimer()
    overrides = [f"iterations={iterations}", "evaluation.backend=inprocess"]
    overrides += [f"trainer.ppo.{k}={v}" for k, v in SIZES[sizes].items()]
    with tempfile.TemporaryDirectory() as tmp, timed_framework(timer):
        t0 = time.perf_counter()
        result = poet.run(CONFIG, out=Path(tmp) / "run", overrides=overrides, progress=False)
        wall = time.perf_counter() - t0
        run = poet.analysis.load_run(result.run_dir)
        env_steps = int(run.phases["env_steps"].sum())
    timer.seconds["rest"] = wall - sum(timer.seconds.values())
    return {
        "wall_seconds": wall,
        "env_steps": env_steps,
        "env_steps_per_s": env_steps / wall,
        "ppo_updates": timer.calls["update"],
        "seconds": timer.seconds,
        "calls": timer.calls,
    }


def run_accel_at(tree: Path, iterations: int, sizes: str) -> dict[str, Any]:
    """`run_accel` from the code in `tree` (another commit's worktree), in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "accel.json"
        cmd = [sys.executable, __file__, "--accel-only", "--iterations", str(iterations), "--sizes", sizes]
        env = os.environ | {"PYTHONPATH": str(tree)}
        subprocess.run([*cmd, "--json", str(out)], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


# ============================================================== the compiled rollout alone
def run_rollout_alone(n_levels: int, steps: int, hidden: list[int], max_steps: int, waves: int = 20) -> dict[str, Any]:
    """The evaluator's compiled rollout of one fixed policy on `n_levels` levels, episodes enough
    for about `steps` env steps in all per wave: `waves` waves on courses not seen before,
    timed together (after a first, untimed wave that compiles)."""
    family = make_family("terrain")
    probe = family.make_env(family.initial())
    spec = spec_for_spaces(probe.observation_space, probe.action_space, tuple(hidden), "tanh")
    evaluator = InProcessEvaluator(family, spec)
    ref = evaluator.put(init_flat(spec, np.random.default_rng(0)))
    levels = [family.sample(np.random.default_rng(i)) for i in range(n_levels)]
    courses = max(1, -(-steps // (n_levels * max_steps)))  # per level, one episode on each

    def wave(first_seed: int) -> list[EvalRequest]:  # a deterministic policy: one episode per course
        seeds = range(first_seed, first_seed + courses)
        return [EvalRequest(ref, level.with_course_seed(s), 1, 0, max_steps) for level in levels for s in seeds]

    evaluator.evaluate(wave(0))
    env_steps, wall = 0, 0.0
    for k in range(1, waves + 1):
        requests = wave(k * courses)  # courses it has not seen
        t0 = time.perf_counter()
        results = evaluator.evaluate(requests)
        wall += time.perf_counter() - t0
        env_steps += int(sum(r.lengths.sum() for r in results))
    return {"wall_seconds": wall, "env_steps": env_steps, "env_steps_per_s": env_steps / wall}


# ============================================================== one minibatch step
def run_minibatch_steps(o: PPOOptions, hidden: list[int], steps: int = 200) -> dict[str, float]:
    """Milliseconds per minibatch step at `o`'s minibatch size, on the same random minibatch:
    the mlp learner's written-out step (`minibatch_step`), the same loss by autograd
    (`autograd_step`), and the plain loop's (autograd and torch's Adam); interleaved, medians
    of 5 blocks of `steps` steps each."""
    from poet.trainers.ppo_loss import autograd_step

    family = make_family("terrain")
    probe = family.make_env(family.initial())
    spec = spec_for_spaces(probe.observation_space, probe.action_space, tuple(hidden), "tanh")
    n, rng = o.minibatch_size, np.random.default_rng(0)
    x, u = torch.as_tensor(rng.standard_normal((n, spec.obs_dim), np.float32)), torch.randn(n, spec.act_dim)
    old_logp, adv, ret = torch.randn(n) - 2.0, torch.randn(n), torch.randn(n)
    learners = [ppo_job._Learner(spec, o.value_hidden) for _ in range(2)]
    sums = dict.fromkeys(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"), 0.0)
    adam = [
        {"t": 0, "m": np.zeros(lr.get().size, np.float32), "v": np.zeros(lr.get().size, np.float32)} for lr in learners
    ]
    actor, critic = mlp([spec.obs_dim, *hidden, spec.act_dim]), mlp([spec.obs_dim, *o.value_hidden, 1])
    log_std = torch.nn.Parameter(torch.zeros(spec.act_dim))
    params = [*actor.parameters(), log_std, *critic.parameters()]
    opt = torch.optim.Adam(params, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.adam_eps)

    ways = {
        "written_out": lambda: learners[0].minibatch_step(x, u, old_logp, adv, ret, adam[0], o, sums),
        "autograd": lambda: autograd_step(learners[1], x, u, old_logp, adv, ret, adam[1], o, sums),
        "plain": lambda: plain_step(o, actor, critic, log_std, params, opt, x, u, old_logp, adv, ret),
    }
    blocks: dict[str, list[float]] = {way: [] for way in ways}
    for block in range(6):
        for way, step in ways.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            if block:  # the first block warms up
                blocks[way].append(1e3 * (time.perf_counter() - t0) / steps)
    return {way: statistics.median(ms) for way, ms in blocks.items()}


# ============================================================== plain PyTorch PPO
def mlp(sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def plain_step(
    o: PPOOptions,
    actor: torch.nn.Module,
    critic: torch.nn.Module,
    log_std: torch.nn.Parameter,
    params: list[torch.nn.Parameter],
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    u: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    ret: torch.Tensor,
) -> None:
    """The plain loop's minibatch step: the clipped objective, Huber value loss and entropy
    bonus by autograd, the gradient clipped, torch's Adam."""
    logp = (-0.5 * ((u - actor(x)) / log_std.exp()) ** 2 - log_std - 0.919).sum(-1)
    ratio = (logp - old_logp).exp()
    policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - o.clip, 1 + o.clip) * adv).mean()
    value_loss = torch.nn.functional.smooth_l1_loss(critic(x).squeeze(-1), ret)
    loss = policy_loss + o.vf_coef * value_loss - o.ent_coef * (log_std + 1.419).sum()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, o.max_grad_norm)
    opt.step()


def run_plain(o: PPOOptions, n_levels: int, hidden: list[int], max_steps: int, updates: int) -> dict[str, Any]:
    """PPO on `n_levels` random terrain levels per update, written plainly; seconds by part."""
    family = make_family("terrain")
    probe = family.make_env(family.initial())
    spec = spec_for_spaces(probe.observation_space, probe.action_space, tuple(hidden), "tanh")
    low, high = torch.tensor(spec.action_low), torch.tensor(spec.action_high)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    actor, critic = mlp([spec.obs_dim, *hidden, spec.act_dim]), mlp([spec.obs_dim, *o.value_hidden, 1])
    log_std = torch.nn.Parameter(torch.full((spec.act_dim,), o.init_log_std))
    params = [*actor.parameters(), log_std, *critic.parameters()]
    opt = torch.optim.Adam(params, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.adam_eps)
    seconds = dict.fromkeys(PARTS, 0.0)
    steps, n, t_start = 0, n_levels, time.perf_counter()
    for _ in range(updates):
        t0 = time.perf_counter()
        envs = [family.make_env(family.sample(rng)) for _ in range(n)]
        obs = np.stack([env.reset(seed=int(rng.integers(2**31)))[0] for env in envs])
        ep_len = np.zeros(n, dtype=np.int64)
        buf_obs = np.empty((o.n_steps, n, spec.obs_dim), np.float32)
        buf_u = np.empty((o.n_steps, n, spec.act_dim), np.float32)
        buf_logp, buf_v, buf_r = (np.empty((o.n_steps, n), np.float32) for _ in range(3))
        buf_cont = np.ones((o.n_steps, n), np.float32)
        for t in range(o.n_steps):
            buf_obs[t] = obs
            with torch.no_grad():
                x = torch.as_tensor(obs)
                mean = actor(x)
                u = mean + log_std.exp() * torch.randn_like(mean)
                buf_logp[t] = (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.919).sum(-1).numpy()
                buf_v[t] = critic(x).squeeze(-1).numpy()
                actions = (low + (torch.tanh(u) + 1.0) * 0.5 * (high - low)).numpy()
            buf_u[t] = u.numpy()
            for i, env in enumerate(envs):
                o_i, r, term, trunc, _ = env.step(actions[i])
                buf_r[t, i] = r
                ep_len[i] += 1
                if term or trunc or ep_len[i] >= max_steps:
                    buf_cont[t, i] = 0.0
                    ep_len[i] = 0
                    o_i = env.reset(seed=int(rng.integers(2**31)))[0]
                obs[i] = o_i
        with torch.no_grad():
            last_v = critic(torch.as_tensor(obs)).squeeze(-1).numpy()
        steps += o.n_steps * n
        t1 = time.perf_counter()
        next_v = np.concatenate([buf_v[1:], last_v[None]]) * buf_cont
        adv = gae(buf_r.astype(np.float64), buf_v.astype(np.float64), next_v, buf_cont, o.gamma, o.gae_lambda)
        t2 = time.perf_counter()
        ret = torch.as_tensor((adv + buf_v).reshape(-1), dtype=torch.float32)
        adv_t = torch.as_tensor(adv.reshape(-1), dtype=torch.float32)
        adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-5)
        x_all, u_all = (
            torch.as_tensor(buf_obs.reshape(-1, spec.obs_dim)),
            torch.as_tensor(buf_u.reshape(-1, spec.act_dim)),
        )
        old_logp = torch.as_tensor(buf_logp.reshape(-1))
        total = adv_t.numel()
        for _ in range(o.epochs):
            order = torch.as_tensor(rng.permutation(total))
            for start in range(0, total - o.minibatch_size + 1, o.minibatch_size):
                idx = order[start : start + o.minibatch_size]
                batch = (x_all[idx], u_all[idx], old_logp[idx], adv_t[idx], ret[idx])
                plain_step(o, actor, critic, log_std, params, opt, *batch)
        t3 = time.perf_counter()
        seconds["rollout"] += t1 - t0
        seconds["gae"] += t2 - t1
        seconds["update"] += t3 - t2
    wall = time.perf_counter() - t_start
    seconds["rest"] = wall - sum(seconds.values())
    return {
        "wall_seconds": wall,
        "env_steps": steps,
        "env_steps_per_s": steps / wall,
        "ppo_updates": updates,
        "seconds": seconds,
    }


def per_update(run: dict[str, Any]) -> dict[str, float]:
    """Milliseconds per PPO update, by part."""
    return {part: 1e3 * s / max(1, run["ppo_updates"]) for part, s in run["seconds"].items()}


def rollout_steps_per_s(run: dict[str, Any], n_levels: int, n_steps: int) -> float:
    """The env steps of a run's PPO rollouts per second spent in them."""
    return run["calls"]["rollout"] * n_levels * n_steps / max(run["seconds"]["rollout"], 1e-9)


def report(rep: int, way: str, r: dict[str, Any]) -> None:
    parts = ", ".join(f"{k} {v:.0f}" for k, v in per_update(r).items()) if "seconds" in r else ""
    print(
        f"[rep {rep + 1}] {way}: {r['env_steps_per_s']:,.0f} env steps/s, {r['wall_seconds']:.1f}s"
        + (f"; {r['ppo_updates']} PPO updates, ms per update: {parts}" if parts else ""),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", choices=sorted(SIZES), default="dcd", help="PPO sizes: dcd's, or the config's")
    parser.add_argument("--iterations", type=int, default=20, help="ACCEL iterations per run")
    parser.add_argument("--plain-updates", type=int, default=6, help="PPO updates per plain run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", default=None, help="also run ACCEL from the code at this git revision")
    parser.add_argument("--accel-only", action="store_true", help=argparse.SUPPRESS)  # one run, for --before
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a pool worker runs a job: one core
    if args.accel_only:
        args.json.write_text(json.dumps(run_accel(args.iterations, args.sizes)))
        return
    cfg = poet.load_config(CONFIG)
    o = PPOOptions(**{**cfg.trainer.section("ppo"), **SIZES[args.sizes]})
    n_levels = int(cfg.curriculum_options.get("num_levels", o.n_envs))
    hidden, max_steps = list(cfg.policy.hidden), cfg.evaluation.max_steps
    ways = ["accel", *(["accel_before"] if args.before else []), "plain", "rollout_alone"]
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in ways}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        if args.before:
            subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT, check=True)
        try:
            # a short untimed run from each tree first: a fresh worktree compiles its numba
            # kernels on first use (cache=True writes them into that tree), which no rep should pay
            run_accel(WARM_UP_ITERATIONS, args.sizes)
            if args.before:
                run_accel_at(before, WARM_UP_ITERATIONS, args.sizes)
            for rep in range(args.repeats):
                for way in ways:
                    if way == "accel":
                        r = run_accel(args.iterations, args.sizes)
                    elif way == "accel_before":
                        r = run_accel_at(before, args.iterations, args.sizes)
                    elif way == "plain":
                        r = run_plain(o, n_levels, hidden, max_steps, args.plain_updates)
                    else:
                        r = run_rollout_alone(n_levels, n_levels * o.n_steps, hidden, max_steps)
                    runs[way].append(r)
                    report(rep, way, r)
        finally:
            if args.before:
                subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=True)
    minibatch_ms = run_minibatch_steps(o, hidden)
    print("ms per minibatch step: " + ", ".join(f"{way} {ms:.2f}" for way, ms in minibatch_ms.items()))
    median = {way: statistics.median(r["env_steps_per_s"] for r in rs) for way, rs in runs.items()}
    # the env steps PPO trains on (levels x n_steps per update), over the whole run's time: ACCEL's
    # scoring rollouts then count as the cost they are, not as steps
    trained, rollout, breakdown = {}, {}, {}
    for way, rs in runs.items():
        if way == "rollout_alone":
            continue
        for r in rs:
            r["trained_steps_per_s"] = r["ppo_updates"] * n_levels * o.n_steps / r["wall_seconds"]
            if way != "plain":
                r["rollout_steps_per_s"] = rollout_steps_per_s(r, n_levels, o.n_steps)
        trained[way] = statistics.median(r["trained_steps_per_s"] for r in rs)
        rollout[way] = statistics.median(r.get("rollout_steps_per_s", 0.0) for r in rs)
        breakdown[way] = {p: statistics.median(per_update(r)[p] for r in rs) for p in PARTS}
    rollout["plain"] = statistics.median(
        r["ppo_updates"] * n_levels * o.n_steps / r["seconds"]["rollout"] for r in runs["plain"]
    )
    ratios = {
        "accel_vs_plain": median["accel"] / median["plain"],
        "accel_vs_plain_trained": trained["accel"] / trained["plain"],
        "accel_rollout_vs_rollout_alone": rollout["accel"] / median["rollout_alone"],
    }
    if args.before:
        ratios["accel_vs_before"] = median["accel"] / median["accel_before"]
        ratios["accel_vs_before_trained"] = trained["accel"] / trained["accel_before"]
    summary = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
        "sizes": {
            "name": args.sizes,
            "levels_per_update": n_levels,
            "n_steps": o.n_steps,
            "epochs": o.epochs,
            "minibatch_size": o.minibatch_size,
            "max_steps": max_steps,
            "policy_hidden": hidden,
            "value_hidden": list(o.value_hidden),
            "accel_iterations": args.iterations,
            "plain_updates": args.plain_updates,
            "repeats": args.repeats,
        },
        "before": args.before,
        "median_env_steps_per_s": median,
        "median_trained_steps_per_s": trained,
        "median_rollout_steps_per_s": rollout,
        **{k: round(v, 3) for k, v in ratios.items()},
        "ms_per_update": breakdown,
        "ms_per_minibatch_step": minibatch_ms,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "runs": runs,
    }
    print("env steps/s: " + ", ".join(f"{way} {v:,.0f}" for way, v in median.items()))
    print("env steps trained on per s: " + ", ".join(f"{way} {v:,.0f}" for way, v in trained.items()))
    print("rollout phase env steps/s: " + ", ".join(f"{way} {v:,.0f}" for way, v in rollout.items()))
    print(", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    for way in breakdown:
        print(f"  {way}: ms per PPO update: " + ", ".join(f"{p} {v:.0f}" for p, v in breakdown[way].items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
