"""Attacks on the aggregates across tasks (adbs_lab/stats/aggregate.py): a task with no finite run (every seed
diverged, or two rows with no seed in common: across_tasks passes it as an empty list) adds nothing to the statistic
or to its bootstrap, so it must not change the interval either; it used to turn Hesterberg's expansion off for every
task (min(runs) == 0), printing a narrower interval than its level."""

from __future__ import annotations

import math

from adbs_lab.stats.aggregate import Interval, expanded_level, improvement_interval, iqm_interval

NAN = math.nan


def _ends(i: Interval) -> tuple[float, float, float]:
    return i.estimate, i.lo, i.hi


def test_an_empty_task_does_not_narrow_the_iqm_interval():
    tasks = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]]
    assert _ends(iqm_interval(tasks + [[NAN, NAN]])) == _ends(iqm_interval(tasks))


def test_an_empty_task_does_not_narrow_the_improvement_interval():
    pairs = [([1.0, 2.0, 3.0], [0.0, 2.5, 1.0]), ([4.0, 5.0, 6.0], [3.0, 5.5, 4.0])]
    with_empty = improvement_interval(pairs + [([], [])])
    assert _ends(with_empty) == _ends(improvement_interval(pairs)), with_empty


def test_the_expanded_level_ignores_tasks_without_runs():
    assert expanded_level(0.95, [3, 3, 0]) == expanded_level(0.95, [3, 3]) > 0.95


def test_one_run_per_task_gives_no_interval():
    """With one run in every task the stratified bootstrap resamples nothing: every replicate is the estimate, and
    the report printed '95% CI 55.00 to 55.00'. There is no interval (the runs' spread within a task is unknown)."""
    for i in (iqm_interval([[50.0], [60.0]]), improvement_interval([([1.0], [0.0]), ([0.0], [1.0])])):
        assert math.isfinite(i.estimate) and math.isnan(i.lo) and math.isnan(i.hi), i
    assert math.isfinite(iqm_interval([[50.0, 51.0], [60.0]]).lo)  # a task with two runs has a spread to resample
