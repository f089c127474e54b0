"""Aggregates of one comparison X vs Y over tasks with few runs each: the interquartile mean and the mean of the
per-seed differences, and the paired probability of improvement, each with an interval whose coverage holds at 3
runs per task (measured: docs/statistics.md, tests/adbs_lab/stats/test_aggregate.py).

A *task* is one setting the comparison ran in (a dataset, a host, a k-shot cell: adbs_lab/results/across_tasks.py
says which); a *run* is one seed both rows completed in one task, so X and Y pair seed by seed (the same data draw
and initialisation). Like is aggregated with like: tasks sit at different levels (datasets tens of points apart),
so each run enters as its per-seed difference X - Y from its own task's reference row, never as a raw accuracy
pooled across tasks (whose trim would cut whole datasets; Agarwal, Schwarzer, Castro, Courville & Bellemare 2021,
"Deep reinforcement learning at the edge of the statistical precipice", NeurIPS, pool normalised scores for that
reason). A task with fewer than MIN_RUNS runs is left out by the caller, and named.

- **IQM of the differences** (`iqm_difference`): the 25% trimmed mean of all runs' differences pooled (the
  interquartile mean Agarwal et al. recommend: one outlying seed moves it little), and the percentile bootstrap
  interval of the trimmed mean (Efron 1979, "Bootstrap methods: another look at the jackknife", Ann. Statist. 7:1;
  for a trimmed mean of 20% or more Wilcox's choice: Wilcox 2017, Introduction to Robust Estimation and Hypothesis
  Testing, 4th ed., ch. 4) at Hesterberg's expanded level (Hesterberg 2015, Amer. Statist. 69:371: the level
  whose normal quantile is √(N / (N - 1)) t_{N-1}), which corrects the percentile interval's narrowness at a few
  runs. It replaced Yuen's trimmed t (Tukey & McLaughlin 1963, Sankhyā A 25:331; Yuen 1974, Biometrika 61:165:
  winsorized variance, h - 1 df; `yuen_bounds`, kept to measure against), which covered 93.6% at 12 runs of one
  distribution and about 90% on the grid where the trimming points fall on atoms (docs/statistics.md). Pooling
  treats the runs as one sample of the tasks' mixture, which overstates the variance of a sample stratified by
  task: conservative where the tasks differ.
- **Mean of the task means** (`mean_difference`): the mean over tasks of each task's mean difference, and its
  t-interval with Satterthwaite's degrees of freedom (Satterthwaite 1946, "An approximate distribution of estimates
  of variance components", Biometrics Bulletin 2:110) for the sum of the tasks' variances of the mean.
- **Paired probability of improvement** (`improvement_interval`): per task the probability that X beats Y on a seed,
  P(X > Y) + P(X = Y)/2 (a tie counts half), averaged over tasks. Its interval is Clopper & Pearson's (1934, "The use
  of confidence or fiducial limits illustrated in the case of the binomial", Biometrika 26:404) on the two binomial
  proportions that bracket it: the lower end bounds P(X > Y) (ties counted as losses), the upper end P(X >= Y)
  (ties as wins). A half-count is not a binomial count, so it enters no Clopper-Pearson bound; with no tie the two
  are one. With equal runs per task the counts are pooled over tasks: a sum of Bernoulli trials of different
  probabilities is more concentrated than the binomial of their mean (Hoeffding 1956, "On the distribution of the
  number of successes in independent trials", Ann. Math. Statist. 27:713), so the pooled bound holds for the mean
  over tasks. With unequal runs each task's bounds are at α/T (Bonferroni over the T tasks) and the mean of the
  bounds bounds the mean. 12 wins of 12 seeds give a lower end of 0.735 at 95%, not 1.

Pure functions on numbers (numpy, scipy); the vectorised forms (`percentile_bounds`, `yuen_bounds`, `mean_bounds`,
`improvement_bounds`) take a leading axis of simulated studies. The bootstrap's
resampled positions are drawn from BOOTSTRAP_SEED and the number of runs, never from the data, and the runs are
sorted first: the same runs, in any order, give the same interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
from scipy import stats

from adbs_lab.stats.verdicts import spread_floor

__all__ = ["Runs", "MIN_RUNS", "TRIM", "NO_SPREAD", "RESAMPLES", "MAX_RESAMPLED", "IQM_METHOD", "RANGE_METHOD",
           "BOOTSTRAP_SEED", "Interval", "differences", "wins_ties", "yuen_bounds", "expanded_level", "percentile_bounds",
           "mean_bounds", "improvement_bounds", "iqm_difference", "mean_difference", "improvement_interval",
           "trim_weights"]

Runs = Union[Sequence[float], np.ndarray]
"""One task's values: a run per seed."""

MIN_RUNS = 3
"""A task with fewer paired runs is left out of the aggregates (and named): two runs give a spread on one degree of
freedom, and with a single run the task says nothing of its noise."""
TRIM = 0.25
"""The share cut from each end: the interquartile mean."""
RESAMPLES = 2000
"""The fewest bootstrap resamples (`percentile_bounds`), Wilcox's number for a percentile interval; more where the
interval's ends lie further out, so that 50 resamples lie beyond each (at most MAX_RESAMPLED runs)."""
MAX_RESAMPLED = 20_000_000
"""The most resampled runs, resamples x runs (`percentile_bounds`; 160 MB of weights): an end so far out that 50
resamples beyond it take more (a Bonferroni level over a few runs: 6 runs at 1 - 0.05/10 put it near 1e-7 of the
bootstrap distribution, 5.9e8 resamples, 28 GB, which killed the process) is not resolved, and the interval is the
runs' range instead, which holds every quantile of that distribution (RANGE_METHOD)."""
RANGE_METHOD = "the runs' range: the expanded level lies beyond what the bootstrap's resamples resolve"
"""The IQM's `method` where its interval is the runs' range (`percentile_bounds`, MAX_RESAMPLED)."""
IQM_METHOD = "expanded percentile bootstrap"
"""The IQM's `method` where it has an interval (`percentile_bounds`)."""
BOOTSTRAP_SEED = 2026
"""The seed of the bootstrap's resampled positions (with the number of runs): the same runs give the same interval
(`percentile_bounds`)."""
NO_SPREAD = "no spread: the differences it rests on are all the same, no interval"
"""An aggregate's `method` where its differences do not spread (`yuen_bounds`, `mean_bounds`): the line says why,
as a verdict's does (adbs_lab/stats/verdicts.py: why_no_interval)."""


@dataclass(frozen=True)
class Interval:
    """A statistic over tasks and its interval."""

    estimate: float
    lo: float
    hi: float
    level: float
    """The interval's confidence, e.g. 0.95."""
    runs: tuple[int, ...]
    """The paired runs of each task the statistic used."""
    method: str = ""
    """How the interval was made, as the lines say it."""

    @property
    def n(self) -> int:
        return int(sum(self.runs))


def differences(pairs: Sequence[tuple[Runs, Runs]]) -> list[np.ndarray]:
    """Per task the differences x - y of the seed pairs (aligned) where both sides are finite."""
    out = []
    for x, y in pairs:
        a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        ok = np.isfinite(a) & np.isfinite(b)
        out.append(a[ok] - b[ok])
    return out


def wins_ties(pairs: Sequence[tuple[Runs, Runs]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wins, ties, runs) per task: seeds where x > y, x == y, and the finite pairs."""
    d = differences(pairs)
    return (np.array([(t > 0).sum() for t in d]), np.array([(t == 0).sum() for t in d]), np.array([t.size for t in d]))


def _winsorized_sd(x: np.ndarray, g: int) -> np.ndarray:
    """The SD over the last axis of sorted runs `x` with the g lowest set to the next one up and the g highest to the
    next one down: the winsorized values, whose spread both intervals of the trimmed mean read."""
    n = x.shape[-1]
    return np.clip(x, x[..., g:g + 1], x[..., n - g - 1:n - g]).std(axis=-1, ddof=1)


def yuen_bounds(d: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trimmed mean, lo, hi) over the last axis (all finite, N >= 2): Yuen's trimmed-mean t-interval; NaN ends
    where the winsorized values do not spread (adbs_lab/stats/verdicts.py: spread_floor)."""
    x = np.sort(np.asarray(d, dtype=float), axis=-1)
    n = x.shape[-1]
    g = int(TRIM * n)
    h = n - 2 * g
    est = x[..., g:n - g].mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sw = _winsorized_sd(x, g)
        se = np.sqrt((n - 1) * sw ** 2 / (h * (h - 1)))
        half = stats.t.ppf(1 - (1 - level) / 2, h - 1) * se if h >= 2 else np.full(np.shape(est), np.nan)
    # differences on the accuracy grid often tie through the middle half: a zero-width interval there missed the
    # grid's IQM in 46% of comparisons (tests/adbs_lab/stats/test_attack_corners.py); no spread, no interval
    half = np.where(sw > spread_floor(), half, np.nan)
    return est, est - half, est + half


@functools.lru_cache(maxsize=32)
def trim_weights(n: int, b: int) -> np.ndarray:
    """(b, n): row r weights the sorted runs by how often resample r puts each among its kept middle h, over h.
    Resampling sorted runs and sorting the resample keeps them in order, so a resample's trimmed mean is the sorted
    runs times its row: the positions are drawn once per (n, b), from BOOTSTRAP_SEED, and never from the data."""
    g = int(TRIM * n)
    h = n - 2 * g
    pos = np.sort(np.random.default_rng([BOOTSTRAP_SEED, n]).integers(0, n, (b, n)), axis=-1)[:, g:n - g]
    w = np.zeros((b, n))
    np.add.at(w, (np.repeat(np.arange(b), h), pos.ravel()), 1.0 / h)
    w.setflags(write=False)
    return w


def expanded_level(level: float, n: int) -> float:
    """Hesterberg's expanded level for a percentile interval from n runs: the level whose normal quantile is
    √(n / (n - 1)) t_{n-1}, the one a t-interval of the mean would use (Hesterberg 2015, "What teachers should know
    about the bootstrap: resampling in the undergraduate statistics curriculum", Amer. Statist. 69:371): the
    percentile interval is too narrow by those two factors at a few runs."""
    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - level) / 2, n - 1)
    return float(1 - 2 * stats.norm.sf(z))


def _tail(level: float, n: int, expand: bool = True) -> float:
    """The share of the bootstrap distribution beyond each end of `percentile_bounds`'s interval."""
    return (1 - (expanded_level(level, n) if expand else level)) / 2


def _resolved(a: float, n: int) -> bool:
    """Whether resamples of n runs resolve a tail of share a: 50 resamples beyond it within MAX_RESAMPLED."""
    return a > 0 and math.ceil(50 / a) * n <= MAX_RESAMPLED


def percentile_bounds(d: np.ndarray, level: float, expand: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trimmed mean, lo, hi) over the last axis (all finite, N >= 2): the percentile bootstrap of the 25% trimmed
    mean (Wilcox 2017, Introduction to Robust Estimation and Hypothesis Testing, 4th ed., ch. 4, `trimpb`), at
    `expanded_level` unless not `expand`, with at least RESAMPLES resamples and 50 beyond each end (the runs' range
    where that takes more than MAX_RESAMPLED); NaN ends where the winsorized values do not spread, as
    `yuen_bounds`."""
    x = np.sort(np.asarray(d, dtype=float), axis=-1)
    n = x.shape[-1]
    g = int(TRIM * n)
    a = _tail(level, n, expand)
    flat = x.reshape(-1, n)
    ends = np.stack([flat[:, 0], flat[:, -1]])  # the range: every resample's trimmed mean lies in it
    if _resolved(a, n):
        w = trim_weights(n, max(RESAMPLES, math.ceil(50 / a)))
        chunk = max(1, 4_000_000 // w.shape[0])  # (chunk, resamples) at a time: a simulation's studies fit in memory
        for i in range(0, flat.shape[0], chunk):
            ends[:, i:i + chunk] = np.quantile(flat[i:i + chunk] @ w.T, [a, 1 - a], axis=-1)
    spread = _winsorized_sd(x, g) > spread_floor()
    lo, hi = (np.where(spread, e.reshape(x.shape[:-1]), np.nan) for e in ends)
    return x[..., g:n - g].mean(axis=-1), lo, hi


def mean_bounds(tasks: Sequence[np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean of the task means, lo, hi) of per-task differences, each shaped (..., runs of that task) with at least
    2 runs: the t-interval with Satterthwaite's degrees of freedom for the sum of the tasks' variances of the
    mean; NaN ends where no task spreads (adbs_lab/stats/verdicts.py: spread_floor), as a zero-width interval
    would claim its level with nothing to rest on."""
    n = np.array([t.shape[-1] for t in tasks], dtype=float)
    means = np.stack([np.asarray(t, dtype=float).mean(axis=-1) for t in tasks], axis=-1)
    v = np.stack([np.asarray(t, dtype=float).var(axis=-1, ddof=1) for t in tasks], axis=-1) / n
    est = means.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(v.sum(axis=-1)) / len(tasks)
        df = v.sum(axis=-1) ** 2 / (v ** 2 / (n - 1)).sum(axis=-1)
        half = stats.t.ppf(1 - (1 - level) / 2, df) * se
    spread = np.any(np.sqrt(v * n) > spread_floor(), axis=-1)
    half = np.where(spread, half, np.nan)
    return est, est - half, est + half


def _cp_lower(k: np.ndarray, n: np.ndarray, q: float | np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(k > 0, stats.beta.ppf(q, np.maximum(k, 1), n - k + 1), 0.0)


def _cp_upper(k: np.ndarray, n: np.ndarray, q: float | np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(k < n, stats.beta.ppf(1 - q, k + 1, np.maximum(n - k, 1)), 1.0)


def improvement_bounds(wins: np.ndarray, ties: np.ndarray, runs: np.ndarray,
                       level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, lo, hi) of the paired probability of improvement from per-task counts shaped (..., tasks) (every
    task with a run): Clopper-Pearson on P(X > Y) for lo and on P(X >= Y) for hi, pooled over tasks where their runs
    are equal, else per task at α/T and averaged (module docstring)."""
    w, t, n = (np.asarray(a, dtype=float) for a in (wins, ties, runs))
    tasks = n.shape[-1]
    a = 1 - level
    est = ((w + t / 2) / n).mean(axis=-1)
    pooled_lo = _cp_lower(w.sum(-1), n.sum(-1), a / 2)
    pooled_hi = _cp_upper((w + t).sum(-1), n.sum(-1), a / 2)
    per_lo = _cp_lower(w, n, a / (2 * tasks)).mean(axis=-1)
    per_hi = _cp_upper(w + t, n, a / (2 * tasks)).mean(axis=-1)
    equal = np.all(n == n[..., :1], axis=-1)
    return est, np.where(equal, pooled_lo, per_lo), np.where(equal, pooled_hi, per_hi)


def _kept(pairs: Sequence[tuple[Runs, Runs]]) -> list[np.ndarray]:
    """The tasks' differences, a task with fewer than MIN_RUNS finite pairs left out (the caller names it)."""
    return [d for d in differences(pairs) if d.size >= MIN_RUNS]


def iqm_difference(pairs: Sequence[tuple[Runs, Runs]], level: float = 0.95) -> Interval:
    """The IQM of the per-seed differences X - Y pooled over the tasks with at least MIN_RUNS pairs, and its expanded
    percentile bootstrap interval (`percentile_bounds`)."""
    d = _kept(pairs)
    runs = tuple(x.size for x in d)
    if not d:
        return Interval(math.nan, math.nan, math.nan, level, runs, "")
    est, lo, hi = percentile_bounds(np.concatenate(d), level)
    how = IQM_METHOD if _resolved(_tail(level, sum(runs)), sum(runs)) else RANGE_METHOD
    return Interval(float(est), float(lo), float(hi), level, runs, how if np.isfinite(lo) else NO_SPREAD)


def mean_difference(pairs: Sequence[tuple[Runs, Runs]], level: float = 0.95) -> Interval:
    """The mean over the tasks with at least MIN_RUNS pairs of each one's mean difference X - Y, and its
    Satterthwaite t-interval."""
    d = _kept(pairs)
    runs = tuple(x.size for x in d)
    if not d:
        return Interval(math.nan, math.nan, math.nan, level, runs, "")
    est, lo, hi = mean_bounds(d, level)
    return Interval(float(est), float(lo), float(hi), level, runs, "Satterthwaite t" if np.isfinite(lo) else NO_SPREAD)


def improvement_interval(pairs: Sequence[tuple[Runs, Runs]], level: float = 0.95) -> Interval:
    """The paired probability of improvement over the tasks with at least MIN_RUNS pairs, and its Clopper-Pearson
    bracket."""
    w, t, n = wins_ties(pairs)
    keep = n >= MIN_RUNS
    runs = tuple(int(k) for k in n[keep])
    if not keep.any():
        return Interval(math.nan, math.nan, math.nan, level, runs, "")
    est, lo, hi = improvement_bounds(w[keep], t[keep], n[keep], level)
    how = "Clopper-Pearson on the wins pooled over tasks" if len(set(runs)) == 1 else \
        f"Clopper-Pearson per task at 1/{len(runs)} of the error, bounds averaged"
    return Interval(float(est), float(lo), float(hi), level, runs, how)
