"""A user's own trainer plugs in by `module:Class`; the score cache never re-scores an archived agent;
no module uses a global RNG."""

from __future__ import annotations

import re

import pytest

import poet
import poet.runtime.runner
from poet.analysis import load_run
from tests.conftest import ROOT

EXAMPLE = "experiments.random_search:RandomSearchTrainer"  # the example trainer of docs/trainers.md


def test_user_trainer_by_module_and_class(tiny, tmp_path):
    cfg = tiny(trainer={"name": EXAMPLE, "options": {"candidates": 4, "sigma": 0.1}})
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert set(run.iterations["iteration"]) == set(range(12))
    assert (run.iterations["rs_best"] >= run.iterations["rs_incumbent"]).all()
    assert run.iterations["score"].notna().all()
    assert run.iterations["score"].max() > run.iterations["score"].iloc[0]  # it learns something


def test_example_trainer_runs_from_the_cli_and_resumes(tiny, tmp_path):
    import subprocess
    import sys

    import yaml

    cfg = tiny(iterations=4, checkpoint={"every": 2})
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable,
        "-m",
        "poet.cli",
        "run",
        str(config),
        "--out",
        str(tmp_path / "r"),
        "--quiet",
        "--set",
        f"trainer.name={EXAMPLE}",
        "--set",
        "trainer.options={candidates: 3}",
    ]
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=300)
    subprocess.run(
        [sys.executable, "-m", "poet.cli", "resume", str(tmp_path / "r"), "--iterations", "6", "--quiet"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    run = load_run(tmp_path / "r")
    assert sorted(run.iterations["iteration"].unique()) == list(range(6))
    assert "rs_best" in run.iterations.columns


def test_a_trainer_that_ignores_levels_is_refused_by_the_curricula_that_give_them(tiny, tmp_path):
    """Robust PLR, ACCEL and DR give the trainer a batch of levels each iteration; a trainer
    that does not say it trains on them is refused in one line, before any work, rather than
    train on the first level of each batch."""
    import subprocess
    import sys

    import yaml

    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(tiny(iterations=2)))
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "poet.cli", "run", str(config), "--quiet", "--set", "curriculum=accel"]
    for trainer in ("tests.test_extension_points:OneLevelTrainer", "tests.test_extension_points:NoLevelsTrainer"):
        proc = subprocess.run(
            [*base, "--out", str(tmp_path / "r"), "--set", f"trainer.name={trainer}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "does not say it trains on a batch of levels" in proc.stderr and "trains_on_levels = True" in proc.stderr
        assert not (tmp_path / "r").exists()


class NoLevelsTrainer:
    """A trainer written before levels: `step` reads `task.env` only."""

    name = "no_levels"

    def init_state(self, theta):
        return {}

    def reset_state(self, state, theta):
        return {}

    def step(self, tasks, evaluator):
        raise AssertionError("never called: the run is refused first")


class OneLevelTrainer(NoLevelsTrainer):
    name = "one_level"
    trains_on_levels = False


@pytest.mark.parametrize("curriculum", ["accel", "robust_plr", "dr"])
def test_the_example_trainer_trains_on_every_level_of_a_batch(tiny, tmp_path, curriculum):
    cfg = tiny(
        curriculum=curriculum,
        iterations=3,
        trainer={"name": EXAMPLE, "options": {"candidates": 2}},
        curriculum_options={"num_levels": 4} if curriculum == "dr" else {"buffer_size": 8},
    )
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert (run.iterations["levels"] > 1).all(), "each row says how many levels its step trained on"
    assert run.iterations["rs_best"].notna().all()


def test_user_trainer_options_are_validated(tiny, tmp_path):
    cfg = tiny(trainer={"name": EXAMPLE, "options": {"step": 0.1}})
    with pytest.raises(
        poet.ConfigError,
        match=r"trainer\.options\.step: .*RandomSearchTrainer has no option 'step'; its options: candidates=8",
    ):
        poet.run(cfg, out=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists(), "nothing is created before the config is valid"


class CountingEvaluator:
    """Wraps an evaluator and logs every unperturbed scoring request as (agent key, env id)."""

    def __init__(self, inner):
        self.inner, self.scored = inner, []

    @property
    def env_steps(self):
        return self.inner.env_steps

    @property
    def should_stop(self):
        return self.inner.should_stop

    @should_stop.setter
    def should_stop(self, check):
        self.inner.should_stop = check

    def put(self, weights):
        return self.inner.put(weights)

    def release(self, refs):
        self.inner.release(refs)

    def close(self):
        self.inner.close()

    def evaluate(self, requests):
        self.scored.extend(
            (r.policy.key, r.env.id) for r in requests if r.perturbation is None and "(score)" not in r.tag
        )
        return self.inner.evaluate(requests)


def test_archived_agents_are_never_rescored(tiny, tmp_path, monkeypatch):
    made = []
    original = poet.runtime.runner.make_evaluator

    def counting(parts, noise):
        made.append(CountingEvaluator(original(parts, noise)))
        return made[0]

    monkeypatch.setattr(poet.runtime.runner, "make_evaluator", counting)
    cfg = tiny(curriculum="enhanced_poet", iterations=17, reproduction={"capacity": 2, "every": 4})
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
