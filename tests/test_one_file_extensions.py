"""A family with its own compiled row kernel, a curriculum and a trainer, each defined in this
one module and named in the config as `module:Name`: nothing in `poet/` knows them. One
`poet run` on the Ray pool runs all three, `poet report` reads the run, and the family's
kernel gives the scores its gymnasium env gives."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import yaml

from envs import EnvParams
from envs.kernel import RowKernel, row_reset, row_step
from poet.analysis import load_run
from tests.conftest import ROOT, tiny_config

# ---------------------------------------------------------------- the family: reach a target
FAMILY = "reach"
DRIVE, DAMPING, NEAR = 0.1, 0.8, 0.05


@row_reset
def reach_reset(data, row, state, obs):
    """At rest at 0; the observation is (target - position, velocity)."""
    table = data[0]
    state[:] = 0.0
    obs[0] = table[row, 0]
    obs[1] = 0.0


@row_step
def reach_step(data, row, action, state, obs):
    """Push by the action (clipped to [-1, 1]); a step costs the distance left, arriving pays 10."""
    a = min(max(np.float64(action[0]), -1.0), 1.0)
    state[1] = DAMPING * state[1] + DRIVE * a
    state[0] += state[1]
    gap = data[0][row, 0] - state[0]
    obs[0] = gap
    obs[1] = state[1]
    arrived = abs(gap) < NEAR
    return (10.0 if arrived else -0.01 * abs(gap)), arrived


def reach_data(params, seeds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per episode: its target (the seed plays no part: every episode is the same)."""
    return np.array([[float(p["target"])] for p in params]), np.zeros(0, dtype=np.int64), np.zeros(0)


class ReachEnv(gym.Env):
    """The gymnasium view of the same compiled functions, one episode at a time."""

    def __init__(self, params: EnvParams, max_episode_steps: int = 100):
        self.params, self.max_episode_steps = params, max_episode_steps
        self.observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.data = reach_data([params], [0])
        self.state, self.obs = np.zeros(2), np.zeros(2, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        reach_reset(self.data, 0, self.state, self.obs)
        return self.obs.copy(), {}

    def step(self, action):
        reward, arrived = reach_step(
            self.data, 0, np.asarray(action, dtype=np.float32).reshape(1), self.state, self.obs
        )
        return self.obs.copy(), float(reward), bool(arrived), False, {}


class ReachFamily:
    """Targets on a line; a child moves its parent's target by up to 0.5."""

    name = FAMILY
    defaults: ClassVar[dict] = {"solved_threshold": 9.0, "reproduction": {"threshold": 5.0}}

    def initial(self) -> EnvParams:
        return EnvParams.create(FAMILY, {"target": 1.0})

    def mutate(self, params: EnvParams, rng: np.random.Generator) -> EnvParams:
        return params.replace(target=round(float(params["target"]) + float(rng.uniform(-0.5, 0.5)), 2))

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> ReachEnv:
        return ReachEnv(params)

    def features(self, params: EnvParams) -> np.ndarray:
        return np.array([float(params["target"])])

    def validate(self, params: EnvParams) -> None:
        if abs(float(params["target"])) > 5.0:
            raise ValueError(f"target: {params['target']} is outside [-5, 5]")

    def flat(self, params: EnvParams) -> dict[str, float]:
        return {"target": float(params["target"])}

    def row_kernel(self) -> RowKernel:
        return RowKernel(obs_dim=2, act_dim=1, state_size=2, data=reach_data, reset=reach_reset, step=reach_step)


def make_family() -> ReachFamily:
    return ReachFamily()


# ---------------------------------------------------------------- the curriculum
@dataclass
class StepperOptions:
    every: int = 2  # iterations between two moves of the target


class Stepper:
    """One agent; every `every` iterations its env becomes a child of its env."""

    name = "stepper"
    Options = StepperOptions

    def __init__(self, options: StepperOptions):
        self.options = options

    def report_traits(self) -> dict:
        return {"kind": "single"}

    def start(self, ctx) -> None:
        from poet.curricula.common import start_pair

        start_pair(ctx)

    def run_iteration(self, ctx, iteration: int, phase) -> None:
        from poet.curricula.common import record_level, train_pairs

        agent = ctx.state.population.active[0]
        if iteration > 0 and iteration % self.options.every == 0:
            parent, agent.env = agent.env.id, ctx.family.mutate(agent.env, ctx.seeds.rng("stepper", iteration))
            record_level(ctx, agent.env, agent.pair_id, parent, iteration)
        with phase("train"):
            train_pairs(ctx, iteration)


# ---------------------------------------------------------------- the trainer
@dataclass
class HillClimbOptions:
    candidates: int = 4
    sigma: float = 0.1


class HillClimber:
    """Each step scores `candidates` perturbations of the agent and keeps the best if it beats it."""

    name = "hill_climb"
    Options = HillClimbOptions

    def __init__(self, options: HillClimbOptions, context):
        self.options, self.context = options, context

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        return {"steps": 0}

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        return self.init_state(theta)

    def step(self, tasks, evaluator):
        from poet.evaluation import EvalRequest
        from poet.trainers import TrainStep

        ctx, o = self.context, self.options
        requests, plans, refs = [], [], []
        for task in tasks:
            rng = np.random.default_rng(task.seed)
            thetas = [task.theta] + [
                (task.theta + o.sigma * rng.standard_normal(task.theta.size)).astype(np.float32)
                for _ in range(o.candidates)
            ]
            refs += [evaluator.put(t) for t in thetas]
            requests += [EvalRequest(r, task.env, 1, task.seed, ctx.max_steps) for r in refs[-len(thetas) :]]
            plans.append(thetas)
        scores = ctx.errors.scores(evaluator.evaluate(requests))
        evaluator.release(refs)
        steps, at = [], 0
        for task, thetas in zip(tasks, plans):
            mine = scores[at : at + len(thetas)]
            at += len(thetas)
            best = int(np.argmax(mine))
            steps.append(
                TrainStep(theta=thetas[best], state={"steps": task.state["steps"] + 1}, score=None, metrics={})
            )
        return steps


# ---------------------------------------------------------------- the tests
# pytest imports this file as a top-level module (tests/ is no package); the run imports it under
# the same name (tests/ on PYTHONPATH), as numba's cache of its kernel records the module's name
MODULE = "test_one_file_extensions"


def test_the_kernel_scores_what_the_gymnasium_env_scores():
    """The same requests through the family's row kernel and through its gymnasium envs (the
    family without `row_kernel`): the same returns and lengths, bit for bit."""
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.policies import init_flat, spec_for_spaces

    class EnvsOnly(ReachFamily):
        row_kernel = None

    family, env = ReachFamily(), ReachEnv(ReachFamily().initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (8,), "tanh")
    targets = [family.initial().replace(target=t) for t in (1.0, -0.5, 2.0, 0.3)]
    results = []
    for fam in (family, EnvsOnly()):
        ev = InProcessEvaluator(fam, spec)
        refs = [ev.put(init_flat(spec, np.random.default_rng(i)) * 3) for i in range(3)]
        reqs = [EvalRequest(refs[i % 3], targets[i % 4], 1, i, 100) for i in range(12)]
        results.append(ev.evaluate(reqs))
    lengths = [r.lengths[0] for r in results[0]]
    assert len(set(lengths)) > 1 and min(lengths) < 100  # some episodes arrive, some do not
    for a, b in zip(*results):
        assert a.ok and b.ok
        np.testing.assert_array_equal(a.returns, b.returns)
        np.testing.assert_array_equal(a.lengths, b.lengths)


@pytest.mark.slow
def test_a_run_of_the_modules_family_curriculum_and_trainer_on_ray_to_a_report(tmp_path):
    cfg = tiny_config(
        curriculum=f"{MODULE}:Stepper",
        iterations=4,
        env={"family": f"{MODULE}:make_family", "options": {}},
        policy={"hidden": [8]},
        evaluation={"backend": "ray", "max_steps": 100, "eval_episodes": 1},
        ray={"workers": 2},
    )
    cfg["trainer"] = {"name": f"{MODULE}:HillClimber", "options": {"candidates": 3}}
    cfg.pop("reproduction")
    cfg.pop("transfer")
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}

    def poet(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "poet.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )

    ran = poet("run", str(config), "--out", str(tmp_path / "r"), "--quiet")
    assert ran.returncode == 0, ran.stderr[-3000:]
    run = load_run(tmp_path / "r")
    assert run.iterations["iteration"].tolist() == [0, 1, 2, 3]
    assert run.envs["target"].nunique() == 2  # the curriculum moved the target at iteration 2
    reported = poet("report", str(tmp_path / "r"))
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert (tmp_path / "r" / "report" / "index.html").is_file()
