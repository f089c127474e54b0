"""adbs_lab/stats/forecast.py: the forecast of where the plan resolves a comparison, checked on studies from known
truths (the 90% interval made from 3 seeds holds the realised stop of the same study in ≥ 85% at every truth, its
median within one batch of it in ≥ 70% pooled over the truths), a plug-in forecast failing the same check, no
forecast from fewer than 3 finite pairs or from no spread, and the time it implies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats import workflow
from adbs_lab.stats.continuation import design
from adbs_lab.stats.forecast import FEWER, NO_SPREAD, RESOLVED, cost, forecast, forecast_family
from adbs_lab.stats.verdicts import CODE, Label, replay

TRUTHS = [(ratio * sigma, sigma) for sigma in (0.5, 1.0) for ratio in (0.0, 1.0, 2.0, 3.0, 4.0)]
LOOKS = design(3)


def test_the_90_percent_interval_from_3_seeds_holds_the_realised_stop():
    cells = [workflow.forecast_check(np.random.default_rng(64 + k), e, s, LOOKS, 3, sims=120, draws=300)
             for k, (e, s) in enumerate(TRUTHS)]
    for (e, s), c in zip(TRUTHS, cells):
        print(f"\nΔ = {e}, σ_d = {s}: covered {c['covered']:.3f}, median within one batch {c['within']:.3f}", end="")
    assert min(c["covered"] for c in cells) >= 0.85
    assert np.mean([c["within"] for c in cells]) >= 0.70


def test_a_plug_in_forecast_falls_short_of_the_same_check():
    # μ = x̄ and σ = s from the first 3 seeds, no uncertainty: the stops it predicts are far too sure
    rng = np.random.default_rng(7)
    d = 1.0 + rng.standard_normal((300, LOOKS.last))  # Δ/σ_d = 1, σ_d = 1
    real = replay(d, LOOKS, 3, 1.0)
    first = replay(d[:, :3], LOOKS, 3, 1.0)["code"] == CODE[Label.NOT_RESOLVED]
    x = d[first, :3]
    new = x.mean(1)[:, None, None] + x.std(1, ddof=1)[:, None, None] * rng.standard_normal((len(x), 300, LOOKS.last - 3))
    r = replay(np.concatenate([np.broadcast_to(x[:, None, :], (len(x), 300, 3)), new], -1), LOOKS, 3, 1.0)
    stops = np.where(r["code"] == CODE[Label.NOT_RESOLVED], math.inf, r["n_seeds"])
    lo, hi = np.quantile(stops, [0.05, 0.95], axis=-1, method="inverted_cdf")
    rl = np.where(real["code"] == CODE[Label.NOT_RESOLVED], math.inf, real["n_seeds"])[first]
    assert ((lo <= rl) & (rl <= hi)).mean() < 0.85


def test_no_forecast_from_fewer_than_3_finite_pairs_or_no_spread():
    assert forecast([0.3, 0.5], LOOKS, 3).note == FEWER and forecast([0.3, 0.5], LOOKS, 3).median is None
    assert forecast([0.3, math.nan, 0.5, math.inf], LOOKS, 3).note == FEWER  # 2 finite of 4
    assert forecast([0.5, 0.5, 0.5], LOOKS, 3).note == NO_SPREAD


def test_a_forecast_is_reproducible_and_a_resolved_comparison_stops_where_it_stands():
    f = forecast([0.9, 1.4, 0.2], LOOKS, 3, seed=1)
    assert f == forecast([0.9, 1.4, 0.2], LOOKS, 3, seed=1) and f.note == ""
    assert f.lo <= f.median <= f.hi and 0 < f.p_by_horizon <= 1 and f.lo > 3
    seeds = 3.0 + 0.1 * np.random.default_rng(0).standard_normal(5)
    clear = forecast(list(seeds), LOOKS, 3)
    at = float(replay(seeds, LOOKS, 3, 1.0)["n_seeds"])
    assert clear.note == RESOLVED and clear.lo == clear.median == clear.hi == at <= 5


def test_the_time_counts_a_shared_reference_once_and_leaves_out_what_has_no_forecast():
    fs = forecast_family({"a vs ref": [0.9, 1.4, 0.2], "b vs ref": [1.1, 0.3, 0.8], "c vs ref": [0.2, 0.4]},
                         LOOKS, seed=3)
    pairs = {"a vs ref": ("a", "ref"), "b vs ref": ("b", "ref"), "c vs ref": ("c", "ref")}
    c = cost(fs, pairs, {"a": 10.0, "b": 20.0, "c": 5.0, "ref": 30.0}, LOOKS)
    assert c.unforecast == ("c vs ref",)
    k = min(fs["a vs ref"].draws.size, fs["b vs ref"].draws.size)
    ends = {n: np.minimum(fs[n].draws[:k], LOOKS.last) - 3 for n in ("a vs ref", "b vs ref")}
    trials = ends["a vs ref"] + ends["b vs ref"] + np.maximum(ends["a vs ref"], ends["b vs ref"])
    assert c.trials[0] == pytest.approx(np.quantile(trials, 0.5)) and c.trials[1] <= c.trials[0] <= c.trials[2]
    seconds = 10 * ends["a vs ref"] + 20 * ends["b vs ref"] + 30 * np.maximum(ends["a vs ref"], ends["b vs ref"])
    assert c.seconds[0] == pytest.approx(np.quantile(seconds, 0.5))


def test_the_cap_that_would_is_the_first_that_resolves_in_80_percent_of_the_same_draws():
    """cap_that_would bisects over the caps; a scan of every cap on the same draws gives the same first cap."""
    import dataclasses

    from adbs_lab.stats.forecast import ENOUGH, cap_that_would

    x = [0.9, 1.4, 0.2]
    cap = cap_that_would(x, LOOKS, 3, seed=5, draws=400, most=40)
    assert cap is not None and cap > LOOKS.max_seeds
    rng = np.random.default_rng(5)  # the draws cap_that_would makes, in its order
    ok = np.asarray(x)
    sigma = np.sqrt(((ok - ok.mean()) ** 2).sum() / rng.chisquare(2, 400))
    mu = ok.mean() + sigma / np.sqrt(3) * rng.standard_normal(400)
    full = np.concatenate([np.broadcast_to(ok, (400, 3)), mu[:, None] + sigma[:, None] * rng.standard_normal((400, 77))], -1)
    share = {c: float((replay(full[:, :c], dataclasses.replace(LOOKS, max_seeds=c, horizon=2 * c), 3, 1.0)["code"]
                       != CODE[Label.NOT_RESOLVED]).mean()) for c in range(LOOKS.max_seeds + 2, 41, 2)}
    assert cap == next(c for c, p in share.items() if p >= ENOUGH)
    assert cap_that_would([0.5, 0.5, 0.5], LOOKS, 3) is None and cap_that_would([0.3, 0.5], LOOKS, 3) is None
