"""adbs_lab/stats/looks.py: the planned looks and the α spent at each, against the spending functions by hand."""

from __future__ import annotations

import math

import pytest

from adbs_lab.stats.looks import Looks, continuable, spent


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


def test_a_plan_with_a_horizon_adds_the_continuation_looks_and_keeps_the_cap_a_look():
    plan = continuable()  # cap 8, horizon 16
    assert plan.sizes == (3, 5, 7, 8, 10, 12, 14, 16) and plan.last == 16 and Looks().last == 8
    assert sum(plan.alphas) == pytest.approx(0.05, abs=1e-15) and all(a > 0 for a in plan.alphas)
    # up to the cap: O'Brien-Fleming at level (1 - r) α over t = n / 8; after it, r α in equal parts
    r = plan.reserve
    assert sum(plan.alphas[:4]) == pytest.approx(0.05 * (1 - r), abs=1e-15)
    assert plan.alphas[0] == pytest.approx(spent(0.05 * (1 - r), 3 / 8, "obrien_fleming"), rel=1e-12)
    assert plan.alphas[4:] == pytest.approx((0.05 * r / 4,) * 4)
    assert continuable(cap=9).sizes == (3, 5, 7, 9, 11, 13, 15, 17, 18)


def test_a_plan_without_a_horizon_spends_exactly_as_before():
    # the numbers Looks gave before horizons existed (printed from the parent commit)
    assert Looks().alphas == (0.001371380669923152, 0.011797097798958683, 0.022976774882599582, 0.013854746648518587)
    assert Looks(batch=1, spending="pocock").alphas[0] == 0.02486743135240241


def test_the_plan_records_as_json_and_refuses_a_record_it_would_not_make():
    import json

    plan = continuable(cap=9, alpha=0.04, reserve=0.3, reserve_spending="pocock")
    data = json.loads(json.dumps(plan.to_json()))
    assert Looks.from_json(data) == plan and data["alphas"] == list(plan.alphas) and data["sizes"][-1] == 18
    assert Looks.from_json({"n0": 3, "batch": 2, "max_seeds": 8, "alpha": 0.05, "spending": "obrien_fleming"}) == Looks()
    with pytest.raises(ValueError, match="other code"):
        Looks.from_json({**data, "alphas": [a * 1.01 for a in data["alphas"]]})
    with pytest.raises(ValueError, match="unknown fields"):
        Looks.from_json({**data, "cap": 8})


@pytest.mark.parametrize("bad", [dict(horizon=8), dict(horizon=16), dict(horizon=16, reserve=1.0),
                                 dict(reserve=0.2), dict(horizon=16, reserve=0.2, reserve_spending="linear")])
def test_a_horizon_that_cannot_be_is_refused(bad):
    with pytest.raises(ValueError):
        Looks(**bad)


def test_the_obrien_fleming_spending_is_scipy_stats_normal_bit_for_bit():
    """spent() reads the normal tails from scipy.special (ndtr, ndtri), not scipy.stats (a second to import): the
    same numbers as 2 Φ̄(z_{1-α/2} / √t) by scipy.stats.norm, to the last bit."""
    import math

    import numpy as np
    from scipy import stats

    from adbs_lab.stats.looks import spent

    rng = np.random.default_rng(0)
    for alpha, t in zip(rng.uniform(1e-6, 0.6, 5_000), rng.uniform(0.01, 1.0, 5_000)):
        assert spent(float(alpha), float(t), "obrien_fleming") == float(
            2.0 * stats.norm.sf(stats.norm.isf(alpha / 2.0) / math.sqrt(t)))
