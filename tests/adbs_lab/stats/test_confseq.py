"""adbs_lab/stats/confseq.py: the closed form against the martingale it solves, infinite at n ≤ 3, and the
time-uniform coverage by simulation (a miss at any n at most a + 2 SE), where naive t-intervals peeked at after
every seed miss far more often."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from adbs_lab.stats import confseq
from adbs_lab.stats.verdicts import CODE, Label

SIMS = 4000


@pytest.mark.parametrize("n, c2", [(4, 0.05), (7, 0.4), (12, 1.0), (30, 0.2)])
def test_the_closed_form_is_where_the_martingale_reaches_one_over_a(n, c2):
    x = np.random.default_rng(n).normal(0.3, 1.7, n)
    a = 0.05 / 3
    est, lo, hi, _ = confseq.bounds(x, a, c2)
    if not math.isfinite(float(hi)):
        pytest.skip("the whole line at this n and c²")
    g = lambda mu: confseq.martingale(x, mu, c2) - math.log(1 / a)  # noqa: E731
    assert float(lo) == pytest.approx(optimize.brentq(g, float(est) - 100, float(est)), rel=1e-9)
    assert float(hi) == pytest.approx(optimize.brentq(g, float(est), float(est) + 100), rel=1e-9)
    assert confseq.martingale(x[:1], 5.0, c2) == pytest.approx(0.0, abs=1e-12)  # G_1 = 1: log 0


def test_infinite_up_to_three_seeds_at_the_tuned_precision_and_finite_after():
    for m in (3, 12):
        a = 0.05 / m
        c2 = confseq.tuned_precision(8, a)
        f = confseq.factor(np.arange(2, 17), a, c2)
        assert np.isinf(f[:2]).all() and np.isfinite(f[4:]).all() and (np.diff(f[4:]) < 0).all()
        assert confseq.factor(8, a, c2) <= confseq.factor(8, a, c2 * 2) and \
            confseq.factor(8, a, c2) <= confseq.factor(8, a, c2 / 2)  # tuned: narrowest at the cap


def test_no_spread_is_not_a_zero_width_sequence_where_the_factor_is_infinite():
    _, lo, hi, _ = confseq.bounds(np.array([1.0, 1.0, 1.0]), 0.05, 0.4)
    assert math.isinf(float(lo)) and math.isinf(float(hi))


@pytest.mark.parametrize("kind", ["normal", "t3"])
def test_a_miss_at_any_of_60_seeds_is_rarer_than_a(kind):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((SIMS, 60)) if kind == "normal" else rng.standard_t(3, (SIMS, 60))
    a = 0.05
    c2 = confseq.tuned_precision(8, a)
    cs = np.zeros(SIMS, dtype=bool)
    naive = np.zeros(SIMS, dtype=bool)
    for k in range(2, 61):
        _, lo, hi, _ = confseq.bounds(x[:, :k], a, c2)
        cs |= (lo > 0) | (hi < 0)
        half = stats.t.ppf(1 - a / 2, k - 1) * x[:, :k].std(axis=1, ddof=1) / math.sqrt(k)
        naive |= np.abs(x[:, :k].mean(axis=1)) > half
    bound = a + 2 * math.sqrt(a * (1 - a) / SIMS)
    print(f"\n{kind}: a miss at some n ≤ 60: confidence sequence {cs.mean():.4f}, naive t {naive.mean():.4f}")
    assert cs.mean() <= bound
    assert naive.mean() > 3 * bound  # the same check catches peeking at a fixed-size interval


def test_replay_freezes_the_first_verdict_and_never_resolves_at_three_seeds():
    d = np.random.default_rng(3).normal(2.0, 0.3, (500, 16))
    r = confseq.replay(d, (3, 5, 7, 8, 10, 12, 14, 16), 0.05 / 3, confseq.tuned_precision(8, 0.05 / 3), 1.0)
    assert (r["n_seeds"] > 3).all() and (r["code"] == CODE[Label.BETTER]).mean() > 0.99
