"""adbs_lab/stats/looks.py: the planned looks and the α spent at each, against the spending functions by hand."""

from __future__ import annotations

import math

import pytest

from adbs_lab.stats.looks import Looks, spent


def test_the_looks_are_complete_batches_up_to_the_cap():
    assert Looks().sizes == (3, 5, 7, 8)  # the defaults: first batch 3, batches of 2, the last cut short at N = 8
    assert Looks(batch=1).sizes == (3, 4, 5, 6, 7, 8)
    assert Looks(n0=4, batch=2, max_seeds=8).sizes == (4, 6, 8)
    assert Looks.fixed(5).sizes == (5,) and Looks.fixed(5).alphas == (0.05,)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock", "equal"])
def test_each_spending_function_spends_alpha_exactly_across_the_looks(spending):
    looks = Looks(batch=1, spending=spending)
    assert sum(looks.alphas) == pytest.approx(0.05, abs=1e-15)
    assert all(a > 0 for a in looks.alphas)


def test_the_spending_functions_by_hand():
    # O'Brien-Fleming type at t = 3/8: 2 - 2 Φ(1.959964 / √0.375) = 2 Φ(-3.20059) = 0.0013714
    assert spent(0.05, 0.375, "obrien_fleming") == pytest.approx(0.0013714, rel=1e-3)
    assert spent(0.05, 1.0, "obrien_fleming") == pytest.approx(0.05)
    assert spent(0.05, 0.5, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 2))
    assert Looks(batch=1, spending="equal").alphas == pytest.approx((0.05 / 6,) * 6)
    obf = Looks(batch=1).alphas  # O'Brien-Fleming spends little early, Pocock much
    assert obf[0] < 0.002 and obf[-1] > 0.01 and Looks(batch=1, spending="pocock").alphas[0] > 0.02


@pytest.mark.parametrize("bad", [dict(n0=0), dict(n0=9), dict(batch=0), dict(alpha=0.0), dict(spending="haybittle")])
def test_a_plan_that_cannot_be_is_refused(bad):
    with pytest.raises(ValueError):
        Looks(**bad)
