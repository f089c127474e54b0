"""Corners the rules of docs/statistics.md missed, found by an attack on adbs_lab/stats/ (simulation against known
truth, and direct calls with edge inputs), and a few the rules hold, kept so that they stay held.

- Across tasks on the accuracy grid: per-seed differences on a grid of 100 / N points tie, often through the middle
  half of the pooled runs, and the IQM's Yuen interval then had zero width ("95% CI +0.00 to +0.00") and missed the
  grid's IQM; the mean of the task means the same where no task spreads. Fixed: no spread, no interval
  (adbs_lab/stats/aggregate.py: yuen_bounds, mean_bounds; the rule of verdicts.no_spread).
- Open (xfail): Yuen's interval undercovers where the tasks are alike (the pooled runs then are one sample, and the
  conservatism docs/statistics.md counts on, from tasks at different effects, is gone), and on the grid where the
  differences spread over a few steps only (the trimming points fall on atoms).
- printed_ends stopped at 6 decimals, so an end that clears 0 by just over TOUCH printed +0.00000000 beside
  "better". Fixed: up to 17 decimals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats import aggregate, corners, premise, verdicts
from adbs_lab.stats.corners import coverage_floor, rate_bound
from adbs_lab.stats.verdicts import Label, Verdict

NAN = math.nan
SMOKE = 700  # the smoke test set's images: a grid step of 0.143 points


def _grid_iqm(effects, sigmas, kind, n_items, runs) -> float:
    """The interquartile mean of the tasks' mixture of D = on_grid(effect + sigma e) (task t weighted by its runs):
    the mean of the quantile function over (0.25, 0.75), each grid value weighted by its CDF jump's overlap."""
    step, dist = corners.grid_step(n_items), corners.distribution(kind)
    w = np.asarray(runs, dtype=float) / sum(runs)
    vals, mass = [], []
    for e, s, wi in zip(effects, sigmas, w):
        k = np.arange(round((e - 15 * s) / step) - 2, round((e + 15 * s) / step) + 3)
        v = k * step
        vals.append(v)
        mass.append(wi * (dist.cdf((v + step / 2 - e) / s) - dist.cdf((v - step / 2 - e) / s)))
    v, p = np.concatenate(vals), np.concatenate(mass)
    order = np.argsort(v, kind="stable")
    v, p = v[order], p[order]
    top = np.cumsum(p)
    overlap = np.clip(np.minimum(top, 0.75) - np.maximum(top - p, 0.25), 0.0, None)
    return float((overlap * v).sum() / overlap.sum())


def _pooled(rng, sims, effects, runs, sigmas, kind="normal", n_items=None) -> np.ndarray:
    tasks = corners.paired_tasks(rng, sims, effects, list(runs), sigmas, kind, n_items=n_items)
    return np.concatenate([x - y for x, y in tasks], axis=-1)


@pytest.mark.parametrize("pairs", [
    [([1.0] * 3, [0.0] * 3)] * 4,  # every difference +1: all equal but nonzero
    [([0.0, 0.0, 1 / 7], [0.0] * 3), ([0.0] * 3, [0.0] * 3), ([0.0] * 3, [0.0] * 3), ([1 / 7, -1 / 7, 0.0], [0.0] * 3)],
])
def test_an_iqm_whose_middle_half_does_not_spread_has_no_interval(pairs):
    """Before: '95% CI +1.00 to +1.00' and '+0.00 to +0.00', a level claimed with nothing to rest on."""
    i = aggregate.iqm_difference(pairs)
    assert math.isfinite(i.estimate) and math.isnan(i.lo) and math.isnan(i.hi)


def test_a_mean_of_task_means_has_no_interval_only_when_no_task_spreads():
    flat = [([1.0] * 3, [0.0] * 3)] * 4
    i = aggregate.mean_difference(flat)
    assert i.estimate == 1.0 and math.isnan(i.lo) and math.isnan(i.hi)
    one = aggregate.mean_difference(flat[:3] + [([1.0, 1.5, 0.5], [0.0] * 3)])
    assert one.lo < 1.0 < one.hi  # one task spreads: the interval rests on it (Satterthwaite df 2)


def test_on_the_smoke_grid_a_printed_across_tasks_interval_misses_in_at_most_alpha():
    """4 tasks x 3 runs, σ_d = half a grid step, effect a quarter step: before the fix the IQM's interval missed
    the grid's IQM in 46% of comparisons (zero-width in 46%); a withheld interval claims nothing."""
    step, sims = corners.grid_step(SMOKE), 4000
    effects, sigmas, runs = [0.25 * step] * 4, [0.5 * step] * 4, (3,) * 4
    d = _pooled(np.random.default_rng(6001), sims, effects, runs, sigmas, n_items=SMOKE)
    truth = _grid_iqm(effects, sigmas, "normal", SMOKE, runs)
    _, lo, hi = aggregate.yuen_bounds(d, 0.95)
    missed = np.isfinite(lo) & ~((lo <= truth + 1e-9) & (truth - 1e-9 <= hi))
    print(f"\nIQM on the grid of {SMOKE}: missed in {missed.mean():.4f}, withheld in {np.isnan(lo).mean():.4f}")
    assert missed.mean() <= rate_bound(0.05, sims)


@pytest.mark.xfail(strict=True, reason="Yuen's one-sample trimmed t (25% trimmed, h - 1 df) covers 93.6% at 12 "
                   "pooled runs of one normal distribution; docs/statistics.md's conservatism comes from tasks at "
                   "different effects, which alike tasks lack; a fix needs another interval (e.g. a bootstrap-t of "
                   "the trimmed mean), not a small change")
def test_the_iqm_interval_covers_when_the_tasks_are_alike():
    sims = 8000
    d = _pooled(np.random.default_rng(6002), sims, [0.5] * 4, (3,) * 4, [1.0] * 4)
    _, lo, hi = aggregate.yuen_bounds(d, 0.95)
    cover = float(((lo <= 0.5) & (0.5 <= hi)).mean())
    print(f"\nIQM, 4 alike tasks x 3 runs, normal: covered {cover:.4f} (floor {coverage_floor(0.95, sims):.4f})")
    assert cover >= coverage_floor(0.95, sims)


@pytest.mark.xfail(strict=True, reason="on a grid with the differences spread over a few steps (σ_d = 1.5 steps, "
                   "4 tasks x 10 runs) the trimming points fall on atoms of the distribution and the winsorized "
                   "variance misses the variance this adds to the trimmed mean: about 90% covered; withholding "
                   "needs the grid's step, which no caller of adbs_lab/results/across_tasks.py knows")
def test_the_iqm_interval_covers_on_the_grid_with_a_few_steps_of_spread():
    step, sims = corners.grid_step(SMOKE), 4000
    effects, sigmas, runs = [0.0] * 4, [1.5 * step] * 4, (10,) * 4
    d = _pooled(np.random.default_rng(6003), sims, effects, runs, sigmas, n_items=SMOKE)
    truth = _grid_iqm(effects, sigmas, "normal", SMOKE, runs)
    _, lo, hi = aggregate.yuen_bounds(d, 0.95)
    missed = np.isfinite(lo) & ~((lo <= truth + 1e-9) & (truth - 1e-9 <= hi))
    assert missed.mean() <= rate_bound(0.05, sims)


@pytest.mark.parametrize("lo, hi, delta", [(1.5e-9, 0.9, 0.5), (3e-9, 0.9, 0.5), (-0.4, -2.5e-9, 0.5),
                                           (-0.3, 0.5 - 3e-9, 0.5), (0.0002, 0.0009, 0.001)])
def test_the_printed_ends_give_the_verdict_even_just_past_touch(lo, hi, delta):
    """An end 1.5e-9 above 0 resolves (TOUCH is 1e-9); at 6 decimals it printed +0.00000000 beside 'better'."""
    v = Verdict(estimate=(lo + hi) / 2, lo=lo, hi=hi, n=3, n_left_out=0, level=0.95,
                verdict=verdicts.label(lo, hi, delta), look=1, n_seeds=3)
    assert v.verdict is not Label.NOT_RESOLVED
    plo, phi, _ = verdicts.printed_ends(v, delta)
    assert verdicts.label(float(plo), float(phi), delta) is v.verdict and float(plo) <= lo and float(phi) >= hi


@pytest.mark.parametrize("diffs", [[NAN, math.inf, -math.inf], [], [0.3, 0.3, 0.3], [0.3, 0.3, NAN, 0.3, math.inf]])
def test_held_no_verdict_from_diverged_empty_or_tied_seeds(diffs):
    v = verdicts.family_verdicts({"a": diffs}, delta=1.0)["a"]
    assert v.verdict is Label.NOT_RESOLVED and math.isnan(v.lo)
    assert v.n_left_out == sum(not math.isfinite(d) for d in diffs)


def test_held_welch_with_no_spread_on_either_side_and_two_runs_a_side_gives_nothing():
    for a, b in (([70, 70, 70], [69, 69, 69]), ([70.0, 71.0], [69.0, 68.0])):
        v = verdicts.welch(a, b, 0.05, 1, 1.0)
        assert v.verdict is Label.NOT_RESOLVED and math.isnan(v.lo)


def test_held_probability_of_improvement_at_exactly_zero_and_a_premise_on_a_constant():
    p = aggregate.improvement_interval([([0.0] * 3, [1.0] * 3)] * 4)
    assert p.estimate == 0.0 and p.lo == 0.0 and p.hi == pytest.approx(1 - 0.025 ** (1 / 12))
    assert not premise.premise_checks(np.zeros(10), np.arange(10.0))[0].holds  # rho undefined: off


def test_an_aggregate_without_an_interval_says_why_in_its_line():
    """A verdict's line says why it has no interval (verdicts.why_no_interval); the line across tasks does too."""
    from adbs_lab.results.across_tasks import Across, lines

    flat = [([1.0] * 3, [0.0] * 3)] * 4
    iqm, mean = aggregate.iqm_difference(flat), aggregate.mean_difference(flat)
    assert iqm.method == mean.method == aggregate.NO_SPREAD
    r = Across(("a", "b"), ("t1", "t2", "t3", "t4"), iqm, mean, aggregate.improvement_interval(flat), 1)
    text = "\n".join(lines([r]))
    assert text.count(f"+1.00 ({aggregate.NO_SPREAD})") == 2, text


@pytest.mark.xfail(strict=True, reason="the mean of task means takes Satterthwaite's df, which is too generous where "
                   "one task of 3 runs carries most of the variance (4 tasks x 3 runs, SDs 4, 0.3, 0.3, 0.3: 96.9% "
                   "at 98.33%, 93.7% at 95%; also 3 runs against 10, 10, 10): the corner rule 6 fixed for Welch. The "
                   "fix there, min(n_t) - 1 df below 8 runs, covers here (99.2%) but widens alike tasks of 3 runs "
                   "1.7 to 2.2 times, a power trade-off to measure and decide, not a small change")
def test_the_mean_of_task_means_covers_where_one_small_task_dominates_the_variance():
    level, sims = 1 - 0.05 / 3, 8000
    tasks = corners.paired_tasks(np.random.default_rng(6004), sims, [0.0] * 4, [3] * 4, [4.0, 0.3, 0.3, 0.3])
    _, lo, hi = aggregate.mean_bounds([x - y for x, y in tasks], level)
    cover = float(((lo <= 0) & (0 <= hi)).mean())
    print(f"\nmean of task means, one dominant task of 3 runs: covered {cover:.4f} at {level:.4f}")
    assert cover >= coverage_floor(level, sims)
