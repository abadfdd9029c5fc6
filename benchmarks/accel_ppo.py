"""Where ACCEL's time goes with PPO, against a plain PyTorch PPO loop on the same family and sizes.

    python benchmarks/accel_ppo.py [--iterations 60] [--plain-updates 30] [--repeats 3] [--json PATH]

1. ACCEL: `experiments/ued_terrain.yaml` (ACCEL with dcd's PPO settings at laptop scale),
   run in this process (`evaluation.backend: inprocess`) so that its parts can be timed by
   wrapping the functions that do them: each PPO update's rollout (`_Rollouts.collect`), its
   GAE (`gae`), its minibatch epochs (`_update` less GAE), the rollouts that score new levels
   by regret (`ppo_regret_job`, its rollout included), the evaluator's scoring waves
   (`evaluate`: the held-out levels) and the rest (the curriculum, records, checkpoints).
2. plain: the same PPO work written as plain PyTorch, top to bottom, no framework and no Ray:
   as many levels as ACCEL trains on per update, each stepped as a gymnasium env (the family's
   `make_env`, as the framework's job steps them), `n_steps` steps each with an episode
   restarted where it ends, one torch forward for all levels per step, GAE (the framework's
   own numpy `gae`, so that part times the same code), then the same epochs and
   minibatch size with torch's Adam and gradient clipping. Its levels are
   drawn at random each update (domain randomisation), so no curriculum work is in it.

The script prints, for each, the seconds per PPO update by part and two rates over the whole
run: every env step taken (ACCEL's scoring rollouts included), and the env steps PPO trained
on (levels x `n_steps` per update), whose ratio is ACCEL's share of plain code for the same
training. Runs alternate
(ACCEL, plain, ACCEL, plain, ...) and the medians are reported. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
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
from poet.policies import spec_for_spaces
from poet.trainers import ppo_job
from poet.trainers.ppo import PPOOptions, gae

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "experiments" / "ued_terrain.yaml"
PARTS = ("rollout", "gae", "update", "level_scoring", "evaluations", "rest")


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

    saved = [
        (ppo_job._Rollouts, "collect"),
        (ppo_job, "gae"),
        (ppo_job, "_update"),
        (ppo_job, "ppo_regret_job"),
        (inprocess.InProcessEvaluator, "evaluate"),
    ]
    originals = [getattr(owner, name) for owner, name in saved]
    parts = ["rollout", "gae", "update", "level_scoring", "evaluations"]
    for (owner, name), original, part in zip(saved, originals, parts):
        setattr(owner, name, timer.wrap(part, original))
    jobs.resolve_job_fn.cache_clear()
    try:
        yield
    finally:
        for (owner, name), original in zip(saved, originals):
            setattr(owner, name, original)
        jobs.resolve_job_fn.cache_clear()


def run_accel(iterations: int) -> dict[str, Any]:
    """One ACCEL run in this process: wall seconds, env steps and seconds by part."""
    timer = PartTimer()
    overrides = [f"iterations={iterations}", "evaluation.backend=inprocess"]
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


# ============================================================== plain PyTorch PPO
def mlp(sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


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
                mean = actor(x_all[idx])
                logp = (-0.5 * ((u_all[idx] - mean) / log_std.exp()) ** 2 - log_std - 0.919).sum(-1)
                ratio = (logp - old_logp[idx]).exp()
                a = adv_t[idx]
                policy_loss = -torch.min(ratio * a, ratio.clamp(1 - o.clip, 1 + o.clip) * a).mean()
                value_loss = torch.nn.functional.smooth_l1_loss(critic(x_all[idx]).squeeze(-1), ret[idx])
                entropy = (log_std + 1.419).sum()
                loss = policy_loss + o.vf_coef * value_loss - o.ent_coef * entropy
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, o.max_grad_norm)
                opt.step()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60, help="ACCEL iterations per run")
    parser.add_argument("--plain-updates", type=int, default=30, help="PPO updates per plain run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a pool worker runs a job: one core
    cfg = poet.load_config(CONFIG)
    o = PPOOptions(**cfg.trainer.section("ppo"))
    n_levels = int(cfg.curriculum_options.get("num_levels", o.n_envs))
    runs: dict[str, list[dict[str, Any]]] = {"accel": [], "plain": []}
    t0 = time.perf_counter()
    for rep in range(args.repeats):
        runs["accel"].append(run_accel(args.iterations))
        runs["plain"].append(
            run_plain(o, n_levels, list(cfg.policy.hidden), cfg.evaluation.max_steps, args.plain_updates)
        )
        for way in runs:
            r = runs[way][-1]
            print(
                f"[rep {rep + 1}] {way}: {r['env_steps_per_s']:,.0f} env steps/s, {r['ppo_updates']} PPO updates, "
                f"{r['wall_seconds']:.1f}s; ms per update: "
                + ", ".join(f"{k} {v:.0f}" for k, v in per_update(r).items()),
                flush=True,
            )
    median = {way: statistics.median(r["env_steps_per_s"] for r in rs) for way, rs in runs.items()}
    # the env steps PPO trains on (levels x n_steps per update), over the whole run's time: ACCEL's
    # scoring rollouts then count as the cost they are, not as steps
    for rs in runs.values():
        for r in rs:
            r["trained_steps_per_s"] = r["ppo_updates"] * n_levels * o.n_steps / r["wall_seconds"]
    trained = {way: statistics.median(r["trained_steps_per_s"] for r in rs) for way, rs in runs.items()}
    breakdown = {way: {p: statistics.median(per_update(r)[p] for r in rs) for p in PARTS} for way, rs in runs.items()}
    summary = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
        "sizes": {
            "levels_per_update": n_levels,
            "n_steps": o.n_steps,
            "epochs": o.epochs,
            "minibatch_size": o.minibatch_size,
            "policy_hidden": list(cfg.policy.hidden),
            "value_hidden": list(o.value_hidden),
            "accel_iterations": args.iterations,
            "plain_updates": args.plain_updates,
            "repeats": args.repeats,
        },
        "median_env_steps_per_s": median,
        "accel_vs_plain": round(median["accel"] / median["plain"], 3),
        "median_trained_steps_per_s": trained,
        "accel_vs_plain_trained": round(trained["accel"] / trained["plain"], 3),
        "ms_per_update": breakdown,
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "runs": runs,
    }
    print(
        f"env steps/s: ACCEL {median['accel']:,.0f}, plain PPO {median['plain']:,.0f} "
        f"(ACCEL / plain {summary['accel_vs_plain']:.2f}); env steps trained on per second: ACCEL "
        f"{trained['accel']:,.0f}, plain PPO {trained['plain']:,.0f} (ACCEL / plain {summary['accel_vs_plain_trained']:.2f})"
    )
    for way in breakdown:
        print(f"  {way}: ms per PPO update: " + ", ".join(f"{p} {v:.0f}" for p, v in breakdown[way].items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
