"""Published bugs of the reference code, and what this project does on the same input
(docs/curricula/known-issues.md): one section per issue, each test pinned by hand.

1. uber-research/poet PR 8: `update_pata_ec` calls `cap_score` without its bounds.
2. facebookresearch/dcd issue 11 (PR 12): ACCEL's "easy" edit selection took slot 0 four times.
3. facebookresearch/dcd issue 3: ACCEL maze results about half the paper's (no maze family here).
4. facebookresearch/minimax issue 7: PLR rank weights 1/0 and a temperature that cancelled out.
5. DramaCow/jaxued PR 6: `-inf` scores entering the PLR buffer.
6. dcd's BipedalWalker test envs: seeds from the wall clock (found here).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from poet.curricula.level_buffer import LevelBuffer
from poet.curricula.plr import ACCELOptions, edit_bases
from poet.curricula.poet.novelty import pata_ec
from poet.curricula.poet.reproduction import pata_ec_novelty

# ----------------------------------------------------------------- 1. uber-research/poet PR 8
# The reference's PATA-EC on these scores with PR 8's bounds (25, 340): poet `master`
# poet_distributed/stats.py compute_centered_ranks, run outside this project on the scores
# capped as PR 8's cap_score caps them (float32, as the reference ranks).
PR8_SCORES = [float(s) for s in np.random.default_rng(8).uniform(30.0, 330.0, size=10)] + [-150.0, 900.0]
PR8_REFERENCE = [
    -0.22727271914482117,
    0.40909093618392944,
    -0.3181818127632141,
    0.22727274894714355,
    0.3181818127632141,
    -0.04545453190803528,
    0.045454561710357666,
    -0.13636362552642822,
    -0.40909090638160706,
    0.13636362552642822,
    -0.5,
    0.5,
]


def test_pata_ec_clips_scores_outside_and_keeps_scores_at_the_mc_bounds() -> None:
    # below, at and above [25, 340]: clipped to 25, 25, 25, 340, 340, 340; 100 inside stays
    scores = [-100.0, 25.0, 24.9, 340.0, 340.1, 1000.0, 100.0]
    # ordinal ranks (ties by position): 0, 1, 2, 4, 5, 6, 3 over 6, minus 0.5
    np.testing.assert_allclose(
        pata_ec(scores, 25.0, 340.0), [-1 / 2, -1 / 3, -1 / 6, 1 / 6, 1 / 3, 1 / 2, 0.0], rtol=0, atol=1e-15
    )
    # average ties: the three 25s share rank 1, the three 340s rank 5, 100 is rank 3
    np.testing.assert_allclose(
        pata_ec(scores, 25.0, 340.0, ties="average"),
        [-1 / 3, -1 / 3, -1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0],
        rtol=0,
        atol=1e-15,
    )
    # clipping comes before ranking: 24.9 and -100 tie at 25, so position decides (unclipped,
    # -100 would rank lowest)
    assert pata_ec([24.9, -100.0], 25.0, 340.0).tolist() == [-0.5, 0.5]
    assert pata_ec([340.5, 9999.0], 25.0, 340.0).tolist() == [-0.5, 0.5]


def test_pata_ec_equals_the_reference_with_pr_8s_bounds_on_untied_scores() -> None:
    # untied after clipping (the reference's tie order is numpy's unstable argsort's): one
    # score below the bounds, one above, ten inside
    scores = PR8_SCORES
    clipped = np.clip(scores, 25.0, 340.0)
    assert len(set(clipped.tolist())) == 12 and clipped[-2:].tolist() == [25.0, 340.0]
    ours = pata_ec(scores, 25.0, 340.0)
    np.testing.assert_allclose(ours, PR8_REFERENCE, rtol=0, atol=1e-7)
    assert ours[-2:].tolist() == [-0.5, 0.5]
    assert sorted(ours.tolist()) == [i / 11 - 0.5 for i in range(12)]


def test_pata_ec_of_a_single_agent_is_zero_not_a_division_by_zero() -> None:
    # PR 8's thread: after the fix, one agent makes compute_centered_ranks divide by x.size - 1 = 0
    with np.errstate(all="raise"):
        assert pata_ec([400.0], 25.0, 340.0).tolist() == [0.0]
        assert pata_ec([400.0], 25.0, 340.0, ties="average").tolist() == [0.0]


def test_enhanced_poet_novelty_passes_the_mc_bounds_to_pata_ec() -> None:
    # the call site PR 8 fixes: every env's row of scores is clipped to [mc_lower, mc_upper]
    rows = {
        "e0": [-50.0, 100.0, 400.0],  # -> 25, 100, 340: ranks 0, 1, 2
        "e1": [300.0, 350.0, 20.0],  # -> 300, 340, 25: ranks 1, 2, 0
        "child": [1000.0, 341.0, 30.0],  # -> 340, 340, 30: ranks 1, 2, 0 (unclipped: 2, 1, 0)
    }
    agents = [SimpleNamespace(pair_id=f"a{i}", theta=i) for i in range(3)]

    class Scorer:
        def score(self, jobs, tags=None):
            return np.array([rows[env][agent] for agent, env in jobs])

    ctx = SimpleNamespace(
        cfg=SimpleNamespace(
            reproduction=SimpleNamespace(mc_lower=25.0, mc_upper=340.0, pata_ec_ties="ordinal", novelty_k=5)
        ),
        state=SimpleNamespace(population=SimpleNamespace(all_pairs=agents, admitted_envs=["e0", "e1"])),
        scorer=Scorer(),
    )
    child = SimpleNamespace(env="child", novelty=None)
    pata_ec_novelty(ctx, [child])
    # child (0, 0.5, -0.5); e0 (-0.5, 0, 0.5) at sqrt(1.5); e1 (0, 0.5, -0.5) at 0; mean of the 2
    assert child.novelty == pytest.approx(math.sqrt(1.5) / 2, abs=1e-12)  # unclipped: (sqrt 2 + sqrt 0.5) / 2


# ------------------------------------------------------- 2. facebookresearch/dcd issue 11, PR 12
RANKING_16 = [5.0, -1.0, 3.0, -2.0, 0.0, 7.0, 2.0, 0.25, 9.0, 1.0, -3.0, 4.0, 6.0, 8.0, 0.5, 2.5]
DCD_FIXED_BASES = [10, 3, 1, 4] * 4  # dcd at a3e4aa1 on RANKING_16
DCD_BROKEN_BASES = [0] * 16  # dcd before a3e4aa1 on RANKING_16


def test_edit_bases_of_16_distinct_rankings_are_the_4_lowest_4_times_each() -> None:
    bases = edit_bases(RANKING_16)
    assert bases == [10, 3, 1, 4] * 4
    assert len(set(bases)) == 4 and 0 not in bases  # slot 0 (5.0) is not among the 4 lowest
    # dcd's edit selection (envs/runners/adversarial_runner.py) run outside this project on
    # RANKING_16 as its 16 x 1 column: after PR 12 (a3e4aa1) it picks these bases; before,
    # argsort along the column's length-1 axis gave slot 0 for every child
    assert bases == DCD_FIXED_BASES
    assert bases != DCD_BROKEN_BASES


def test_edit_bases_follow_each_cycles_ranking() -> None:
    first = edit_bases(RANKING_16)
    second = edit_bases([-r for r in RANKING_16])  # the levels that were easiest are now hardest
    assert second == [8, 13, 5, 12] * 4
    assert not set(first) & set(second)  # nothing edited in one cycle is forced into the next
    assert edit_bases([float(i) for i in range(16)]) == [0, 1, 2, 3] * 4  # slot 0 when it is lowest


def _recording_scorer(returns: list[float]):
    class Scorer:
        cache = None

        def __init__(self):
            self.returns = returns

        def score(self, jobs, tags=None):  # by position in the batch: after the step, then the children
            return np.array(self.returns[: len(jobs)], dtype=np.float64)

    return Scorer()


class _Trainer:
    """An 'ES step' that keeps the batch it was given (no value net: ACCEL ranks by return)."""

    name = "fake"

    def init_state(self, theta):
        return {}

    def reset_state(self, state, theta):
        return {}

    def step(self, tasks, evaluator):
        from poet.trainers import TrainStep

        self.batch = list(tasks[0].levels)
        return [TrainStep(theta=t.theta, state={}, score=None, metrics={}, levels=[{}] * len(t.levels)) for t in tasks]


def test_accel_cycle_edits_the_four_lowest_of_its_batch_not_its_first_slot(tmp_path) -> None:
    import envs
    from poet import load_config
    from poet.context import RunContext
    from poet.curricula import CURRICULA
    from poet.pair import Pair
    from poet.population import Population
    from poet.records import RecordWriter
    from poet.seeding import Seeds
    from poet.state import RunState

    family = envs.make_family("terrain", {})
    cur = CURRICULA["accel"](ACCELOptions(buffer_size=16, replay_prob=1.0, min_fill=0.0, num_levels=16, edits=1))
    buffer = LevelBuffer(16, cur.options.temperature, cur.options.staleness_coef)
    for i in range(16):
        level = family.sample(np.random.default_rng(100 + i)).with_course_seed(i)
        buffer.insert({"env": level.to_json(), "max_return": 50.0}, 1.0 + i, buffer.propose())
    agent = Pair("p0", 0, family.initial(), np.zeros(3, np.float32), {}, None, 0)
    state = RunState(
        population=Population(active=[agent], next_index=1), curriculum_data={"level_buffer": buffer.to_data()}
    )
    ctx = RunContext(
        cfg=load_config(data={"curriculum": "accel"}),
        family=family,
        spec=None,
        trainer=_Trainer(),
        evaluator=None,
        seeds=Seeds(0),
        scorer=_recording_scorer([16.0 - j for j in range(16)]),  # slot 15 returns least
        records=RecordWriter(tmp_path),
        log=lambda line: None,
        state=state,
    )

    def phase(name):
        import contextlib

        return contextlib.nullcontext()

    def parents(iteration: int) -> list[str]:
        ctx.records.flush()
        rows = [json.loads(x) for x in (tmp_path / "records" / "envs.jsonl").read_text().splitlines()]
        return [r["parent_env_id"] for r in rows if r["created_iteration"] == iteration]

    cur.run_iteration(ctx, 1, phase)
    batch = [level.id for level in ctx.trainer.batch]
    assert len(batch) == 16
    assert parents(1) == [batch[15], batch[14], batch[13], batch[12]] * 4

    ctx.scorer.returns = [1.0 + j for j in range(16)]  # next cycle: slot 0 returns least
    cur.run_iteration(ctx, 2, phase)
    batch = [level.id for level in ctx.trainer.batch]
    assert parents(2) == [batch[0], batch[1], batch[2], batch[3]] * 4


# -------------------------------------------------------- 3. facebookresearch/dcd issue 3
def test_accel_defaults_are_dcds_bipedal_accel_json_not_its_maze_config() -> None:
    # bipedal_accel.json: level_replay_prob 0.9, level_replay_rho 0.5, buffer 1000, staleness 0.5,
    # num_edits 3, num_processes 16; the temperature is arguments.py's 0.1 (the json sets none)
    expected = {
        "replay_prob": 0.9,
        "min_fill": 0.5,
        "buffer_size": 1000,
        "staleness_coef": 0.5,
        "edits": 3,
        "num_levels": 16,
        "temperature": 0.1,
        "score": "auto",
        "buffer_priority": "replay_support",
    }
    o = ACCELOptions()
    assert {name: getattr(o, name) for name in expected} == expected
    # the maze run of issue 3 (mg_60b_uni_accel_empty.json) had 32 processes and base_levels
    # easy: its rule here picks 4 levels, each edited 8 times
    ranking = [float((7 * i) % 32) for i in range(32)]  # a permutation of 0..31
    assert edit_bases(ranking) == [0, 23, 14, 5] * 8  # the slots holding 0, 1, 2, 3


# ---------------------------------------------------- 4. facebookresearch/minimax issue 7
def _three(temperature: float, staleness_coef: float = 0.0) -> LevelBuffer:
    b = LevelBuffer(capacity=4, temperature=temperature, staleness_coef=staleness_coef)
    b.levels, b.scores, b.staleness = ["a", "b", "c"], [3.0, 1.0, 2.0], [2.0, 0.0, 1.0]
    return b


def test_rank_weights_are_one_over_rank_to_the_power_one_over_t() -> None:
    # scores 3, 1, 2 and an empty slot (0): ranks 1, 3, 2
    np.testing.assert_allclose(_three(1.0).weights(), [6 / 11, 2 / 11, 3 / 11], rtol=1e-15)
    # T = 0.1: 1, 1/3^10, 1/2^10 over their sum; times 3^10 2^10 = 60466176: 60466176, 1024, 59049
    np.testing.assert_allclose(_three(0.1).weights(), np.array([60466176, 1024, 59049]) / 60526249, rtol=1e-13)
    # minimax before 3fb8b46 divided the rank weights by T, which the normalisation cancels:
    # the same distribution at every temperature
    ranks = np.array([1.0, 3.0, 2.0])
    divided = [(1 / ranks / t) / (1 / ranks / t).sum() for t in (0.1, 1.0)]
    np.testing.assert_allclose(divided[0], divided[1], rtol=1e-15)
    assert abs(_three(0.1).weights()[0] - divided[0][0]) > 0.4


def test_rank_and_staleness_weights_sum_to_one_by_hand() -> None:
    # T = 1, staleness 2, 0, 1 -> 2/3, 0, 1/3; half and half: 20/33, 3/33, 10/33
    w = _three(1.0, staleness_coef=0.5).weights()
    np.testing.assert_allclose(w, [20 / 33, 3 / 33, 10 / 33], rtol=1e-15)
    assert w.sum() == pytest.approx(1.0, abs=1e-15)


def test_all_zero_scores_and_staleness_give_finite_weights_without_dividing_by_zero() -> None:
    with np.errstate(all="raise"):  # a 1/0, 0/0 or overflow here would raise
        # part-filled (2 of 4), every score 0 and every staleness 0: the 4 slots tie at 0 and
        # rank last slot first, so the levels rank 4 and 3; staleness gives 1/capacity each
        b = LevelBuffer(4, 0.1, 0.5, levels=["a", "b"], scores=[0.0, 0.0], staleness=[0.0, 0.0])
        w = b.weights()
        expected = 0.5 * np.array([59049, 1048576]) / 1107625 + 0.5 * 0.25  # 3^10, 4^10 over their sum
        np.testing.assert_allclose(w, expected, rtol=1e-13)
        assert w.sum() == pytest.approx(0.75, abs=1e-15)  # dcd's: sampling normalises it
        np.testing.assert_allclose(w / w.sum(), expected / 0.75, rtol=1e-13)
        # full: ranks 2 and 1; staleness 1/2 each
        b = LevelBuffer(2, 0.1, 0.5, levels=["a", "b"], scores=[0.0, 0.0], staleness=[0.0, 0.0])
        np.testing.assert_allclose(b.weights(), [0.5 / 1025 + 0.25, 0.5 * 1024 / 1025 + 0.25], rtol=1e-15)
        # the defaults (1000 slots, T = 0.1), one level scoring 0
        b = LevelBuffer(1000, levels=["a"], scores=[0.0], staleness=[0.0])
        assert b.weights().tolist() == [0.5 + 0.5 / 1000]
        assert LevelBuffer(1000).weights().tolist() == []  # an empty buffer has no weights


# ------------------------------------------------------------------ 5. DramaCow/jaxued PR 6
NON_FINITE = [float("-inf"), float("inf"), float("nan")]


def _held(capacity: int) -> LevelBuffer:
    b = LevelBuffer(capacity)
    for name, score in (("a", 0.5), ("b", 0.25)):
        b.offer(name, [score], b.propose())
    return b


def _refused(call, bad: float, b: LevelBuffer) -> None:
    before = json.dumps(b.to_data())
    with pytest.raises(ValueError) as error:
        call()
    assert repr(bad) in str(error.value)  # names the score: -inf, inf or nan
    assert json.dumps(b.to_data()) == before  # nothing changed


@pytest.mark.parametrize("bad", NON_FINITE, ids=repr)
def test_a_non_finite_score_offered_for_a_new_level_is_refused(bad: float) -> None:
    b = _held(4)  # room for more
    stamp = b.propose()
    _refused(lambda: b.offer("new", [bad], stamp), bad, b)
    _refused(lambda: b.offer("new", [1.0, bad], stamp), bad, b)  # a later episode's score too
    full = _held(2)
    stamp = full.propose()
    _refused(lambda: full.insert("new", bad, stamp), bad, full)


@pytest.mark.parametrize("bad", NON_FINITE, ids=repr)
def test_a_non_finite_score_for_a_replayed_level_is_refused(bad: float) -> None:
    b = _held(4)
    _refused(lambda: b.update(0, bad), bad, b)


def test_a_level_with_no_finished_episode_gets_no_score_not_minus_inf() -> None:
    from poet.trainers.ppo import level_scores

    # rewards 1, values 0, gamma 0.5, lambda 1: env 0 ends an episode at step 1 (advantages
    # 1.5, 1 -> 1.25), env 1 ends none; jaxued scores env 1 -inf, here it has no score
    continues = np.ones((3, 2))
    continues[1, 0] = 0.0
    scores, _ = level_scores(np.ones((3, 2)), np.zeros((3, 2)), continues, gamma=0.5, lam=1.0)
    assert scores == [[1.25], []]
    b = _held(4)
    for index, episode_scores in zip([0, 1], scores):  # a replay: RobustPLR._replay's loop
        for score in episode_scores:
            b.update(index, score)
    assert b.scores == [1.25, 0.25]  # b keeps its score (jaxued PR 6's rule)
    stamp = b.propose()
    assert b.offer("new", scores[1], stamp) is None and b.levels == ["a", "b"]  # a new one stays out


# ---------------------------------------------------- 6. dcd's BipedalWalker test envs' seeds
def _stair_steps(values: dict, seed: int) -> list[int]:
    from envs import EnvParams
    from envs.bipedal import BipedalTerrainEnv

    env = BipedalTerrainEnv(EnvParams.create("bipedal", values, seed))
    env.reset(seed=seed)
    steps = [int(size) for kind, _, size in env.obstacles if kind == "stairs"]
    env.close()
    return steps


def test_dcd_test_levels_run_on_a_fixed_list_of_course_seeds() -> None:
    pytest.importorskip("Box2D")
    from envs import EnvParams, dcd_levels
    from envs.bipedal import BipedalTerrainEnv

    assert dcd_levels.COURSE_SEEDS == tuple(range(100))
    grounds = []
    for _ in range(2):  # the same seed: the same course, in a new env as in a used one
        env = BipedalTerrainEnv(EnvParams.create("bipedal", dcd_levels.SUITE["Med-Roughness"], 7))
        grounds += [env.reset(seed=7) and list(env.terrain_y), env.reset(seed=7) and list(env.terrain_y)]
        env.close()
    assert all(g == grounds[0] for g in grounds)
    env = BipedalTerrainEnv(EnvParams.create("bipedal", dcd_levels.SUITE["Med-Roughness"], 8))
    env.reset(seed=8)
    assert list(env.terrain_y) != grounds[0]


def test_dcd_stairs_hold_up_to_one_step_fewer_than_stair_steps() -> None:
    pytest.importorskip("Box2D")
    from envs import dcd_levels

    counts = {s for seed in range(40) for s in _stair_steps(dcd_levels.SUITE["Med-Stairs"], seed)}
    assert counts == {0, 1, 2, 3, 4}  # randint(5): never 5
    assert max(s for seed in range(20) for s in _stair_steps(dcd_levels.EXTENDED["High-Stairs"], seed)) <= 8


# ------------------------------------------------------------------------------ the page
def test_every_row_of_the_page_names_tests_that_exist_here() -> None:
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "curricula" / "known-issues.md").read_text()
    summary = page[page.index("| issue |") : page.index("\n## ")]
    rows = [line for line in summary.splitlines()[2:] if line.startswith("|")]
    here = {name for name in globals() if name.startswith("test_")}
    assert len(rows) == 7
    for row in rows:
        named = [n.strip("`") for n in row.rstrip(" |").rpartition("|")[2].split(",")]
        named = [n.strip().strip("`") for n in named]
        assert named and all(n in here for n in named), f"{row[:60]}...: {named} not all in this file"


def test_dcd_test_mazes_have_fixed_episodes_where_dcds_vary() -> None:
    from envs import dcd_levels, maze_levels

    # FourRooms: dcd's env always starts from seed 1337, and its constructor's level is never
    # played; here the episodes are that stream's levels 1, 2, ... every time
    stream = dcd_levels.legacy_gym_rng(1337)
    played = [maze_levels.four_rooms(stream) for _ in range(3)][1:]
    assert maze_levels.maze_episodes("FourRooms", 2) == played and played[0] != played[1]
    # SimpleCrossing's episode k is gym's seed k (dcd's constructor seeds from the OS)
    assert maze_levels.maze_episodes("SimpleCrossingS11N5", 3)[2] == maze_levels.simple_crossing(
        dcd_levels.legacy_gym_rng(2)
    )
    # a corridor's episode k draws its goal as dcd's constructor does, from RandomState(k)
    goals = [e["goal"] for e in maze_levels.maze_episodes("SmallCorridor", 4)]
    assert goals == [maze_levels.fixed_maze("SmallCorridor", np.random.RandomState(k))["goal"] for k in range(4)]
    # dcd's "25 blocks" DR levels hold 12 walls
    draws = np.random.default_rng(0)
    assert {len(maze_levels.sample(draws, 25, False)["walls"]) for _ in range(10)} == {12}
