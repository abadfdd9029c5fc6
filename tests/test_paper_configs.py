"""The papers' experiment configs load, hold the papers' settings, and run (2 iterations, small overrides)."""
from __future__ import annotations

import pytest

import poet
from poet.analysis import load_run
from poet.config import load_config
from tests.conftest import ROOT

CONFIGS = {"poet_bipedal.yaml": ("poet", 200, 20, "bipedal"),
           "enhanced_poet_bipedal.yaml": ("enhanced", 150, 40, "bipedal_cppn")}
SMALL = ["iterations=2", "evaluation.backend=inprocess", "evaluation.max_steps=40", "evaluation.eval_episodes=1",
         "trainer.options.population=4", "trainer.options.noise_table_size=100000", "progress=false"]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_paper_settings(name):
    cfg = load_config(ROOT / "experiments" / name)
    mode, every, capacity, family = CONFIGS[name]
    assert cfg.env.family == family
    assert (cfg.mode, cfg.reproduction.every, cfg.reproduction.capacity) == (mode, every, capacity)
    assert cfg.trainer.options["population"] == 512 and cfg.trainer.options["sigma"] == 0.1
    assert cfg.trainer.options["lr"] == 0.01 and cfg.evaluation.eval_episodes == 5
    assert (cfg.transfer.every, cfg.reproduction.threshold, cfg.reproduction.mc_lower, cfg.reproduction.mc_upper) == (
        25, 200, 25, 340)
    assert (cfg.reproduction.max_children, cfg.reproduction.max_admitted, cfg.reproduction.novelty_k) == (8, 1, 5)
    assert cfg.solved_threshold == 230 and cfg.policy.hidden == [40, 40]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_paper_config_runs(name, tmp_path):
    poet.run(ROOT / "experiments" / name, out=tmp_path / "r", overrides=SMALL, progress=False)
    run = load_run(tmp_path / "r")
    assert sorted(run.iterations["iteration"].unique()) == [0, 1]
    assert run.envs["family"].iloc[0] == CONFIGS[name][3]
