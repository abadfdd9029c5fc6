"""Statistics of the study that compares POET against control curricula.

- The first round's comparison at targets (envs POET solved; `compare_at_targets`): at each
  target POET has its best score, and a control the best scores of its seeds there; the
  differences are POET minus the control's mean. Its sign-flip p-values are descriptive only
  (docs/study.md says why).
- The second round's (docs/study-plan.md), with the POET seed as the unit: a pooled solve
  rate with a bootstrap interval that resamples seeds (`cluster_bootstrap_rate`), an exact
  interval for a count of seeds (`clopper_pearson`), and the sign-flip test over seeds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_SIGN_FLIP_UNITS = 20
TEST_NAME = "exact one-sided sign-flip test on per-target differences (POET minus the control's mean over its seeds)"


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order; NaNs pass through and do not count in m."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m:
        order = valid[np.argsort(p[valid], kind="stable")]
        scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
        adjusted[order] = np.maximum.accumulate(scaled)
    return [float(a) for a in adjusted]


def sign_flip_test(differences: Sequence[float]) -> float:
    """Exact one-sided sign-flip test that the mean difference is > 0, over all 2^k sign assignments.

    Raises ValueError for more than 20 differences; returns NaN for none.
    """
    d = np.asarray(differences, dtype=float)
    k = len(d)
    if k == 0:
        return math.nan
    if k > MAX_SIGN_FLIP_UNITS:
        raise ValueError(f"sign_flip_test enumerates 2^k assignments; k={k} exceeds {MAX_SIGN_FLIP_UNITS}")
    sums = np.zeros(1)
    for x in d:
        sums = np.concatenate((sums + x, sums - x))
    observed = d.sum()
    # the same sum reached by another order of additions may differ in its last bits
    tolerance = 1e-9 * np.abs(d).sum()
    return float(np.count_nonzero(sums >= observed - tolerance) / 2**k)


def min_attainable_p(k: int) -> float:
    """The smallest p the sign-flip test can give with k units: 2^-k (NaN for k = 0)."""
    return math.nan if k == 0 else 2.0**-k


def bootstrap_ci(
    differences: Sequence[float], level: float = 0.95, resamples: int = 10000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean difference, resampling units."""
    d = np.asarray(differences, dtype=float)
    k = len(d)
    if k == 0:
        return (math.nan, math.nan)
    if k == 1:
        return (float(d[0]), float(d[0]))
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, k, size=(resamples, k))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return (float(lo), float(hi))


def cluster_bootstrap_rate(
    solved: Sequence[int], runs: Sequence[int], level: float = 0.95, resamples: int = 10000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of a pooled rate (sum solved / sum runs) whose units are
    clusters: cluster i has `runs[i]` runs of which `solved[i]` solved, and each resample
    draws clusters with replacement (numpy's `default_rng(seed)`). NaN for no runs."""
    s, n = np.asarray(solved, dtype=float), np.asarray(runs, dtype=float)
    if len(n) == 0 or n.sum() == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(n), size=(resamples, len(n)))
    totals = n[picks].sum(axis=1)
    rates = np.where(totals > 0, s[picks].sum(axis=1) / np.maximum(totals, 1), np.nan)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.nanpercentile(rates, [tail, 100.0 - tail])
    return (float(lo), float(hi))


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return float(sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k, n + 1)))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval for a binomial probability after k of n: the p at
    which P(X >= k) and P(X <= k) each equal (1 - level) / 2, by bisection."""
    if not 0 <= k <= n or n == 0:
        raise ValueError(f"clopper_pearson needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    alpha = (1.0 - level) / 2.0

    def solve(f, increasing: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2.0
            if (f(mid) < alpha) == increasing:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2.0

    lower = 0.0 if k == 0 else solve(lambda p: binomial_tail(k, n, p), increasing=True)
    upper = 1.0 if k == n else solve(lambda p: 1.0 - binomial_tail(k + 1, n, p), increasing=False)
    return (lower, upper)


def json_safe(value: Any) -> Any:
    """`value` with every NaN float replaced by None and numpy scalars made plain, through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {key: json_safe(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value


def compare_at_targets(
    poet_scores: Sequence[float], control_scores: Sequence[Sequence[float]], threshold: float
) -> dict:
    """POET against one control at each target, as a JSON-safe dict (NaN as None).

    `control_scores[t]` holds the control's per-seed scores at target t; a target whose list is
    empty is left out and counted in "missing". The solved counts are over the targets used.
    """
    if len(poet_scores) != len(control_scores):
        raise ValueError(f"{len(poet_scores)} POET scores but {len(control_scores)} control targets")
    used = [(float(p), [float(c) for c in runs]) for p, runs in zip(poet_scores, control_scores) if len(runs)]
    differences = [p - float(np.mean(runs)) for p, runs in used]
    k = len(differences)
    return json_safe(
        {
            "unit": "target",
            "test": TEST_NAME,
            "k": k,
            "missing": len(poet_scores) - k,
            "differences": differences,
            "mean_difference": float(np.mean(differences)) if k else math.nan,
            "ci95": list(bootstrap_ci(differences, level=0.95)),
            "p": sign_flip_test(differences),
            "min_p": min_attainable_p(k),
            "poet_solved": sum(p >= threshold for p, _ in used),
            "control_solved_runs": sum(c >= threshold for _, runs in used for c in runs),
            "control_runs": sum(len(runs) for _, runs in used),
            "control_targets_solved": sum(any(c >= threshold for c in runs) for _, runs in used),
        }
    )


def adjust_page(tests: list[dict]) -> list[dict]:
    """Copies of `compare_at_targets` results with "p_holm": Holm over the page's tests whose p is not None."""
    adjusted = holm([math.nan if t["p"] is None else t["p"] for t in tests])
    return [{**copy.deepcopy(t), "p_holm": json_safe(a)} for t, a in zip(tests, adjusted)]
