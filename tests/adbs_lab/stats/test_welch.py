"""The unpaired interval (adbs_lab/stats/verdicts.py: welch; adbs_lab/stats/intervals.py: welch_t): Welch-Satterthwaite
against scipy from 8 runs a side, the conservative min(n_a, n_b) - 1 degrees of freedom below; its error rate by
simulation at 3 runs against 8 (and 2, 4, 5, 6 against 8, 3 against 3) with unequal spreads at Bonferroni levels (at
most nominal + 2 Monte Carlo SE, fixed RNG), with the power beside it; the same check fails for f730cc9's interval
(tests/helpers/old_f730cc9.py, old_welch_bounds: Welch-Satterthwaite df always). docs/statistics.md has the table
(bench/corner_simulation.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats import corners as C
from adbs_lab.stats.intervals import welch_t
from adbs_lab.stats.verdicts import CONSERVATIVE_BELOW, welch
from tests.helpers.old_f730cc9 import old_welch_bounds

SIMS = 20000
LEVELS = (0.05, 0.05 / 3, 0.05 / 6)  # one comparison; Bonferroni over 3 and over 6


def test_from_8_runs_a_side_it_is_scipys_welch_interval():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 3, 8), rng.normal(1, 1, 9)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.99)
    _, lo, hi, df = welch_t(a, b, 0.01, CONSERVATIVE_BELOW)
    assert (lo, hi) == pytest.approx((ref.low, ref.high)) and df == pytest.approx(stats.ttest_ind(a, b, equal_var=False).df)
    v = welch(list(a), list(b), 0.05, 5, 1.0)
    assert (v.lo, v.hi) == pytest.approx((ref.low, ref.high)) and not v.conservative_df


def test_below_8_runs_a_side_the_degrees_of_freedom_are_min_n_minus_1():
    a, b = [1.0, 4.0, 2.5], [0.0, 0.5, 1.0, 0.2, 0.9, 0.4, 0.3, 0.8]
    half = stats.t.ppf(1 - 0.05 / 3 / 2, 2) * math.sqrt(np.var(a, ddof=1) / 3 + np.var(b, ddof=1) / 8)
    v = welch(a, b, 0.05, 3, 1.0)
    est = np.mean(a) - np.mean(b)
    assert (v.lo, v.hi) == pytest.approx((est - half, est + half)) and v.conservative_df and v.n == 3
    assert CONSERVATIVE_BELOW == 8 and not welch(b, b, 0.05, 1, 1.0).conservative_df
    assert welch(b[:7], b, 0.05, 1, 1.0).conservative_df
    assert math.isnan(welch([1.0], b, 0.05, 1, 1.0).lo)  # one run: no interval


def _miss_and_power(bounds, n_a: int, n_b: int, sd_a: float, sd_b: float, err: float) -> tuple[float, float]:
    """(the share of intervals missing a true difference of 0, the share above 0 at a true difference of 3)."""
    rng = np.random.default_rng(n_a * 100 + n_b + int(10 * sd_a))
    a, b = C.two_samples(rng, SIMS, n_a, n_b, sd_a, sd_b, 0.0)
    lo, hi = bounds(a, b, err)
    a, b = C.two_samples(rng, SIMS, n_a, n_b, sd_a, sd_b, 3.0)
    return float(np.mean((lo > 0) | (hi < 0))), float(np.mean(bounds(a, b, err)[0] > 0))


def _new(a, b, err):
    return welch_t(a, b, err, CONSERVATIVE_BELOW)[1:3]


@pytest.mark.parametrize("n_a, n_b, sd_a, sd_b", [(3, 8, 3.0, 1.0), (3, 8, 1.0, 3.0), (3, 8, 1.0, 1.0),
                                                  (2, 8, 3.0, 1.0), (5, 8, 3.0, 1.0), (8, 8, 3.0, 1.0)])
def test_the_error_rate_holds_at_bonferroni_levels_with_unequal_spreads(n_a, n_b, sd_a, sd_b):
    """20,000 simulated comparisons under no difference, normal runs: the share of intervals that miss it is at most
    the nominal error + 2 SE at α, α/3 and α/6; the power (a true difference of 3 points) printed beside it
    (bench/corner_simulation.py prints f730cc9's beside them)."""
    for err in LEVELS:
        miss, power = _miss_and_power(_new, n_a, n_b, sd_a, sd_b, err)
        print(f"{n_a} vs {n_b}, SD {sd_a:g}/{sd_b:g}, error {err:.4f}: miss {miss:.3%}, power {power:.1%}")
        assert miss <= C.rate_bound(err, SIMS), (err, miss)


def test_f730cc9s_welch_misses_three_times_its_level_at_3_runs_against_8():
    """The same check on f730cc9's interval (Welch-Satterthwaite df at any n): 3 noisy runs (SD 3) against 8 (SD 1)
    at α/6 miss in about 2.6% where 0.83% is claimed."""
    miss, _ = _miss_and_power(old_welch_bounds, 3, 8, 3.0, 1.0, 0.05 / 6)
    assert miss > 2.5 * C.rate_bound(0.05 / 6, SIMS), miss


def test_the_conservative_interval_pays_in_power_only_below_8_runs():
    """From 8 runs a side the interval is Welch-Satterthwaite's, so its power is f730cc9's; below, less (the price of
    holding the level: at 3 vs 8 with equal spreads, α/6, 2.9% where f730cc9 had 51% on an interval that missed
    more often than it said)."""
    assert _miss_and_power(_new, 8, 9, 3.0, 1.0, 0.05 / 6) == _miss_and_power(old_welch_bounds, 8, 9, 3.0, 1.0, 0.05 / 6)
    new, old = (_miss_and_power(f, 4, 8, 3.0, 1.0, 0.05 / 3)[1] for f in (_new, old_welch_bounds))
    assert 0 < new < old
