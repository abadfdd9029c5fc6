"""A user's own trainer plugs in by `module:Class`; the score cache never re-scores an archived agent;
no module uses a global RNG."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pytest

import poet
import poet.runner
from poet.analysis import load_run
from poet.evaluation import EvalRequest
from poet.trainers import TrainStep, TrainTask
from tests.conftest import ROOT


@dataclass
class HillClimbOptions:
    """Options of the test trainer."""

    step_size: float = 0.05


class HillClimb:
    """A minimal user trainer: keep a random neighbour if it scores higher (one evaluator call per step)."""

    name = "hill_climb"
    Options = HillClimbOptions

    def __init__(self, options: HillClimbOptions, context: Any):
        self.options, self.context = options, context

    def init_state(self, theta: np.ndarray) -> dict[str, Any]:
        return {"accepted": 0}

    def reset_state(self, state: dict[str, Any], theta: np.ndarray) -> dict[str, Any]:
        return self.init_state(theta)

    def step(self, tasks: Sequence[TrainTask], evaluator) -> list[TrainStep]:
        candidates, requests = [], []
        for task in tasks:
            rng = np.random.default_rng(task.seed)
            cand = (task.theta + self.options.step_size * rng.standard_normal(task.theta.size)).astype(np.float32)
            candidates.append(cand)
            for theta in (task.theta, cand):
                requests.append(EvalRequest(evaluator.put(theta), task.env, 2, task.seed, self.context.max_steps))
        scores = self.context.errors.scores(evaluator.evaluate(requests))
        out = []
        for i, (task, cand) in enumerate(zip(tasks, candidates)):
            old, new = scores[2 * i], scores[2 * i + 1]
            better = new > old
            out.append(TrainStep(theta=cand if better else task.theta,
                                 state={"accepted": task.state["accepted"] + int(better)},
                                 score=float(old), metrics={"candidate_score": float(new)}))
        return out


def test_user_trainer_by_module_and_class(tiny, tmp_path):
    cfg = tiny(trainer={"name": "tests.test_extension_points:HillClimb", "options": {"step_size": 0.1}})
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert set(run.iterations["iteration"]) == set(range(12))
    assert "candidate_score" in run.iterations.columns
    assert run.iterations["score"].notna().all()


def test_user_trainer_options_are_validated(tiny, tmp_path):
    cfg = tiny(trainer={"name": "tests.test_extension_points:HillClimb", "options": {"step": 0.1}})
    with pytest.raises(poet.ConfigError, match=r"trainer\.options\.step: unknown key"):
        poet.run(cfg, out=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists(), "nothing is created before the config is valid"


class CountingEvaluator:
    """Wraps an evaluator and logs every unperturbed scoring request as (agent key, env id)."""

    def __init__(self, inner):
        self.inner, self.scored = inner, []

    def put(self, weights):
        return self.inner.put(weights)

    def release(self, refs):
        self.inner.release(refs)

    def close(self):
        self.inner.close()

    def evaluate(self, requests):
        self.scored.extend((r.policy.key, r.env.id) for r in requests if r.perturbation is None and "(score)" not in r.tag)
        return self.inner.evaluate(requests)


def test_archived_agents_are_never_rescored(tiny, tmp_path, monkeypatch):
    made = []
    original = poet.runner.make_evaluator

    def counting(parts, noise):
        made.append(CountingEvaluator(original(parts, noise)))
        return made[0]

    monkeypatch.setattr(poet.runner, "make_evaluator", counting)
    cfg = tiny(mode="enhanced", iterations=17, reproduction={"capacity": 2, "every": 4})
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert run.envs["retired_iteration"].notna().sum() >= 1, "the test needs archived pairs"
    scored = made[0].scored
    # PATA-EC scores every archived agent on every env at each reproduction; with the cache
    # no (agent, env) combination ever reaches the evaluator twice.
    assert len(scored) == len(set(scored))


GLOBAL_RNG = re.compile(
    r"np\.random\.(seed|rand|randn|randint|random|choice|shuffle|permutation|uniform|normal|standard_normal)\(|"
    r"^\s*import random\b|^\s*from random import|torch\.manual_seed|torch\.rand(n|int)?\(",
    re.MULTILINE,
)


@pytest.mark.parametrize("package", ["poet", "envs"])
def test_no_global_rng(package):
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / package).rglob("*.py") if GLOBAL_RNG.search(p.read_text())]
    assert offenders == []
