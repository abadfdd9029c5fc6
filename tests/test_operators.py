"""POET's small operators: rank transforms, PATA-EC, kNN novelty, the minimal criterion,
seeding, and env mutation staying inside each family's bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import envs
from envs.registry import EXAMPLE_OPTIONS, FAMILIES, make_family
from poet.curricula.poet.novelty import knn_novelty, pata_ec
from poet.curricula.poet.reproduction import eligible_parents, passes_mc
from poet.ranking import average_ranks, centered_ranks, rank_normalise
from poet.seeding import Seeds, episode_seeds

REPO_ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ centred ranks
def test_centered_ranks_exact_small_array() -> None:
    out = centered_ranks(np.array([10.0, 30.0, 20.0]))
    np.testing.assert_array_equal(out, [-0.5, 0.5, 0.0])
    out = centered_ranks(np.array([4.0, -1.0, 7.0, 0.0, 2.0]))
    # ranks 3, 0, 4, 1, 2 over 4
    np.testing.assert_allclose(out, [0.25, -0.5, 0.5, -0.25, 0.0], rtol=0, atol=1e-15)


def test_centered_ranks_keep_shape_and_rank_all_entries_together() -> None:
    # Mirrored ES returns: ranks are over all 4 entries, not per column.
    x = np.array([[1.0, 4.0], [3.0, 2.0]])
    out = centered_ranks(x)
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out, [[-0.5, 0.5], [1 / 6, -1 / 6]], rtol=0, atol=1e-15)


def test_centered_ranks_range_is_exactly_minus_half_to_half() -> None:
    x = np.random.default_rng(0).standard_normal((50, 2))
    out = centered_ranks(x)
    assert out.min() == -0.5 and out.max() == 0.5
    # every rank appears once, evenly spaced
    np.testing.assert_allclose(np.sort(out.ravel()), np.linspace(-0.5, 0.5, 100), atol=1e-12)
    assert np.argmin(out) == np.argmin(x) and np.argmax(out) == np.argmax(x)


def test_centered_ranks_ties_broken_by_position() -> None:
    np.testing.assert_array_equal(centered_ranks(np.array([5.0, 5.0, 5.0])), [-0.5, 0.0, 0.5])
    # the first 2 gets the lower rank of the two 2s
    np.testing.assert_array_equal(centered_ranks(np.array([2.0, 1.0, 2.0])), [0.0, -0.5, 0.5])


def test_centered_ranks_ties_by_position_in_a_long_array() -> None:
    # 300 entries cycling 0, 1, 2: the 100 zeros take ranks 0..99 in order of position, etc.
    x = np.array([i % 3 for i in range(300)], dtype=np.float64)
    expected_rank = (np.arange(300) % 3) * 100 + np.arange(300) // 3
    np.testing.assert_allclose(centered_ranks(x), expected_rank / 299 - 0.5, rtol=0, atol=1e-15)


def test_centered_ranks_single_element_is_zero() -> None:
    np.testing.assert_array_equal(centered_ranks(np.array([42.0])), [0.0])
    out = centered_ranks(np.array([[-3.0]]))
    assert out.shape == (1, 1) and out[0, 0] == 0.0


# ------------------------------------------------------------ average ranks / PATA-EC
def test_average_ranks_ties_averaged_exactly() -> None:
    np.testing.assert_array_equal(average_ranks(np.array([3, 1, 3, 2])), [2.5, 0.0, 2.5, 1.0])
    np.testing.assert_array_equal(average_ranks(np.array([1, 1, 2, 2, 2])), [0.5, 0.5, 3.0, 3.0, 3.0])
    np.testing.assert_array_equal(average_ranks(np.array([9.0, 8.0, 7.0])), [2.0, 1.0, 0.0])


def test_rank_normalise_exact_values() -> None:
    np.testing.assert_allclose(rank_normalise(np.array([3, 1, 3, 2])), [1 / 3, -0.5, 1 / 3, -1 / 6], atol=1e-15)


def test_rank_normalise_all_equal_is_all_zero() -> None:
    np.testing.assert_array_equal(rank_normalise(np.array([7.0, 7.0, 7.0, 7.0])), np.zeros(4))
    np.testing.assert_array_equal(rank_normalise(np.array([1.5])), [0.0])


def test_pata_ec_clips_to_mc_bounds_so_out_of_range_scores_tie() -> None:
    scores = np.array([-500.0, -100.0, 100.0, 400.0, 500.0])
    out = pata_ec(scores, 25.0, 340.0, "average")
    # clipped: [25, 25, 100, 340, 340] -> ranks [0.5, 0.5, 2, 3.5, 3.5] / 4 - 0.5
    np.testing.assert_allclose(out, [-0.375, -0.375, 0.0, 0.375, 0.375], atol=1e-15)
    assert out[0] == out[1] and out[3] == out[4]
    # without clipping the two failures would be told apart
    assert rank_normalise(scores)[0] != rank_normalise(scores)[1]


def test_pata_ec_within_bounds_equals_plain_average_ranks() -> None:
    scores = np.array([30.0, 200.0, 30.0, 90.0])
    # average ranks [0.5, 3, 0.5, 2] / 3 - 0.5
    np.testing.assert_allclose(pata_ec(scores, 25.0, 340.0, "average"), [-1 / 3, 0.5, -1 / 3, 1 / 6], atol=1e-15)
    # ordinal (the reference): the earlier 30 ranks first, [0, 3, 1, 2] / 3 - 0.5
    np.testing.assert_allclose(pata_ec(scores, 25.0, 340.0), [-0.5, 0.5, -1 / 6, 1 / 6], atol=1e-15)


def test_pata_ec_output_in_half_range() -> None:
    scores = np.random.default_rng(3).uniform(-200, 400, size=37)
    out = pata_ec(scores, 0.0, 300.0)
    assert out.shape == (37,)
    assert out.min() >= -0.5 and out.max() <= 0.5


# --------------------------------------------------------------------- kNN novelty
ARCHIVE = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [6.0, 8.0]])  # distances from 0: 5, 1, 2, 10


@pytest.mark.parametrize("k, expected", [(1, 1.0), (2, 1.5), (3, 8 / 3), (4, 4.5)])
def test_knn_novelty_exact_mean_of_k_nearest(k: int, expected: float) -> None:
    assert knn_novelty(np.zeros(2), ARCHIVE, k) == pytest.approx(expected, abs=1e-12)


def test_knn_novelty_k_larger_than_archive_uses_all() -> None:
    assert knn_novelty(np.zeros(2), ARCHIVE, 100) == pytest.approx(4.5, abs=1e-12)


def test_knn_novelty_empty_archive_is_inf() -> None:
    assert knn_novelty(np.zeros(2), np.empty((0, 2)), 5) == float("inf")


def test_knn_novelty_zero_for_a_point_in_the_archive() -> None:
    assert knn_novelty(np.array([0.0, 2.0]), ARCHIVE, 1) == 0.0
    # the next neighbour of (0, 2) is (1, 0) at sqrt(5)
    assert knn_novelty(np.array([0.0, 2.0]), ARCHIVE, 2) == pytest.approx(np.sqrt(5) / 2, abs=1e-12)


# --------------------------------------------------------------- minimal criterion
@pytest.mark.parametrize(
    "score, ok",
    [(25.0, True), (340.0, True), (100.0, True), (24.999, False), (340.001, False), (-100.0, False), (1e9, False)],
)
def test_passes_mc_inclusive_bounds(score: float, ok: bool) -> None:
    assert passes_mc(score, 25.0, 340.0) is ok


def test_eligible_parents_threshold_inclusive() -> None:
    pairs = ["a", "b", "c", "d"]
    scores = np.array([199.9, 200.0, 250.0, -5.0])
    assert eligible_parents(pairs, scores, 200.0) == ["b", "c"]
    assert eligible_parents(pairs, scores, 1000.0) == []


# ------------------------------------------------------------------------ seeding
_SUBPROCESS_DRAW = """
import json, sys
from poet.seeding import Seeds, episode_seeds
s = Seeds(1234)
print(json.dumps({
    "rng": s.rng("mutation", 3, 7).integers(0, 2**40, size=8).tolist(),
    "integer": s.integer("score", 99),
    "episodes": episode_seeds(555, 4),
}))
"""


def test_same_name_and_keys_give_same_stream_in_fresh_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_DRAW],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO_ROOT), "PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    other = json.loads(proc.stdout.strip().splitlines()[-1])
    s = Seeds(1234)
    assert other["rng"] == s.rng("mutation", 3, 7).integers(0, 2**40, size=8).tolist()
    assert other["integer"] == s.integer("score", 99)
    assert other["episodes"] == episode_seeds(555, 4)


def test_same_stream_twice_in_process() -> None:
    a = Seeds(7).rng("es.noise", 1, 2).standard_normal(16)
    b = Seeds(7).rng("es.noise", 1, 2).standard_normal(16)
    np.testing.assert_array_equal(a, b)


def _draw(seeds: Seeds, name: str, *keys: int) -> np.ndarray:
    return seeds.rng(name, *keys).integers(0, 2**62, size=4)


def test_different_names_keys_or_roots_give_different_streams() -> None:
    s = Seeds(7)
    base = _draw(s, "mutation", 1)
    others = [
        _draw(s, "transfer", 1),
        _draw(s, "mutation", 2),
        _draw(s, "mutation"),
        _draw(s, "mutation", 1, 0),
        _draw(Seeds(8), "mutation", 1),
    ]
    for o in others:
        assert not np.array_equal(base, o)
    assert s.integer("a", 1) != s.integer("b", 1)


def test_streams_of_different_names_are_uncorrelated() -> None:
    s = Seeds(2024)
    a = s.rng("es.noise", 5).standard_normal(10_000)
    b = s.rng("mutation", 5).standard_normal(10_000)
    c = s.rng("es.noise", 6).standard_normal(10_000)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05
    assert abs(np.corrcoef(a, c)[0, 1]) < 0.05


def test_seeds_integer_is_31_bit() -> None:
    s = Seeds(99)
    vals = [s.integer("score", i) for i in range(2000)]
    assert all(isinstance(v, int) and 0 <= v < 2**31 for v in vals)
    assert len(set(vals)) == len(vals)
    assert max(vals) > 2**30  # uses the top bit range, not a narrower one


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, np.int64(-5)])
def test_bad_root_raises(bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        Seeds(bad)  # type: ignore[arg-type]


def test_numpy_integer_root_accepted() -> None:
    assert Seeds(np.int64(5)).integer("x") == Seeds(5).integer("x")


def test_episode_seeds_deterministic_and_distinct() -> None:
    a = episode_seeds(31337, 64)
    assert a == episode_seeds(31337, 64)
    assert len(set(a)) == 64
    assert all(0 <= x < 2**31 for x in a)
    # episode i's seed depends on (seed, i) only, not on how many episodes were asked for
    assert episode_seeds(31337, 5) == a[:5]
    assert episode_seeds(31338, 5) != a[:5]
    # requests with neighbouring seeds share no episode seeds (no reused courses)
    assert not set(episode_seeds(31338, 64)) & set(a)


# ----------------------------------------------------------------------- mutation
N_CHAIN = 300


def _check_in_bounds(family, params, mutated: bool = True) -> None:
    family.validate(params)
    assert params.family == family.name
    values = params.values
    if family.name in ("terrain", "bipedal"):  # POET's parameter groups
        from envs import terrain as t

        assert 0.0 <= values["roughness"] <= t.ROUGH_MAX
        for name, max_value, min_hi in (
            ("pit_gap", t.PIT_MAX, t.PIT_DEFAULT[1]),
            ("stump_height", t.STUMP_MAX, t.STUMP_DEFAULT[1]),
        ):
            if values[name]:
                lo, hi = values[name]
                assert 0.0 <= lo <= hi <= max_value and hi >= min_hi
    elif family.name in ("bipedal_cppn", "terrain_cppn"):  # a genome: weights bounded, the reference's rise bounded
        from envs import cppn

        assert all(abs(c["weight"]) <= cppn.WEIGHT_LIMIT for c in values["genome"]["connections"])
        # the reference rescales a child's output so that max(y) - y[0] over x in [-1, 1) lies in
        # [0.25, 16]; the initial random slope is not rescaled
        y = cppn.evaluate(values["genome"], cppn.REFERENCE_X)
        assert not mutated or 0.25 - 1e-9 <= abs(float(np.max(y - y[0]))) <= 16.0 + 1e-9
    else:
        for p in family.param_specs:
            assert p.low <= values[p.name] <= p.high, (p.name, values[p.name])


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_mutation_stays_in_bounds_over_chained_mutations(name: str) -> None:
    family = make_family(name, EXAMPLE_OPTIONS.get(name, {}))
    rng = np.random.default_rng(17)
    params = family.initial()
    _check_in_bounds(family, params, mutated=False)
    seen = {params.id}
    for _ in range(N_CHAIN):
        params = family.mutate(params, rng)
        _check_in_bounds(family, params)
        seen.add(params.id)
    assert len(seen) > 50  # the chain really moves around the parameter space
    assert isinstance(envs.EnvParams.from_json(params.to_json()), envs.EnvParams)
