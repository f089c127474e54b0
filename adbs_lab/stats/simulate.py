"""Simulated studies for the verdicts' error rates, power and coverage (the tests and bench/verdict_simulation.py),
and for the coverage of the aggregates over tasks (`aggregate_coverage`, adbs_lab/stats/aggregate.py).

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

from adbs_lab.stats import aggregate
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import CODE, Label, bonferroni, intervals, replay

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
        _, lo, hi, _, _ = intervals(d[..., :size], bonferroni(alpha_k, len(effects)))
        ok &= (lo <= e) & (e <= hi)
    return ok


def aggregate_coverage(kind: Literal["iqm", "improvement"], sims: int, tasks: int = 4, runs: int = 10,
                       reps: int = 1000, expand: bool = True, seed: int = 2026) -> float:
    """The share of `sims` simulated comparisons over `tasks` tasks of `runs` runs each whose 95% interval covers
    the truth. IQM: task means spread evenly over [-1, 1], normal runs of SD 1, so the equal mixture's IQM is 0 by
    symmetry. Probability of improvement: paired differences N(μ_m, 1) with μ_m spread over [-0.5, 1], so the truth
    is the mean of Φ(μ_m)."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    hit = 0
    for i in range(sims):
        if kind == "iqm":
            vals = [m + rng.standard_normal(runs) for m in np.linspace(-1, 1, tasks)]
            iv, truth = aggregate.iqm_interval(vals, 0.95, reps, seed=i, expand=expand), 0.0
        else:
            mu = np.linspace(-0.5, 1.0, tasks)
            pairs = [(m + rng.standard_normal(runs), np.zeros(runs)) for m in mu]
            iv = aggregate.improvement_interval(pairs, 0.95, reps, seed=i, expand=expand)
            truth = float(stats.norm.cdf(mu).mean())
        hit += iv.lo <= truth <= iv.hi
    return hit / sims
