"""adbs_lab/stats/planner.py: c4 and Browne's bound by hand and by simulation, the planned n giving the power it
promises with σ known (and what a 3-seed pilot achieves, printed), two seeds flagged, and the cost of a plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adbs_lab.stats.looks import Looks
from adbs_lab.stats.planner import (FEWER, NO_SPREAD, SeedPlan, c4, expected_half_width, extra_cost, levels, plan,
                                    plan_family, sigma_upper, smallest_n)
from adbs_lab.stats.simulate import differences, run
from adbs_lab.stats.intervals import paired_t
from adbs_lab.stats.verdicts import CODE, Label, classify

N_STUDIES = 2000
DELTA = 1.0


def test_c4_and_the_expected_half_width_by_hand_and_by_simulation():
    assert [round(c4(n), 4) for n in (2, 3, 5, 10)] == [0.7979, 0.8862, 0.9400, 0.9727]  # the SQC tables' c4
    x = np.random.default_rng(3).standard_normal((200000, 4))
    assert x.std(axis=1, ddof=1).mean() == pytest.approx(c4(4), abs=0.005)
    half = stats.t.ppf(1 - 0.01 / 2, 3) * x.std(axis=1, ddof=1) / 2  # n = 4, σ = 1, a = 0.01
    assert expected_half_width(4, 1.0, 0.01) == pytest.approx(half.mean(), rel=0.01)


def test_browne_upper_bound_by_hand_and_its_coverage():
    # χ²_{0.20, 2} = -2 ln 0.8 (the χ² with 2 degrees of freedom is exponential with mean 2)
    assert sigma_upper(1.0, 3) == pytest.approx(math.sqrt(2 / (-2 * math.log(0.8))))
    s = np.random.default_rng(5).standard_normal((100000, 3)).std(axis=1, ddof=1)
    assert np.mean(np.sqrt(2 / stats.chi2.ppf(0.2, 2)) * s >= 1.0) == pytest.approx(0.80, abs=0.01)


def _power_at(n: np.ndarray | int, sigma: float, rng: np.random.Generator, pilot: np.ndarray | None = None) -> float:
    """Share of 3-comparison studies (true difference δ in each) whose fixed-size verdict at n seeds is "better"."""
    n_max = int(np.max(n))
    d = differences(rng, N_STUDIES, [DELTA] * 3, n_max, sigma)
    if pilot is not None:
        d[:, :, :3] = pilot  # the pilot's seeds are the study's first seeds
    d = np.where(np.arange(n_max) < np.asarray(n)[..., None], d, np.nan)  # each study's seeds beyond its n unused
    _, lo, hi, _, _ = paired_t(d, 0.05 / 3)
    return float(np.mean(classify(lo, hi, DELTA) == CODE[Label.BETTER]))


def test_the_planned_n_gives_better_in_80_percent_with_sigma_known():
    sigma = 0.4
    n = smallest_n(sigma, DELTA, levels(0.05, 3))
    assert n == 7 and expected_half_width(6, sigma, 0.05 / 3) > DELTA / 2 >= expected_half_width(7, sigma, 0.05 / 3)
    assert smallest_n(sigma, DELTA, levels(0.05, 1)) == 5  # the adjustment is paid for: one comparison needs fewer
    power = _power_at(n, sigma, np.random.default_rng(21))
    print(f"\nσ = {sigma} known, n = {n}: better in {power:.1%} of comparisons")
    assert power >= 0.80
    wrong = smallest_n(sigma, 2 * DELTA, levels(0.05, 3))  # a planner aiming at a half-width of δ, not δ/2
    assert _power_at(wrong, sigma, np.random.default_rng(21)) < 0.80  # this test would catch it


def _planned_n(sigmas: np.ndarray, level_at: dict[int, float]) -> np.ndarray:
    """`smallest_n` for many σ at once (capped at the largest n of level_at): the half-width is linear in σ, so n is
    the first whose largest σ allowed, (δ/2) / half-width at σ = 1, reaches σ."""
    ns = np.array(sorted(level_at))
    allowed = np.array([DELTA / 2 / expected_half_width(int(n), 1.0, level_at[int(n)]) for n in ns])
    return ns[np.minimum(np.searchsorted(allowed, sigmas), len(ns) - 1)]


def test_a_three_seed_pilot_plans_on_browne_bound_and_its_power_is_printed():
    sigma, rng = 0.4, np.random.default_rng(22)
    pilot = differences(rng, N_STUDIES, [DELTA] * 3, 3, sigma)
    s = pilot.std(axis=2, ddof=1)
    level_at = levels(0.05, 3)
    assert [int(_planned_n(np.array(x), level_at)) for x in (0.2, 0.4, 0.9)] == [smallest_n(x, DELTA, level_at)
                                                                                 for x in (0.2, 0.4, 0.9)]
    n = _planned_n(sigma_upper(1.0, 3) * s, level_at)
    n_point = _planned_n(s, level_at)
    power, power_point = _power_at(n, sigma, rng, pilot), _power_at(n_point, sigma, rng, pilot)
    print(f"\n3-seed pilot, σ = {sigma}: Browne's bound plans median n = {np.median(n):.0f} (mean {n.mean():.1f}), "
          f"better in {power:.1%}; the point estimate plans median {np.median(n_point):.0f}, better in {power_point:.1%}")
    assert power > 0.80 and power >= power_point and n.mean() > n_point.mean()


def test_fewer_than_three_seeds_or_no_spread_give_no_plan():
    two = plan([0.5, 1.1], DELTA, levels(0.05, 3))
    assert two.note == FEWER and two.needed is None and two.extra is None
    tied = plan([0.5, 0.5, 0.5], DELTA, levels(0.05, 3))  # s = 0 would plan "enough"
    assert tied.note == NO_SPREAD and tied.needed is None
    three = plan([0.5, 1.1, 0.7], DELTA, levels(0.05, 3))
    assert three.note == "" and three.sigma == pytest.approx(sigma_upper(three.s, 3)) and three.needed > three.needed_point
    one = plan([0.5, math.nan], DELTA, levels(0.05, 3))
    assert one.note == FEWER and one.needed is None and one.extra is None


def test_a_sequential_plan_names_a_look_at_the_level_of_that_look():
    looks = Looks(batch=1)
    at = levels(0.05, 3, looks)
    assert set(at) == set(looks.sizes) and at[8] == pytest.approx(looks.alphas[-1] / 3)
    n = smallest_n(0.3, DELTA, at)
    assert n in looks.sizes
    r = run(np.random.default_rng(23), N_STUDIES, [DELTA] * 3, 0.3, looks)
    power = np.mean((r["code"] == CODE[Label.BETTER]) & (r["n_seeds"] <= n))
    print(f"\nsequential, σ = 0.3 known: planned look n = {n}, better by then in {power:.1%}")
    assert power >= 0.80
    plans = plan_family({"a": [0.2, 0.4, 0.5]}, DELTA, m=3, looks=looks)
    assert plans["a"].needed is None or plans["a"].needed in looks.sizes


def test_the_cost_counts_each_row_once_with_its_largest_need():
    plans = {"a": SeedPlan(3, 3, 1.0, 2.0, 7, 5, ""), "b": SeedPlan(3, 3, 1.0, 2.0, 5, 4, ""),
             "c": SeedPlan(1, 1, math.nan, math.nan, None, None, FEWER)}
    pairs = {"a": ("A", "ref"), "b": ("B", "ref"), "c": ("C", "ref")}
    cost = extra_cost(plans, pairs, {"A": 10.0, "B": 20.0, "C": 5.0, "ref": 30.0})
    assert cost.seeds_by_row == {"A": 4, "ref": 4, "B": 2}  # ref runs once, as many as "a" needs
    assert cost.seconds == 4 * 10.0 + 2 * 20.0 + 4 * 30.0 and cost.unplanned == ("c",)
