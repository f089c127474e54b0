"""Simulated data for the corners the statistics must hold in, with the truth to check them against: accuracies on
the grid of a finite evaluation set (ties), heavy tails, tasks at different levels, unequal spreads, rank
correlations near a threshold. The tests and bench/corner_simulation.py draw from here; adbs_lab/stats/simulate.py
draws the verdicts' studies.

Every function takes a numpy Generator the caller seeds (a run is reproducible) and returns arrays whose leading
axis is the simulated study, so a check over thousands of studies is one vectorised computation.

- `draws`: unit-variance noise: "normal", "t3" (Student t with 3 degrees of freedom, scaled to variance 1: heavy
  tails), "uniform" (bounded: a difference that never changes sign, for a probability of exactly 1).
- `on_grid`: values in accuracy points rounded to the grid of an evaluation set of `n_items` items (step
  100 / n_items), as a measured accuracy is a count over that set.
- `paired_tasks`: two rows X and Y per task, paired seed by seed: each task has its own level (datasets differ by
  tens of points) and its own effect and spread of the per-seed difference X - Y.
- `two_samples`: two rows that ran different seeds (unpaired), of different sizes and spreads.
- `rank_pairs`: pairs whose population Spearman rho is a given value (bivariate normal; Pearson 1907).
- The truths: `mixture_iqm` (the interquartile mean of the tasks' pooled difference distribution), `grid_iqm` (the
  same on a grid) and `grid_win_tie` (the win and tie probabilities of a difference on a grid).
- Tolerances: `rate_bound` (nominal + 2 Monte Carlo standard errors) and `coverage_floor` (nominal - 2 SE).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import numpy as np
from scipy import integrate, optimize, stats

__all__ = ["Kind", "draws", "distribution", "grid_step", "on_grid", "paired_tasks", "two_samples", "rank_pairs",
           "pearson_for_spearman", "mixture_iqm", "grid_iqm", "grid_win_tie", "mc_se", "rate_bound", "coverage_floor"]

Kind = Literal["normal", "t3", "uniform"]


def distribution(kind: Kind) -> stats.rv_continuous:
    """The unit-variance distribution of `draws(kind)` (scipy frozen)."""
    if kind == "normal":
        return stats.norm()
    if kind == "t3":
        return stats.t(3, scale=1 / math.sqrt(3))  # t(3) has variance 3
    if kind == "uniform":
        return stats.uniform(-math.sqrt(3), 2 * math.sqrt(3))
    raise ValueError(f"unknown noise {kind!r}; valid: normal, t3, uniform")


def draws(rng: np.random.Generator, shape: tuple[int, ...], kind: Kind = "normal") -> np.ndarray:
    """Unit-variance noise of `kind`."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "t3":
        return rng.standard_t(3, shape) / math.sqrt(3)
    if kind == "uniform":
        return rng.uniform(-math.sqrt(3), math.sqrt(3), shape)
    raise ValueError(f"unknown noise {kind!r}; valid: normal, t3, uniform")


def grid_step(n_items: int) -> float:
    """The step of an accuracy (points) measured on `n_items` items: 100 / n_items."""
    return 100.0 / n_items


def on_grid(values: np.ndarray, n_items: int | None) -> np.ndarray:
    """`values` (points) rounded to the nearest multiple of 100 / n_items; as they are without `n_items`."""
    if n_items is None:
        return np.asarray(values, dtype=float)
    step = grid_step(n_items)
    return np.round(np.asarray(values, dtype=float) / step) * step


def paired_tasks(rng: np.random.Generator, sims: int, effects: Sequence[float], runs: Sequence[int] | int,
                 sigmas: Sequence[float] | float = 1.0, kind: Kind = "normal", levels: Sequence[float] | None = None,
                 n_items: int | None = None, seed_sd: float = 2.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per task (X, Y), each of shape (sims, runs of that task): Y = level + u, X = level + u + effect + sigma * e,
    with u the seed's own draw (shared by both rows: what pairing removes; normal, SD `seed_sd` points) and e unit
    noise of `kind`, so X - Y = effect + sigma * e exactly (and with seed_sd 0, X = level + effect + sigma * e).
    `levels`: the tasks' levels (default 40, 55, 70, ... points: datasets far apart). `n_items`: X - Y is rounded
    to the grid of that many items (ties), Y to the grid too."""
    t = len(effects)
    sizes = [runs] * t if isinstance(runs, int) else list(runs)
    sig = [float(sigmas)] * t if isinstance(sigmas, (int, float)) else [float(s) for s in sigmas]
    lev = list(levels) if levels is not None else [40.0 + 15.0 * i for i in range(t)]
    if not len(sizes) == len(sig) == len(lev) == t:
        raise ValueError(f"one size, spread and level per task: {len(sizes)}, {len(sig)}, {len(lev)} for {t} tasks")
    out = []
    for e, n, s, level in zip(effects, sizes, sig, lev):
        y = on_grid(level + seed_sd * rng.standard_normal((sims, n)), n_items)
        out.append((y + on_grid(e + s * draws(rng, (sims, n), kind), n_items), y))
    return out


def two_samples(rng: np.random.Generator, sims: int, n_a: int, n_b: int, sd_a: float, sd_b: float,
                diff: float = 0.0, kind: Kind = "normal") -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of shapes (sims, n_a) and (sims, n_b): a = diff + sd_a * e, b = sd_b * e' (independent), so the true
    mean(a) - mean(b) is `diff`."""
    return diff + sd_a * draws(rng, (sims, n_a), kind), sd_b * draws(rng, (sims, n_b), kind)


def pearson_for_spearman(rho: float) -> float:
    """The bivariate normal's Pearson r whose Spearman rho is `rho`: rho = (6/pi) asin(r/2) (Pearson 1907)."""
    return 2.0 * math.sin(math.pi * rho / 6.0)


def rank_pairs(rng: np.random.Generator, sims: int, n: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of shape (sims, n): bivariate normal pairs whose population Spearman rho is `rho`."""
    r = pearson_for_spearman(rho)
    x = rng.standard_normal((sims, n))
    return x, r * x + math.sqrt(1 - r * r) * rng.standard_normal((sims, n))


def mixture_iqm(effects: Sequence[float], sigmas: Sequence[float] | float, kind: Kind = "normal",
                weights: Sequence[float] | None = None) -> float:
    """The interquartile mean (the mean between the 25% and 75% quantiles) of the mixture of the tasks' difference
    distributions effect + sigma * e, task t weighted by `weights` (default equal; its runs for pooled runs)."""
    sig = [float(sigmas)] * len(effects) if isinstance(sigmas, (int, float)) else [float(s) for s in sigmas]
    w = np.asarray(weights if weights is not None else [1.0] * len(effects), dtype=float)
    w = w / w.sum()
    d = distribution(kind)

    def cdf(x: float) -> float:
        return float(sum(wi * d.cdf((x - e) / s) for wi, e, s in zip(w, effects, sig)))

    span = max(abs(e) for e in effects) + 50 * max(sig)
    q1, q3 = (optimize.brentq(lambda x, p=p: cdf(x) - p, -span, span, xtol=1e-12) for p in (0.25, 0.75))
    part = sum(wi * integrate.quad(lambda x, e=e, s=s: x * d.pdf((x - e) / s) / s, q1, q3, epsabs=1e-12)[0]
               for wi, e, s in zip(w, effects, sig))
    return float(part / 0.5)


def grid_iqm(effects: Sequence[float], sigmas: Sequence[float], kind: Kind, n_items: int, runs: Sequence[int]) -> float:
    """The interquartile mean of the tasks' mixture of D = on_grid(effect + sigma e, n_items), task t weighted by its
    runs: the mean of the quantile function over (0.25, 0.75), each grid value weighted by its CDF jump's overlap."""
    step, dist = grid_step(n_items), distribution(kind)
    w = np.asarray(runs, dtype=float) / sum(runs)
    vals, mass = [], []
    for e, s, wi in zip(effects, sigmas, w):
        k = np.arange(round((e - 15 * s) / step) - 2, round((e + 15 * s) / step) + 3)
        v = k * step
        vals.append(v)
        mass.append(wi * (dist.cdf((v + step / 2 - e) / s) - dist.cdf((v - step / 2 - e) / s)))
    v, p = np.concatenate(vals), np.concatenate(mass)
    order = np.argsort(v, kind="stable")
    v, p = v[order], p[order]
    top = np.cumsum(p)
    overlap = np.clip(np.minimum(top, 0.75) - np.maximum(top - p, 0.25), 0.0, None)
    return float((overlap * v).sum() / overlap.sum())


def grid_win_tie(effect: float, sigma: float, kind: Kind, n_items: int | None) -> tuple[float, float]:
    """(P(D > 0), P(D = 0)) of D = on_grid(effect + sigma * e, n_items): the tie band is |effect + sigma e| below
    half a step (no ties without a grid)."""
    d = distribution(kind)
    half = grid_step(n_items) / 2 if n_items is not None else 0.0
    above = float(d.sf((half - effect) / sigma))
    return above, float(d.cdf((half - effect) / sigma) - d.cdf((-half - effect) / sigma)) if half else 0.0


def mc_se(p: float, sims: int) -> float:
    """The Monte Carlo standard error of a share p estimated from `sims` independent studies."""
    return math.sqrt(p * (1 - p) / sims)


def rate_bound(nominal: float, sims: int) -> float:
    """The most an error rate may measure over `sims` studies and still hold `nominal`: nominal + 2 SE."""
    return nominal + 2 * mc_se(nominal, sims)


def coverage_floor(nominal: float, sims: int) -> float:
    """The least a coverage may measure over `sims` studies and still hold `nominal`: nominal - 2 SE."""
    return nominal - 2 * mc_se(nominal, sims)
