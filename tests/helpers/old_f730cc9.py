"""The statistics as commit f730cc9 computed them, copied verbatim in substance (names prefixed `old_`), so that each
simulation test of the corners can be pointed at the old rule and show the failure it fixed. Not used by any
code: only by the tests that compare (tests/adbs_lab/stats/test_corners_*.py)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

OLD_REPS = 1000
"""Bootstrap resamples for the old intervals in the tests (f730cc9 used 5,000; its docs' table 1,000)."""


def old_expanded_level(level: float, runs: Sequence[int]) -> float:
    """f730cc9 adbs_lab/stats/aggregate.py expanded_level: Hesterberg's expansion, off where a task has one run."""
    runs = [r for r in runs if r > 0]
    n, df = min(runs) if runs else 0, sum(r - 1 for r in runs)
    if n < 2 or df < 1:
        return level
    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - level) / 2, df)
    return float(1 - 2 * stats.norm.sf(z))


def _old_interval(estimate: float, boot: np.ndarray, level: float, runs: tuple[int, ...]) -> tuple[float, float]:
    a = (1 - old_expanded_level(level, runs)) / 2
    ok = boot[np.isfinite(boot)]
    if not ok.size or not math.isfinite(estimate) or max(runs, default=0) < 2:
        return math.nan, math.nan
    return float(np.quantile(ok, a)), float(np.quantile(ok, 1 - a))


def old_iqm_interval(tasks: Sequence[np.ndarray], level: float = 0.95, reps: int = OLD_REPS,
                     seed: int = 0) -> tuple[float, float, float]:
    """f730cc9 aggregate.iqm_interval: (IQM of all runs pooled, lo, hi), stratified bootstrap, expanded level."""
    vals = [np.asarray(t, dtype=float)[np.isfinite(t)] for t in tasks]
    rng = np.random.default_rng(seed)
    draws = [t[rng.integers(0, t.size, size=(reps, t.size))] for t in vals if t.size]
    boot = stats.trim_mean(np.concatenate(draws, axis=1), 0.25, axis=1)
    est = float(stats.trim_mean(np.concatenate(vals), 0.25))
    return (est, *_old_interval(est, boot, level, tuple(v.size for v in vals)))


def old_improvement_interval(pairs: Sequence[tuple[np.ndarray, np.ndarray]], level: float = 0.95,
                             reps: int = OLD_REPS, seed: int = 0) -> tuple[float, float, float]:
    """f730cc9 aggregate.improvement_interval: (mean over tasks of the per-seed win share (ties half), lo, hi), the
    seed pairs resampled within each task, percentile interval at the expanded level."""
    wins = []
    for x, y in pairs:
        a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        ok = np.isfinite(a) & np.isfinite(b)
        wins.append((a[ok] > b[ok]) + 0.5 * (a[ok] == b[ok]))
    rng = np.random.default_rng(seed)
    draws = [w[rng.integers(0, w.size, size=(reps, w.size))] for w in wins if w.size]
    boot = np.mean([d.mean(axis=1) for d in draws], axis=0)
    est = float(np.mean([w.mean() for w in wins if w.size]))
    return (est, *_old_interval(est, boot, level, tuple(w.size for w in wins)))


def old_welch_bounds(a: np.ndarray, b: np.ndarray, err: float) -> tuple[np.ndarray, np.ndarray]:
    """f730cc9 verdicts.welch's interval, vectorised over the leading axis: Welch-Satterthwaite df always."""
    na, nb = a.shape[-1], b.shape[-1]
    va, vb = a.var(axis=-1, ddof=1) / na, b.var(axis=-1, ddof=1) / nb
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    half = stats.t.ppf(1 - err / 2, df) * np.sqrt(va + vb)
    est = a.mean(axis=-1) - b.mean(axis=-1)
    return est - half, est + half


def old_premise_switched_on(x: np.ndarray, y: np.ndarray, lower: float = 0.7, first: int = 10,
                            level: float = 0.95) -> np.ndarray:
    """f730cc9 shadows.AutoPruner's rule, vectorised over studies (rows of x, y: trials in the order they ended):
    after every trial from the `first`-th on, Spearman's rho over the trials so far with a Fisher-z lower bound
    (Bonett-Wright variance) at `level`; switched on once any bound reaches `lower`."""
    z = stats.norm.ppf(0.5 + level / 2)
    on = np.zeros(x.shape[0], dtype=bool)
    for n in range(first, x.shape[1] + 1):
        r = _spearman_rows(x[:, :n], y[:, :n])
        zr = np.arctanh(np.clip(r, -0.999999, 0.999999))
        on |= np.tanh(zr - z * np.sqrt((1 + r * r / 2) / (n - 3))) >= lower
    return on


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    rx, ry = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    return (rx * ry).sum(-1) / np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))


def old_best_standing(best: str, compared) -> tuple[bool, list[str]]:
    """f730cc9 adbs_lab/results/comparisons.py best_standing."""
    from adbs_lab.stats.verdicts import Label

    above, below = (Label.BETTER, Label.BETTER_SMALL), (Label.WORSE, Label.WORSE_SMALL)
    if not compared:
        return True, []
    against = {c.pair[1]: c.verdict.verdict for c in compared if c.pair[0] == best}
    beaten = {c.pair[0]: c.verdict.verdict for c in compared if c.pair[1] == best}
    rows = {r for c in compared for r in c.pair} - {best}
    ok = all(v in above for v in against.values()) and all(v in below for v in beaten.values()) \
        and rows <= set(against) | set(beaten)
    if ok:
        return True, []
    tied = [r for r, v in {**against, **beaten}.items() if v not in above + below]
    for ref in against:
        tied += [c.pair[0] for c in compared if c.pair[1] == ref and c.pair[0] not in tied and c.pair[0] != best
                 and c.verdict.verdict not in above + below]
    return False, sorted(set(tied))


def _coverages(sims: int = 1000) -> None:
    """f730cc9's across-task intervals on the corners' data (docs/statistics.md quotes these): the bootstrap
    probability of improvement near 1, the pooled-raw IQM with t(3) noise, `sims` comparisons per cell."""
    from adbs_lab.stats import corners as C

    for runs in (3, 10):
        got = []
        for p in (0.9, 0.95, 0.977, 0.99):
            rng = np.random.default_rng(int(1000 * p) + runs)
            e = float(stats.norm.ppf(p))
            effects = [e * 0.8, e * 0.9, e * 1.1, e * 1.2]
            tasks = C.paired_tasks(rng, sims, effects, runs)
            truth = float(np.mean([C.grid_win_tie(x, 1.0, "normal", None)[0] for x in effects]))
            hit = sum(lo <= truth <= hi for lo, hi in (old_improvement_interval([(x[i], y[i]) for x, y in tasks],
                                                                                seed=i)[1:] for i in range(sims)))
            got.append(f"P={p}: {hit / sims:.1%}")
        print(f"f730cc9 bootstrap P(X > Y), 4 tasks x {runs} runs: " + ", ".join(got))
    got = []
    for runs in (3, 5, 10):
        levels, effects = [40.0, 55.0, 70.0, 85.0], [0.0, 0.5, 1.0, 1.5]
        tasks = C.paired_tasks(np.random.default_rng(runs), sims, effects, runs, 1.0, "t3", levels=levels, seed_sd=0.0)
        truth = C.mixture_iqm([lv + e for lv, e in zip(levels, effects)], 1.0, "t3")
        hit = sum(lo <= truth <= hi for lo, hi in (old_iqm_interval([x[i] for x, _ in tasks], seed=i)[1:]
                                                   for i in range(sims)))
        got.append(f"{runs} runs: {hit / sims:.1%}")
    print("f730cc9 pooled-raw IQM bootstrap, t(3), 4 tasks at 40-85 points: " + ", ".join(got))


if __name__ == "__main__":  # .venv/bin/python -m tests.helpers.old_f730cc9 (about a minute)
    _coverages()


def old_fixed_table_codes(values: np.ndarray, alpha: float, m: int, delta: float) -> np.ndarray:
    """f730cc9 verdicts.replay for a fixed table: the paired t-interval at alpha / m from 2 finite pairs on, a zero
    spread giving a zero-width interval, read by `classify` (unchanged since)."""
    from adbs_lab.stats.verdicts import classify

    x = np.asarray(values, dtype=float)
    n = x.shape[-1]
    est = x.mean(axis=-1)
    half = stats.t.ppf(1 - alpha / m / 2, n - 1) * x.std(axis=-1, ddof=1) / math.sqrt(n)
    return classify(est - half, est + half, delta)
