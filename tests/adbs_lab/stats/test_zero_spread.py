"""No verdict from fewer than 3 finite pairs or from a spread of zero (adbs_lab/stats/verdicts.py: MIN_PAIRS,
no_spread): accuracies are counts over a finite evaluation set, so per-seed differences lie on a grid of 100 / N
points and two or more of them can be equal, which gives s = 0, a zero-width interval and, before this rule, an
immediate verdict. Simulated with every row truly equal and accuracies on the grid of N = 700 (the smoke test set),
2,000 and 10,000 images, and pointed at the rule of f730cc9 (tests/helpers/old_f730cc9.py) to show the failure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats import workflow
from adbs_lab.stats.corners import rate_bound
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.planner import FEWER, NO_SPREAD, plan, levels
from adbs_lab.stats.simulate import false_verdicts
from adbs_lab.stats.verdicts import CODE, Label, family_verdicts, no_spread, replay, spread_floor
from tests.helpers.old_f730cc9 import old_fixed_table_codes

ALPHA, SIMS = 0.05, 4000
BOUND = rate_bound(ALPHA, SIMS)


def test_two_pairs_however_far_apart_resolve_nothing_and_plan_nothing():
    v = family_verdicts({"a": [5.0, 5.2]}, delta=1.0)["a"]
    assert v.verdict is Label.NOT_RESOLVED and v.n == 2 and math.isnan(v.lo) and math.isnan(v.hi)
    p = plan([5.0, 5.2], 1.0, levels(ALPHA, 1))
    assert p.needed is None and p.note == FEWER


@pytest.mark.parametrize("diffs", [[0.0, 0.0, 0.0], [1.5, 1.5, 1.5, 1.5], [-0.1428] * 8, [0.3, 0.3, 0.3, math.nan]])
def test_equal_differences_have_no_spread_and_resolve_nothing(diffs):
    v = family_verdicts({"a": diffs}, delta=1.0)["a"]
    assert v.verdict is Label.NOT_RESOLVED and math.isnan(v.lo) and math.isnan(v.hi)
    assert v.estimate == pytest.approx(np.nanmean(diffs))
    p = plan(diffs, 1.0, levels(ALPHA, 1))
    assert p.needed is None and p.note == NO_SPREAD


@pytest.mark.parametrize("n", [3, 8, 12, 13, 20])
def test_on_a_grid_the_step_rule_is_the_zero_rule_up_to_12_pairs(n):
    """One pair off by a grid step has s = step / √n: above the grid's rounding SD step / √12 up to n = 12."""
    step = 100 / 700
    x = np.r_[np.zeros(n - 1), step] + 47.0
    assert not no_spread(x)  # without the step: some spread
    assert bool(no_spread(x, step)) == (n > 12) and spread_floor(step) == pytest.approx(step / math.sqrt(12))


def test_three_pairs_with_spread_still_resolve():
    v = family_verdicts({"a": [3.0, 3.2, 2.9]}, delta=1.0)["a"]
    assert v.verdict is Label.BETTER and v.n == 3


def test_a_sequential_study_waits_past_a_look_without_spread():
    looks = Looks(n0=3, batch=2, max_seeds=5, alpha=ALPHA, spending="equal")
    r = replay(np.array([[0.5, 0.5, 0.5, 0.6, 0.4]]), looks, 1, 1.0)
    assert r["look"][0] == 2 and r["code"][0] == CODE[Label.BETTER_SMALL]  # look 1 had no spread: not resolved there


def _fixed_table_false_rate(codes: np.ndarray) -> float:
    return float(false_verdicts(codes, [0.0] * codes.shape[1], 1.0).any(axis=1).mean())


@pytest.mark.parametrize("items", [300, 700, 2000, 10000])  # 300: a small validation set
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_no_difference_on_a_grid_gives_a_false_verdict_in_at_most_alpha_of_tables(items, n):
    """m = 3 rows equal to their reference, σ_d = 1 point: a fixed table of n seeds."""
    d = workflow.differences(np.random.default_rng(60 + n), SIMS, [0.0] * 3, n, 1.0, "normal", items)
    r = replay(d, Looks.fixed(n, ALPHA), 3, 1.0)
    rate = _fixed_table_false_rate(r["code"])
    print(f"\nN = {items}, n = {n}: a false verdict in {rate:.4f} of tables (bound {BOUND:.4f})")
    assert rate <= BOUND


def test_the_rule_of_f730cc9_fails_the_same_check_at_two_seeds_on_the_smoke_grid():
    d = workflow.differences(np.random.default_rng(62), SIMS, [0.0] * 3, 2, 1.0, "normal", 700)
    old = _fixed_table_false_rate(old_fixed_table_codes(d, ALPHA, 3, 1.0))
    new = _fixed_table_false_rate(replay(d, Looks.fixed(2, ALPHA), 3, 1.0)["code"])
    print(f"\nN = 700, n = 2: f730cc9 {old:.4f}, now {new:.4f} (bound {BOUND:.4f})")
    assert old > BOUND >= new
