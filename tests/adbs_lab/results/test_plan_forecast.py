"""The plan under a table as wired (adbs_lab/results/comparisons.py: forecasts, the numbers plan_lines prints), checked
against known truths. The wiring's inputs: a comparison open in the table (its verdict at the table's fixed look of
3 seeds, α / m, is "not resolved"), its per-seed differences as compare_rows pairs them, the design a deciding study of
the table's m comparisons would run (continuation.design(m) at the default split), the table's δ, and the stream
`seed + k` of its k-th open comparison (forecast.forecast_family). `test_the_wiring_forecasts_each_open_comparison_*`
checks that these are what it forecasts from; the calibration test then checks the forecast on those inputs, over
many tables (vectorised: adbs_lab/stats/forecast.py: stop_draws, what forecast() runs after its own replay), against
the stop the same table's seeds realise when continued under the same looks to the horizon: the 90% prediction
interval holds the realised stop in at least 85% of the comparisons forecast at every truth, and its median is within
one batch of it in at least 70% pooled over the truths (no stop by the horizon counts as one batch past it).

The truths are those of tests/adbs_lab/stats/test_forecast.py (Δ/σ_d from 0 to 4, σ_d = 0.5 and 1, δ = 1), each a
table of 3 rows against one reference (m = 3), every row with the same true difference; a row's value at a seed is
its effect plus noise of SD σ_d / √2, so a paired difference has SD σ_d and the 3 comparisons share the reference's
draw, as in a study. Unlike forecast.py's own test, only the comparisons the table leaves open are forecast, as the
plan prints: the table's fixed look resolves the easy draws of a large Δ/σ_d at 3 seeds, and what is left is harder
to forecast (docs/statistics.md, "Reading the plan")."""

from __future__ import annotations

import math

import numpy as np

from adbs_lab.results import comparisons as cmp
from adbs_lab.stats.continuation import design
from adbs_lab.stats.forecast import DRAWS, forecast, stop_draws
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.verdicts import CODE, Label, replay
from tests.helpers.frames import study_frames

M, N0, DELTA = 3, 3, 1.0
TRUTHS = [(ratio * sigma, sigma) for sigma in (0.5, 1.0) for ratio in (0.0, 1.0, 2.0, 3.0, 4.0)]
LOOKS = design(M)
TABLES = 30
"""Tables per truth (3 comparisons each)."""


def test_the_wiring_forecasts_each_open_comparison_from_its_differences_at_the_design():
    rows = {"ref": [50.0, 54.0, 47.0], "a": [51.0, 55.5, 47.5], "b": [50.2, 53.1, 47.4], "c": [56.0, 61.0, 52.0]}
    pairs = [("a", "ref"), ("b", "ref"), ("c", "ref")]
    s, t = study_frames(rows)
    compared = cmp.compare_rows(s, pairs, trials=t, policy=VerdictPolicy(pairs=tuple(pairs)))
    looks, own, said = cmp.forecasts(compared)
    open_ = [c for c in compared if c.plan is not None]
    assert looks == LOOKS and not own and len(open_) == 2 and list(said) == [cmp.name(c.pair) for c in open_]
    for k, c in enumerate(open_):
        d = [x - y for x, y in zip(rows[c.pair[0]], rows[c.pair[1]])]
        assert said[cmp.name(c.pair)] == forecast(d, LOOKS, M, DELTA, seed=k)
    recorded = Looks(max_seeds=5, alpha=0.05)  # a study that recorded its looks: those, not the design
    compared = cmp.compare_rows(s, pairs, trials=t, policy=VerdictPolicy(pairs=tuple(pairs), looks=recorded))
    assert cmp.forecasts(compared)[:2] == (recorded, True)


def test_the_plans_90_percent_interval_holds_the_realised_stop_and_its_median_is_near_it():
    rng = np.random.default_rng(2026)
    covered, within = [], []
    for effect, sigma in TRUTHS:
        rows = rng.standard_normal((TABLES, M + 1, LOOKS.last)) * sigma / math.sqrt(2.0)
        rows[:, 1:, :] += effect
        d = (rows[:, 1:, :] - rows[:, :1, :]).reshape(-1, LOOKS.last)  # (tables × m, seeds)
        in_table = replay(d[:, :N0], Looks.fixed(N0, 0.05), M, DELTA)["code"] == CODE[Label.NOT_RESOLVED]
        by_design = replay(d[:, :N0], LOOKS, M, DELTA)["code"] == CODE[Label.NOT_RESOLVED]
        x = d[in_table & by_design]  # what the plan forecasts (forecast() stops one its looks resolve at 3 seeds)
        stops = stop_draws(x[:, :N0], LOOKS, M, DELTA, rng, DRAWS)
        med, lo, hi = np.quantile(stops, [0.5, 0.05, 0.95], axis=-1, method="inverted_cdf")
        r = replay(x, LOOKS, M, DELTA)
        real = np.where(r["code"] == CODE[Label.NOT_RESOLVED], math.inf, r["n_seeds"].astype(float))
        past = float(LOOKS.last + LOOKS.batch)
        covered.append(float(((lo <= real) & (real <= hi)).mean()))
        within.append(float((np.abs(np.where(np.isinf(med), past, med) - np.where(np.isinf(real), past, real))
                             <= LOOKS.batch).mean()))
        print(f"\nΔ = {effect}, σ_d = {sigma}: {len(x)} open, covered {covered[-1]:.3f}, median within one batch "
              f"{within[-1]:.3f}", end="")
    assert min(covered) >= 0.85
    assert np.mean(within) >= 0.70


def test_a_study_at_the_end_of_its_looks_is_told_so_and_the_cap_a_new_study_would_need():
    rows = {"ref": [50.0, 54.0, 47.0, 52.0, 49.0], "a": [50.6, 53.5, 47.9, 52.1, 49.8]}
    s, t = study_frames(rows)
    policy = VerdictPolicy(pairs=(("a", "ref"),), looks=Looks(max_seeds=5))
    (c,) = cmp.compare_rows(s, [("a", "ref")], trials=t, policy=policy)
    lines = cmp.plan_lines([c], cmp.row_seconds(t))
    assert lines[1] == "  looks: the study's own, as it recorded them (first 3 seeds, 2 more a look, the cap at 5, no horizon)"
    assert lines[2].startswith("  a vs ref: the study's looks are spent (the last at 5 seeds): no more seeds resolve it "
                               "under its plan; a new study with a cap of ")
