"""The t-intervals (adbs_lab/stats/intervals.py): the quantile is scipy's, bit for bit; Welch's agrees with scipy's
ttest_ind; a table cell's mean ± half-width; and the paired interval's coverage by simulation against known truth
(normal differences, n = 2, 3, 8, fixed RNG: the share missing the truth at most a + 2 Monte Carlo SE), with
today's corners (one value: no interval; no spread: a zero-width interval, which the corners' rules will refuse)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats.intervals import mean_t, paired_t, t_quantile, welch_t


def test_the_quantile_is_scipys_bit_for_bit():
    rng = np.random.default_rng(0)
    q, df = rng.random(20_000), rng.integers(1, 200, 20_000).astype(float)
    assert np.array_equal(t_quantile(q, df), stats.t.ppf(q, df))
    assert math.isnan(t_quantile(0.975, math.nan))


def test_a_cell_is_the_mean_and_the_t_half_width():
    # two values 50, 52: mean 51, sd sqrt(2), t_{0.975,1} = 12.7062 -> half width 12.7062 * sqrt(2)/sqrt(2)
    m, h = mean_t([50.0, 52.0])
    assert m == 51.0 and h == pytest.approx(12.7062, abs=1e-3)
    m, h = mean_t([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)  # t_{0.975, 2} * s / sqrt(n)
    assert mean_t([3.0]) == (3.0, 0.0) and mean_t([3.0, math.nan, None]) == (3.0, 0.0)
    assert math.isnan(mean_t([])[0]) and math.isnan(mean_t([math.nan])[1])


def test_welch_agrees_with_scipy_and_takes_the_conservative_df_below_its_threshold():
    a, b = np.array([65.17, 64.61, 59.60]), np.array([67.02, 66.55, 63.84, 66.0])
    est, lo, hi, df = welch_t(b, a, 0.05)
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-12) and est == pytest.approx(b.mean() - a.mean())
    assert welch_t(b, a, 0.05, conservative_below=8)[3] == 2.0  # min(3, 4) - 1
    assert welch_t(np.array([2.0, 2.0]), np.array([3.0, 3.0]), 0.05)[1:3] == (-1.0, -1.0)  # no spread: the point


@pytest.mark.parametrize("n", [2, 3, 8])
def test_the_paired_interval_covers_the_truth_at_its_level(n):
    rng = np.random.default_rng(n)
    sims, a = 20_000, 0.05
    est, lo, hi, count, left = paired_t(rng.normal(1.0, 2.0, (sims, n)), a)
    miss = float(np.mean((lo > 1.0) | (hi < 1.0)))
    assert miss <= a + 2 * math.sqrt(a * (1 - a) / sims), miss
    assert miss >= a - 4 * math.sqrt(a * (1 - a) / sims), miss  # not conservative by accident (a broken quantile)
    assert (count == n).all() and (left == 0).all()


def test_one_value_has_no_interval_and_no_spread_a_zero_width_one():
    est, lo, hi, n, left = paired_t(np.array([[1.0, math.nan], [2.0, 2.0]]), 0.05)
    assert math.isnan(lo[0]) and n[0] == 1 and left[0] == 1 and est[0] == 1.0
    assert lo[1] == hi[1] == 2.0  # today's behaviour at zero spread (a grid of accuracies can give it)
