"""adbs_lab/stats/premise.py: the weighted Spearman rho, its interval and the pruning regret, against hand
computations, and the interval's coverage by simulation against a known population rho."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, norm, spearmanr

from adbs_lab.stats import premise as pm


def test_weighted_spearman_matches_a_hand_computation():
    # weighted mid-ranks: x -> 0.5, 1.5, 3, 4.5; y -> 0.5, 3.5, 2, 4.5; weights 0.2, 0.2, 0.4, 0.2 (normalised)
    # both weighted means 2.5; deviations x: -2, -1, .5, 2 and y: -2, 1, -.5, 2; cov 1.3, variances 1.9 each
    assert pm.weighted_spearman([1, 2, 3, 4], [1, 3, 2, 4], [1, 1, 2, 1]) == pytest.approx(1.3 / 1.9)


def test_an_integer_weight_is_the_row_repeated_and_unit_weights_are_spearmans_rho():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=12).round(1), rng.normal(size=12).round(1)  # rounded: ties
    w = rng.integers(1, 4, size=12)
    repeated = spearmanr(np.repeat(x, w), np.repeat(y, w)).statistic
    assert pm.weighted_spearman(x, y, w) == pytest.approx(repeated)
    assert pm.weighted_spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)


def test_too_few_or_constant_values_have_no_rho_and_no_interval():
    assert math.isnan(pm.weighted_spearman([1, 2], [2, 1]))
    assert math.isnan(pm.weighted_spearman([1, 1, 1], [1, 2, 3]))
    assert all(math.isnan(v) for v in pm.spearman_interval(0.5, 3))
    c = pm.correlation([1, 2, math.nan, 4], [1, 2, 3, 4])  # a NaN pair is left out
    assert c.n == 3 and c.r == pytest.approx(1.0)


def test_the_interval_is_fisher_z_with_bonett_wright_variance_and_kish_n():
    r, n = 0.5, 28
    half = norm.ppf(0.975) * math.sqrt((1 + r * r / 2) / (n - 3))  # (1 + r^2/2) / (n - 3): Bonett & Wright 2000
    low, high = pm.spearman_interval(r, n)
    assert (low, high) == pytest.approx((math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)))
    assert (low, high) == pytest.approx((0.1327, 0.7465), abs=1e-4)
    assert pm.kish_n([1, 1, 5, 5]) == pytest.approx(144 / 52)
    assert pm.kish_n([5, 5, 5]) == pytest.approx(3)


def test_regret_matches_a_hand_computation():
    # completed 1..9 (weight 1), shadows 2 and 10 (weight 5, s = 0.2): total weight 19; the weight up to 9 is 14
    # (14/19 < 0.9), so the top-10% threshold is 10; one of the two shadows reaches it: 50%, n = 2, 1 hit
    objective = [*range(1, 10), 2, 10]
    weight = [1] * 9 + [5, 5]
    pruned = [False] * 9 + [True, True]
    r = pm.pruning_regret(objective, weight, pruned)
    assert r is not None and (r.share, r.hits, r.n, r.threshold) == (0.5, 1, 2, 10)
    ci = binomtest(1, 2).proportion_ci(method="exact")
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high)) and r.low == pytest.approx(0.0126, abs=1e-4)
    assert pm.pruning_regret([1, 2, 3], [1, 1, 1], [False] * 3) is None


@pytest.mark.parametrize("n", [15, 40])
def test_the_interval_covers_the_true_rho_95_percent_of_the_time(n):
    """Bivariate normal with Pearson r: Spearman's population rho is (6/pi) asin(r/2) (Pearson 1907)."""
    r, reps = 0.6, 2000
    truth = 6 / math.pi * math.asin(r / 2)
    rng = np.random.default_rng(n)
    cov = [[1, r], [r, 1]]
    hits = 0
    for _ in range(reps):
        xy = rng.multivariate_normal([0, 0], cov, size=n)
        c = pm.correlation(xy[:, 0], xy[:, 1])
        hits += c.low <= truth <= c.high
    assert abs(hits / reps - 0.95) <= 0.02, hits / reps


def test_with_shadows_weighted_1_over_s_the_interval_still_covers_the_population_rho():
    """Half the trials pruned (base accuracy below the median), a share s = 0.2 of them run on, each weighted 1/s:
    the weighted rho on Kish's n estimates the rho of all trials, pruned or not, at the nominal coverage."""
    n, r, s, reps = 80, 0.6, 0.2, 2000
    truth = 6 / math.pi * math.asin(r / 2)
    rng = np.random.default_rng(7)
    hits = measured = 0
    for _ in range(reps):
        x, y = rng.multivariate_normal([0, 0], [[1, r], [r, 1]], size=n).T
        pruned = x < np.median(x)
        keep = ~pruned | (rng.random(n) < s)
        c = pm.correlation(x[keep], y[keep], np.where(pruned, 1 / s, 1.0)[keep])
        measured += math.isfinite(c.low)
        hits += c.low <= truth <= c.high
    assert measured == reps and abs(hits / reps - 0.95) <= 0.02, hits / reps
