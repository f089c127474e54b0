"""The family guarantee over the deciding metric and the secondary metrics together (adbs_lab/stats/continuation.py:
AlphaSplit; docs/statistics.md, "Secondary metrics"): simulated tables where every row is truly equal on every
metric, read as a study reads them (the deciding metric by `replay` over the planned looks at the primary's share,
each secondary by `read_at_look` at the look its comparison stopped at, at the secondaries' share over
n_secondaries × m), err in at most α of tables, within 2 Monte Carlo standard errors."""

from __future__ import annotations

import math

import numpy as np

from adbs_lab.stats.continuation import AlphaSplit, design
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import CODE, Label, read_at_look, replay

M = 3
"""Comparisons: three rows, each against one shared reference."""
REPS = 10_000
DELTA = 1.0
TRUE = (CODE[Label.NOT_RESOLVED], CODE[Label.EQUIVALENT])
"""With every true difference 0, these are the verdicts that are true (0 lies inside ±δ); any other is an error."""


def _tables(noise: str, rng: np.random.Generator, n_seeds: int, metrics: int, rho: float = 0.6) -> np.ndarray:
    """Per-seed differences row - reference, (REPS, M, metrics, n_seeds), all truly 0: each row's value on a seed is
    a factor shared by its metrics on that seed (correlation `rho` between a row's metrics, as base, novel and H of
    one trial are) plus each metric's own noise; the comparisons share the reference's values (correlated too)."""
    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape) if noise == "normal" else rng.standard_t(3, shape)

    rows = math.sqrt(rho) * draw(REPS, M + 1, 1, n_seeds) + math.sqrt(1 - rho) * draw(REPS, M + 1, metrics, n_seeds)
    return 3.0 * (rows[:, 1:] - rows[:, :1])  # σ of 3 points on each difference's scale: δ = 1 is tight


def _family_errors(d: np.ndarray, split: AlphaSplit) -> tuple[float, float]:
    """(share of tables with a wrong verdict on the deciding metric, share with one on any metric)."""
    looks = design(M, split)  # the sequential design: the primary's share spent over looks up to the horizon
    primary = replay(d[:, :, 0, :], looks, M, DELTA)
    wrong_primary = ~np.isin(primary["code"], TRUE).all(axis=1)
    secondary_looks = split.secondary(looks)
    wrong = wrong_primary.copy()
    for j in range(1, d.shape[2]):
        r = read_at_look(d[:, :, j, :], primary["look"], secondary_looks, split.secondary_m(M), DELTA)
        wrong |= ~np.isin(r["code"], TRUE).all(axis=1)
    return float(wrong_primary.mean()), float(wrong.mean())


def _se(p: float) -> float:
    return math.sqrt(p * (1 - p) / REPS)


def test_the_family_over_primary_and_secondaries_errs_at_most_alpha():
    split = AlphaSplit()
    looks = design(M, split)
    for noise, seed in (("normal", 11), ("t3", 12)):
        d = _tables(noise, np.random.default_rng(seed), looks.last, 1 + split.n_secondaries)
        primary, family = _family_errors(d, split)
        assert primary <= split.primary_alpha + 2 * _se(split.primary_alpha), (noise, primary)
        assert family <= split.alpha + 2 * _se(split.alpha), (noise, family)
        assert family >= primary  # the secondaries add verdicts, never remove one


def test_reading_each_secondary_as_a_family_of_its_own_would_break_the_guarantee():
    """The same tables with each secondary metric read as a family of its own, all of α at one look over all the
    seeds (what four tables on --metric test_novel_acc, test_base_acc, ... would print), err far more often than α:
    the split is what keeps the union bound over every metric, and the test above can tell the difference."""
    split = AlphaSplit()
    looks = design(M, split)
    d = _tables("normal", np.random.default_rng(13), looks.last, 1 + split.n_secondaries)
    primary = replay(d[:, :, 0, :], looks, M, DELTA)
    wrong = ~np.isin(primary["code"], TRUE).all(axis=1)
    own = Looks.fixed(looks.last, split.alpha)
    for j in range(1, d.shape[2]):
        r = read_at_look(d[:, :, j, :], 1, own, M, DELTA)
        wrong |= ~np.isin(r["code"], TRUE).all(axis=1)
    assert wrong.mean() > split.alpha + 4 * _se(split.alpha), wrong.mean()


def test_read_at_look_is_the_replay_interval_of_that_look():
    """A secondary read at the look its primary stopped at is the interval `replay` would give at that look: the
    same seeds, the same α_k / m."""
    rng = np.random.default_rng(5)
    looks = design(M)
    x = rng.normal(0, 2, (400, looks.last))
    r = replay(x, looks, M, DELTA)
    again = read_at_look(x, r["look"], looks, M, DELTA)
    for key in ("code", "look", "n_seeds", "n"):
        assert np.array_equal(r[key], again[key]), key
    for key in ("lo", "hi", "level", "estimate"):
        assert np.allclose(r[key], again[key], equal_nan=True), key
    none = read_at_look(x[:2], np.array([0, len(looks.sizes) + 5]), looks, M, DELTA)  # before a look, or none
    assert np.isnan(none["lo"]).all() and (none["code"] == CODE[Label.NOT_RESOLVED]).all()
    assert (none["look"] == 0).all()
