"""Corners the rules of docs/statistics.md missed, found by an attack on adbs_lab/stats/ (simulation against known
truth, and direct calls with edge inputs), and a few the rules hold, kept so that they stay held.

- Across tasks on the accuracy grid: per-seed differences on a grid of 100 / N points tie, often through the middle
  half of the pooled runs, and the IQM's Yuen interval then had zero width ("95% CI +0.00 to +0.00") and missed the
  grid's IQM; the mean of the task means the same where no task spreads. Fixed: no spread, no interval
  (adbs_lab/stats/aggregate.py: yuen_bounds, mean_bounds; the rule of verdicts.no_spread).
- Yuen's interval undercovered where the tasks are alike (the pooled runs then are one sample, and the conservatism
  docs/statistics.md counts on, from tasks at different effects, is gone), and on the grid where the differences
  spread over a few steps only (the trimming points fall on atoms). Fixed: the percentile bootstrap at Hesterberg's
  expanded level (aggregate.percentile_bounds), no wider than Yuen's in the cells measured.
- Open (xfail): the mean of the task means on Satterthwaite's df where one task of 3 runs carries most of the
  variance; no rule measured both covers there and costs little elsewhere (docs/statistics.md has the trade-off).
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
    truth = corners.grid_iqm(effects, sigmas, "normal", SMOKE, runs)
    _, lo, hi = aggregate.percentile_bounds(d, 0.95)
    missed = np.isfinite(lo) & ~((lo <= truth + 1e-9) & (truth - 1e-9 <= hi))
    print(f"\nIQM on the grid of {SMOKE}: missed in {missed.mean():.4f}, withheld in {np.isnan(lo).mean():.4f}")
    assert missed.mean() <= rate_bound(0.05, sims)


def _iqm_hits(d: np.ndarray, truth: float, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Per interval (the printed one, Yuen's it replaced): (the share of comparisons whose interval was printed
    and missed `truth`, the median width of the printed ones)."""
    out = {}
    for f in (aggregate.percentile_bounds, aggregate.yuen_bounds):
        _, lo, hi = f(d, level)
        printed = np.isfinite(lo)
        out[f.__name__] = (float((printed & ~((lo <= truth + 1e-9) & (truth - 1e-9 <= hi))).mean()),
                           float(np.median((hi - lo)[printed])))
    return out


def test_the_iqm_interval_covers_when_the_tasks_are_alike():
    """4 alike tasks x 3 runs, normal: 12 pooled runs of one distribution, where the conservatism of pooling tasks
    at different effects is gone. Yuen's interval (winsorized variance, h - 1 df) covered 93.6%; the printed one,
    the percentile bootstrap at Hesterberg's expanded level, covers, and is narrower (docs/statistics.md)."""
    sims = 8000
    d = _pooled(np.random.default_rng(6002), sims, [0.5] * 4, (3,) * 4, [1.0] * 4)
    got = _iqm_hits(d, 0.5)
    print(f"\nIQM, 4 alike tasks x 3 runs, normal: missed {got}")
    assert got["percentile_bounds"][0] <= rate_bound(0.05, sims) < got["yuen_bounds"][0]


def test_the_iqm_interval_covers_on_the_grid_with_a_few_steps_of_spread():
    """σ_d = 1.5 grid steps, 4 tasks x 10 runs: the trimming points fall on atoms of the distribution, and the
    winsorized variance misses what that adds to the trimmed mean's (Yuen's missed in 10%); the bootstrap needs no
    formula for it, and no grid step, which no caller of adbs_lab/results/across_tasks.py knows."""
    step, sims = corners.grid_step(SMOKE), 4000
    effects, sigmas, runs = [0.0] * 4, [1.5 * step] * 4, (10,) * 4
    d = _pooled(np.random.default_rng(6003), sims, effects, runs, sigmas, n_items=SMOKE)
    got = _iqm_hits(d, corners.grid_iqm(effects, sigmas, "normal", SMOKE, runs))
    assert got["percentile_bounds"][0] <= rate_bound(0.05, sims) < got["yuen_bounds"][0], got


@pytest.mark.parametrize("effects, runs, sigmas, kind, most", [
    ([0.5] * 4, (3,) * 4, [1.0] * 4, "normal", 1.0),
    ([0.5] * 4, (5,) * 4, [1.0] * 4, "normal", 1.02),
    ([0.5] * 4, (10,) * 4, [1.0] * 4, "normal", 1.02),
    ([0.0, 0.5, 1.0, 1.5], (3,) * 4, [0.5, 1.0, 1.5, 2.0], "t3", 1.05),
    ([0.0, 0.5, 1.0, 1.5], (3, 4, 5, 10), [0.5, 1.0, 1.5, 2.0], "t3", 1.05),
])
def test_the_expanded_percentile_interval_costs_at_most_5_percent_width_elsewhere(effects, runs, sigmas, kind, most):
    """The price of the corners above, in the cells the coverage tests of tests/adbs_lab/stats/test_aggregate.py
    already hold: the printed interval's median width at most `most` times Yuen's (docs/statistics.md has the
    table), its coverage held."""
    sims = 2000
    d = _pooled(np.random.default_rng(sum(runs) + len(set(effects))), sims, effects, runs, sigmas, kind)
    got = _iqm_hits(d, corners.mixture_iqm(effects, sigmas, kind, weights=list(runs)))
    ratio = got["percentile_bounds"][1] / got["yuen_bounds"][1]
    print(f"\nwidth ratio {ratio:.3f}, missed {got['percentile_bounds'][0]:.4f}")
    assert ratio <= most and got["percentile_bounds"][0] <= rate_bound(0.05, sims)


def test_the_printed_iqm_interval_is_the_same_for_the_same_runs_in_any_order():
    """The bootstrap's resampled positions come from a fixed seed and the number of runs, never from the data or
    the call: the same runs give the same interval, whatever their order and whatever ran before."""
    pairs = [([1.0, 2.0, 4.0, 0.5], [0.0] * 4), ([3.0, 1.0, 2.0], [0.0, 0.0, 0.5]), ([0.2, 0.1, 0.9], [0.0] * 3)]
    first = aggregate.iqm_difference(pairs)
    aggregate.percentile_bounds(np.random.default_rng(1).standard_normal((50, 10)), 0.9)
    again = aggregate.iqm_difference([(x[::-1], y[::-1]) for x, y in pairs[::-1]])
    assert (first.estimate, first.lo, first.hi) == (again.estimate, again.lo, again.hi)
    assert first.method == aggregate.IQM_METHOD and first.lo < first.estimate < first.hi


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


@pytest.mark.xfail(strict=True, reason="the mean of task means takes Satterthwaite's df, too generous where one task "
                   "of 3 runs carries most of the variance (4 x 3 runs, SDs 4, 0.3, 0.3, 0.3: 97.0% at 98.33%; 3 runs "
                   "SD 3 against 10, 10, 10 runs SD 1: 95.9%). No rule measured covers there at little cost "
                   "(docs/statistics.md, 'The corners across tasks'): Hsu's min(n_t) - 1, Banerjee's bound and the "
                   "Behrens-Fisher fiducial interval cover every cell but widen 4 alike tasks of 3 runs 1.7 to 1.9 "
                   "times; moving the df toward the largest task's by its share covers this cell (97.9%) at 1.14 "
                   "times, but not 3 runs against 10 (96.9%)")
def test_the_mean_of_task_means_covers_where_one_small_task_dominates_the_variance():
    level, sims = 1 - 0.05 / 3, 8000
    tasks = corners.paired_tasks(np.random.default_rng(6004), sims, [0.0] * 4, [3] * 4, [4.0, 0.3, 0.3, 0.3])
    _, lo, hi = aggregate.mean_bounds([x - y for x, y in tasks], level)
    cover = float(((lo <= 0) & (0 <= hi)).mean())
    print(f"\nmean of task means, one dominant task of 3 runs: covered {cover:.4f} at {level:.4f}")
    assert cover >= coverage_floor(level, sims)
