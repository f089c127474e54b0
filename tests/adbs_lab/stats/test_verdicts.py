"""adbs_lab/stats/verdicts.py: the paired interval and its Bonferroni adjustment against hand computations, the
verdict read from the interval (never disagreeing with it), failed seeds left out and counted, and the share of
simulated studies with a false verdict under no difference within α (normal and heavy-tailed noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats.intervals import paired_t
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.simulate import Noise, differences, false_verdicts
from adbs_lab.stats.verdicts import (CODE, LABELS, Label, bonferroni, classify, family_verdicts, label,
                                     replay)

ALPHA = 0.05
N_STUDIES = 2000
BOUND = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / N_STUDIES)  # 5.97%: α plus two binomial standard errors


def test_the_paired_interval_and_bonferroni_match_a_hand_computation():
    row = np.array([61.2, 60.4, 62.9, 61.7, 60.8])
    ref = np.array([60.1, 60.0, 61.5, 61.9, 59.6])
    d = row - ref  # 1.1, 0.4, 1.4, -0.2, 1.2
    mean, s = 0.78, math.sqrt(sum((x - 0.78) ** 2 for x in [1.1, 0.4, 1.4, -0.2, 1.2]) / 4)
    t = stats.t.ppf(1 - 0.05 / 3 / 2, 4)  # three comparisons: each interval at 1 - 0.05/3
    assert t == pytest.approx(3.9608, abs=1e-3)  # the t table's 0.99167 quantile, 4 degrees of freedom
    v = family_verdicts({"a": d, "b": [0.0] * 5, "c": [0.0] * 5}, alpha=0.05, delta=1.0)["a"]
    assert v.estimate == pytest.approx(mean)
    assert (v.lo, v.hi) == pytest.approx((mean - t * s / math.sqrt(5), mean + t * s / math.sqrt(5)))
    ci = stats.ttest_rel(row, ref).confidence_interval(confidence_level=1 - 0.05 / 3)
    assert (v.lo, v.hi) == pytest.approx((ci.low, ci.high))
    assert v.level == pytest.approx(1 - 0.05 / 3) and v.n == 5 and v.n_left_out == 0
    assert v.verdict is Label.NOT_RESOLVED  # [-0.54, 2.10]: holds 0 and reaches past +δ
    one = family_verdicts({"a": d}, alpha=0.05, delta=1.0)["a"]  # alone: the plain 95% interval, narrower
    assert (one.lo, one.hi) == pytest.approx(tuple(stats.ttest_rel(row, ref).confidence_interval(0.95)))
    assert bonferroni(0.05, 4) == 0.0125


def test_the_verdicts_read_the_interval_they_display():
    """Property over many random intervals: each label holds exactly when its inequalities do."""
    rng = np.random.default_rng(7)
    lo = rng.normal(0, 1.5, 20000)
    hi = lo + rng.exponential(1.0, 20000)
    delta = 1.0
    code = classify(lo, hi, delta)
    inside = (lo > -delta) & (hi < delta)
    expect = {Label.EQUIVALENT: inside & (lo <= 0) & (hi >= 0), Label.BETTER_SMALL: inside & (lo > 0),
              Label.WORSE_SMALL: inside & (hi < 0), Label.BETTER: ~inside & (lo > 0), Label.WORSE: ~inside & (hi < 0)}
    expect[Label.NOT_RESOLVED] = ~np.any(list(expect.values()), axis=0)
    for lab, where in expect.items():
        assert np.array_equal(code == CODE[lab], where), lab
    assert sum(np.sum(code == CODE[x]) for x in LABELS) == len(lo)  # exhaustive, and exclusive by construction
    assert all(np.sum(code == CODE[x]) > 100 for x in LABELS)  # every label drawn often
    assert label(0.2, 1.5, 1.0) is Label.BETTER and label(-0.5, 0.5, 1.0) is Label.EQUIVALENT
    assert label(math.nan, math.nan, 1.0) is Label.NOT_RESOLVED


def test_a_failed_seed_is_left_out_and_counted_and_one_pair_resolves_nothing():
    v = family_verdicts({"a": [1.0, math.nan, 1.2, math.inf, 0.9]}, delta=1.0)["a"]
    assert (v.n, v.n_left_out, v.n_seeds) == (3, 2, 5)
    est, lo, hi, n, _ = paired_t(np.array([1.0, 1.2, 0.9]), 0.05)
    assert (v.estimate, v.lo, v.hi) == pytest.approx((float(est), float(lo), float(hi)))
    single = family_verdicts({"a": [5.0, math.nan], "b": []}, delta=1.0)
    assert single["a"].verdict is Label.NOT_RESOLVED and single["a"].n == 1 and math.isnan(single["a"].lo)
    assert single["b"].verdict is Label.NOT_RESOLVED and single["b"].n == 0


def _false_shares(kind: Noise, m: int = 3) -> tuple[float, np.ndarray]:
    """(share of studies with any false verdict, share per comparison) at a fixed 8 seeds, no true difference, the
    intervals adjusted for a family of m (3 is right; 1, a deliberately broken adjustment, must fail the check)."""
    d = differences(np.random.default_rng(11), N_STUDIES, [0.0, 0.0, 0.0], 8, 1.0, kind)
    false = false_verdicts(replay(d, Looks.fixed(8), m, 1.0)["code"], [0.0, 0.0, 0.0], 1.0)
    return float(false.any(axis=1).mean()), false.mean(axis=0)


@pytest.mark.parametrize("kind", ["normal", "t3_outliers"])
def test_no_difference_gives_a_false_verdict_in_at_most_alpha_of_studies(kind):
    family, each = _false_shares(kind)
    print(f"\nfixed 8 seeds, {kind}: any false verdict {family:.2%}, per comparison {np.round(each * 100, 2)}%")
    assert family <= BOUND and (each <= BOUND).all()


def test_the_error_check_catches_a_missing_adjustment():
    """The check above can fail: intervals at α each instead of α/3 give false verdicts in more than α of studies."""
    family, _ = _false_shares("normal", m=1)
    assert family > BOUND, family
