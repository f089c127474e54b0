"""Attacks on the aggregates across tasks (adbs_lab/stats/aggregate.py): a task with no finite run (every seed
diverged, or two rows with no seed in common: across_tasks passes it as an empty list) or with fewer than 3 runs adds
nothing to the statistics, so it must not change an interval either (f730cc9's bootstrap turned its expansion off
for every task when one had a single run); every run a tie, every run a win, every seed but one diverged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats.aggregate import Interval, improvement_interval, iqm_difference, mean_difference

NAN = math.nan
STATS = (iqm_difference, mean_difference, improvement_interval)


def _ends(i: Interval) -> tuple[float, float, float]:
    return i.estimate, i.lo, i.hi


@pytest.mark.parametrize("f", STATS)
def test_an_empty_or_short_task_changes_nothing(f):
    pairs = [([1.0, 2.0, 3.0], [0.0, 2.5, 1.0]), ([4.0, 5.0, 6.0, 7.0], [3.0, 5.5, 4.0, 6.0])]
    for extra in (([], []), ([NAN, NAN], [1.0, 2.0]), ([9.0], [0.0]), ([9.0, 8.0, NAN], [0.0, 1.0, 1.0])):
        assert _ends(f(pairs + [extra])) == _ends(f(pairs)), extra


@pytest.mark.parametrize("f", STATS)
def test_one_or_two_runs_per_task_give_nothing(f):
    """With one run in every task the spread within a task is unknown: f730cc9 printed '95% CI 55.00 to 55.00'."""
    i = f([([50.0], [49.0]), ([60.0, 61.0], [59.0, 60.5])])
    assert all(math.isnan(v) for v in _ends(i)) and i.runs == ()


def test_every_seed_a_tie_or_a_win():
    """All ties: the estimate 1/2, the interval from 0 (ties as losses) to 1 (ties as wins), the honest bracket of a
    probability whose data say nothing. All wins in 4 tasks of 3: the upper end 1, the lower 0.735, not 1."""
    same = [(np.full(3, 50.0), np.full(3, 50.0))] * 4
    p = improvement_interval(same)
    assert (p.estimate, p.lo, p.hi) == (0.5, 0.0, 1.0)
    wins = improvement_interval([(np.full(3, 51.0), np.full(3, 50.0))] * 4)
    assert wins.hi == 1.0 and wins.lo == pytest.approx(0.025 ** (1 / 12))
