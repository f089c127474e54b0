"""Simulated studies for the verdicts' error rates, power and coverage (the tests and bench/verdict_simulation.py),
and for the coverage of the aggregates over tasks (`aggregate_coverage`, adbs_lab/stats/aggregate.py, on the
corners' data of adbs_lab/stats/corners.py).

A study here is one reference row and m rows compared with it, each run on the same N seeds. A seed's value of a
row is the row's true effect plus noise of scale σ/√2, so a paired difference row - reference has SD σ (normal
noise) and the m differences of a seed share the reference's draw, correlated as in a real table. Two noises:
"normal", and "t3_outliers": Student t with 3 degrees of freedom scaled to unit variance, with 10% of the draws
multiplied by OUTLIER_SCALE (a seed gone astray), heavy tails the t-interval is not built for. Everything is
vectorised over studies, with a numpy Generator the caller seeds, so a run is reproducible.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from adbs_lab.stats import aggregate, corners
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import CODE, Label, bonferroni, decisive_t, replay

__all__ = ["Noise", "OUTLIER_SHARE", "OUTLIER_SCALE", "noise", "differences", "false_verdicts", "run", "coverage",
           "aggregate_coverage"]

Noise = Literal["normal", "t3_outliers"]
OUTLIER_SHARE = 0.10
"""The share of draws scaled up in the "t3_outliers" noise."""
OUTLIER_SCALE = 5.0
"""How much an outlier's draw is scaled up."""


def noise(rng: np.random.Generator, shape: tuple[int, ...], kind: Noise) -> np.ndarray:
    """Unit-scale draws: standard normal, or unit-variance t(3) with a share of them scaled up."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "t3_outliers":
        draws = rng.standard_t(3, shape) / np.sqrt(3.0)  # t(3) has variance 3
        return np.where(rng.random(shape) < OUTLIER_SHARE, OUTLIER_SCALE * draws, draws)
    raise ValueError(f"unknown noise {kind!r}")


def differences(rng: np.random.Generator, n_studies: int, effects: Sequence[float], n_seeds: int, sigma: float,
                kind: Noise = "normal") -> np.ndarray:
    """Per-seed differences row - reference, shape (n_studies, m, n_seeds), for true effects `effects`."""
    rows = noise(rng, (n_studies, len(effects) + 1, n_seeds), kind) * sigma / np.sqrt(2.0)
    return rows[:, 1:, :] - rows[:, :1, :] + np.asarray(effects, dtype=float)[None, :, None]


def false_verdicts(code: np.ndarray, effects: Sequence[float], delta: float) -> np.ndarray:
    """Whether each verdict (codes, shape (..., m)) is false for the true effects (the last axis)."""
    e = np.asarray(effects, dtype=float)
    wrong = {Label.BETTER: e <= 0, Label.WORSE: e >= 0, Label.EQUIVALENT: ~((-delta < e) & (e < delta)),
             Label.BETTER_SMALL: ~((0 < e) & (e < delta)), Label.WORSE_SMALL: ~((-delta < e) & (e < 0))}
    out = np.zeros(np.shape(code), dtype=bool)
    for lab, is_wrong in wrong.items():
        out |= (code == CODE[lab]) & is_wrong
    return out


def run(rng: np.random.Generator, n_studies: int, effects: Sequence[float], sigma: float, looks: Looks,
        delta: float = 1.0, kind: Noise = "normal") -> dict[str, np.ndarray]:
    """`replay`'s arrays for simulated studies under `looks` (one look: a fixed size), plus "false" (each verdict
    false?) and "covered" (each displayed interval holds the true effect, every look counted: see `coverage`)."""
    d = differences(rng, n_studies, effects, looks.max_seeds, sigma, kind)
    out = replay(d, looks, len(effects), delta)
    out["false"] = false_verdicts(out["code"], effects, delta)
    out["covered"] = coverage(d, looks, effects)
    return out


def coverage(d: np.ndarray, looks: Looks, effects: Sequence[float]) -> np.ndarray:
    """Whether every interval of a comparison at every look covers its true effect, shape (n_studies, m): the
    union-bound event the guarantee rests on (checked over all looks, stopped or not)."""
    e = np.asarray(effects, dtype=float)[None, :]
    ok = np.ones(d.shape[:-1], dtype=bool)
    for size, alpha_k in zip(looks.sizes, looks.alphas):
        _, lo, hi, _, _ = decisive_t(d[..., :size], bonferroni(alpha_k, len(effects)))
        ok &= (lo <= e) & (e <= hi)
    return ok


def aggregate_coverage(kind: Literal["iqm", "mean", "improvement"], sims: int, runs: Sequence[int] = (10,) * 4,
                       effects: Sequence[float] = (0.0, 0.5, 1.0, 1.5), sigmas: Sequence[float] | float = 1.0,
                       noise: corners.Kind = "normal", n_items: int | None = None, level: float = 0.95,
                       seed: int = 2026) -> float:
    """The share of `sims` simulated comparisons over tasks (one per entry of `effects`, `runs` paired runs each, at
    levels tens of points apart: corners.paired_tasks) whose interval at `level` covers the truth: the IQM of the
    per-seed differences ("iqm": the mixture's, corners.mixture_iqm, each task weighted by its runs), the mean of
    the task means ("mean": the mean effect), the paired probability of improvement ("improvement": the mean over
    tasks of P(D > 0) + P(D = 0)/2 for D on the grid of `n_items`, corners.grid_win_tie). Vectorised."""
    rng = np.random.default_rng(seed)
    tasks = corners.paired_tasks(rng, sims, effects, list(runs), sigmas, noise, n_items=n_items)
    d = [x - y for x, y in tasks]
    sig = [float(sigmas)] * len(effects) if isinstance(sigmas, (int, float)) else list(sigmas)
    if kind == "iqm":
        if n_items is not None:
            raise ValueError("the IQM's truth is computed for continuous differences: n_items=None")
        _, lo, hi = aggregate.percentile_bounds(np.concatenate(d, axis=-1), level)
        truth = corners.mixture_iqm(effects, sig, noise, weights=list(runs))
    elif kind == "mean":
        if n_items is not None:
            raise ValueError("the mean's truth is computed for continuous differences: n_items=None")
        _, lo, hi = aggregate.mean_bounds(d, level)
        truth = float(np.mean(effects))
    else:
        wins = np.stack([(x > 0).sum(axis=-1) for x in d], axis=-1)
        ties = np.stack([(x == 0).sum(axis=-1) for x in d], axis=-1)
        _, lo, hi = aggregate.improvement_bounds(wins, ties, np.broadcast_to(np.array(runs), wins.shape), level)
        truth = float(np.mean([w + t / 2 for w, t in (corners.grid_win_tie(e, s, noise, n_items)
                                                        for e, s in zip(effects, sig))]))
    return float(np.mean((lo <= truth) & (truth <= hi)))
