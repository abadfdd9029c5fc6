"""Wave planning: which requests share a chunk and how many chunks a wave gets (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pytest

import envs
from poet.evaluation import EvalRequest, PolicyRef
from poet.evaluation.planning import MIN_SLOT_CHUNK_ROWS, Deadlines, EpisodeLengths, plan_chunks, plan_guided, plan_wave
from poet.evaluation.requests import RequestTable

TERRAIN = envs.make_family("terrain", {"course_length": 30.0})


def _wave(reqs: list[EvalRequest]) -> RequestTable:
    return RequestTable.of(reqs)


def _by_cap(reqs: list[EvalRequest], n_chunks: int, max_rows: int) -> list[list[int]]:
    """plan_chunks with each request costing its rows at its step cap."""
    wave = _wave(reqs)
    rows = wave.rows()
    return plan_chunks(wave.policy, rows, rows * wave.max_steps, n_chunks, max_rows)


def test_plan_chunks_cuts_equal_shares_of_cost_and_never_splits():
    p, ref = TERRAIN.initial(), PolicyRef("k")
    reqs = [EvalRequest(ref, p, e, 0, s) for e, s in [(1, 10), (5, 100), (2, 100), (3, 50), (1, 1000)]]
    # costs (rows x steps) 10, 500, 200, 150, 1000: two shares of 930. Rows cut the first
    # four apart (at most 4 rows a chunk; 1 has 5 alone); 4's midpoint (860 + 500) lies in
    # the second share. Costliest chunk first.
    assert _by_cap(reqs, n_chunks=2, max_rows=4) == [[4], [1], [2], [3], [0]]
    even = [EvalRequest(ref, p, 1, 0, 100) for _ in range(8)]
    assert _by_cap(even, 2, 4096) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(len(c) for c in _by_cap(even, 3, 4096)) == [2, 3, 3]
    pinned = [EvalRequest(ref, p.with_course_seed(1), 5, 0, 100) for _ in range(4)]  # one row each
    assert len(_by_cap(pinned, 1, 4)) == 1
    assert _by_cap([], 2, 10) == []


def test_plan_chunks_keeps_a_policys_requests_together():
    """An ES-shaped wave (4 policies on 3 envs each, submitted env by env): each of 2 chunks
    carries the weights of 2 policies, not all 4."""
    envs_ = [TERRAIN.initial().with_course_seed(s) for s in range(3)]
    refs = [PolicyRef(f"k{i}") for i in range(4)]
    reqs = [EvalRequest(ref, env, 1, 0, 100) for env in envs_ for ref in refs]
    chunks = _by_cap(reqs, 2, 4096)
    assert [sorted({reqs[i].policy.key for i in c}) for c in chunks] == [["k0", "k1"], ["k2", "k3"]]
    assert chunks[0] == [0, 4, 8, 1, 5, 9]  # each policy's requests in submission order


def test_plan_chunks_cuts_a_share_whose_rows_pass_max_rows_where_they_would():
    p, ref = TERRAIN.initial(), PolicyRef("k")
    reqs = [EvalRequest(ref, p, 3, 0, 100) for _ in range(5)]  # 15 rows in one share
    assert _by_cap(reqs, 1, 7) == [[0, 1], [2, 3], [4]]


def test_guided_chunks_shrink_as_the_wave_goes_costliest_first():
    def guided(reqs, workers, min_rows, max_rows):
        wave = _wave(reqs)
        rows = wave.rows()
        return plan_guided(rows, rows * wave.max_steps, workers, min_rows, max_rows)

    p, ref = TERRAIN.initial(), PolicyRef("k")
    even = [EvalRequest(ref, p, 1, 0, 100) for _ in range(8)]
    # 2 workers: each chunk takes a quarter of the cost left: 800 -> 200, 600 -> 150, 400 -> 100, ...
    assert guided(even, workers=2, min_rows=1, max_rows=4096) == [[0, 1], [2, 3], [4], [5], [6], [7]]
    assert guided(even, workers=2, min_rows=2, max_rows=4096) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    reqs = [EvalRequest(ref, p, e, 0, s) for e, s in [(1, 10), (5, 100), (2, 100), (3, 50), (1, 1000)]]
    # costs 10, 500, 200, 150, 1000: costliest first, each alone covers a quarter of what is left
    assert guided(reqs, workers=2, min_rows=1, max_rows=6) == [[4], [1], [2], [3], [0]]
    # a minimum of 6 rows that max_rows=5 never lets a chunk reach: chunks close when full
    assert guided(reqs, workers=2, min_rows=6, max_rows=5) == [[4], [1], [2, 3], [0]]
    assert guided([], 2, 8, 4096) == []


def test_a_wave_shrinks_into_chunks_only_where_steps_cost_per_live_env():
    """Gymnasium envs with the compiled forward: chunks shrink down to MIN_SLOT_CHUNK_ROWS
    episodes. A row kernel, or a torch kind's fixed-shape network call (as costly for one live
    row as for 16): one balanced chunk per worker, so each worker has one tail of steps."""
    p, ref = TERRAIN.initial(), PolicyRef("k")
    wave = _wave([EvalRequest(ref, p, 1, 0, 100) for _ in range(128)])
    rows = wave.rows()
    chunks = plan_wave(wave, rows, rows * 100.0, 2, 4096, shrinking=True)
    assert sorted(i for c in chunks for i in c) == list(range(128))
    assert len(chunks[0]) == 32 and min(len(c) for c in chunks[:-1]) == MIN_SLOT_CHUNK_ROWS
    assert [len(c) for c in plan_wave(wave, rows, rows * 100.0, 2, 4096, shrinking=False)] == [64, 64]


def _observe(model: EpisodeLengths, reqs: list[EvalRequest], lengths: list[list[int]], failed=()) -> None:
    """Answers to `reqs` with these episode lengths (a pinned request answers all its episodes alike)."""
    model.observe(_wave(reqs), np.asarray([n for ep in lengths for n in ep], dtype=np.int64), failed)


def _costs(model: EpisodeLengths, reqs: list[EvalRequest]) -> list[float]:
    return model.costs(_wave(reqs)).tolist()


def test_episode_lengths_charge_each_env_its_mean_length_seen():
    easy, hard, ref = TERRAIN.initial(), TERRAIN.initial().with_course_seed(5), PolicyRef("k")
    model = EpisodeLengths(weight=0.5)
    reqs = [EvalRequest(ref, easy, 1, 0, 400), EvalRequest(ref, easy, 1, 1, 400), EvalRequest(ref, hard, 2, 2, 400)]
    assert _costs(model, reqs) == [400, 400, 400]  # nothing seen: the step cap
    _observe(model, reqs, [[300], [100], [50, 50]])
    # easy: (300 + 100) / 2 = 200; hard is pinned to one course: its one distinct episode counts
    assert model.means == {easy: 200.0, hard: 50.0}
    assert _costs(model, reqs) == [200.0, 200.0, 50.0]
    _observe(model, reqs[:1], [[400]])
    assert model.means[easy] == 0.5 * 200 + 0.5 * 400  # recent waves weigh more
    assert _costs(model, [EvalRequest(ref, easy, 3, 0, 100)]) == [3 * 100]  # never above the cap
    _observe(model, [EvalRequest(ref, TERRAIN.initial().with_course_seed(9), 1, 0, 400)], [[0]], failed=[0])
    assert len(model.means) == 2  # errors teach nothing
    small = EpisodeLengths(max_envs=2)
    _observe(small, reqs, [[300], [100], [50, 50]])
    third = TERRAIN.initial().with_course_seed(6)
    _observe(small, [EvalRequest(ref, third, 1, 0, 400)], [[10]])
    assert list(small.means) == [hard, third]  # the oldest went
    chunk = EpisodeLengths()
    chunk.observe(_wave(reqs), np.asarray([20, 20], dtype=np.int64), answered=[2])  # one request of the wave
    assert chunk.means == {hard: 20.0}


def test_planning_with_measured_lengths_balances_the_steps_not_the_caps():
    easy, hard, ref = TERRAIN.initial(), TERRAIN.initial().with_course_seed(5), PolicyRef("k")
    reqs = [EvalRequest(ref, env, 1, i, 400) for env in (easy, hard) for i in range(4)]
    # by cap alone, all easy envs make one chunk and all hard ones the other
    by_cap = _by_cap(reqs, 2, 4096)
    assert sorted(sorted(reqs[i].env == easy for i in c) for c in by_cap) == [[False] * 4, [True] * 4]
    model = EpisodeLengths()
    _observe(model, reqs, [[400 if r.env == easy else 40] for r in reqs])
    wave = _wave(reqs)
    cost = model.costs(wave)
    balanced = plan_chunks(wave.policy, wave.rows(), cost, 2, 4096)
    # 1,760 steps: shares of 880, each within half a request (200) of it
    assert [sum(cost[i] for i in c) for c in balanced] == [960, 800]


def test_deadline_is_the_work_at_the_measured_rate_of_its_kind_with_a_floor():
    d = Deadlines(floor=30.0, factor=10.0, decay=0.5)
    assert d.budget("chunk", 1000) == 30.0  # unmeasured, small: the floor
    assert d.budget("chunk", 100_000) == pytest.approx(100_000 * Deadlines.PRIOR_STEP_SECONDS * 10)
    d.observe("job", 4.0, 1000)
    assert d.budget("job", 100_000) == pytest.approx(10 * 100_000 * 4e-3)
    d.observe("job", 1.0, 1000)  # recent units weigh more: (0.5 x 4 + 1) / (0.5 x 1000 + 1000)
    assert d.rate("job") == pytest.approx(3.0 / 1500)
    assert d.rate("chunk") == Deadlines.PRIOR_STEP_SECONDS  # each kind has its own rate
    d.observe("chunk", 0.0, 10)  # nothing to learn from
    assert d.rate("chunk") == Deadlines.PRIOR_STEP_SECONDS
    assert Deadlines(seconds=5.0).budget("chunk", 1e9) == 5.0  # fixed by config
