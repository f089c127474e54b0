"""Attacks on the IQM's interval at the levels a study asks for (adbs_lab/stats/aggregate.py: percentile_bounds):
adbs_lab/results/across_tasks.py asks for 1 - α/m, m the comparisons, and at a few runs Hesterberg's expanded
level puts the interval's ends far out in the bootstrap distribution. Resampling so that 50 resamples lie beyond
an end at 1e-7 took 5.9e8 resamples of 6 runs (28 GB: the process was killed); with --error-rate near 0 the level
rounds to 1 and the end's share was 0 (ZeroDivisionError). Past what the resamples resolve the interval is the runs'
range, which holds every quantile of the bootstrap distribution: conservative, and said in its method."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats import aggregate

CELLS = 20_000_000
"""Resamples x runs a call may build (160 MB of weights)."""


@pytest.fixture
def bounded(monkeypatch):
    """trim_weights refusing more than CELLS resampled runs, so a test fails instead of the machine running out of
    memory."""
    # aggregate.trim_weights is wrapped: through percentile_bounds alone the old code would allocate the gigabytes
    # this test guards against before failing
    real = aggregate.trim_weights

    def weights(n: int, b: int) -> np.ndarray:
        assert n * b <= CELLS, f"{b} resamples of {n} runs"
        return real(n, b)

    monkeypatch.setattr(aggregate, "trim_weights", weights)


def _pairs(tasks: int, runs: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
    return [(rng.normal(1.0, 1.0, runs), rng.normal(0.0, 1.0, runs)) for _ in range(tasks)]


@pytest.mark.parametrize("tasks, runs, level", [(2, 3, 1 - 0.05 / 10), (2, 3, 0.99), (1, 3, 0.95), (4, 3, 0.999),
                                                (2, 3, 1 - 1e-300)])
def test_a_far_level_gives_the_runs_range_in_bounded_memory(bounded, tasks, runs, level):
    pairs = _pairs(tasks, runs)
    got = aggregate.iqm_difference(pairs, level)
    d = np.concatenate(aggregate.differences(pairs))
    assert (got.lo, got.hi) == (d.min(), d.max()) and got.method == aggregate.RANGE_METHOD, got


def test_a_level_the_resamples_resolve_keeps_the_bootstrap(bounded):
    got = aggregate.iqm_difference(_pairs(2, 3), 0.95)
    d = np.concatenate(aggregate.differences(_pairs(2, 3)))
    assert got.method == aggregate.IQM_METHOD and d.min() < got.lo < got.estimate < got.hi < d.max(), got


def test_the_range_holds_the_resolved_interval_of_the_same_runs(bounded):
    """Just past the bound the range must not be narrower than the bootstrap's interval just inside it."""
    d = np.concatenate(aggregate.differences(_pairs(2, 3)))
    inside = aggregate.percentile_bounds(d, 0.97)
    outside = aggregate.percentile_bounds(d, 1 - 0.05 / 10)
    assert outside[1] <= inside[1] and outside[2] >= inside[2] and math.isfinite(float(outside[1]))
