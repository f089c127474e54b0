"""The aggregates over tasks (adbs_lab/stats/aggregate.py): the per-seed differences' IQM and mean of task means, the
paired probability of improvement, against hand computations and scipy; their intervals' coverage on simulated
comparisons (adbs_lab/stats/corners.py: tasks at different levels, t(3) noise, 3 to 10 runs, ties on a grid, P from
0.5 to exactly 1), at least nominal - 2 Monte Carlo SE, fixed RNG; and the same checks pointed at f730cc9's
functions (tests/helpers/old_f730cc9.py), which fail them. docs/statistics.md has the measured tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats import aggregate as A
from adbs_lab.stats import corners as C
from adbs_lab.stats import simulate
from tests.helpers import old_f730cc9 as old

SIMS = 4000
FLOOR = C.coverage_floor(0.95, SIMS)  # 94.31%


def test_the_per_seed_differences_their_iqm_and_the_mean_of_task_means_by_hand():
    # task 1: 3-1, 2-2, 5-6, 4-0 -> 2, 0, -1, 4; task 2: 1-0, 1-0, 2-0 -> 1, 1, 2; a NaN pair is left out
    pairs = [([3.0, 2.0, 5.0, 4.0, math.nan], [1.0, 2.0, 6.0, 0.0, 1.0]), ([1.0, 1.0, 2.0], [0.0, 0.0, 0.0])]
    # pooled -1 0 1 1 2 2 4: int(0.25 * 7) = 1 cut from each end, the mean of 0 1 1 2 2
    i = A.iqm_difference(pairs)
    assert i.estimate == pytest.approx(6 / 5) and i.runs == (4, 3) and i.n == 7
    assert A.mean_difference(pairs).estimate == pytest.approx((5 / 4 + 4 / 3) / 2)
    w, t, n = A.wins_ties(pairs)
    assert (w.tolist(), t.tolist(), n.tolist()) == ([2, 3], [1, 0], [4, 3])
    p = A.improvement_interval(pairs)  # task 1: (2 + 1/2) / 4; task 2: 1; the mean over tasks, not over seeds
    assert p.estimate == pytest.approx((2.5 / 4 + 1) / 2)


def test_yuens_interval_is_scipys_yuen_test():
    """Yuen's trimmed t of one sample is scipy's Yuen test (`ttest_ind(trim=0.25, equal_var=False)`) against a
    sample without spread: standard error² (N - 1) s_w² / (h (h - 1)), h - 1 degrees of freedom; at 15 runs (3.75
    to cut) int(0.25 * 15) = 3 are cut from each end, as scipy.stats.trim_mean cuts."""
    for n in (12, 15, 7):
        x = np.random.default_rng(n).standard_t(3, n)
        est, lo, hi = A.yuen_bounds(x, 0.95)
        ref = stats.ttest_ind(x, np.zeros(8), trim=0.25, equal_var=False)
        half = stats.t.ppf(0.975, ref.df) * est / ref.statistic
        assert est == pytest.approx(stats.trim_mean(x, 0.25)) and ref.df == n - 2 * int(0.25 * n) - 1
        assert (lo, hi) == pytest.approx((est - half, est + half))


def test_the_mean_of_task_means_has_satterthwaites_interval():
    a, b = np.array([1.0, 2.0, 4.0]), np.array([0.0, 3.0, 3.0, 6.0, 8.0])
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 5
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 4)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb) / 2
    i = A.mean_difference([(a, np.zeros(3)), (b, np.zeros(5))])
    assert (i.estimate, i.lo, i.hi) == pytest.approx(((a.mean() + b.mean()) / 2, (a.mean() + b.mean()) / 2 - half,
                                                      (a.mean() + b.mean()) / 2 + half))


def test_the_improvement_interval_is_clopper_pearson_on_the_two_bracketing_proportions():
    # 12 wins of 12 seeds (4 tasks x 3): the lower end is (0.025)^(1/12) = 0.735, not 1
    every = [(np.ones(3), np.zeros(3))] * 4
    p = A.improvement_interval(every)
    assert (p.estimate, p.hi) == (1.0, 1.0) and p.lo == pytest.approx(0.025 ** (1 / 12)) and p.lo < 0.74
    # equal runs: pooled counts (8 wins, 1 tie, 3 losses); the lower end counts the tie as a loss (8 of 12), the
    # upper as a win (9 of 12)
    pairs = [(np.array([1.0, 1, 0]), np.array([0.0, 0, 1])), (np.array([1.0, 1, 1]), np.array([0.0, 0, 1])),
             (np.array([1.0, 1, 1]), np.array([0.0, 0, 0])), (np.array([0.0, 0, 1]), np.array([1.0, 1, 0]))]
    p = A.improvement_interval(pairs, 0.95)
    lo = stats.binomtest(8, 12).proportion_ci(0.95, "exact").low
    hi = stats.binomtest(9, 12).proportion_ci(0.95, "exact").high
    assert (p.lo, p.hi) == pytest.approx((lo, hi)) and p.estimate == pytest.approx(8.5 / 12)
    # unequal runs: each task's exact interval at 1 - 0.05/2 (2 tasks), the bounds averaged; task 2 has 3 wins
    # and a tie in 5: 3 of 5 for its lower end, 4 of 5 for its upper
    pairs = [(np.array([1.0, 1, 1]), np.zeros(3)), (np.array([1.0, 0, 1, 1, 0]), np.array([0.0, 0, 0, 0, 1]))]
    ci = {(k, n): stats.binomtest(k, n).proportion_ci(0.975, "exact") for k, n in ((3, 3), (3, 5), (4, 5))}
    p = A.improvement_interval(pairs, 0.95)
    assert (p.lo, p.hi) == pytest.approx(((ci[3, 3].low + ci[3, 5].low) / 2, (ci[3, 3].high + ci[4, 5].high) / 2))
    assert p.estimate == pytest.approx((1 + 3.5 / 5) / 2)  # the tie of task 2 (0 vs 0) counts half


def test_a_task_with_fewer_than_3_runs_is_left_out_and_changes_nothing():
    """f730cc9 pooled a one-run task into the IQM and switched the interval's expansion off for every task: adding
    a one-seed study narrowed the intervals. Now it is left out of every statistic."""
    pairs = [(np.array([1.0, 2.0, 4.0]), np.zeros(3)), (np.array([2.0, 0.0, 3.0, 1.0]), np.zeros(4))]
    more = pairs + [(np.array([9.0]), np.zeros(1)), (np.array([5.0, 6.0]), np.zeros(2))]
    for f in (A.iqm_difference, A.mean_difference, A.improvement_interval):
        assert f(more) == f(pairs) and f(more).runs == (3, 4)
        assert all(math.isnan(v) for v in (f(more[2:]).estimate, f(more[2:]).lo))
    x = [np.array([53.0, 55.0, 57.0]), np.array([54.0, 56.0, 55.0])]  # the old rule on raw runs: narrower with one
    _, lo, hi = old.old_iqm_interval(x)
    _, lo1, hi1 = old.old_iqm_interval(x + [np.array([55.0])])
    assert hi1 - lo1 < hi - lo


def test_a_gain_on_one_dataset_moves_the_aggregate():
    """Four datasets tens of points apart, X 1 point above Y on every seed; then 5 points more on one dataset.
    f730cc9's IQM pooled raw accuracies, and its trim cut the lowest and the highest dataset: the gain there left
    IQM X - IQM Y where it was. The mean of the task means moves by 5/4; the IQM of the per-seed differences moves
    less (a trimmed mean discounts the 3 runs that now stand out), which is why the lines print both."""
    y = [level + np.array([0.0, 1.0, -1.0]) for level in (40.0, 55.0, 70.0, 85.0)]
    x = [t + 1.0 + np.array([0.1, -0.1, 0.0]) for t in y]
    gained = [t + 5.0 if i == 3 else t for i, t in enumerate(x)]
    before = old.old_iqm_interval(x)[0] - old.old_iqm_interval(y)[0]
    assert old.old_iqm_interval(gained)[0] - old.old_iqm_interval(y)[0] == pytest.approx(before)
    moved = [f(list(zip(gained, y))).estimate - f(list(zip(x, y))).estimate for f in (A.iqm_difference,
                                                                                     A.mean_difference)]
    assert moved[0] > 0.01 and moved[1] == pytest.approx(1.25)


def _improvement_coverage(p: float, runs: tuple[int, ...], noise: str, n_items: int | None, seed: int) -> float:
    """Coverage of the 95% interval, each task's effect set so its continuous P(X > Y) spreads around p (0.8 to 1.2
    times the effect of p); p = 1: bounded noise and every seed a win. Ties from the grid of n_items."""
    if p == 1.0:
        effects, kind = [2.0, 2.5, 3.0, 3.5], "uniform"  # sqrt(3) is the uniform's reach: X > Y on every seed
    else:
        e = float(C.distribution(noise).ppf(p))  # type: ignore[arg-type]
        effects, kind = [e * 0.8, e * 0.9, e * 1.1, e * 1.2], noise
    return simulate.aggregate_coverage("improvement", SIMS, runs, effects, 1.0, kind, n_items, seed=seed)  # type: ignore[arg-type]


PS = (0.5, 0.7, 0.9, 0.95, 0.977, 0.99, 1.0)


@pytest.mark.parametrize("runs, noise, n_items", [((3,) * 4, "normal", None), ((10,) * 4, "t3", None),
                                                  ((3,) * 4, "normal", 700), ((5,) * 4, "t3", 200),
                                                  ((3, 4, 5, 10), "normal", 700)])
def test_the_probability_of_improvement_covers_from_a_half_to_exactly_one(runs, noise, n_items):
    """4,000 simulated comparisons of 4 tasks per P: coverage >= 95% - 2 SE = 94.31% at every P from 0.5 to 0.99
    and at exactly 1, with ties (differences on the grid of a 700- or 200-item evaluation set) and without."""
    got = {p: _improvement_coverage(p, runs, noise, n_items, seed=int(1000 * p)) for p in PS}
    assert min(got.values()) >= FLOOR, got


def test_f730cc9s_bootstrap_probability_of_improvement_fails_near_one():
    """The same check on f730cc9's stratified bootstrap (4 tasks, 3 runs, normal noise): every resample of a study
    that won every seed is 1, so its interval is [1, 1] and misses P < 1."""
    sims = 400
    rng = np.random.default_rng(95)
    e = float(stats.norm.ppf(0.95))
    effects = [e * 0.8, e * 0.9, e * 1.1, e * 1.2]
    tasks = C.paired_tasks(rng, sims, effects, 3)
    truth = float(np.mean([C.grid_win_tie(x, 1.0, "normal", None)[0] for x in effects]))
    hit = sum(lo <= truth <= hi for lo, hi in (old.old_improvement_interval([(x[i], y[i]) for x, y in tasks],
                                                                            seed=i)[1:] for i in range(sims)))
    assert hit / sims < C.coverage_floor(0.95, sims) - 0.3, hit / sims  # about 48%


@pytest.mark.parametrize("kind", ["iqm", "mean"])
@pytest.mark.parametrize("runs", [(3,) * 4, (5,) * 4, (10,) * 4, (3, 4, 5, 10)])
def test_the_differences_intervals_cover_with_tasks_at_different_levels_and_t3_noise(kind, runs):
    """4,000 simulated comparisons: 4 tasks at levels 40, 55, 70, 85 points, effects 0, 0.5, 1, 1.5 and spreads
    0.5 to 2 points of the per-seed difference, t(3) noise; coverage >= 95% - 2 SE, and at a Bonferroni level of
    1 - 0.05/3 at least that level - 2 SE."""
    for level in (0.95, 1 - 0.05 / 3):
        got = simulate.aggregate_coverage(kind, SIMS, runs, sigmas=(0.5, 1.0, 1.5, 2.0), noise="t3", level=level,
                                          seed=sum(runs))
        assert got >= C.coverage_floor(level, SIMS), (level, got)


def test_f730cc9s_pooled_iqm_interval_undercovers_with_t3_noise():
    """The same tasks on f730cc9's interval (the IQM of one side's raw runs pooled, stratified bootstrap at the
    expanded level), against its own truth (the IQM of the levels' mixture): below 95% - 2 SE at 3 runs per task."""
    sims = 600
    rng = np.random.default_rng(3)
    levels, effects = [40.0, 55.0, 70.0, 85.0], [0.0, 0.5, 1.0, 1.5]
    tasks = C.paired_tasks(rng, sims, effects, 3, 1.0, "t3", levels=levels, seed_sd=0.0)
    truth = C.mixture_iqm([lv + e for lv, e in zip(levels, effects)], 1.0, "t3")
    hit = 0
    for i in range(sims):
        _, lo, hi = old.old_iqm_interval([x[i] for x, _ in tasks], seed=i)
        hit += lo <= truth <= hi
    assert hit / sims < C.coverage_floor(0.95, sims), hit / sims
