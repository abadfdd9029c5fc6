"""experiments/study_stats.py: Holm, the exact sign-flip test, the bootstrap CI and the per-target comparison."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from experiments import study_stats
from experiments.study_stats import (
    adjust_page,
    bootstrap_ci,
    compare_at_targets,
    holm,
    min_attainable_p,
    sign_flip_test,
)


def test_holm_hand_worked_example():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(0.06, 1*0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)


def test_holm_caps_at_one_and_is_monotone_in_sorted_order():
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    p = np.random.default_rng(1).uniform(0, 0.2, size=12)
    adjusted = np.array(holm(p))
    in_order = adjusted[np.argsort(p)]
    assert np.all(np.diff(in_order) >= 0)
    assert np.all(adjusted >= p) and np.all(adjusted <= 1)


def test_holm_passes_nan_through_without_counting_it():
    # m = 2: 2*0.01, max(0.02, 1*0.04)
    adjusted = holm([0.01, math.nan, 0.04])
    assert math.isnan(adjusted[1])
    assert [adjusted[0], adjusted[2]] == pytest.approx([0.02, 0.04], abs=1e-15)
    assert holm([]) == []


@pytest.mark.parametrize("k", [3, 4, 5, 6, 7, 8])
def test_sign_flip_matches_scipy_exact_permutation_test(k):
    d = np.random.default_rng(k).normal(0.3, 1.0, size=k)
    reference = stats.permutation_test(
        (d,),
        lambda x, axis: np.mean(x, axis=axis),
        vectorized=True,
        permutation_type="samples",
        alternative="greater",
        n_resamples=np.inf,
    ).pvalue
    assert sign_flip_test(d) == pytest.approx(reference, abs=1e-12)


def test_sign_flip_all_positive_gives_two_to_the_minus_k():
    assert sign_flip_test([0.5, 1.0, 2.0, 0.1, 3.0]) == 2.0**-5


def test_sign_flip_with_ties_and_a_zero():
    # +-0.1 +-0.1 +-0.2 reaches >= 0.2 in 3 of 8 ways (0.4, and 0.2 twice); the zero doubles both counts
    assert sign_flip_test([0.1, -0.1, 0.0, 0.2]) == 3 / 8
    assert sign_flip_test([0.0, 0.0]) == 1.0
    assert math.isnan(sign_flip_test([]))


def test_sign_flip_refuses_more_than_twenty_units():
    with pytest.raises(ValueError, match="k=21"):
        sign_flip_test([1.0] * 21)


def test_min_attainable_p():
    assert min_attainable_p(9) == 1 / 512
    assert math.isnan(min_attainable_p(0))


def test_bootstrap_ci_is_deterministic_and_contains_the_mean():
    d = [1.0, 2.0, 3.0, 4.0, 5.0]
    lo, hi = bootstrap_ci(d, seed=3)
    assert bootstrap_ci(d, seed=3) == (lo, hi)
    assert 1.0 <= lo < 3.0 < hi <= 5.0
    assert bootstrap_ci([2.5]) == (2.5, 2.5)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_compare_at_targets_on_a_small_example():
    poet = [250.0, 310.0, 205.0]
    control = [[150.0, 210.0, 90.0], [], [200.0, 100.0, 60.0]]
    result = compare_at_targets(poet, control, threshold=200.0)
    # target 0: 250 - 150 = 100; target 1 missing; target 2: 205 - 120 = 85
    assert result["unit"] == "target"
    assert result["k"] == 2 and result["missing"] == 1
    assert result["differences"] == pytest.approx([100.0, 85.0])
    assert result["mean_difference"] == pytest.approx(92.5)
    # only +100 +85 reaches the observed sum; with 2 units a resample mean is 85, 92.5 or 100
    assert result["p"] == 0.25 and result["min_p"] == 0.25
    assert result["ci95"] == pytest.approx([85.0, 100.0])
    # over the targets used: POET 250, 205; control runs 210 and 200 (>= counts), at both targets
    assert result["poet_solved"] == 2
    assert result["control_solved_runs"] == 2 and result["control_runs"] == 6
    assert result["control_targets_solved"] == 2
    json.dumps(result, allow_nan=False)


def test_compare_at_targets_reports_nan_as_none():
    result = compare_at_targets([250.0], [[]], threshold=200.0)
    assert result["k"] == 0 and result["missing"] == 1 and result["differences"] == []
    assert result["mean_difference"] is None and result["p"] is None and result["min_p"] is None
    assert result["ci95"] == [None, None]
    json.dumps(result, allow_nan=False)


def test_adjust_page_adds_holm_over_the_tests_with_a_p():
    page = [
        compare_at_targets([5.0, 6.0, 7.0], [[1.0], [2.0], [3.0]], threshold=4.0),  # p = 1/8
        compare_at_targets([5.0, 1.0, 7.0], [[1.0], [2.0], [3.0]], threshold=4.0),  # d = 4, -1, 4: p = 2/8
        compare_at_targets([5.0], [[]], threshold=4.0),  # no targets: p None
    ]
    assert [t["p"] for t in page] == [0.125, 0.25, None]
    adjusted = adjust_page(page)
    # m = 2: 2 * 0.125 = 0.25, max(0.25, 1 * 0.25) = 0.25
    assert [t["p_holm"] for t in adjusted] == [0.25, 0.25, None]
    assert all("p_holm" not in t for t in page)
    assert [{k: v for k, v in t.items() if k != "p_holm"} for t in adjusted] == page


# ------------------------------------------------------------- second round: the seed as the unit
@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 8), (3, 8), (8, 8), (5, 13), (20, 20)])
def test_clopper_pearson_is_scipys_beta_quantiles(k, n):
    beta = stats.beta
    lo, hi = study_stats.clopper_pearson(k, n)
    assert lo == pytest.approx(beta.ppf(0.025, k, n - k + 1) if k else 0.0, abs=1e-9)
    assert hi == pytest.approx(beta.ppf(0.975, k + 1, n - k) if k < n else 1.0, abs=1e-9)


def test_clopper_pearson_at_8_of_8_is_the_plans_lower_end():
    assert study_stats.clopper_pearson(8, 8)[0] == pytest.approx(0.025 ** (1 / 8)) == pytest.approx(0.6306, abs=1e-4)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        study_stats.clopper_pearson(3, 2)


def test_cluster_bootstrap_resamples_whole_seeds():
    # every seed at rate 1/3: every resample has it, whatever the seeds drawn
    assert study_stats.cluster_bootstrap_rate([1, 2, 3], [3, 6, 9]) == pytest.approx((1 / 3, 1 / 3))
    # one seed solving all, two none: the interval spans 0 to 1 by whole seeds, never a run's share
    lo, hi = study_stats.cluster_bootstrap_rate([3, 0, 0], [3, 3, 3])
    assert lo == 0.0 and hi == 1.0
    again = study_stats.cluster_bootstrap_rate([2, 0, 1, 0], [3, 3, 3, 3])
    assert again == study_stats.cluster_bootstrap_rate([2, 0, 1, 0], [3, 3, 3, 3])  # default_rng(0)
    assert all(map(math.isnan, study_stats.cluster_bootstrap_rate([], [])))
