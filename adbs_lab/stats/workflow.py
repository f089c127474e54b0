"""Simulated studies followed the way the output advises, for the error rate of the whole workflow and the power of
a plan (bench/continuation_simulation.py and tests/adbs_lab/stats/test_workflow.py; docs/statistics.md,
"Continuing a study"). Everything runs on the vectorised replay of adbs_lab/stats/verdicts.py over thousands of
studies at once, with a numpy Generator the caller seeds.

A study: one reference row and m rows compared with it on the same seeds. A row's value at a seed is its true
effect plus noise of scale σ/√2 (the m differences share the reference's draw, as in a table), so a paired
difference has SD σ = σ_d. Noise "normal" or "t3" (Student t with 3 degrees of freedom scaled to variance 1), and
with `n_items` each row's accuracy rounded to the grid 100 / n_items points of a test set of that many images.

- `advised`: a default run to the cap, then the printed continuation, then once more (the plan's pauses:
  adbs_lab/stats/continuation.py), each invocation printing every comparison's verdict; false if any verdict any
  invocation printed is false.
- `rerun_at_planned_n`: the workflow before continuations existed: a fixed `--seeds 0 1 2` table, then a fresh run
  of the planner's n seeds (seeds 0, 1, 2 again, the whole α again), false if either table has a false verdict.
- `power`: P(a "better" verdict) by a given seed for Δ = δ and σ_d = δ / ratio, the design as built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy import stats

from adbs_lab.stats.continuation import pauses
from adbs_lab.stats.forecast import stop_draws
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.planner import N_MAX, UPPER, expected_half_width
from adbs_lab.stats.simulate import false_verdicts
from adbs_lab.stats.verdicts import CODE, Label, bonferroni, classify, decisive_t, replay

__all__ = ["Noise", "NOISES", "unit_noise", "differences", "BETTER_CODES", "Secondaries", "advised", "rerun_at_planned_n",
           "rerun_with_larger_cap", "power", "forecast_check"]

Noise = Literal["normal", "t3"]
NOISES: tuple[Noise, ...] = ("normal", "t3")
BETTER_CODES = (CODE[Label.BETTER], CODE[Label.BETTER_SMALL])
"""The verdicts that say the row is better than its reference."""


def unit_noise(rng: np.random.Generator, shape: tuple[int, ...], kind: Noise) -> np.ndarray:
    """Unit-variance noise: standard normal, or Student t(3) / √3."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "t3":
        return rng.standard_t(3, shape) / math.sqrt(3.0)
    raise ValueError(f"unknown noise {kind!r}; one of {', '.join(NOISES)}")


def differences(rng: np.random.Generator, sims: int, effects: Sequence[float], n_seeds: int, sigma: float,
                kind: Noise = "normal", n_items: int | None = None, level: float = 50.0) -> np.ndarray:
    """Per-seed differences row - reference, shape (sims, m, n_seeds). With `n_items`, each row's accuracy
    (around `level` points) lies on the grid of 100 / n_items points before the difference is taken."""
    rows = unit_noise(rng, (sims, len(effects) + 1, n_seeds), kind) * sigma / math.sqrt(2.0)
    rows[:, 1:, :] += np.asarray(effects, dtype=float)[None, :, None]
    if n_items is not None:
        step = 100.0 / n_items
        rows = np.round((rows + level) / step) * step
    return rows[:, 1:, :] - rows[:, :1, :]


@dataclass(frozen=True)
class Secondaries:
    """The secondary metrics of simulated studies, read beside the primary at its share of α
    (adbs_lab/stats/continuation.py: AlphaSplit)."""

    d: np.ndarray
    """Per-seed differences, shape (sims, m, n_secondaries, seeds)."""
    looks: Looks
    """Their plan: the primary's looks at the secondaries' share of α."""
    effects: np.ndarray
    """True differences, shape (m, n_secondaries)."""


def _secondaries_false(sec: Secondaries, delta: float) -> np.ndarray:
    """Whether some secondary verdict of a comparison is false if read at look k, shape (looks, sims, m): each
    interval over the look's seeds at α_k / (m · n_secondaries) of the secondaries' plan."""
    m, k_sec = sec.effects.shape
    out = []
    for size, alpha_k in zip(sec.looks.sizes, sec.looks.alphas):
        _, lo, hi, _, _ = decisive_t(sec.d[..., :size], bonferroni(alpha_k, m * k_sec))
        out.append(false_verdicts(classify(lo, hi, delta), sec.effects, delta).any(axis=2))  # type: ignore[arg-type]
    return np.stack(out)


def advised(d: np.ndarray, looks: Looks, effects: Sequence[float], delta: float,
            secondaries: Secondaries | None = None) -> dict[str, np.ndarray]:
    """The advised workflow on differences `d` (sims, m, ≥ looks.last seeds): an invocation to each pause in turn
    while some comparison is open (a continuation is printed only then), every invocation printing every
    comparison's verdict (and, with `secondaries`, those of its secondary metrics). Returns "false" (any printed
    verdict false, per study), "false_primary" (any of the primary metric's), "invocations" (how many ran),
    "seeds" (seeds per row at the end: the most any comparison reached) and "open" (comparisons still open at the
    end)."""
    m, sims = d.shape[1], d.shape[0]
    if secondaries is not None and secondaries.looks.sizes != looks.sizes:
        raise ValueError(f"the secondaries are read at the primary's looks {looks.sizes}, not {secondaries.looks.sizes}")
    false = np.zeros(sims, dtype=bool)
    false_primary = np.zeros(sims, dtype=bool)
    running = np.ones(sims, dtype=bool)
    ran, seeds, open_ = (np.zeros(sims, dtype=int) for _ in range(3))
    sec_false = _secondaries_false(secondaries, delta) if secondaries is not None else None
    for stop in pauses(looks):
        r = replay(d[..., :stop], looks, m, delta)
        unresolved = r["code"] == CODE[Label.NOT_RESOLVED]
        printed = false_verdicts(r["code"], effects, delta).any(axis=1)
        false_primary |= running & printed
        if sec_false is not None:  # each comparison's secondaries read at the look its primary verdict stands at
            at = np.take_along_axis(sec_false, (r["look"] - 1)[None, ...], axis=0)[0]
            printed |= (at & (r["look"] > 0)).any(axis=1)
        false |= running & printed
        ran += running
        seeds = np.where(running, np.where(unresolved.any(axis=1), stop, r["n_seeds"].max(axis=1)), seeds)
        open_ = np.where(running, unresolved.sum(axis=1), open_)
        running &= unresolved.any(axis=1)  # the next invocation runs only where a continuation was printed
    return {"false": false, "false_primary": false_primary, "invocations": ran, "seeds": seeds, "open": open_}


def _planned_n(s: np.ndarray, n: int, delta: float, a: float) -> np.ndarray:
    """The planner's n (adbs_lab/stats/planner.py: a fixed-size study at error rate a, σ's upper 80% bound from n
    seeds, the smallest n whose expected half-width is ≤ δ/2), vectorised over s; 0 where it is beyond N_MAX."""
    upper = s * math.sqrt((n - 1) / float(stats.chi2.ppf(1.0 - UPPER, n - 1)))
    unit = np.array([expected_half_width(k, 1.0, a) for k in range(2, N_MAX + 1)])  # falls with k
    first = np.argmax(unit[None, ...] * upper[..., None] <= delta / 2.0, axis=-1)
    ok = unit[first] * upper <= delta / 2.0
    return np.where(ok, first + 2, 0)


def rerun_at_planned_n(d: np.ndarray, effects: Sequence[float], delta: float, alpha: float = 0.05,
                       n0: int = 3) -> dict[str, np.ndarray]:
    """Before continuations: a fixed table of the first n0 seeds at alpha / m, then a fresh run of seeds 0 .. n - 1
    at alpha / m again, n the planner's largest n over the table's open comparisons (none beyond N_MAX: no rerun).
    `d` needs N_MAX seeds. Returns "false" (either table), "first" (the first table alone) and "n" (0: no rerun)."""
    m = d.shape[1]
    a = bonferroni(alpha, m)
    _, lo, hi, _, _ = decisive_t(d[..., :n0], a)
    code = classify(lo, hi, delta)
    first = false_verdicts(code, effects, delta).any(axis=1)
    s = np.std(d[..., :n0], axis=-1, ddof=1)
    planned = np.where(code == CODE[Label.NOT_RESOLVED], _planned_n(s, n0, delta, a), 0)
    n = planned.max(axis=1)
    false = np.array(first, dtype=bool)
    for size in np.unique(n[n > 0]):
        pick = n == size
        _, lo2, hi2, _, _ = decisive_t(d[pick][..., :size], a)
        false[pick] |= false_verdicts(classify(lo2, hi2, delta), effects, delta).any(axis=1)
    return {"false": false, "first": first, "n": n}


def rerun_with_larger_cap(d: np.ndarray, effects: Sequence[float], delta: float, first: Looks,
                          second: Looks) -> dict[str, np.ndarray]:
    """Before continuations: a sequential run under `first`, then, where it left a comparison open, a fresh run under
    `second` (a larger cap) over the same seeds from seed 0, each spending its whole α. `d` needs second.last seeds."""
    m = d.shape[1]
    r1 = replay(d[..., :first.last], first, m, delta)
    false = false_verdicts(r1["code"], effects, delta).any(axis=1)
    again = (r1["code"] == CODE[Label.NOT_RESOLVED]).any(axis=1)
    r2 = replay(d[..., :second.last], second, m, delta)
    return {"false": false | (again & false_verdicts(r2["code"], effects, delta).any(axis=1)), "first": false}


def power(rng: np.random.Generator, looks: Looks, m: int, ratios: Sequence[float] = (1.0, 2.0, 3.0, 4.0),
          until: int | None = None, sims: int = 20000, delta: float = 1.0,
          kind: Noise = "normal") -> dict[float, float]:
    """{Δ/σ_d: P("better" by seed `until`)} for one comparison of a family of m (Bonferroni over m, the plan's
    looks up to `until`, default the cap) whose true difference is Δ = δ, σ_d = δ / ratio."""
    stop = looks.max_seeds if until is None else until
    out = {}
    for ratio in ratios:
        d = delta + unit_noise(rng, (sims, stop), kind) * delta / ratio
        code = replay(d, looks, m, delta)["code"]
        out[float(ratio)] = float(np.isin(code, BETTER_CODES).mean())
    return out


def forecast_check(rng: np.random.Generator, effect: float, sigma: float, looks: Looks, m: int, delta: float = 1.0,
                   sims: int = 500, draws: int = 500, n0: int = 3) -> dict[str, float]:
    """The forecast (adbs_lab/stats/forecast.py) against the truth: studies with true difference `effect` and SD
    `sigma`, the forecast made from the first n0 seeds of each study still open there, the realised stop that of
    the same study's seeds run on to the horizon. Returns "covered" (the 90% interval holds the realised stop),
    "within" (the median is within one batch of it; no stop by the horizon counts as one batch past it) and
    "open" (the share of studies open at n0, the ones forecast)."""
    d = effect + sigma * unit_noise(rng, (sims, looks.last), "normal")
    r = replay(d, looks, m, delta)
    real = np.where(r["code"] == CODE[Label.NOT_RESOLVED], math.inf, r["n_seeds"].astype(float))
    first = replay(d[:, :n0], looks, m, delta)["code"] == CODE[Label.NOT_RESOLVED]
    stops = stop_draws(d[first, :n0], looks, m, delta, rng, draws)
    med, lo, hi = np.quantile(stops, [0.5, 0.05, 0.95], axis=-1, method="inverted_cdf")
    past = float(looks.last + looks.batch)
    rl = real[first]
    within = np.abs(np.where(np.isinf(med), past, med) - np.where(np.isinf(rl), past, rl)) <= looks.batch
    return {"covered": float(((lo <= rl) & (rl <= hi)).mean()), "within": float(within.mean()),
            "open": float(first.mean())}
