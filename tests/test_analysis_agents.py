"""A run's analysis frames (phylogeny, transfer edges) and its agents scored on any env:
`Run.agent`, `Run.score`, `Run.cross_eval` (cached in the run directory)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

import envs
import poet
from poet.analysis import agents as scoring
from poet.analysis import load_run
from poet.config import ConfigError
from tests.conftest import tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("agents") / "run"
    poet.run(tiny_config(checkpoint={"every": 4, "keep": 3}), out=out, progress=False)
    return load_run(out)


def test_phylogeny_is_a_forest_rooted_at_the_initial_env(run):
    tree = run.phylogeny
    assert list(tree.columns) == [
        "env_id",
        "parent_env_id",
        "pair_id",
        "created_iteration",
        "solved_iteration",
        "retired_iteration",
        "difficulty",
        "depth",
        "root_env_id",
        "params",
    ]
    assert len(tree) >= 3 and tree["env_id"].is_unique
    ids = set(tree["env_id"])
    roots = tree[tree["parent_env_id"].isna()]
    assert list(roots["env_id"]) == [tree["env_id"].iloc[0]]  # one root: the run's initial env
    by_id = tree.set_index("env_id")
    for row in tree.itertuples():
        if pd.isna(row.parent_env_id):
            assert row.depth == 0 and row.root_env_id == row.env_id
            continue
        assert row.parent_env_id in ids
        parent = by_id.loc[row.parent_env_id]
        assert row.depth == parent["depth"] + 1 and row.root_env_id == parent["root_env_id"]
        assert row.created_iteration >= parent["created_iteration"]
    assert all(isinstance(p, dict) and "roughness" in p for p in tree["params"])


def test_transfer_edges_join_envs_the_phylogeny_holds(run):
    edges = run.transfer_edges
    assert len(edges) and list(edges.columns) == [
        "iteration",
        "source_pair_id",
        "source_env_id",
        "target_pair_id",
        "target_env_id",
        "kind",
        "score_before",
        "score_after",
        "accepted",
    ]
    env_of = dict(zip(run.phylogeny["pair_id"], run.phylogeny["env_id"]))
    assert (edges["source_env_id"] == edges["source_pair_id"].map(env_of)).all()
    assert (edges["target_env_id"] == edges["target_pair_id"].map(env_of)).all()
    assert set(edges["kind"]) <= {"direct", "fine_tune"} and edges["accepted"].dtype == bool
    assert (edges["source_pair_id"] != edges["target_pair_id"]).all()


def test_agents_come_from_the_checkpoint_at_or_before_an_iteration(run):
    assert scoring.checkpoint_iterations(run) == [4, 8, 12]
    newest = run.agents()
    assert {a.iteration for a in newest} == {12}
    assert [a.pair_id for a in newest] == sorted((a.pair_id for a in newest), key=lambda p: int(p[1:]))
    assert {a.iteration for a in run.agents(iteration=10)} == {8}
    first = run.agent(pair="p0", iteration=4)
    assert first.iteration == 4 and first.env_id == run.phylogeny["env_id"].iloc[0]
    assert run.agent(env=first.env_id).pair_id == "p0"
    with pytest.raises(ConfigError, match=r"no checkpoint .* at or before 3 \(kept checkpoints: 4, 8, 12"):
        run.agents(iteration=3)
    with pytest.raises(ConfigError, match=r"no pair 'p99' in the checkpoint of iteration 12; it has p0 \("):
        run.agent(pair="p99")
    with pytest.raises(ConfigError, match="pair=<pair id> or env=<env id>"):
        run.agent()


def test_cross_eval_is_the_runs_own_score_of_each_agent_on_its_env(run):
    """The diagonal is what the run recorded for the same agent in its last iteration
    (self_score after_step), bit for bit; each cell is `score` of that agent on that env."""
    matrix = run.cross_eval(cache=False)
    newest = run.agents()
    assert list(matrix.index) == [a.pair_id for a in newest]
    assert list(matrix.columns) == list(run.envs["env_id"])
    last = run.iterations[run.iterations["iteration"] == 11]
    for row in last.itertuples():
        assert matrix.loc[row.pair_id, row.env_id] == row.score
    one = run.score([newest[-1]], [newest[0].pair_id, newest[-1].env_id])
    assert list(one.columns) == ["pair_id", "agent_iteration", "agent_id", "env_id", "score"]
    assert one["score"].tolist() == [
        matrix.loc[newest[-1].pair_id, newest[0].env_id],
        matrix.loc[newest[-1].pair_id, newest[-1].env_id],
    ]


def test_level_samples_are_scored_as_fresh_envs(run):
    family = envs.make_family("terrain", {"course_length": 20.0, "max_episode_steps": 150})
    levels = [family.sample(np.random.default_rng(i)) for i in range(3)]
    first = run.score(run.agents()[:2], levels)
    assert first["env_id"].tolist() == [lv.id for lv in levels] * 2
    assert np.isfinite(first["score"]).all()
    assert first.equals(run.score(run.agents()[:2], levels))  # a level's episodes: a function of the level


def test_cross_eval_is_kept_in_the_run_directory_and_read_back(run, monkeypatch, capsys):
    matrix = run.cross_eval()
    kept = sorted((run.path / scoring.CACHE_DIR).glob("cross_eval-*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["envs"] == list(matrix.columns)
    assert "cross_eval: " in capsys.readouterr().err  # the cost, said before the work

    def no_work(*args, **kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(scoring, "score", no_work)
    assert run.cross_eval().equals(matrix)
    assert not list((run.path / scoring.CACHE_DIR).glob(".tmp-*"))


def test_cross_eval_says_its_cost_and_refuses_a_call_over_the_limit(run):
    with pytest.raises(
        ConfigError, match=r"cross_eval: \d+ agents x \d+ envs, at most [\d,]+ env steps.*max_env_steps=10"
    ):
        run.cross_eval(max_env_steps=10, cache=False)


def test_a_run_directory_that_cannot_be_written_still_gives_the_matrix(run, monkeypatch, capsys):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(scoring.os, "replace", full)
    matrix = run.cross_eval(envs=list(run.envs["env_id"])[:2])
    assert matrix.shape == (len(run.agents()), 2) and np.isfinite(matrix.to_numpy()).all()
    assert "cross_eval: result not kept in" in capsys.readouterr().err
    assert not list((run.path / scoring.CACHE_DIR).glob(".tmp-*"))


def test_cross_eval_on_the_ray_pool_gives_the_same_matrix(run, ray_local):
    assert run.cross_eval(backend="ray", workers=2, cache=False).equals(run.cross_eval(cache=False))


def test_class_levels_fall_in_their_class_and_are_the_same_for_every_run():
    family = envs.make_family("terrain")
    for klass in range(4):
        levels = scoring.class_levels(family, klass, n=20, seed=5)
        assert len(levels) == 20 and {family.difficulty(lv) for lv in levels} == {klass}
        assert all(lv.course_seed is not None for lv in levels)  # one course each: every run scores the same
        assert [lv.id for lv in levels] == [lv.id for lv in scoring.class_levels(family, klass, n=20, seed=5)]
    assert scoring.class_levels(family, 2, n=5, seed=6) != scoring.class_levels(family, 2, n=5, seed=5)
    with pytest.raises(ConfigError, match="has no sample"):
        scoring.class_levels(envs.make_family("cartpole"), 1, n=2)


def test_cvar_is_the_mean_of_the_worst_share():
    scores = np.array([5.0, -1.0, 3.0, 10.0, 0.0, 2.0, 8.0, 1.0, 4.0, 6.0])
    assert scoring.cvar(scores, [0.1, 0.2, 0.25, 0.5, 1.0]).tolist() == [-1.0, -0.5, 0.0, 1.0, 3.8]


def test_robustness_curves_rise_with_alpha_for_every_agent(run):
    curves = run.robustness(1, n=12, seed=3)
    assert list(curves.columns) == ["pair_id", "alpha", "cvar", "levels", "class"]
    assert set(curves["pair_id"]) == {a.pair_id for a in run.agents()}
    assert (curves["levels"] == 12).all() and (curves["class"] == 1).all()
    for _, curve in curves.groupby("pair_id"):
        assert list(curve["alpha"]) == list(scoring.ALPHAS)
        assert np.all(np.diff(curve["cvar"].to_numpy()) >= 0)
    family = envs.make_family("terrain", {"course_length": 20.0, "max_episode_steps": 150})
    same = run.robustness(scoring.class_levels(family, 1, n=12, seed=3))
    assert same["cvar"].tolist() == curves["cvar"].tolist() and same["class"].isna().all()
