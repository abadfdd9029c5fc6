"""The PLR level buffer against dcd's LevelSampler: its formulas by hand (rank transform,
staleness mixing, proportionate replay schedule, replacement of the least-supported level)
and replay weights computed by dcd's own code (the golden numbers at the end)."""

from __future__ import annotations

import numpy as np
import pytest

from poet.curricula.level_buffer import LevelBuffer


def _buffer(**kw) -> LevelBuffer:
    b = LevelBuffer(capacity=4, temperature=0.5, staleness_coef=0.5, **kw)
    b.levels, b.scores, b.staleness = ["a", "b", "c"], [3.0, 1.0, 2.0], [2.0, 0.0, 2.0]
    return b


def test_replay_distribution_mixes_rank_and_staleness() -> None:
    # ranks (highest score first) 1, 3, 2; 1/rank^(1/0.5): 1, 1/9, 1/4 -> 36/49, 4/49, 9/49
    # staleness 2, 0, 2 -> 1/2, 0, 1/2; mixed half and half
    expected = [0.5 * 36 / 49 + 0.25, 0.5 * 4 / 49, 0.5 * 9 / 49 + 0.25]
    np.testing.assert_allclose(_buffer().weights(), expected)
    no_staleness = _buffer()
    no_staleness.staleness_coef = 0.0
    np.testing.assert_allclose(no_staleness.weights(), [36 / 49, 4 / 49, 9 / 49])


def test_ties_rank_in_reversed_argsort_order_and_zero_staleness_is_one_over_capacity() -> None:
    b = LevelBuffer(capacity=3, temperature=1.0, staleness_coef=0.5)
    b.levels, b.scores, b.staleness = ["a", "b", "c"], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]
    # numpy's argsort of three ties is 0, 1, 2; reversed, the last slot ranks first:
    # ranks 3, 2, 1 -> 1/3, 1/2, 1 over 11/6; staleness all 0 -> 1/3 each (capacity 3)
    np.testing.assert_allclose(b.weights(), [0.5 * 2 / 11 + 1 / 6, 0.5 * 3 / 11 + 1 / 6, 0.5 * 6 / 11 + 1 / 6])


class _Uniform:
    """Gives the one number a replay decision draws."""

    def __init__(self, u: float):
        self.u = u

    def random(self) -> float:
        return self.u


def test_proportionate_replay_schedule() -> None:
    b = _buffer()  # 3 of 4 filled: replay when u < min(0.75, replay_prob)
    assert b.replay_decision(_Uniform(0.74), replay_prob=0.9, min_fill=0.5) is True
    assert b.replay_decision(_Uniform(0.76), replay_prob=0.9, min_fill=0.5) is False
    assert b.replay_decision(_Uniform(0.6), replay_prob=0.5, min_fill=0.5) is False
    assert b.replay_decision(_Uniform(0.0), replay_prob=0.9, min_fill=0.8) is False  # below the minimum fill


def test_replay_updates_staleness_not_the_sample_count() -> None:
    b = _buffer()
    index = b.sample_replay(np.random.default_rng(1))
    assert b.samples == 0 and b.staleness[index] == 0.0  # dcd: only new levels advance running_sample_count
    assert [s for i, s in enumerate(b.staleness) if i != index] == [
        s + 1 for i, s in enumerate([2.0, 0.0, 2.0]) if i != index
    ]
    counts = np.bincount([_buffer().sample_replay(np.random.default_rng(s)) for s in range(4000)], minlength=3) / 4000
    np.testing.assert_allclose(counts, _buffer().weights(), atol=0.03)


def test_new_levels_fill_then_replace_the_least_supported_when_they_score_at_least_as_much() -> None:
    b = _buffer()
    stamp = b.propose()
    b.propose()  # one more new level before this one is scored
    b.sample_replay(np.random.default_rng(0))  # replays do not count (dcd's running_sample_count)
    assert b.insert("d", 0.0, stamp) == 3 and b.staleness[3] == 1.0  # free slot; new levels since proposed
    least = int(np.argmin(b.weights()))
    assert b.insert("e", b.scores[least] - 0.5, b.propose()) is None  # scores below the one it would replace
    assert b.insert("f", b.scores[least], b.propose()) == least and b.levels[least] == "f"


def test_with_score_priority_the_lowest_scored_level_is_the_one_replaced() -> None:
    b = _buffer()
    b.priority = "score"
    b.insert("d", 0.0, b.propose())  # fills the last slot: scores 3, 1, 2, 0
    assert b.insert("e", -1.0, b.propose()) is None  # below the lowest score (0)
    assert b.insert("f", 0.5, b.propose()) == 3 and b.levels == ["a", "b", "c", "f"]  # the lowest (0) goes
    assert b.insert("g", 0.7, b.propose()) == 3  # now 0.5 is the lowest


def test_plain_data_round_trip() -> None:
    b = _buffer(samples=7)
    again = LevelBuffer.from_data(b.to_data())
    assert again == b
    with pytest.raises(KeyError):
        LevelBuffer.from_data({"capacity": 3})


@pytest.mark.parametrize(
    "capacity, min_fill, needed",
    [(1000, 0.5, 500), (100, 0.07, 7), (100, 0.29, 29), (7, 0.5, 4), (10, 0.0, 1), (10, 1.0, 10), (3, 0.34, 2)],
)
def test_levels_to_replay_is_the_fewest_levels_the_replay_decision_accepts(capacity, min_fill, needed) -> None:
    assert LevelBuffer.levels_to_replay(capacity, min_fill) == needed
    # the replay decision agrees: it can replay with `needed` levels, never with one fewer
    b = LevelBuffer(capacity=capacity)
    b.levels, b.scores, b.staleness = ["x"] * needed, [0.0] * needed, [0.0] * needed
    assert b.replay_decision(_Uniform(0.0), replay_prob=1.0, min_fill=min_fill) is True
    del b.levels[-1]
    assert b.replay_decision(_Uniform(0.0), replay_prob=1.0, min_fill=min_fill) is False


# Golden numbers: dcd's `LevelSampler.sample_weights` (facebookresearch/dcd, level_replay/
# level_sampler.py at 72991be) run on the same buffers, with its BipedalWalker settings:
# rank transform at temperature 0.1, staleness coefficient 0.5 (power transform, temperature
# 1), `sample_full_distribution` with a seed buffer of `capacity` slots, the levels held in
# its first slots (unseen_seed_weights 0 there). Buffers of at most 16 slots: numpy sorts
# those by insertion, so the order of tied scores does not depend on the machine's SIMD sort.
DCD_WEIGHTS = {
    "part-filled, staleness all 0: 1/capacity each": (
        8,
        [0.3, 0.1, 0.2],
        [0, 0, 0],
        [0.5620037442350012, 0.06250845913976925, 0.06298779662522949],
    ),
    "part-filled, stale": (
        8,
        [0.3, 0.1, 0.2],
        [2, 0, 1],
        [0.8328370775683345, 8.459139769259448e-06, 0.16715446329189615],
    ),
    "tied scores in argsort order, reversed": (
        6,
        [0.5, 0.2, 0.5, 0.2, 0.5],
        [1, 2, 0, 3, 4],
        [0.05000845913084466, 0.10000005114912945, 0.0004877961105918407, 0.15000047636338926, 0.6995032172460449],
    ),
    "a level scoring 0 ranks among the empty slots": (
        6,
        [0.4, 0.0, 0.7],
        [1, 0, 2],
        [0.1671544715366559, 8.261018306647875e-09, 0.8328455202023257],
    ),
    "full, ties and zeros, staleness all 0": (
        5,
        [0.0, 0.3, 0.0, 0.3, 0.1],
        [0, 0, 0, 0, 0],
        [0.10000005114912945, 0.10048779611059185, 0.10000047636338925, 0.5995032172460447, 0.10000845913084466],
    ),
}


@pytest.mark.parametrize("case", list(DCD_WEIGHTS))
def test_replay_weights_are_dcds_on_full_and_part_filled_buffers_with_ties_and_zeros(case) -> None:
    capacity, scores, staleness, expected = DCD_WEIGHTS[case]
    b = LevelBuffer(capacity=capacity, temperature=0.1, staleness_coef=0.5)
    b.levels = [f"level{i}" for i in range(len(scores))]
    b.scores, b.staleness = [float(s) for s in scores], [float(s) for s in staleness]
    np.testing.assert_allclose(b.weights(), expected, rtol=1e-12, atol=1e-15)


def test_sampling_normalises_weights_that_sum_to_less_than_one() -> None:
    capacity, scores, staleness, expected = DCD_WEIGHTS["part-filled, staleness all 0: 1/capacity each"]
    b = LevelBuffer(capacity=capacity, temperature=0.1, staleness_coef=0.5)
    b.levels, b.scores, b.staleness = ["a", "b", "c"], list(scores), [0.0, 0.0, 0.0]
    assert b.weights().sum() == pytest.approx(0.5 + 0.5 * 3 / 8)
    draws = [LevelBuffer.from_data(b.to_data()).sample_replay(np.random.default_rng(s)) for s in range(4000)]
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 4000, np.array(expected) / sum(expected), atol=0.03)


def _rollout(ends: list[list[int]], seed: int, steps: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rewards, values and continues of a rollout whose envs' episodes end at `ends`."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, len(ends)))
    values = rng.normal(size=(steps + 1, len(ends)))[:steps]  # the last row is dcd's bootstrap, never used
    continues = np.ones((steps, len(ends)))
    for i, at in enumerate(ends):
        continues[at, i] = 0.0
    return rewards, values, continues


# dcd's LevelSampler.update_with_rollouts then after_update (facebookresearch/dcd @72991be), on
# the GAE of its RolloutStorage (gamma 0.99, lambda 0.9, done forced at the last step, the
# unfinished episodes "cliffhangers"), for the rollouts `_rollout` makes: its seed_scores,
# seeds and seed_staleness afterwards (returns are float32 in dcd's storage).
def test_replayed_levels_keep_the_score_of_their_last_finished_episode_as_dcd() -> None:
    from poet.trainers.ppo import level_scores

    b = LevelBuffer(4)
    for name, score in (("a", 0.5), ("b", 0.25), ("c", 0.125)):
        b.insert(name, score, b.propose())
    # env 0 replays a (two episodes, then one unfinished), env 1 b (unfinished), env 2 a again
    scores, _ = level_scores(*_rollout([[3, 8], [], [11]], 7), gamma=0.99, lam=0.9)
    assert [len(s) for s in scores] == [2, 0, 1]
    for index, episode_scores in zip([0, 1, 0], scores):
        for score in episode_scores:
            b.update(index, score)
    np.testing.assert_allclose(b.scores, [0.09874042412523863, 0.25, 0.125], rtol=1e-6)


def test_new_levels_enter_on_their_first_finished_episode_and_keep_the_last_as_dcd() -> None:
    from poet.trainers.ppo import level_scores

    b = LevelBuffer(4)
    b.insert("old", 0.3, b.propose())
    stamps = [b.propose() for _ in range(3)]  # three new levels, one per env
    scores, _ = level_scores(*_rollout([[4, 9], [], [6]], 8), gamma=0.99, lam=0.9)
    slots = [b.offer(name, s, stamp) for name, s, stamp in zip(["n1", "n2", "n3"], scores, stamps)]
    assert slots == [1, None, 2]  # n2 finished no episode: dcd never scores it, so it never enters
    assert b.levels == ["old", "n1", "n3"]
    np.testing.assert_allclose(b.scores, [0.3, 0.20327943578367402, 1.536754998484734], rtol=1e-6)
    assert b.staleness == [0.0, 2.0, 0.0]  # new levels proposed after each, as dcd's running_sample_count


def test_accel_edits_the_four_lowest_by_return_minus_value_loss_as_dcd() -> None:
    from poet.curricula.plr import edit_bases

    # dcd's runner: np.argsort(mean_return - batched_value_loss)[:4], repeated num_processes // 4 times
    # (no ties among the 16: numpy's order of ties there depends on the CPU, as it does for dcd)
    ranking = [5.0, -1.0, 3.0, -2.0, 0.0, 7.0, 2.0, 0.25, 9.0, 1.0, -3.0, 4.0, 6.0, 8.0, 0.5, 2.5]
    assert edit_bases(ranking) == [10, 3, 1, 4] * 4
    assert edit_bases([5.0, -1.0, 3.0, -1.0, 0.0, 7.0]) == [1, 3, 4, 2]  # 6 // 4 = 1 round; tie in argsort order
    assert edit_bases([1.0, 4.0, 2.0]) == [1, 1, 1]  # fewer than 4: the highest (dcd's argmax), once per level
