"""The aggregates over tasks (adbs_lab/stats/aggregate.py): IQM and the paired probability of improvement against
hand computations, the bootstrap stratified by task, and the intervals' coverage on simulated studies within 2
points of nominal (docs/statistics.md has the measured table)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats import aggregate as A
from adbs_lab.stats import simulate


def test_iqm_is_the_mean_of_the_middle_half_of_all_runs_pooled():
    # 8 runs: the 2 lowest and the 2 highest are cut, the mean of 3, 4, 5, 6
    assert A.iqm([[1, 2, 3, 4], [8, 7, 6, 5]]) == pytest.approx(4.5)
    # 10 runs: int(0.25 * 10) = 2 cut from each end (scipy.stats.trim_mean, as rliable): 0 1 | 3 4 5 6 7 9 | 50 100
    assert A.iqm([[0, 100, 5, 3], [1, 50, 9, 4, 6, 7]]) == pytest.approx((3 + 4 + 5 + 6 + 7 + 9) / 6)
    assert A.iqm([[1.0, math.nan, 3.0], [2.0]]) == pytest.approx(2.0)  # a diverged run (NaN) is no run
    assert math.isnan(A.iqm([[], [math.nan]]))


def test_probability_of_improvement_pairs_seeds_within_tasks_ties_half():
    # task 1: wins 1, tie 1/2, loss 0 -> 1/2; task 2: both won -> 1; the mean over tasks 3/4 (not over seeds: 4/5)
    pairs = [([3.0, 2.0, 5.0], [1.0, 2.0, 6.0]), ([1.0, 1.0], [0.0, 0.0])]
    assert A.improvement(pairs) == pytest.approx(0.75)
    # a seed with a diverged side is left out of its task's share
    assert A.improvement([([3.0, math.nan], [1.0, 0.0]), ([0.0], [1.0])]) == pytest.approx(0.5)
    assert math.isnan(A.improvement([([math.nan], [1.0])]))


def test_the_bootstrap_resamples_within_tasks():
    """Two tasks whose runs are constant within the task: every stratified resample is the same, so the interval is
    the point; resampling the runs pooled (unstratified) would move the IQM."""
    tasks = [[0.0, 0.0, 0.0, 0.0], [10.0, 10.0, 10.0, 10.0]]
    i = A.iqm_interval(tasks, reps=500)
    assert i.estimate == i.lo == i.hi == pytest.approx(5.0) and i.runs == (4, 4) and i.n == 8
    boot = A.stratified_statistic([np.array(t) for t in tasks], "iqm", reps=200)
    assert np.allclose(boot, 5.0)
    p = A.improvement_interval([([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]), ([0.0, 0.0], [1.0, 1.0])], reps=500)
    assert p.estimate == p.lo == p.hi == pytest.approx(0.5)


def test_expanded_level_widens_the_percentile_interval_for_few_runs():
    """Hesterberg's expanded percentile: z' = √(n/(n-1)) t_{df}, so 3 runs in 4 tasks ask for a wider percentile than
    the nominal 95%; with many runs it tends to the nominal level; one run per task leaves it."""
    z = math.sqrt(3 / 2) * stats.t.ppf(0.975, 8)
    assert A.expanded_level(0.95, [3, 3, 3, 3]) == pytest.approx(1 - 2 * stats.norm.sf(z))
    assert A.expanded_level(0.95, [3, 3, 3, 3]) > 0.99
    assert 0.95 < A.expanded_level(0.95, [200, 200]) < 0.952
    assert A.expanded_level(0.95, [1, 5]) == 0.95


@pytest.mark.parametrize("kind", ["iqm", "improvement"])
def test_the_intervals_cover_within_2_points_of_nominal(kind):
    """1,000 simulated comparisons of 4 tasks x 10 runs, fixed RNG: coverage within 2 points of 95% (its Monte Carlo
    standard error is 0.7 points); the plain percentile interval (rliable's), with 3 runs per task, does not."""
    t0 = time.perf_counter()
    got = simulate.aggregate_coverage(kind, 1000)
    print(f"{kind}: coverage {got:.1%} in {time.perf_counter() - t0:.1f} s")
    assert abs(got - 0.95) <= 0.02, got
    assert simulate.aggregate_coverage(kind, 300, runs=3, expand=False) < 0.90
