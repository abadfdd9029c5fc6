"""Every registered curriculum: runs, resumes after a hard kill with identical tables, and
gives the same tables on the Ray pool; a user's curriculum from one file via module:Class."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import poet
from envs import EnvParams
from poet.analysis import load_run
from poet.curricula import CURRICULA
from poet.runtime import checkpoint
from tests.conftest import ROOT, poet_in_process
from tests.test_checkpoint import _assert_same_run, _kill_after_checkpoint, _write_config

TABLES = ("iterations", "envs", "transfers", "events")


# small level buffers, so that replay starts within a few iterations
OPTIONS = {
    "robust_plr": {"buffer_size": 6, "num_levels": 3},
    "accel": {"buffer_size": 6, "num_levels": 3},
    "dr": {"num_levels": 2},
    "path": {"target": {"roughness": 2.0, "pit_gap": [0.4, 1.2], "stump_height": [0.2, 0.8]}, "stages": 4},
}


def _cfg(tiny, curriculum: str, **sections) -> dict:
    return tiny(
        **{"curriculum": curriculum, "curriculum_options": OPTIONS.get(curriculum, {}), "iterations": 8, **sections}
    )


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_every_curriculum_resumes_after_a_kill_with_identical_tables(name, tiny, tmp_path):
    import sys

    cfg = _cfg(tiny, name, checkpoint={"every": 3})
    config = _write_config(tmp_path / "cfg.yaml", cfg)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    poet.run(cfg, out=straight, progress=False)
    run = load_run(straight)
    trained = set(run.iterations["iteration"])  # the PLR curricula train nothing when they explore
    assert trained <= set(range(8)) and len(trained) >= (1 if name in ("robust_plr", "accel") else 8)
    assert len(run.envs) >= 1 and set(run.iterations["env_id"]) <= set(run.envs["env_id"])
    base = [sys.executable, "-m", "poet.cli"]
    _kill_after_checkpoint(base + ["run", str(config), "--out", str(killed), "--quiet"], killed, 3)
    poet.resume(killed, progress=False)
    _assert_same_run(straight, killed)


@pytest.mark.parametrize("family", ["terrain", "bipedal"])
@pytest.mark.parametrize("name", ["accel", "robust_plr"])
def test_level_buffer_curricula_with_ppo_train_on_batches_of_16_and_resume_identically(name, family, tiny, tmp_path):
    """dcd's cycle with PPO: 16 levels per cycle (one env each), scored by positive value loss;
    a kill and resume in between gives the same tables."""
    import sys

    options = {"course_length": 20.0, "max_episode_steps": 40} if family == "terrain" else {"max_episode_steps": 40}
    cfg = _cfg(
        tiny,
        name,
        iterations=6,
        env={"family": family, "options": options},
        curriculum_options={"buffer_size": 24, "num_levels": 16},
        evaluation={"max_steps": 40},
        trainer={"name": "ppo", "ppo": {"n_steps": 40, "minibatch_size": 320, "epochs": 1}},
        checkpoint={"every": 2},
    )
    config = _write_config(tmp_path / "cfg.yaml", cfg)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    poet.run(cfg, out=straight, progress=False)
    run = load_run(straight)
    assert len(run.iterations) >= 1 and (run.iterations["levels"] == 16).all()
    kinds = run.events["kind"].value_counts()
    assert kinds["replayed"] == 16 * len(run.iterations) and kinds["explored"] % 16 == 0
    assert kinds.get("edited", 0) == (kinds["replayed"] if name == "accel" else 0)  # 4 bases x 4 children
    base = [sys.executable, "-m", "poet.cli"]
    _kill_after_checkpoint(base + ["run", str(config), "--out", str(killed), "--quiet"], killed, 2)
    poet.resume(killed, progress=False)
    _assert_same_run(straight, killed)


def test_ppo_rollouts_shorter_than_an_episode_are_warned_of_for_level_scores(tiny, tmp_path):
    cfg = _cfg(tiny, "robust_plr", iterations=2, trainer={"name": "ppo", "ppo": {"n_steps": 64}})  # episodes to 150
    with pytest.warns(
        UserWarning,
        match=r"trainer\.ppo\.n_steps \(64\) < evaluation\.max_steps \(150\) a level whose episodes all last longer",
    ):
        poet.run(cfg, out=tmp_path / "r", progress=False)


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_every_curriculum_gives_the_same_tables_on_the_ray_pool(name, ray_local, tiny, tmp_path):
    evaluation = {**tiny()["evaluation"], "test_every": 4}
    poet.run(_cfg(tiny, name, evaluation=evaluation), out=tmp_path / "local", progress=False)
    poet.run(
        _cfg(tiny, name, evaluation={**evaluation, "backend": "ray"}, ray={"workers": 2}),
        out=tmp_path / "pool",
        progress=False,
    )
    a, b = load_run(tmp_path / "local"), load_run(tmp_path / "pool")
    assert len(a.heldout) > 0
    for table in (*TABLES, "heldout"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True, obj=table)


def test_dr_trains_on_new_random_levels_every_iteration(tiny, tmp_path):
    poet.run(_cfg(tiny, "dr"), out=tmp_path / "r", progress=False)  # 2 levels an iteration
    run = load_run(tmp_path / "r")
    assert run.envs["env_id"].nunique() == 16 and run.envs["parent_env_id"].isna().all()
    assert run.iterations["env_id"].tolist() == run.envs["env_id"].tolist()[::2]
    assert run.iterations["level_ids"].tolist() == [
        " ".join(run.envs["env_id"].iloc[2 * i : 2 * i + 2]) for i in range(8)
    ]
    assert run.envs["created_iteration"].tolist() == [i // 2 for i in range(16)]


def test_direct_trains_on_env_start(tiny, tmp_path):
    start = {"roughness": 1.5, "pit_gap": [], "stump_height": [0.0, 0.4]}
    poet.run(tiny(curriculum="direct", iterations=3, env={"start": start}), out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert len(run.envs) == 1 and run.envs["roughness"].iloc[0] == 1.5 and run.envs["stump_height_hi"].iloc[0] == 0.4
    assert run.iterations["env_id"].nunique() == 1


def test_a_bad_env_start_is_a_config_error_naming_the_field(tiny, tmp_path):
    with pytest.raises(poet.ConfigError, match=r"env.start: .*roughness"):
        poet.run(tiny(env={"start": {"roughness": 99.0, "pit_gap": [], "stump_height": []}}), out=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_user_curriculum_from_one_file_runs_and_resumes(tiny, tmp_path, monkeypatch):
    """experiments/ladder_curriculum.py: one file, named as module:Class, with its own options and state."""
    monkeypatch.chdir(ROOT)
    name = "experiments.ladder_curriculum:LadderCurriculum"
    cfg = tiny(
        curriculum=name, curriculum_options={"rungs": 3, "threshold": 20.0}, iterations=10, checkpoint={"every": 4}
    )
    poet.run(cfg, out=tmp_path / "straight", progress=False)
    run = load_run(tmp_path / "straight")
    climbed = run.events[run.events["kind"] == "climbed"]
    assert 1 <= len(climbed) <= 3 and len(run.envs) == len(climbed) + 1
    assert run.envs["parent_env_id"].iloc[1:].tolist() == run.envs["env_id"].iloc[:-1].tolist()
    # its state (the rung) is checkpointed: stop at 6, resume to 10, same tables
    poet.run({**cfg, "iterations": 6}, out=tmp_path / "resumed", progress=False)
    assert checkpoint.latest(tmp_path / "resumed").state.curriculum_data["rung"] >= 0
    poet.resume(tmp_path / "resumed", iterations=10, progress=False)
    _assert_same_run(tmp_path / "straight", tmp_path / "resumed")
    with pytest.raises(poet.ConfigError, match=r"curriculum_options\.rungs: must be >= 1, got 0"):
        poet.run({**cfg, "curriculum_options": {"rungs": 0}}, out=tmp_path / "bad")


@pytest.mark.parametrize("name", ["robust_plr", "accel"])
def test_plr_curricula_replay_explore_and_keep_their_buffer_in_the_state(name, tiny, tmp_path):
    poet.run(_cfg(tiny, name, iterations=12), out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    kinds = run.events["kind"].value_counts()
    # one trainer step per replay cycle, on a batch of num_levels (3) levels; no other training
    assert len(run.iterations) >= 1 and (run.iterations["levels"] == 3).all()
    assert kinds.get("replayed", 0) == 3 * len(run.iterations)
    assert (run.iterations["level_ids"].str.split().str.len() == 3).all()
    assert kinds.get("explored", 0) >= 3 and kinds["explored"] % 3 == 0
    # ACCEL: fewer than 4 levels in a batch, so dcd edits the highest-ranked one once per level
    assert kinds.get("edited", 0) == (kinds["replayed"] if name == "accel" else 0)
    edited = run.envs[run.envs["parent_env_id"].notna()]
    assert len(edited) == kinds.get("edited", 0)  # ACCEL's children name the replayed level they came from
    buffer = checkpoint.latest(tmp_path / "r").state.curriculum_data["level_buffer"]
    assert len(buffer["levels"]) == 6 and buffer["samples"] == kinds["explored"] + kinds.get("edited", 0)


@pytest.mark.parametrize("name", ["accel", "robust_plr", "dr", "direct"])
def test_cli_run_with_ppo_writes_the_tables_and_report(name, tmp_path):
    """`poet run --set curriculum=NAME --set trainer.name=ppo` on the terrain family, then `poet report`."""
    out = tmp_path / "r"
    small = [
        "iterations=6",
        "evaluation.backend=inprocess",
        "evaluation.max_steps=64",  # no longer than a rollout: every level gets a finished episode to score
        "trainer.ppo.n_envs=2",
        "trainer.ppo.n_steps=64",
        "trainer.ppo.minibatch_size=64",
        "trainer.ppo.epochs=2",
        "env.options.course_length=20",
    ]
    if name in ("accel", "robust_plr"):
        small.append("curriculum_options={buffer_size: 4, num_levels: 2}")
    if name == "dr":
        small.append("curriculum_options={num_levels: 2}")
    sets = [x for s in [f"curriculum={name}", "trainer.name=ppo", *small] for x in ("--set", s)]
    run = poet_in_process(["run", str(ROOT / "experiments" / "quickstart.yaml"), *sets, "--out", str(out), "--quiet"])
    assert run.returncode == 0, run.stderr[-2000:]
    report = poet_in_process(["report", str(out)])
    assert report.returncode == 0, report.stderr[-2000:]
    records = load_run(out)
    assert len(records.iterations) >= 1 and "policy_loss" in records.iterations.columns
    if name in OPTIONS:  # levels scored by the PPO value net's positive value loss
        assert "positive_value_loss" in records.iterations.columns
        explored = records.events["detail"][records.events["kind"] == "explored"].map(json.loads)
        assert all(isinstance(d["score"], float) and "slot" in d for d in explored)
        assert (records.iterations["levels"] == 2).all()  # a batch of num_levels levels per cycle
    from poet.analysis.report import FIGURES

    for figure in FIGURES:
        assert (out / "report" / f"{figure}.png").read_bytes()[:4] == b"\x89PNG"


def test_regret_scores_pinned_by_hand():
    from poet.curricula.plr import maxmc
    from poet.trainers.ppo import gae, positive_value_loss

    # GAE with gamma 0.9, lambda 0.5 over one 3-step episode:
    # d2 = 2 - 0.2 = 1.8; d1 = 0 + 0.9 * 0.2 - 1.0 = -0.82; d0 = 1 + 0.9 * 1.0 - 0.5 = 1.4
    # A2 = 1.8; A1 = -0.82 + 0.45 * 1.8 = -0.01; A0 = 1.4 + 0.45 * -0.01 = 1.3955
    adv = gae(
        np.array([[1.0], [0.0], [2.0]]),
        np.array([[0.5], [1.0], [0.2]]),
        np.array([[1.0], [0.2], [0.0]]),
        np.array([[1.0], [1.0], [0.0]]),
        0.9,
        0.5,
    )
    np.testing.assert_allclose(adv[:, 0], [1.3955, -0.01, 1.8])
    assert positive_value_loss(adv) == pytest.approx((1.3955 + 0 + 1.8) / 3)
    # MaxMC: the best return seen on the level (30) minus the agent's now (20)
    assert maxmc(max([10.0, 30.0, 20.0]), 20.0) == 10.0 and maxmc(5.0, 5.0) == 0.0


def test_accel_edits_the_level_it_replayed(tiny, tmp_path):
    poet.run(_cfg(tiny, "accel", iterations=12), out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    replayed = run.events[run.events["kind"] == "replayed"].groupby("iteration")["env_id"].apply(set)
    edited = run.envs[run.envs["parent_env_id"].notna()]
    assert len(edited) >= 1
    for _, row in edited.iterrows():
        assert row["parent_env_id"] in replayed[row["created_iteration"]]
    from envs import EnvParams

    family = __import__("envs").make_family("terrain", tiny()["env"]["options"])
    for _, row in run.envs[run.envs["parent_env_id"].notna()].iterrows():
        child = EnvParams.from_json(row["params_json"])
        family.validate(child)


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_held_out_levels_are_scored_for_every_curriculum(name, tiny, tmp_path):
    from poet.analysis.report import heldout_figure

    cfg = _cfg(tiny, name, evaluation={**tiny()["evaluation"], "test_every": 4})
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    ho = run.heldout
    assert sorted(ho["iteration"].unique()) == [3, 7]
    assert list(dict.fromkeys(ho["level"])) == ["flat", "pits", "stumps", "rough", "combined"]
    # one row per active agent and level; the same level ids in every run (pinned courses)
    assert ho.groupby("iteration").size().to_numpy().tolist() == [
        5 * n for n in ho.groupby("iteration")["pair_id"].nunique()
    ]
    assert ho["score"].notna().all() and ho.groupby("level")["env_id"].nunique().eq(1).all()
    assert heldout_figure(run).axes[0].get_legend() is not None


def test_held_out_evaluation_needs_test_levels(tiny, tmp_path):
    cfg = tiny(env={"family": "cartpole", "options": {}}, evaluation={**tiny()["evaluation"], "test_every": 2})
    with pytest.raises(
        poet.ConfigError,
        match="evaluation.test_every: env family 'cartpole' has no test_levels.*test_every=0 runs without",
    ):
        poet.run(cfg, out=tmp_path / "r")


def test_compare_curricula_quick_runs_poet_beside_ued_and_compares_them(tmp_path):
    import json
    import subprocess
    import sys

    out, runs = tmp_path / "compare.json", tmp_path / "runs"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "compare_curricula.py"),
            "--quick",
            "--curricula",
            "poet",
            "accel",
            "dr",
            "--json",
            str(out),
            "--out",
            str(runs),
        ],
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| curriculum | flat | pits | stumps | rough | combined | iterations |" in run.stdout
    data = json.loads(out.read_text())
    assert [s["curriculum"] for s in data["summary"]] == ["poet", "accel", "dr"]
    # each curriculum on its own config, every run on the same held-out levels
    assert data["configs"] == {
        "poet": "experiments/quickstart.yaml",
        "accel": "experiments/ued_terrain.yaml",
        "dr": "experiments/ued_terrain.yaml",
    }
    for row in data["summary"]:
        assert set(row["combined"]) == {"mean", "min", "max"} and row["env_steps_mean"] > 0
    assert all(r["heldout_curve"] for r in data["runs"])
    assert len({tuple(r["heldout"]) for r in data["runs"]}) == 1
    # then `poet compare` on the runs
    assert data["compare"] == [str(runs / "compare-s0")]
    assert f"poet compare (seed 0): {runs / 'compare-s0' / 'index.html'}" in run.stdout
    for name in ("heldout_levels", "heldout_curves", "training_scores"):
        assert (runs / "compare-s0" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "poet-s0 (poet)" in (runs / "compare-s0" / "index.html").read_text()


def test_compare_curricula_checks_every_config_before_running(tmp_path):
    import subprocess
    import sys

    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / "compare_curricula.py"),
            "--quick",
            "--curricula",
            "poet",
            "nosuch",
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2 and run.stderr.splitlines()[-1].startswith(
        "compare_curricula: error: nosuch: curriculum:"
    )
    assert len(run.stderr.splitlines()) == 1 and not (tmp_path / "runs").exists()


# ------------------------------------------------------------ PLR phases with fake services
class _ReturnsScorer:
    """Every (agent, level) scores `value`; records what was asked."""

    def __init__(self, value: float):
        self.value, self.asked, self.cache = value, [], None

    def score(self, jobs, tags=None):
        self.asked.extend(env for _, env in jobs)
        return np.full(len(jobs), self.value)


class _StepTrainer:
    """One 'ES step' adds 1 to theta and reports the best perturbation's return."""

    name = "fake"

    def __init__(self, best: float):
        self.best = best

    def init_state(self, theta):
        return {}

    def reset_state(self, state, theta):
        return {}

    def step(self, tasks, evaluator):
        from poet.trainers import TrainStep

        self.tasks = list(tasks)
        return [
            TrainStep(
                theta=t.theta + 1, state={}, score=None, metrics={}, levels=[{"return_max": self.best}] * len(t.levels)
            )
            for t in tasks
        ]


def _plr_ctx(tmp_path, curriculum, levels=(), **options):
    import envs
    from poet.context import RunContext
    from poet.curricula.level_buffer import LevelBuffer
    from poet.pair import Pair
    from poet.parts import load_config
    from poet.population import Population
    from poet.records import RecordWriter
    from poet.seeding import Seeds
    from poet.state import RunState

    family = envs.make_family("terrain", {})
    cls = CURRICULA[curriculum]
    cur = cls(cls.Options(**options))
    agent = Pair(
        pair_id="p0",
        index=0,
        env=family.initial(),
        theta=np.zeros(3, np.float32),
        state={},
        parent_env_id=None,
        created_iteration=0,
    )
    buffer = LevelBuffer(cur.options.buffer_size, cur.options.temperature, cur.options.staleness_coef)
    for i, level in enumerate(levels):
        buffer.insert({"env": level.to_json(), "max_return": 20.0 + i}, 1.0 + i, buffer.propose())
    state = RunState(
        population=Population(active=[agent], next_index=1), curriculum_data={"level_buffer": buffer.to_data()}
    )
    ctx = RunContext(
        cfg=load_config(data={"curriculum": curriculum}),
        family=family,
        spec=None,
        trainer=_StepTrainer(best=50.0),
        evaluator=None,
        seeds=Seeds(0),
        scorer=_ReturnsScorer(10.0),
        records=RecordWriter(tmp_path),
        log=lambda line: None,
        state=state,
    )
    return ctx, cur, family


def _phase(name):
    import contextlib

    return contextlib.nullcontext()


class _RegretTrainer(_StepTrainer):
    """Scores every level 1.5 per finished episode and hands back the agent's state moved on."""

    def regret(self, tasks, evaluator):
        from poet.trainers import TrainStep

        metrics = {"scores": [1.5], "mean_return": 0.0, "value_loss": 0.0}
        return [TrainStep(t.theta, {**t.state, "moved": True}, None, {}, [metrics] * len(t.levels)) for t in tasks]


def test_scoring_new_levels_keeps_the_state_the_trainer_hands_back(tmp_path):
    """dcd's return statistics move in every rollout, scoring ones too: the agent takes the state
    its trainer's `regret` gives back (PPO's `scoring_updates_stats`), and nothing trains."""
    from poet.curricula.level_buffer import LevelBuffer

    ctx, cur, _ = _plr_ctx(tmp_path, "robust_plr", buffer_size=10, num_levels=3, score="positive_value_loss")
    ctx.trainer = _RegretTrainer(best=50.0)
    theta = ctx.state.population.active[0].theta.copy()
    cur.run_iteration(ctx, 0, _phase)  # an empty buffer: explore
    agent = ctx.state.population.active[0]
    assert agent.state == {"moved": True} and agent.scores == [] and np.array_equal(agent.theta, theta)
    assert LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"]).scores == [1.5, 1.5, 1.5]


def test_robust_plr_explores_new_levels_without_training(tmp_path):
    from poet.curricula.level_buffer import LevelBuffer

    ctx, cur, _ = _plr_ctx(tmp_path, "robust_plr", buffer_size=10, num_levels=3)
    cur.run_iteration(ctx, 0, _phase)  # an empty buffer: explore
    buffer = LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"])
    assert len(buffer.levels) == 3 and buffer.scores == [0.0, 0.0, 0.0]  # MaxMC: a first visit scores 0
    assert [e["max_return"] for e in buffer.levels] == [10.0, 10.0, 10.0]
    assert ctx.state.population.active[0].scores == []  # no training
    assert len(ctx.scorer.asked) == 3 and buffer.samples == 3


def test_replay_trains_on_the_drawn_level_and_scores_it_by_maxmc(tmp_path):
    import envs
    from envs import EnvParams
    from poet.curricula.level_buffer import LevelBuffer

    family = envs.make_family("terrain", {})
    levels = [family.sample(np.random.default_rng(i)).with_course_seed(i) for i in range(2)]
    # a full buffer (fill 1) and replay probability 1: this iteration replays
    ctx, cur, _ = _plr_ctx(tmp_path, "robust_plr", levels, buffer_size=2, replay_prob=1.0, min_fill=0.0, num_levels=1)
    cur.run_iteration(ctx, 5, _phase)
    buffer = LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"])
    agent = ctx.state.population.active[0]
    index = [i for i, e in enumerate(buffer.levels) if EnvParams.from_json(e["env"]) == agent.env]
    assert len(index) == 1
    i = index[0]
    # trained once (theta + 1), scored 10 after the step; best seen = max(10, 20 + i, ES best 50) = 50
    assert agent.scores == [10.0] and agent.theta.tolist() == [1.0, 1.0, 1.0]
    assert buffer.levels[i]["max_return"] == 50.0 and buffer.scores[i] == 40.0
    assert buffer.staleness[i] == 0.0 and buffer.staleness[1 - i] == 1.0  # (the other was proposed 1 sample before)


def test_accel_edits_the_replayed_level_into_a_scored_child(tmp_path):
    import envs
    from poet.curricula.level_buffer import LevelBuffer

    family = envs.make_family("terrain", {})
    levels = [family.sample(np.random.default_rng(i)).with_course_seed(i) for i in range(2)]
    ctx, cur, _ = _plr_ctx(
        tmp_path, "accel", levels, buffer_size=2, replay_prob=1.0, min_fill=0.0, edits=3, num_levels=1
    )
    cur.run_iteration(ctx, 5, _phase)
    replayed = ctx.state.population.active[0].env
    child = ctx.scorer.asked[-1]  # the scorer saw: the score after the step, then the child
    assert child != replayed and child.with_course_seed(None) != replayed.with_course_seed(None)
    family.validate(child)
    ctx.records.flush()
    rows = [__import__("json").loads(x) for x in (tmp_path / "records" / "envs.jsonl").read_text().splitlines()]
    assert rows[-1]["env_id"] == child.id and rows[-1]["parent_env_id"] == replayed.id
    buffer = LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"])
    # the child scores 0 (MaxMC first visit); the least-supported level scores 1 or 40: it stays out
    assert child.to_json() not in [e["env"] for e in buffer.levels]


def test_accel_cycle_trains_on_a_batch_and_its_children_enter_with_dcds_staleness(tmp_path):
    import envs
    from envs import EnvParams
    from poet.curricula.level_buffer import LevelBuffer

    family = envs.make_family("terrain", {})
    levels = [family.sample(np.random.default_rng(i)).with_course_seed(i) for i in range(4)]
    ctx, cur, _ = _plr_ctx(
        tmp_path, "accel", levels, buffer_size=20, replay_prob=1.0, min_fill=0.0, edits=3, num_levels=8
    )
    before = LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"])
    cur.run_iteration(ctx, 5, _phase)
    (task,) = ctx.trainer.tasks
    assert len(task.levels) == 8 and all(level in levels for level in task.levels)  # 8 draws from the buffer
    buffer = LevelBuffer.from_data(ctx.state.curriculum_data["level_buffer"])
    # 8 children: the 4 lowest-returning levels of the batch (all return 10 here: argsort's
    # order) edited twice each; MaxMC scores them 0 and the free slots take them all
    children = [EnvParams.from_json(e["env"]) for e in buffer.levels[4:]]
    assert len(children) == 8 and buffer.scores[4:] == [0.0] * 8
    # dcd's running_sample_count: each child is counted when proposed, so the first one has
    # seen 7 more new levels before it enters, the last none; replays do not count
    assert buffer.staleness[4:] == [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    assert buffer.samples == before.samples + 8


def test_dr_draws_the_iterations_level_and_trains_on_it_with_fake_services(tmp_path):
    ctx, _, family = _plr_ctx(tmp_path, "robust_plr")  # the fake services; the curriculum under test is DR
    dr = CURRICULA["dr"](CURRICULA["dr"].Options(num_levels=3))
    trainer = ctx.trainer
    for iteration in (1, 2):
        dr.run_iteration(ctx, iteration, _phase)
        agent = ctx.state.population.active[0]
        levels = dr.levels(ctx, iteration)  # a function of the iteration only
        assert trainer.tasks[0].levels == levels and agent.env == levels[0]
        rng = ctx.seeds.rng("dr.level", iteration)
        assert [level.with_course_seed(None) for level in levels] == [family.sample(rng) for _ in range(3)]
    assert agent.scores == [10.0, 10.0] and agent.theta.tolist() == [2.0, 2.0, 2.0]
    assert ctx.state.population.active[0].env != dr.levels(ctx, 1)[0]


def test_direct_trains_on_its_one_env_with_fake_services(tmp_path):
    ctx, _, _ = _plr_ctx(tmp_path, "robust_plr")
    direct = CURRICULA["direct"]()
    env = ctx.state.population.active[0].env
    for iteration in range(3):
        direct.run_iteration(ctx, iteration, _phase)
    agent = ctx.state.population.active[0]
    assert agent.env == env and agent.scores == [10.0] * 3 and agent.theta.tolist() == [3.0, 3.0, 3.0]


def test_path_trains_on_equal_stages_from_the_start_to_the_target(tiny, tmp_path):
    target = OPTIONS["path"]["target"]
    poet.run(_cfg(tiny, "path"), out=tmp_path / "r", progress=False)  # 8 iterations, 4 stages: 2 each
    run = load_run(tmp_path / "r")
    assert len(run.envs) == 4 and run.envs["created_iteration"].tolist() == [0, 2, 4, 6]
    assert run.envs["parent_env_id"].iloc[1:].tolist() == run.envs["env_id"].iloc[:-1].tolist()
    last = EnvParams.from_json(run.envs["params_json"].iloc[-1])
    assert last.values == target and run.envs["roughness"].tolist() == [0.0, 0.67, 1.33, 2.0]
    # the CPPN family has no interpolation: a one-line error before any work
    with pytest.raises(poet.ConfigError, match="curriculum: path needs env family 'bipedal_cppn' to interpolate"):
        poet.run(
            tiny(curriculum="path", curriculum_options=OPTIONS["path"], env={"family": "bipedal_cppn", "options": {}}),
            out=tmp_path / "bad",
        )


def test_path_by_env_steps_restarts_es_at_each_stage_and_resumes_identically(tiny, tmp_path):
    probe = load_run(_run(tiny, tmp_path / "probe", {**OPTIONS["path"]}, iterations=8))
    budget = int(probe.phases["env_steps"].sum())  # the shares: of the steps 8 iterations took
    options = {**OPTIONS["path"], "env_steps": budget, "restart_trainer": True}
    run = load_run(_run(tiny, tmp_path / "r", options, iterations=10))
    # stage k from the first iteration whose env steps before it reach k * budget / 4
    per_iteration = run.phases.groupby("iteration")["env_steps"].sum().to_numpy()
    before = np.concatenate([[0], np.cumsum(per_iteration)[:-1]])
    stages = np.minimum(3, before * 4 // budget)
    assert run.envs["created_iteration"].tolist() == [0, *np.flatnonzero(np.diff(stages)) + 1]
    sigma = run.iterations.set_index("iteration")["sigma"]
    firsts = run.envs["created_iteration"].tolist()
    assert all(sigma[i] == sigma[0] for i in firsts)  # ES's noise back at its start at each stage
    assert (sigma.drop(firsts) < sigma[0]).all()
    state = json.loads(sorted((tmp_path / "r" / "checkpoints").iterdir())[-1].joinpath("state.json").read_text())
    assert state["env_steps"] == int(per_iteration.sum())
    # stopped at 5 and resumed: the same run; also from a checkpoint saved before the count was kept
    for legacy in (False, True):
        out = _run(tiny, tmp_path / f"resumed-{legacy}", options, iterations=5)
        if legacy:
            (saved,) = (out / "checkpoints").iterdir()
            text = json.loads((saved / "state.json").read_text())
            del text["env_steps"]
            (saved / "state.json").write_text(json.dumps(text))
            manifest = json.loads((saved / "manifest.json").read_text())
            manifest["sha256"]["state.json"] = checkpoint._sha(saved / "state.json")
            (saved / "manifest.json").write_text(json.dumps(manifest))
        poet.resume(out, iterations=10, progress=False)
        _assert_same_run(tmp_path / "r", out)
    plain = load_run(_run(tiny, tmp_path / "plain", {**options, "restart_trainer": False}, iterations=10))
    assert (plain.iterations["sigma"].iloc[1:].to_numpy() < sigma[0]).all()


def _run(tiny, out, options: dict, iterations: int):
    cfg = _cfg(tiny, "path", iterations=iterations, curriculum_options=options, checkpoint={"every": 0, "keep": 1})
    poet.run(cfg, out=out, progress=False)
    return out


def test_env_start_given_with_its_course_keeps_the_course(tiny, tmp_path):
    start = EnvParams.create("terrain", {"roughness": 1.0, "pit_gap": [], "stump_height": []}, course_seed=4242)
    poet.run(
        tiny(curriculum="direct", iterations=2, env={"start": start.to_dict()}), out=tmp_path / "r", progress=False
    )
    first = load_run(tmp_path / "r").envs.iloc[0]
    assert EnvParams.from_json(first["params_json"]) == start and first["course_seed"] == 4242


# ------------------------------------------------------------ level-buffer runs: progress, options, shipped config
def test_level_buffer_progress_fields_say_what_the_iteration_did(tmp_path):
    import envs

    ctx, cur, _ = _plr_ctx(tmp_path, "accel", buffer_size=10, num_levels=3)  # min fill 0.5: 5 levels
    cur.run_iteration(ctx, 0, _phase)  # an empty buffer: explore 3
    assert cur.progress_fields(ctx) == {"levels": "3/5 before first replay"}
    family = envs.make_family("terrain", {})
    levels = [family.sample(np.random.default_rng(i)).with_course_seed(i) for i in range(2)]
    ctx, cur, _ = _plr_ctx(tmp_path / "full", "robust_plr", levels, buffer_size=2, replay_prob=1.0, min_fill=0.0)
    assert cur.progress_fields(ctx) == {"buffer": "2/2", "replays": 0, "replay_score": "none yet"}
    cur.run_iteration(ctx, 5, _phase)  # replays: one trainer step, the fake scorer's 10 after it
    assert cur.progress_fields(ctx) == {"buffer": "2/2", "replays": 1, "replay_score": "10"}


def test_progress_bar_of_a_level_buffer_run_says_it_is_filling_never_nan(tmp_path, capsys):
    from types import SimpleNamespace

    from poet.runtime.loop import Progress

    ctx, cur, _ = _plr_ctx(tmp_path, "accel")  # dcd's defaults: 1000 levels, min fill 0.5, 16 per cycle
    bar = Progress(30, 0, True)
    for iteration in range(2):
        cur.run_iteration(ctx, iteration, _phase)
        bar.update(SimpleNamespace(ctx=ctx, curriculum=cur, last_steps_per_second=1234.0, annecs=lambda: 0))
    bar.close()
    err = capsys.readouterr().err
    assert "levels=32/500 before first replay" in err, err
    assert "nan" not in err and "best=" not in err and "steps_per_s=1,234" in err


def test_cli_progress_bar_of_a_short_accel_run(tiny, tmp_path):
    """`poet run` with dcd's buffer defaults: 3 iterations only explore, and the bar says so."""

    config = _write_config(tmp_path / "cfg.yaml", tiny(curriculum="accel", iterations=3, progress=True))
    run = poet_in_process(["run", str(config), "--out", str(tmp_path / "r")])
    assert run.returncode == 0, run.stderr[-2000:]
    assert "levels=48/500 before first replay" in run.stderr, run.stderr[-2000:]
    assert "nan" not in run.stderr


@pytest.mark.parametrize(
    "curriculum, option, value, message",
    [
        ("robust_plr", "min_fill", 2, "min_fill: must be in [0, 1], got 2.0"),
        ("robust_plr", "replay_prob", -0.5, "replay_prob: must be in [0, 1], got -0.5"),
        ("accel", "staleness_coef", 1.5, "staleness_coef: must be in [0, 1], got 1.5"),
        ("accel", "buffer_size", 0, "buffer_size: must be >= 1, got 0"),
        ("accel", "num_levels", 2.5, "num_levels: expected an integer, got 2.5"),
        ("accel", "buffer_size", "big", "buffer_size: expected an integer, got 'big'"),
        ("robust_plr", "temperature", 0, "temperature: must be > 0, got 0.0"),
        ("robust_plr", "temperature", "hot", "temperature: expected a number, got 'hot'"),
        ("accel", "score", "regret", "score: expected one of 'auto', 'positive_value_loss', 'maxmc', got 'regret'"),
        ("accel", "buffer_priority", "age", "buffer_priority: expected one of 'replay_support', 'score', got 'age'"),
        ("accel", "edits", 0, "edits: must be >= 1, got 0"),
        ("accel", "edits", True, "edits: expected an integer, got True"),
    ],
)
def test_level_buffer_option_errors_name_the_option_and_the_bound(curriculum, option, value, message):
    from poet.parts import build_options

    with pytest.raises(poet.ConfigError) as info:
        build_options(CURRICULA[curriculum], {option: value}, "curriculum_options", curriculum)
    assert str(info.value) == f"curriculum_options.{message}"


def test_cli_bad_level_buffer_option_is_one_error_line(tmp_path):

    run = poet_in_process(
        ["run", "experiments/ued_terrain.yaml", "--set", "curriculum_options.min_fill=2", "--out", str(tmp_path / "r")]
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("poet: error: ") and "curriculum_options" in lines[0], run.stderr
    assert "curriculum_options.min_fill: must be in [0, 1], got 2.0" in lines[0]
    assert not (tmp_path / "r").exists()


UED = ROOT / "experiments" / "ued_terrain.yaml"


def test_ued_terrain_config_is_the_quickstart_with_a_buffer_scaled_to_the_run():
    """Same env, policy, evaluation and ES as the quickstart, dcd's PPO with a rollout as long as
    an episode; its buffer lets replays start within the first tenth of the run, where dcd's 1000
    levels would take a third of it."""
    from poet.curricula.level_buffer import LevelBuffer
    from poet.parts import check_parts, load_config

    ued, quick = load_config(UED), load_config(ROOT / "experiments" / "quickstart.yaml")
    assert ued.curriculum == "accel" and ued.env.family == quick.env.family
    # the quickstart's env, on dcd's 8-D levels: the terrain family's default for dcd's curricula
    assert ued.env.options == {**quick.env.options, "level_space": "dcd"}
    assert (ued.policy.hidden, ued.policy.activation, ued.policy.init) == ([40, 40], "tanh", "orthogonal")
    assert (ued.evaluation.max_steps, ued.evaluation.eval_episodes, ued.evaluation.test_every) == (400, 3, 20)
    assert ued.trainer.name == "ppo" and ued.trainer.section("es") == quick.trainer.section("es")
    from poet.curricula import dcd

    scaled = {"n_steps": 400, "minibatch_size": 200}  # 16 levels x 400 steps / dcd's 32 minibatches
    assert ued.trainer.section("ppo") == {**dcd.DEFAULTS["trainer"]["ppo"], **scaled}
    accel = check_parts(ued).curriculum.options
    cycles = -(-LevelBuffer.levels_to_replay(accel.buffer_size, accel.min_fill) // accel.num_levels)
    assert cycles <= ued.iterations // 10
    defaults = CURRICULA["accel"]().options
    assert -(-LevelBuffer.levels_to_replay(defaults.buffer_size, defaults.min_fill) // defaults.num_levels) > 30
    # robust PLR runs from it as it is; DR takes no options, and says so rather than ignoring them
    assert check_parts(load_config(UED, overrides=["curriculum=robust_plr"])).curriculum.name == "robust_plr"
    dr = load_config(UED, overrides=["curriculum=dr", "curriculum_options={}"])
    assert check_parts(dr).curriculum.name == "dr"
    with pytest.raises(poet.ConfigError, match=r"curriculum_options\.buffer_size: dr has no option 'buffer_size'"):
        check_parts(load_config(UED, overrides=["curriculum=dr"]))


@pytest.mark.parametrize("curriculum", ["accel", "robust_plr", "dr"])
def test_ued_terrain_config_runs_each_ued_curriculum(curriculum, tmp_path):
    """A few iterations of experiments/ued_terrain.yaml, cut down, with `--set curriculum=...`."""

    small = [
        "iterations=6",
        "evaluation.backend=inprocess",
        "evaluation.max_steps=60",
        "evaluation.test_every=3",
        "trainer.es.population=8",
        "env.options.course_length=20",
        f"curriculum={curriculum}",
    ]
    small += ["curriculum_options={}"] if curriculum == "dr" else []
    sets = [x for s in small for x in ("--set", s)]
    run = poet_in_process(["run", str(UED), *sets, "--out", str(tmp_path / "r"), "--quiet"])
    assert run.returncode == 0, run.stderr[-2000:]
    records = load_run(tmp_path / "r")
    assert sorted(records.heldout["iteration"].unique()) == [2, 5]
    if curriculum == "dr":
        assert len(records.iterations) == 6
    else:  # 16 new levels per cycle: 4 cycles fill the 100-level buffer to its minimum of 50
        assert (records.events["kind"] == "explored").sum() >= 16 * 4 or len(records.iterations) == 0


def test_a_score_the_trainer_cannot_give_is_one_error_line_before_any_rollout(tmp_path):
    """score: positive_value_loss needs PPO's value net; with ES the run stops at its start."""

    run = poet_in_process(
        [
            "run",
            str(UED),
            "--set",
            "curriculum_options.score=positive_value_loss",
            "--set",
            "trainer.name=es",
            "--backend",
            "inprocess",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.splitlines()[-1] == (
        "poet: error: curriculum_options.score: positive_value_loss needs a trainer with a value function "
        "(regret(tasks, evaluator)); trainer 'es' has none"
    )
    assert load_run(tmp_path / "r").events.empty  # nothing was scored
