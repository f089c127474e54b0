"""An anytime-valid confidence sequence for a paired mean with unknown variance: the route a continuation could take
without a horizon, simulated against the spending plans (bench/continuation_simulation.py; docs/statistics.md,
"Continuing a study").

The construction is the Gaussian mixture of scale-invariant likelihood ratios of Wang & Ramdas (2023,
"Anytime-valid t-tests and confidence sequences for Gaussian means with unknown variance", arXiv:2310.03722,
Sequential Analysis; Theorem 4.9 of the arXiv version, building on Lai 1976, "On confidence sequences", Annals of
Statistics 4:265). For differences x_1, ..., x_n and a candidate mean μ, with S_n = Σ (x_i - μ) and
V_n = Σ (x_i - μ)², the process

    G_n(μ) = √(c² / (n + c²)) · ((n + c²) V_n / ((n + c²) V_n - S_n²))^(n/2)

is a nonnegative martingale with G_1 = 1 under the true μ, whatever σ, in the filtration of the scale-invariant
statistics (x_1 - μ, ..., x_n - μ) / ‖x - μ‖: it is the likelihood ratio of those statistics under a N(0, 1/c²)
prior on the standardised mean θ = (μ' - μ)/σ against θ = 0 (integrating σ out by the right Haar measure dσ/σ and θ
by the prior). By Ville's inequality P(∃n: G_n(μ) ≥ 1/a) ≤ a, so CS_n = {μ: G_n(μ) < 1/a} covers μ at every n at
once with probability ≥ 1 - a: valid at any look, any stopping rule, any number of continuations (a bound over all
n implies one at any random n, so the reduced filtration costs nothing here).

Solved for μ (S_n = n d, V_n = (n - 1) s² + n d², d = x̄ - μ), CS_n is x̄ ± s · f(n), with

    K = a^(2/n) (c² / (n + c²))^(1/n),   B = (1 - K)(n + c²),   f(n) = √(B (n - 1) / (n (n - B)))   (B < n),

and the whole line when B ≥ n (checked against a root-finder on G_n in tests/adbs_lab/stats/test_confseq.py). The
prior precision c² is fixed before any data; `tuned_precision` picks the one narrowest at a chosen n (the cap).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from adbs_lab.stats.intervals import finite_moments
from adbs_lab.stats.verdicts import CODE, Label, classify

__all__ = ["martingale", "factor", "tuned_precision", "bounds", "replay"]


def martingale(x: np.ndarray, mu: float, c2: float) -> float:
    """G_n(μ) of the differences `x` (all finite), in logs to stay finite: log G_n."""
    y = np.asarray(x, dtype=float) - mu
    n, s, v = len(y), float(y.sum()), float((y * y).sum())
    return 0.5 * math.log(c2 / (n + c2)) + 0.5 * n * math.log((n + c2) * v / ((n + c2) * v - s * s))


def factor(n: int | np.ndarray, a: float, c2: float) -> np.ndarray:
    """f(n): CS_n's half-width in units of the sample SD s, at error rate a (inf where CS_n is the whole line)."""
    n_ = np.asarray(n, dtype=float)
    k = a ** (2.0 / n_) * (c2 / (c2 + n_)) ** (1.0 / n_)
    b = (1.0 - k) * (c2 + n_)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.sqrt(b * (n_ - 1.0) / (n_ * (n_ - b)))
    return np.where((b < n_) & (n_ >= 2), f, np.inf)


def tuned_precision(n: int, a: float) -> float:
    """The prior precision c² that makes CS_n narrowest at n seeds and error rate a (fixed before the data)."""
    res = optimize.minimize_scalar(lambda lc: float(factor(n, a, math.exp(lc))), bounds=(-8.0, 5.0), method="bounded")
    return float(math.exp(res.x))


def bounds(values: np.ndarray, a: float, c2: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, lo, hi, n) of CS_n over the last axis of `values` (non-finite values left out; n < 2: no bounds)."""
    n, est, var = finite_moments(values)
    s = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = factor(np.maximum(n, 2), a, c2)
        half = np.where(n >= 2, np.where(np.isinf(f), np.inf, f * s), np.nan)  # inf · 0 (no spread): the line
    return est, est - half, est + half, n


def replay(values: np.ndarray, sizes: tuple[int, ...], a: float, c2: float, delta: float) -> dict[str, np.ndarray]:
    """The verdicts the confidence sequence gives at the looks `sizes` (each comparison at error rate a, e.g. α/m):
    the first look that resolves a comparison freezes its verdict, as `verdicts.replay` does for the t-intervals.
    Returns "code" and "n_seeds" (the look's seeds, or the last look's when unresolved)."""
    x = np.asarray(values, dtype=float)
    shape = x.shape[:-1]
    code = np.full(shape, CODE[Label.NOT_RESOLVED])
    at = np.full(shape, 0)
    open_ = np.ones(shape, dtype=bool)
    for size in sizes:
        if size > x.shape[-1]:
            break
        _, lo, hi, _ = bounds(x[..., :size], a, c2)
        c = classify(np.where(np.isinf(lo), np.nan, lo), np.where(np.isinf(hi), np.nan, hi), delta)
        code, at = np.where(open_, c, code), np.where(open_, size, at)
        open_ &= c == CODE[Label.NOT_RESOLVED]
    return {"code": code, "n_seeds": at}
