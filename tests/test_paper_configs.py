"""The papers' experiment configs load, hold the papers' settings, and run (2 iterations, small overrides)."""

from __future__ import annotations

import re

import pytest

import poet
from poet.analysis import load_run
from poet.parts import load_config
from tests.conftest import ROOT

CONFIGS = {
    "poet_bipedal.yaml": ("poet", 200, 25, "bipedal"),
    "enhanced_poet_bipedal.yaml": ("enhanced_poet", 150, 40, "bipedal_cppn"),
}
SMALL = [
    "iterations=2",
    "evaluation.backend=inprocess",
    "evaluation.max_steps=40",
    "evaluation.eval_episodes=1",
    "trainer.es.population=4",
    "trainer.es.noise_table_size=100000",
    "progress=false",
]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_paper_settings(name):
    cfg = load_config(ROOT / "experiments" / name)
    mode, every, capacity, family = CONFIGS[name]
    assert cfg.env.family == family
    assert (cfg.curriculum, cfg.reproduction.every, cfg.reproduction.capacity) == (mode, every, capacity)
    assert cfg.trainer.section("es")["population"] == 512 and cfg.trainer.section("es")["sigma"] == 0.1
    assert cfg.trainer.section("es")["lr"] == 0.01 and cfg.evaluation.eval_episodes == 5
    assert (cfg.transfer.every, cfg.reproduction.threshold, cfg.reproduction.mc_lower, cfg.reproduction.mc_upper) == (
        25,
        200,
        25,
        340,
    )
    assert (cfg.reproduction.max_children, cfg.reproduction.max_admitted, cfg.reproduction.novelty_k) == (8, 1, 5)
    assert cfg.solved_threshold == 230 and cfg.policy.hidden == [40, 40]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_paper_config_runs(name, tmp_path):
    poet.run(ROOT / "experiments" / name, out=tmp_path / "r", overrides=SMALL, progress=False)
    run = load_run(tmp_path / "r")
    assert sorted(run.iterations["iteration"].unique()) == [0, 1]
    assert run.envs["family"].iloc[0] == CONFIGS[name][3]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_paper_configs_use_the_reference_rules(name):
    cfg = load_config(ROOT / "experiments" / name)
    assert (cfg.evaluation.course, cfg.evaluation.self_score, cfg.policy.init) == ("fixed", "after_step", "reference")
    assert cfg.trainer.section("es")["beta1"] == 0.9 and cfg.trainer.section("es")["propose_with"] == "adam"
    assert (cfg.reproduction.child_agent, cfg.reproduction.pata_ec_ties) == ("best_transfer", "ordinal")


def test_enhanced_paper_config_rebuilds_every_env_from_its_record(tmp_path):
    """2 iterations with the reference defaults; every env, rebuilt from its record (course seed
    included), gives the recorded score to the agent that was scored on it."""
    import numpy as np
    import torch

    from envs import EnvParams
    from poet.analysis.render import load_agents
    from poet.policies.mlp_torch import MLPPolicy, to_actions
    from poet.runtime import checkpoint

    loose = [
        "reproduction.every=1",
        "reproduction.threshold=-1000000000",
        "reproduction.mc_lower=-1000000000",
        "reproduction.mc_upper=1000000000",
        "reproduction.max_admitted=3",
        "reproduction.max_children=3",
    ]
    poet.run(
        ROOT / "experiments" / "enhanced_poet_bipedal.yaml", out=tmp_path / "r", overrides=SMALL + loose, progress=False
    )
    run = load_run(tmp_path / "r")
    parts, snapshot = load_agents(tmp_path / "r")
    assert len(run.envs) == 4 and run.envs["course_seed"].notna().all()
    assert run.envs["course_seed"].nunique() == 4
    last = run.iterations[run.iterations["iteration"] == 1].set_index("pair_id")["score"]
    for env_id, text, pair_id in zip(run.envs["env_id"], run.envs["params_json"], run.envs["pair_id"]):
        params = EnvParams.from_json(text)
        assert params.id == env_id and params.course_seed is not None
        pair = snapshot.state.population.get(pair_id)
        assert pair.env == params
        policy = MLPPolicy(parts.spec)
        policy.load_flat(pair.theta)
        env = parts.family.make_env(params)
        obs, _ = env.reset(seed=params.course_seed)
        total = 0.0
        for _ in range(40):  # evaluation.max_steps=40
            raw = policy(torch.as_tensor(np.asarray(obs, dtype=np.float32)).reshape(1, -1))
            obs, reward, term, trunc, _ = env.step(to_actions(parts.spec, raw.detach())[0])
            total += float(reward)
            if term or trunc:
                break
        assert total == pytest.approx(last[pair_id], abs=1e-3), pair_id
    assert checkpoint.checkpoints(tmp_path / "r")


def test_the_paper_config_takes_es_options_from_its_section():
    # with the options under trainer.options (which won over trainer.es), this ran with 512
    from poet.parts import check_parts

    parts = check_parts(load_config(ROOT / "experiments" / "poet_bipedal.yaml", overrides=["trainer.es.population=16"]))
    assert (parts.trainer_options.population, parts.trainer_options.sigma) == (16, 0.1)


def test_the_small_bipedal_preset_keeps_the_papers_rules_smaller():
    small = load_config(ROOT / "experiments" / "bipedal_small.yaml")
    paper = load_config(ROOT / "experiments" / "poet_bipedal.yaml")
    assert (small.trainer.section("es")["population"], small.evaluation.eval_episodes, small.evaluation.max_steps) == (
        32,
        1,
        400,
    )
    assert (small.reproduction, small.transfer, small.policy, small.env) == (
        paper.reproduction,
        paper.transfer,
        paper.policy,
        paper.env,
    )
    assert {k: v for k, v in small.trainer.section("es").items() if k not in ("population", "noise_table_size")} == {
        k: v for k, v in paper.trainer.section("es").items() if k not in ("population", "noise_table_size")
    }


def test_the_small_bipedal_preset_runs_at_its_own_settings_and_costs_what_its_comment_says(tmp_path):
    config = ROOT / "experiments" / "bipedal_small.yaml"
    result = poet.run(config, out=tmp_path / "r", progress=False, overrides=["evaluation.backend=inprocess"])
    assert result.iterations == 3
    run = load_run(tmp_path / "r")
    assert run.iterations["iteration"].tolist() == [0, 1, 2] and run.envs["family"].tolist() == ["bipedal"]
    assert run.envs["difficulty"].tolist() == [0]  # the flat start: easy in the paper's classes
    quoted = re.search(r"simulates ([\d,]+) env steps in its 3", config.read_text())
    assert quoted and int(quoted.group(1).replace(",", "")) == run.phases["env_steps"].sum()
