"""What the sequential design will do next: for an open comparison, the seeds at which the planned looks would
resolve it (a median and a 90% prediction interval), and the trials and time that implies.

A prediction, not a test: it may use the observed difference. It integrates over what the seeds run so far leave
uncertain, the true difference μ and the SD σ of the per-seed differences, by the posterior predictive of the
normal model under the reference prior p(μ, σ) ∝ 1/σ (Gelman, Carlin, Stern, Dunson, Vehtari & Rubin 2013,
"Bayesian Data Analysis", 3rd ed., section 3.2): σ² = (n - 1) s² / χ²_{n-1} and μ | σ ~ N(x̄, σ²/n), n the finite
pairs. For each draw it simulates the unseen seeds up to the plan's horizon, appends them to the seeds run and
replays the planned looks (adbs_lab/stats/verdicts.py: replay), so the stop is the first look that resolves the
comparison, or none by the horizon (`math.inf`). A plug-in forecast (μ = x̄, σ = s) would ignore that 3 seeds
leave σ uncertain by a factor of several, and its intervals fall short (docs/statistics.md, "Forecasting the stop").

No forecast from fewer than 3 finite pairs (the spread of 2 says almost nothing about σ), nor from pairs with no
spread at all (s = 0, ties on a finite test set): the forecast says so in its `note`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

import dataclasses

from adbs_lab.stats.continuation import CAP_FOR_FAMILY, AlphaSplit, design
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import CODE, Label, replay

__all__ = ["MIN_PAIRS", "LEVEL", "DRAWS", "FEWER", "NO_SPREAD", "RESOLVED", "ENOUGH", "MOST", "stop_draws", "Forecast",
           "forecast", "forecast_family", "Cost", "cost", "planned_looks", "cap_that_would"]

MIN_PAIRS = 3
"""The fewest finite pairs a forecast is made from."""
LEVEL = 0.90
"""The prediction interval's level."""
DRAWS = 4000
"""Posterior predictive draws per comparison."""
FEWER = "fewer than 3 finite pairs: no forecast (the spread of 2 seeds says almost nothing about σ)"
NO_SPREAD = "the finite pairs have no spread (s = 0): no forecast"
RESOLVED = "resolved: no more seeds"
ENOUGH = 0.80
"""The predictive probability at which a cap or horizon is said to resolve a comparison (`cap_that_would`)."""
MOST = 100
"""The largest cap `cap_that_would` tries: beyond it, "no cap up to MOST"."""


def stop_draws(diffs: np.ndarray, looks: Looks, m: int, delta: float, rng: np.random.Generator,
               draws: int = DRAWS) -> np.ndarray:
    """Posterior predictive draws of the seeds at which the plan resolves each comparison, shape (..., draws):
    `diffs` (..., seeds run) in seed order (non-finite values are failed seeds: left out), each row with at least
    MIN_PAIRS finite values and some spread, open at the looks run. math.inf: not resolved by the horizon."""
    x = np.asarray(diffs, dtype=float)
    ok = np.isfinite(x)
    n = ok.sum(axis=-1)
    if (n < MIN_PAIRS).any():
        raise ValueError(FEWER)
    mean = np.where(ok, x, 0.0).sum(axis=-1) / n
    ss = (np.where(ok, x - mean[..., None], 0.0) ** 2).sum(axis=-1)
    if (ss <= 0).any():
        raise ValueError(NO_SPREAD)
    lead = x.shape[:-1]
    sigma = np.sqrt(ss[..., None] / rng.chisquare(n[..., None] - 1, lead + (draws,)))
    mu = mean[..., None] + sigma / np.sqrt(n[..., None]) * rng.standard_normal(lead + (draws,))
    future = looks.last - x.shape[-1]
    new = mu[..., None] + sigma[..., None] * rng.standard_normal(lead + (draws, max(future, 0)))
    seen = np.broadcast_to(x[..., None, :], lead + (draws, x.shape[-1]))
    r = replay(np.concatenate([seen, new], axis=-1), looks, m, delta)
    return np.where(r["code"] == CODE[Label.NOT_RESOLVED], math.inf, r["n_seeds"].astype(float))


@dataclass(frozen=True)
class Forecast:
    """Where the plan is expected to resolve one comparison."""

    seeds_run: int
    """Seeds run so far (finite or not)."""
    n: int
    """Finite pairs among them."""
    median: float | None
    """The median seeds at the stop (math.inf: not by the horizon); None without a forecast."""
    lo: float | None
    """The 90% prediction interval's lower end (5% quantile); None without a forecast."""
    hi: float | None
    """Its upper end (95% quantile; math.inf: the horizon may not resolve it); None without a forecast."""
    p_by_horizon: float | None
    """The predictive probability that the plan resolves it by its horizon; None without a forecast."""
    note: str
    """Why there is no forecast, or RESOLVED; '' otherwise."""
    draws: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)
    """The predictive draws of the stop (empty without a forecast), for `cost`."""


def forecast(diffs: Sequence[float], looks: Looks, m: int, delta: float = 1.0, seed: int = 0,
             draws: int = DRAWS) -> Forecast:
    """One comparison's forecast from its per-seed differences so far (seed order; non-finite: a failed seed) under
    the plan `looks` in a family of m. A comparison the looks run so far resolved stops where it stands."""
    x = np.asarray(list(diffs), dtype=float)
    ok = x[np.isfinite(x)]
    if len(ok) < MIN_PAIRS:
        return Forecast(len(x), len(ok), None, None, None, None, FEWER)
    if float(np.ptp(ok)) == 0.0:
        return Forecast(len(x), len(ok), None, None, None, None, NO_SPREAD)
    now = replay(x, looks, m, delta)
    if int(now["code"]) != CODE[Label.NOT_RESOLVED]:
        at = float(now["n_seeds"])
        return Forecast(len(x), len(ok), at, at, at, 1.0, RESOLVED, np.full(draws, at))
    d = stop_draws(x, looks, m, delta, np.random.default_rng(seed), draws)
    q = np.quantile(d, [0.5, (1 - LEVEL) / 2, (1 + LEVEL) / 2], method="inverted_cdf")
    return Forecast(len(x), len(ok), float(q[0]), float(q[1]), float(q[2]), float(np.isfinite(d).mean()), "", d)


def forecast_family(diffs_by_comparison: Mapping[str, Sequence[float]], looks: Looks, delta: float = 1.0,
                    m: int | None = None, seed: int = 0, draws: int = DRAWS) -> dict[str, Forecast]:
    """{comparison: Forecast} for a family's comparisons (m: the family's size, default those given); each
    comparison draws from its own stream of `seed`, so adding one does not change the others'."""
    family = len(diffs_by_comparison) if m is None else m
    return {name: forecast(d, looks, family, delta, seed + k, draws)
            for k, (name, d) in enumerate(diffs_by_comparison.items())}


@dataclass(frozen=True)
class Cost:
    """The trials and time the forecast stops imply, over the predictive draws."""

    trials: tuple[float, float, float]
    """Trials still to run: (median, 5%, 95%), each row its most demanding comparison's seeds."""
    seconds: tuple[float, float, float]
    """The same in seconds, at each row's seconds per trial."""
    p_by_horizon: float
    """The predictive probability that every forecast comparison is resolved by the horizon."""
    unforecast: tuple[str, ...]
    """Comparisons with no forecast (too few pairs, no spread), not counted."""


def cost(forecasts: Mapping[str, Forecast], pairs: Mapping[str, tuple[str, str]], trial_s: Mapping[str, float],
         looks: Looks) -> Cost:
    """The trials and seconds still to run: per draw, a row runs to the largest stop among its comparisons (as row
    or reference; a stop beyond the horizon runs it to the horizon), from the seeds it has, as
    adbs_lab/stats/planner.py: extra_cost counts a shared reference once. Draw k of every comparison is taken
    together (their streams are independent, as `forecast_family` draws them)."""
    have = {name: f for name, f in forecasts.items() if f.draws.size}
    unforecast = tuple(name for name in forecasts if name not in have)
    if not have:
        return Cost((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, unforecast)
    size = min(f.draws.size for f in have.values())
    target: dict[str, np.ndarray] = {}
    run: dict[str, int] = {}
    for name, f in have.items():
        stop = np.minimum(f.draws[:size], looks.last)
        for row in pairs[name]:
            target[row] = np.maximum(target.get(row, np.zeros(size)), stop)
            run[row] = max(run.get(row, 0), f.seeds_run)
    extra = {row: np.maximum(t - run[row], 0.0) for row, t in target.items()}
    trials = sum(extra.values(), np.zeros(size))
    seconds = sum((e * trial_s[row] for row, e in extra.items()), np.zeros(size))
    by = np.logical_and.reduce([np.isfinite(f.draws[:size]) for f in have.values()])
    q = (0.5, (1 - LEVEL) / 2, (1 + LEVEL) / 2)
    t_q, s_q = np.quantile(trials, q), np.quantile(seconds, q)
    return Cost(tuple(float(v) for v in t_q), tuple(float(v) for v in s_q), float(by.mean()),  # type: ignore[arg-type]
                unforecast)


def planned_looks(looks: Looks | None, m: int, split: AlphaSplit | None = None) -> tuple[Looks, bool]:
    """The looks a forecast replays, and whether they are the study's own: the study's recorded looks where it has
    them (its verdict policy's `looks`), else the design a deciding study of m comparisons would run
    (adbs_lab/stats/continuation.py: design, at the split's primary share, AlphaSplit() by default); a family larger
    than the designs simulated takes the largest simulated cap (CAP_FOR_FAMILY)."""
    if looks is not None:
        return looks, True
    return design(min(m, CAP_FOR_FAMILY[-1][0]), split), False


def _with_cap(looks: Looks, cap: int) -> Looks:
    """`looks` with cap `cap`: the same first batch, batch, spending and reserve; a horizon twice the cap where
    `looks` has one (adbs_lab/stats/looks.py: continuable)."""
    return dataclasses.replace(looks, max_seeds=cap, horizon=None if looks.horizon is None else 2 * cap)


def cap_that_would(diffs: Sequence[float], looks: Looks, m: int, delta: float = 1.0, seed: int = 0,
                   draws: int = 1000, enough: float = ENOUGH, most: int = MOST) -> int | None:
    """The smallest cap C > looks.max_seeds (in steps of its batch; `looks` otherwise as it is, a horizon 2C where it
    has one) whose looks resolve the comparison by C in at least `enough` of the posterior predictive draws (as
    `stop_draws` makes them: one draw of (μ, σ) and of the unseen seeds serves every cap, so the caps are compared
    on the same futures); None when no cap up to `most` does, or without a forecast (fewer than MIN_PAIRS finite
    pairs, no spread). A prediction, not a plan that keeps a guarantee: a study given a larger cap after it saw
    these seeds spends α the recorded plan does not have, so the cap is for a new study (or one planned so)."""
    x = np.asarray(list(diffs), dtype=float)
    ok = x[np.isfinite(x)]
    if len(ok) < MIN_PAIRS or float(np.ptp(ok)) == 0.0:
        return None
    rng = np.random.default_rng(seed)
    n, mean = len(ok), float(ok.mean())
    ss = float(((ok - mean) ** 2).sum())
    sigma = np.sqrt(ss / rng.chisquare(n - 1, draws))
    mu = mean + sigma / np.sqrt(n) * rng.standard_normal(draws)
    longest = 2 * most
    z = rng.standard_normal((draws, max(longest - len(x), 0)))
    full = np.concatenate([np.broadcast_to(x, (draws, len(x))), mu[:, None] + sigma[:, None] * z], axis=-1)
    def enough_by(cap: int) -> bool:
        r = replay(full[:, :cap], _with_cap(looks, cap), m, delta)
        return float((r["code"] != CODE[Label.NOT_RESOLVED]).mean()) >= enough

    caps = list(range(looks.max_seeds + looks.batch, most + 1, looks.batch))
    if not caps or not enough_by(caps[-1]):
        return None
    # the share resolved grows with the cap, nearly always (more seeds; a larger cap spends less α at its early looks
    # under O'Brien-Fleming, so not strictly): bisected for the first cap that does
    lo, hi = 0, len(caps) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough_by(caps[mid]) else (mid + 1, hi)
    return caps[lo]
