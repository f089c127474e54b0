"""Does base-session accuracy predict the study's objective? The premise of pruning on it, measured.

A pruner stops trials whose base-session validation accuracy lags at some base epoch. That is only sound when the
accuracy at that epoch ranks the trials as the study's objective (validation average accuracy over sessions) does;
ADBS trades base for novel accuracy, so the premise can fail. The pruned trials' outcomes are unknown, so a random
share s of them (the *shadows*, adbs_lab/search/shadows.py) runs on to the end; each stands for 1/s pruned trials
(inverse-probability weighting, Horvitz & Thompson 1952), a completed trial for itself.

- `weighted_spearman`: Spearman's rho as the weighted Pearson correlation of weighted mid-ranks (each value's rank
  is the weight below it plus half the weight tied with it), an estimate of the population's rank correlation.
- `kish_n`: the effective number of a weighted sample, (sum w)^2 / sum w^2 (Kish 1965), the n of the interval.
- `spearman_interval`: Fisher's z-interval with Bonett & Wright's (2000) variance for Spearman's rho,
  (1 + r^2 / 2) / (n - 3) (Psychometrika 65, 23-28).
- `pruning_regret`: the weighted share of pruned trials that would have reached the top 10% of the objective, with
  Clopper & Pearson's (1934) exact interval on n = the pruned trials' Kish n (equal weights when s is fixed: the
  shadows' share and their count).
- `premise_checks`: --pruner auto's decision. The premise is checked at fixed numbers of trials (CHECKS: the first
  10, 20 and 40 to end, each check over those trials alone), the one-sided error of the 95% lower bound (2.5%) split
  equally over the checks (Bonferroni), so over all of them the premise is wrongly taken to hold with probability at
  most 2.5%; checking one bound again after every trial would spend that error once per trial. Between checks the
  last check's answer stands: off until one holds, then on for the rest of the study; after the last check nothing
  changes.

Pure functions on numbers (numpy, scipy); the study's numbers are gathered in adbs_lab/search/shadows.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["LEVEL", "PREMISE_LOWER", "PREMISE_MIN_N", "CHECKS", "TOP_SHARE", "DEFAULT_SHADOW_SHARE", "Correlation",
           "Regret", "Check", "kish_n", "weighted_ranks", "weighted_spearman", "spearman_interval", "correlation",
           "check_level", "premise_checks", "switched_on", "switched_on_rows", "weighted_quantile", "pruning_regret",
           "correlation_line", "regret_line"]

LEVEL = 0.95
"""The intervals' confidence level."""
PREMISE_LOWER = 0.7
"""--pruner auto prunes at a base epoch once the correlation's lower bound there is at least this."""
PREMISE_MIN_N = 10
"""...and once it rests on an effective n of at least this: Fisher's z-interval degenerates for a perfect rank order
of a handful of trials (4 trials in order by chance: 1 in 24), and Bonett & Wright (2000) checked their variance from
n = 10 on."""
CHECKS = (10, 20, 40)
"""--pruner auto checks the premise at a base epoch once this many trials (completed and shadows, in the order they
ended) have a value there: each check over exactly those first trials, at `check_level`."""
TOP_SHARE = 0.10
"""Regret counts pruned trials that would have reached this top share of the objective."""
DEFAULT_SHADOW_SHARE = 0.2
"""--shadow-share: the share of pruned trials that run on to the end, unseen by the pruner and sampler."""


@dataclass(frozen=True)
class Correlation:
    """Weighted Spearman rho at one base epoch, its interval, and the sample behind it."""

    r: float
    low: float
    high: float
    n: int
    """Trials (completed and shadows) with both values."""
    n_eff: float
    """Kish's effective n: the n of the interval."""


@dataclass(frozen=True)
class Regret:
    share: float
    """Weighted share of pruned trials that would have reached the top TOP_SHARE of the objective."""
    low: float
    high: float
    hits: int
    n: int
    """Clopper-Pearson's n: the pruned trials' Kish n, rounded (the shadow count when their weights are equal)."""
    threshold: float
    """The objective's weighted (1 - TOP_SHARE) quantile over completed trials and shadows."""


def _arrays(x: ArrayLike, y: ArrayLike, w: ArrayLike | None):
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    wa = np.ones_like(xa) if w is None else np.asarray(w, dtype=float)
    if not (xa.shape == ya.shape == wa.shape and xa.ndim == 1):
        raise ValueError(f"x, y and w must be 1-d and of one length, got {xa.shape}, {ya.shape}, {wa.shape}")
    keep = np.isfinite(xa) & np.isfinite(ya) & np.isfinite(wa) & (wa > 0)
    return xa[keep], ya[keep], wa[keep]


def kish_n(w: ArrayLike) -> float:
    """Kish's (1965) effective sample size of weights `w`: (sum w)^2 / sum w^2; len(w) when they are equal."""
    wa = np.asarray(w, dtype=float)
    return float(wa.sum() ** 2 / (wa**2).sum()) if len(wa) and (wa**2).sum() > 0 else 0.0


def weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted mid-ranks: the weight of the values below each value plus half the weight of those equal to it
    (itself included). With unit weights, the ordinary mid-ranks minus 1/2."""
    below = (x[None, :] < x[:, None]) * w[None, :]
    tied = (x[None, :] == x[:, None]) * w[None, :]
    return below.sum(axis=1) + tied.sum(axis=1) / 2


def weighted_spearman(x: ArrayLike, y: ArrayLike, w: ArrayLike | None = None) -> float:
    """Spearman's rho of (x, y) with weights `w` (None: equal): the weighted Pearson correlation of the weighted
    mid-ranks. NaN with fewer than 3 pairs or a constant variable. Non-finite pairs and non-positive weights are
    left out."""
    xa, ya, wa = _arrays(x, y, w)
    if len(xa) < 3:
        return math.nan
    rx, ry = weighted_ranks(xa, wa), weighted_ranks(ya, wa)
    p = wa / wa.sum()
    dx, dy = rx - p @ rx, ry - p @ ry
    sxx, syy = p @ (dx * dx), p @ (dy * dy)
    if sxx <= 0 or syy <= 0:
        return math.nan
    return float(np.clip(p @ (dx * dy) / math.sqrt(sxx * syy), -1.0, 1.0))


def spearman_interval(r: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Fisher's z-interval for Spearman's rho with Bonett & Wright's (2000) variance (1 + r^2/2) / (n - 3);
    (NaN, NaN) when n <= 3 or r is NaN. `n` may be an effective (non-integer) n."""
    from scipy.stats import norm

    if not math.isfinite(r) or not n > 3:
        return math.nan, math.nan
    z = math.atanh(min(max(r, -0.999999), 0.999999))
    half = norm.ppf(0.5 + level / 2) * math.sqrt((1 + r * r / 2) / (n - 3))
    return math.tanh(z - half), math.tanh(z + half)


def correlation(x: ArrayLike, y: ArrayLike, w: ArrayLike | None = None,
                level: float = LEVEL) -> Correlation:
    """`weighted_spearman` with its `spearman_interval` on Kish's effective n."""
    xa, ya, wa = _arrays(x, y, w)
    r = weighted_spearman(xa, ya, wa)
    n_eff = kish_n(wa)
    low, high = spearman_interval(r, n_eff, level)
    return Correlation(r, low, high, len(xa), n_eff)


def check_level(level: float = LEVEL, checks: Sequence[int] = CHECKS) -> float:
    """The confidence of each check's interval: `level`'s error split equally over the checks (its lower bound then
    errs with probability (1 - level) / 2 / len(checks))."""
    return 1 - (1 - level) / len(checks)


@dataclass(frozen=True)
class Check:
    """One premise check of --pruner auto at a base epoch."""

    at: int
    """The trials it is over: the first `at` to end with a value at that epoch."""
    correlation: Correlation
    """Over those trials, its interval at `check_level`."""
    holds: bool
    """Its lower bound is at least PREMISE_LOWER on an effective n of at least PREMISE_MIN_N."""


def premise_checks(x: ArrayLike, y: ArrayLike, w: ArrayLike | None = None, lower: float = PREMISE_LOWER,
                   checks: Sequence[int] = CHECKS, level: float = LEVEL) -> list[Check]:
    """The checks reached: for each count c of `checks` that the pairs (x, y) with both values reach, in the order
    given (the order the trials ended), the correlation of the first c at `check_level`, and whether it holds."""
    xa, ya, wa = _arrays(x, y, w)
    each = check_level(level, checks)
    out = []
    for c in sorted(checks):
        if len(xa) < c:
            break
        corr = correlation(xa[:c], ya[:c], wa[:c], each)
        out.append(Check(c, corr, bool(math.isfinite(corr.low) and corr.low >= lower and corr.n_eff >= PREMISE_MIN_N)))
    return out


def switched_on(checks: Sequence[Check]) -> Check | None:
    """The first check that held (the pruner is on from it on), or None (off)."""
    return next((c for c in checks if c.holds), None)


def _rho_rows(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`weighted_spearman` over the last axis of finite (..., n) arrays with positive weights, vectorised."""
    def ranks(v: np.ndarray) -> np.ndarray:
        below = ((v[..., None, :] < v[..., :, None]) * w[..., None, :]).sum(-1)
        return below + ((v[..., None, :] == v[..., :, None]) * w[..., None, :]).sum(-1) / 2

    p = w / w.sum(-1, keepdims=True)
    rx, ry = ranks(x), ranks(y)
    dx, dy = rx - (p * rx).sum(-1, keepdims=True), ry - (p * ry).sum(-1, keepdims=True)
    sxx, syy = (p * dx * dx).sum(-1), (p * dy * dy).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (p * dx * dy).sum(-1) / np.sqrt(sxx * syy)
    return np.where((sxx > 0) & (syy > 0), np.clip(r, -1.0, 1.0), np.nan)


def switched_on_rows(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, lower: float = PREMISE_LOWER,
                     checks: Sequence[int] = CHECKS, level: float = LEVEL, each: float | None = None) -> np.ndarray:
    """`premise_checks`' decision for many simulated studies at once (rows of x, y, w: finite, in the order the
    trials ended): the first check count that held, 0 where none did. `each`: every check's own level instead of
    `check_level` (to simulate a rule that does not split the error, as a check after every trial at 95%)."""
    from scipy.stats import norm

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float)
    z = norm.ppf(0.5 + (check_level(level, checks) if each is None else each) / 2)
    out = np.zeros(x.shape[:-1], dtype=int)
    for c in sorted(checks, reverse=True):  # the earliest that held wins
        if x.shape[-1] < c:
            continue
        r = _rho_rows(x[..., :c], y[..., :c], w[..., :c])
        n_eff = w[..., :c].sum(-1) ** 2 / (w[..., :c] ** 2).sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            zr = np.arctanh(np.clip(r, -0.999999, 0.999999))
            low = np.tanh(zr - z * np.sqrt((1 + r * r / 2) / (n_eff - 3)))
        out = np.where((low >= lower) & (n_eff >= PREMISE_MIN_N), c, out)
    return out


def weighted_quantile(v: ArrayLike, w: ArrayLike, q: float) -> float:
    """The smallest value whose cumulative weight share reaches q (the inverse of the weighted empirical CDF)."""
    va, wa = np.asarray(v, dtype=float), np.asarray(w, dtype=float)
    order = np.argsort(va, kind="stable")
    cum = np.cumsum(wa[order]) / wa.sum()
    return float(va[order][min(int(np.searchsorted(cum, q - 1e-12)), len(va) - 1)])


def pruning_regret(objective: ArrayLike, w: ArrayLike, pruned: Sequence[bool], top: float = TOP_SHARE,
                   level: float = LEVEL) -> Regret | None:
    """Of the pruned trials (the shadows, each weighted 1/s), the weighted share whose objective reaches the
    weighted (1 - top) quantile of all (completed trials, weight 1, and shadows); its Clopper-Pearson interval on
    n = round(Kish n of the pruned weights), hits = round(share * n). None without a pruned trial with a value."""
    from scipy.stats import binomtest

    v, wa = np.asarray(objective, dtype=float), np.asarray(w, dtype=float)
    pa = np.asarray(pruned, dtype=bool)
    keep = np.isfinite(v) & np.isfinite(wa) & (wa > 0)
    v, wa, pa = v[keep], wa[keep], pa[keep]
    if not pa.any():
        return None
    threshold = weighted_quantile(v, wa, 1 - top)
    reached = v[pa] >= threshold
    share = float(wa[pa] @ reached / wa[pa].sum())
    n = max(1, round(kish_n(wa[pa])))
    hits = min(n, round(share * n))
    ci = binomtest(hits, n).proportion_ci(confidence_level=level, method="exact")
    return Regret(share, float(ci.low), float(ci.high), hits, n, threshold)


def correlation_line(epoch: int, c: Correlation, against: str) -> str:
    """One line of the premise's table: the epoch, rho, its interval, n and the effective n."""
    if not math.isfinite(c.r):
        return f"  base epoch {epoch:>3}: {against}: too few trials (n = {c.n})"
    interval = (f"[{c.low:+.2f}, {c.high:+.2f}]" if math.isfinite(c.low) else "[no interval: effective n <= 3]")
    return (f"  base epoch {epoch:>3}: Spearman rho with {against} {c.r:+.2f}, 95% CI {interval}, n = {c.n} "
            f"(effective n {c.n_eff:.1f})")


def regret_line(r: Regret | None) -> str:
    if r is None:
        return "  pruning regret: no pruned trial ran on (no shadow), so it is not measured"
    return (f"  pruning regret: {100 * r.share:.0f}% of pruned trials would have reached the top "
            f"{100 * TOP_SHARE:.0f}% of the objective (>= {r.threshold:.4g}), 95% CI [{100 * r.low:.0f}%, "
            f"{100 * r.high:.0f}%] (Clopper-Pearson; {r.hits} of {r.n} shadows)")
