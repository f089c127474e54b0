"""Aggregates over tasks with few runs each: the interquartile mean and the paired probability of improvement,
with stratified-bootstrap intervals (Agarwal, Schwarzer, Castro, Courville & Bellemare 2021, "Deep reinforcement
learning at the edge of the statistical precipice", NeurIPS; their library is rliable).

A *task* is one setting a comparison was run in (a dataset, a host, a k-shot cell: adbs_lab/results/across_tasks.py
says which); a *run* is one seed of one row in one task. Pure functions of lists of per-task values (numpy, scipy).

- **IQM** (interquartile mean): the mean of the middle 50% of all runs of all tasks pooled, i.e. the 25% trimmed mean
  (`scipy.stats.trim_mean(x, 0.25)`, as rliable computes it). Agarwal et al. recommend it over the mean (one
  outlying run moves it little) and over the median (it uses half the runs, not one or two, so its interval is
  narrower at 3-10 runs per task).
- **Paired probability of improvement**: per task, the share of the seeds both rows ran where X beats Y (a tie
  counts half), then the mean over tasks. rliable's P(X > Y) compares every run of X with every run of Y
  (Mann-Whitney); here a seed is the same data draw and initialisation for both rows, so the comparison pairs them,
  the way the verdicts do (adbs_lab/stats/verdicts.py).
- **Stratified bootstrap**: resample the runs (for the probability of improvement, the seed pairs) with
  replacement *within* each task, keeping each task's count, and take the percentile interval of the statistic over
  the resamples (rliable's default; Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).
  Stratifying keeps every task in every resample, so the interval is about the runs' noise with the tasks fixed.
  `scipy.stats.bootstrap` resamples whole observations and cannot stratify over tasks of different sizes; rliable
  itself needs arch (with statsmodels), seaborn and pandas, which this layer never imports; so it is done here in
  numpy. The plain percentile interval undercovers with few runs per task (84% at 95% with 3 runs in 4 tasks), so
  its ends are read at Hesterberg's expanded level (`expanded_level`). Measured coverage: docs/statistics.md
  (adbs_lab/stats/simulate.py: aggregate_coverage).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np
from scipy import stats

__all__ = ["Runs", "REPS", "FEW_RUNS", "Interval", "iqm", "improvement", "iqm_interval", "improvement_interval",
           "stratified_statistic", "expanded_level"]

Runs = Union[Sequence[float], np.ndarray]
"""One task's values: a run per seed."""

REPS = 5000
"""Bootstrap resamples: the percentile ends at α/2 = 0.025 then rest on 125 resamples each, and on 25 at a
Bonferroni-adjusted α/2 of 0.005."""
FEW_RUNS = 5
"""Fewer runs than this in some task: the intervals undercover (measured, docs/statistics.md), and the report warns."""


@dataclass(frozen=True)
class Interval:
    """A statistic over tasks and its stratified-bootstrap percentile interval."""

    estimate: float
    lo: float
    hi: float
    level: float
    """The interval's confidence, e.g. 0.95."""
    runs: tuple[int, ...]
    """The runs (or seed pairs) of each task the statistic used."""

    @property
    def n(self) -> int:
        return int(sum(self.runs))


def _finite(tasks: Sequence[Runs]) -> list[np.ndarray]:
    """Each task's finite values (a diverged run has none: it is left out, and the caller counts it)."""
    out = [np.asarray(t, dtype=float) for t in tasks]
    return [t[np.isfinite(t)] for t in out]


def iqm(tasks: Sequence[Runs]) -> float:
    """The interquartile mean of all runs of all tasks pooled (NaN without a run)."""
    pooled = np.concatenate(_finite(tasks)) if len(tasks) else np.array([])
    return float(stats.trim_mean(pooled, 0.25)) if pooled.size else math.nan


def _wins(x: Runs, y: Runs) -> np.ndarray:
    """Per seed pair: 1 where x beats y, 1/2 on a tie, 0 otherwise; pairs with a non-finite side are left out."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    return (a[ok] > b[ok]) + 0.5 * (a[ok] == b[ok])


def improvement(pairs: Sequence[tuple[Runs, Runs]]) -> float:
    """P(X > Y): per task the share of paired seeds where X beats Y (ties half), averaged over the tasks that have a
    pair. `pairs`: per task (X's values, Y's values), aligned seed by seed."""
    shares = [w.mean() for w in (_wins(x, y) for x, y in pairs) if w.size]
    return float(np.mean(shares)) if shares else math.nan


def stratified_statistic(tasks: Sequence[np.ndarray], statistic: str, reps: int = REPS,
                         rng: np.random.Generator | None = None) -> np.ndarray:
    """`reps` bootstrap replicates of `statistic` ("iqm": of the pooled values; "mean of task means": of the per-task
    means, for the probability of improvement's per-seed wins), each task's values resampled with replacement within
    the task, its size kept."""
    rng = rng if rng is not None else np.random.default_rng(0)
    draws = [t[rng.integers(0, t.size, size=(reps, t.size))] for t in tasks if t.size]
    if not draws:
        return np.full(reps, math.nan)
    if statistic == "iqm":
        return stats.trim_mean(np.concatenate(draws, axis=1), 0.25, axis=1)
    if statistic == "mean of task means":
        return np.mean([d.mean(axis=1) for d in draws], axis=0)
    raise ValueError(f"unknown statistic {statistic!r}")


def expanded_level(level: float, runs: Sequence[int]) -> float:
    """The percentile level that makes a stratified bootstrap's interval hold `level`: Hesterberg's expanded
    percentile interval (Hesterberg 2015, "What teachers should know about the bootstrap", The American Statistician
    69:371), z' = √(n/(n-1)) · t_{1-α/2, df}. The bootstrap's spread uses each task's plug-in variance (divisor n,
    not n - 1) and normal tails where the runs give a t with df = Σ(n_m - 1); with 3-5 runs per task the plain
    percentile interval covers 84-90% at 95% (measured, docs/statistics.md). n is the fewest runs of any task
    (the widest correction); `level` itself when a task has a single run (no df to correct with)."""
    runs = [r for r in runs if r > 0]  # a task without a run is in no resample: it neither widens nor narrows
    n, df = min(runs) if runs else 0, sum(r - 1 for r in runs)
    if n < 2 or df < 1:
        return level
    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - level) / 2, df)
    return float(1 - 2 * stats.norm.sf(z))


def _interval(estimate: float, boot: np.ndarray, level: float, runs: tuple[int, ...], expand: bool) -> Interval:
    a = (1 - (expanded_level(level, runs) if expand else level)) / 2
    ok = boot[np.isfinite(boot)]
    # one run in every task: each replicate is the estimate itself, a zero-width "interval" that knows no spread
    if not ok.size or not math.isfinite(estimate) or max(runs, default=0) < 2:
        return Interval(estimate, math.nan, math.nan, level, runs)
    return Interval(estimate, float(np.quantile(ok, a)), float(np.quantile(ok, 1 - a)), level, runs)


def iqm_interval(tasks: Sequence[Runs], level: float = 0.95, reps: int = REPS, seed: int = 0,
                 expand: bool = True) -> Interval:
    """The IQM of the tasks' runs and its stratified-bootstrap percentile interval at `level` (expanded, unless
    `expand` is False: the plain percentile interval, rliable's, kept to measure what the expansion buys)."""
    vals = _finite(tasks)
    boot = stratified_statistic(vals, "iqm", reps, np.random.default_rng(seed))
    return _interval(iqm(vals), boot, level, tuple(v.size for v in vals), expand)


def improvement_interval(pairs: Sequence[tuple[Runs, Runs]], level: float = 0.95,
                         reps: int = REPS, seed: int = 0, expand: bool = True) -> Interval:
    """The paired probability of improvement and its interval: the seed pairs resampled within each task."""
    wins = [_wins(x, y) for x, y in pairs]
    boot = stratified_statistic(wins, "mean of task means", reps, np.random.default_rng(seed))
    return _interval(improvement(pairs), boot, level, tuple(w.size for w in wins), expand)
