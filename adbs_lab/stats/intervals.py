"""Every t-interval the verdicts, tables, figures and bench scripts print: one function each.

- `paired_t`: the paired t-interval of Student (1908) over per-seed differences, mean ± t_{1-a/2, n-1} s / √n,
  vectorised over the last axis (the verdicts and their simulations run the same code); a value that is not finite
  is left out and counted, and fewer than `MIN_PAIRS` values give no interval.
- `welch_t`: the unpaired interval for mean(a) - mean(b): Welch's standard error with the Welch-Satterthwaite degrees
  of freedom (Welch 1947, "The generalization of 'Student's' problem when several different population variances are
  involved", Biometrika 34:28), or the conservative min(n_a, n_b) - 1 where a side has fewer than
  `conservative_below` runs (Hsu 1938; conservative at any ratio of the variances: Mickey & Brown 1966, "Bounds on the
  distribution functions of the Behrens-Fisher statistic", Ann. Math. Statist. 37:639).
- `mean_t`: a table cell's mean ± half-width over a row's seeds at `DESCRIPTIVE_LEVEL`: unadjusted and descriptive
  (how far a row's seeds spread), never a verdict: the verdicts' intervals are adjusted for their family
  (adbs_lab/stats/verdicts.py: family_verdicts). Summed in order, as the tables always printed it (numpy's pairwise sum
  can round a mean ending in ...5 the other way in the last printed digit), so it is kept apart from `paired_t`.

The quantile is scipy.special.stdtrit, which is what scipy.stats.t.ppf computes for 0 < q < 1 and df > 0 (and NaN
for a NaN df), bit for bit, without importing scipy.stats (about a second on a loaded machine).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import special

__all__ = ["DESCRIPTIVE_LEVEL", "MIN_PAIRS", "t_quantile", "finite_moments", "paired_t", "welch_t", "mean_t"]

DESCRIPTIVE_LEVEL = 0.95
"""The level of the per-cell bands of tables and figures: unadjusted, descriptive (the verdicts carry the family's
guarantee)."""
MIN_PAIRS = 2
"""The fewest finite values a t-interval is made from (for an unpaired one, on each side)."""


def t_quantile(q: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """Student's t quantile: scipy.stats.t.ppf(q, df), bit for bit (module docstring)."""
    return special.stdtrit(df, q)


def finite_moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, mean, sample variance) of the finite values over the last axis (NaN mean with none, NaN variance with
    fewer than 2): what every interval over seeds and the spread check read (adbs_lab/stats/verdicts.py: no_spread;
    adbs_lab/stats/confseq.py)."""
    x = np.asarray(values, dtype=float)
    ok = np.isfinite(x)
    n = ok.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(ok, x, 0.0).sum(axis=-1) / n
        var = (np.where(ok, x - est[..., None], 0.0) ** 2).sum(axis=-1) / (n - 1)
    return n, est, var


def paired_t(values: np.ndarray, a: float) -> tuple[np.ndarray, ...]:
    """(estimate, lo, hi, n, n_left_out) of the paired t-interval at error rate a over the last axis of `values`;
    non-finite values are left out and counted, and n < MIN_PAIRS gives NaN ends."""
    x = np.asarray(values, dtype=float)
    n, est, var = finite_moments(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(n >= MIN_PAIRS, n - 1, np.nan)  # no spread from one value: no interval
        half = t_quantile(1.0 - a / 2.0, df) * np.sqrt(var / n)
    return est, est - half, est + half, n, x.shape[-1] - n


def welch_t(a: np.ndarray, b: np.ndarray, err: float, conservative_below: int = 0) -> tuple[np.ndarray, ...]:
    """(estimate, lo, hi, df) of the unpaired t-interval for mean(a) - mean(b) at error rate `err` over the last
    axis (all finite, each side at least MIN_PAIRS): Welch-Satterthwaite df, or min(n_a, n_b) - 1 where a side has
    fewer than `conservative_below` runs; no spread on either side: df n_a + n_b - 2 (the interval is the point)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    nx, ny = x.shape[-1], y.shape[-1]
    vx, vy = x.var(axis=-1, ddof=1) / nx, y.var(axis=-1, ddof=1) / ny
    se = np.sqrt(vx + vy)
    with np.errstate(invalid="ignore", divide="ignore"):
        ws = (vx + vy) ** 2 / (vx ** 2 / (nx - 1) + vy ** 2 / (ny - 1))
    df = np.where(se > 0, ws, nx + ny - 2) if min(nx, ny) >= conservative_below else \
        np.full(np.shape(se), min(nx, ny) - 1.0)
    half = t_quantile(1.0 - err / 2.0, df) * se
    est = x.mean(axis=-1) - y.mean(axis=-1)
    return est, est - half, est + half, df


def _finite(v: object) -> bool:
    """A number (not a bool, not None or a string) that is finite."""
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            and math.isfinite(float(v)))


def mean_t(values: Sequence[float], level: float = DESCRIPTIVE_LEVEL) -> tuple[float, float]:
    """A table cell: the mean of the finite values and the half-width of their t-interval at `level` (n - 1 degrees
    of freedom; 0 for one value, NaN for none)."""
    vals = [float(v) for v in values if _finite(v)]
    if not vals:
        return math.nan, math.nan
    mean = sum(vals) / len(vals)  # in order (module docstring)
    if len(vals) == 1:
        return mean, 0.0
    sem = float(np.std(vals, ddof=1)) / math.sqrt(len(vals))
    return mean, float(t_quantile(0.5 + level / 2, len(vals) - 1) * sem)
