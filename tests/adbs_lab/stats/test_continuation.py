"""adbs_lab/stats/continuation.py: where the invocations of a study pause, "continue" apart from "inconclusive at
the horizon", the split of α between the primary and the secondary metrics, and the recommended plan per family."""

from __future__ import annotations

import numpy as np
import pytest

from adbs_lab.stats.continuation import (CAP_FOR_FAMILY, CONTINUE, INCONCLUSIVE, MORE, RESOLVED, AlphaSplit, Step,
                                         advise, design, next_pause, pauses, step)
from adbs_lab.stats.looks import Looks, continuable
from adbs_lab.stats.verdicts import Label, family_verdicts


def test_a_default_run_pauses_at_the_cap_and_its_continuations_at_the_middle_and_the_horizon():
    assert pauses(continuable()) == (8, 12, 16)
    assert pauses(continuable(cap=9)) == (9, 15, 18)  # looks 9, 11, 13, 15, 17, 18: the first past 13.5
    assert pauses(Looks()) == (8,)
    assert next_pause(continuable(), 8) == 12 and next_pause(continuable(), 12) == 16 and next_pause(continuable(), 16) is None


def test_each_step_is_this_runs_look_a_continuation_or_inconclusive_at_the_horizon():
    plan = continuable()
    assert step(True, 5, plan, 8) == Step(RESOLVED, None, None)
    assert step(False, 5, plan, 8) == Step(MORE, 7, 8)
    assert step(False, 8, plan, 8) == Step(CONTINUE, 10, 12)  # paused at the cap: the printed continuation
    assert step(False, 12, plan, 12) == Step(CONTINUE, 14, 16)
    assert step(False, 16, plan, 16) == Step(INCONCLUSIVE, None, None)  # no continuation offered at the horizon
    assert step(False, 8, Looks(), 8) == Step(INCONCLUSIVE, None, None)  # a plan without a horizon: the cap is it
    with pytest.raises(ValueError, match="pauses at one of"):
        step(False, 5, plan, 9)


def test_advice_reads_the_verdicts_of_a_family_under_the_plan():
    plan = continuable()
    rng = np.random.default_rng(4)
    diffs = {"clear": list(3.0 + 0.2 * rng.standard_normal(8)), "open": list(0.5 + 2.0 * rng.standard_normal(8))}
    verdicts = family_verdicts(diffs, looks=plan)
    assert verdicts["clear"].verdict is Label.BETTER and verdicts["open"].verdict is Label.NOT_RESOLVED
    steps = advise(verdicts, plan, 8)
    assert steps["clear"].state == RESOLVED and steps["open"] == Step(CONTINUE, 10, 12)


def test_the_split_keeps_the_family_at_alpha():
    split = AlphaSplit()
    assert split.alpha == pytest.approx(0.05)
    plan = design(3, split)
    assert sum(split.primary(plan).alphas) == pytest.approx(0.04) and sum(split.secondary(plan).alphas) == pytest.approx(0.01)
    assert split.secondary_m(3) == 12
    for bad in (dict(primary_alpha=0.0), dict(secondary_alpha=0.01, n_secondaries=0),
                dict(primary_alpha=0.99, secondary_alpha=0.02)):
        with pytest.raises(ValueError):
            AlphaSplit(**bad)


def test_the_recommended_plan_by_family_size():
    assert design(3).max_seeds == 8 and design(3).last == 16 and design(3).alpha == 0.04
    assert design(12).max_seeds == 9 and design(12).last == 18
    assert design(CAP_FOR_FAMILY[-1][0]).max_seeds == CAP_FOR_FAMILY[-1][1]
    with pytest.raises(ValueError, match="give the plan's cap yourself"):
        design(CAP_FOR_FAMILY[-1][0] + 1)
