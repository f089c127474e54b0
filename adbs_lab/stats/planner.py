"""How many seeds would settle each unresolved comparison, and what they would cost.

The plan is for the effect size δ a study names (never the observed difference, which would plan on noise). A
comparison is settled once its interval is narrower than δ: an interval of width < δ that contains 0 lies inside
(-δ, δ), so one of the verdicts of adbs_lab/stats/verdicts.py is reached whatever the true difference. The planned
n is the smallest whose EXPECTED half-width is ≤ δ/2,

    t_{1-a/2, n-1} · c4(n) · σ / √n ≤ δ / 2,     c4(n) = E[s] / σ = √(2/(n-1)) Γ(n/2) / Γ((n-1)/2),

with a the error rate the interval will actually have: α / m for a study of fixed size, α_k / m at look k of a
sequential one (adbs_lab/stats/looks.py), so the plan pays for the adjustment it will meet (c4: the bias of the
sample SD of a normal sample, e.g. Montgomery, "Introduction to Statistical Quality Control", appendix VI).

σ is the paired SD's upper 80% confidence bound from the seeds already run, s √((n-1) / χ²_{0.20, n-1}) (Browne
1995, "On the use of a pilot sample for sample size determination", Statistics in Medicine 14:1933): planning on s
itself falls short about half the time. It needs 3 seeds; with 2 the plan uses s and says so. The point-estimate
plan is given beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import special, stats

from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import MIN_PAIRS, bonferroni, no_spread

__all__ = ["UPPER", "N_MAX", "FEWER", "NO_SPREAD", "c4", "sigma_upper", "expected_half_width", "levels", "smallest_n",
           "SeedPlan", "plan", "plan_family", "Cost", "extra_cost"]

UPPER = 0.80
"""The confidence of the upper bound on σ the plan uses (Browne 1995)."""
N_MAX = 100
"""The largest n a study of fixed size is planned to; beyond it the plan says "more than N_MAX"."""
FEWER = f"fewer than {MIN_PAIRS} finite pairs: no plan (no verdict is read from fewer)"
NO_SPREAD = "no spread: every pair's difference is the same, so no estimate of σ and no plan"


def c4(n: int) -> float:
    """E[s] / σ for a normal sample of n (n ≥ 2): the sample SD's bias, < 1."""
    return math.sqrt(2.0 / (n - 1)) * math.exp(special.gammaln(n / 2.0) - special.gammaln((n - 1) / 2.0))


def sigma_upper(s: float, n: int, confidence: float = UPPER) -> float:
    """Browne's upper `confidence` bound on σ from a sample SD s of n values (n ≥ 2)."""
    return s * math.sqrt((n - 1) / float(stats.chi2.ppf(1.0 - confidence, n - 1)))


def expected_half_width(n: int, sigma: float, a: float) -> float:
    """The expected half-width of a paired t-interval at error rate a over n pairs of SD sigma."""
    return float(stats.t.ppf(1.0 - a / 2.0, n - 1)) * c4(n) * sigma / math.sqrt(n)


def levels(alpha: float, m: int, looks: Looks | None = None, n_max: int = N_MAX) -> dict[int, float]:
    """{n: the error rate of an interval over n pairs}: alpha / m at every n of a fixed-size study, or α_k / m at
    the looks of a sequential one (where the study can stop)."""
    if looks is None:
        return {n: bonferroni(alpha, m) for n in range(2, n_max + 1)}
    return {n: bonferroni(a, m) for n, a in zip(looks.sizes, looks.alphas) if n >= 2}


def smallest_n(sigma: float, delta: float, level_at: Mapping[int, float]) -> int | None:
    """The smallest n of `level_at` whose expected half-width is ≤ delta / 2; None when none is."""
    for n in sorted(level_at):
        if expected_half_width(n, sigma, level_at[n]) <= delta / 2.0:
            return n
    return None


@dataclass(frozen=True)
class SeedPlan:
    """How many seeds one comparison needs to be settled."""

    seeds_run: int
    """Seeds run so far (finite or not)."""
    n: int
    """Finite pairs among them, the sample σ is estimated from."""
    s: float
    """The paired differences' sample SD (NaN with fewer than MIN_PAIRS)."""
    sigma: float
    """The σ planned on: Browne's upper bound (n ≥ MIN_PAIRS and some spread), NaN otherwise."""
    needed: int | None
    """Seeds the comparison needs in all (planned on `sigma`); None: beyond the cap or no plan."""
    needed_point: int | None
    """The same planned on s itself, beside it."""
    note: str
    """Why the plan is weaker than usual ('' when it is not)."""
    diffs: tuple[float, ...] = ()
    """The per-seed differences it was made from, in seed order (NaN: a failed seed), which the forecast of the
    table's plan replays (adbs_lab/stats/forecast.py; adbs_lab/results/comparisons.py: plan_lines)."""

    @property
    def extra(self) -> int | None:
        """Seeds to add to those run (0 when enough ran); None when `needed` is."""
        return None if self.needed is None else max(0, self.needed - self.seeds_run)


def plan(diffs: Sequence[float], delta: float, level_at: Mapping[int, float]) -> SeedPlan:
    """One comparison's plan from its per-seed differences so far (non-finite ones left out)."""
    x = np.asarray(list(diffs), dtype=float)
    ok = x[np.isfinite(x)]
    n = len(ok)
    if n < MIN_PAIRS:  # no verdict is read from fewer (adbs_lab/stats/verdicts.py: MIN_PAIRS): no plan either
        return SeedPlan(len(x), n, math.nan, math.nan, None, None, FEWER, tuple(x))
    s = float(np.std(ok, ddof=1))
    if no_spread(ok):  # a plan from s = 0 would say "enough"
        return SeedPlan(len(x), n, s, math.nan, None, None, NO_SPREAD, tuple(x))
    point = smallest_n(s, delta, level_at)
    upper = sigma_upper(s, n)
    return SeedPlan(len(x), n, s, upper, smallest_n(upper, delta, level_at), point, "", tuple(x))


def plan_family(diffs_by_comparison: Mapping[str, Sequence[float]], delta: float = 1.0, alpha: float = 0.05,
                m: int | None = None, looks: Looks | None = None) -> dict[str, SeedPlan]:
    """{comparison: SeedPlan} for the unresolved comparisons given; m is the table's number of comparisons (all of
    them, resolved or not: the adjustment counts them all), by default those given. With `looks`, the study is
    sequential and the plan names the first look expected to settle the comparison (alpha: looks.alpha)."""
    family = m if m is not None else len(diffs_by_comparison)
    level_at = levels(looks.alpha if looks is not None else alpha, family, looks)
    return {name: plan(d, delta, level_at) for name, d in diffs_by_comparison.items()}


@dataclass(frozen=True)
class Cost:
    """What the planned seeds would cost."""

    seconds: float
    """Extra seeds × each row's mean seconds per trial, summed over the rows that need them (each row once)."""
    seeds_by_row: dict[str, int]
    """Extra seeds per row: the most any of its comparisons needs, as row or as reference."""
    unplanned: tuple[str, ...]
    """Comparisons without a plan (too few seeds, or beyond the cap), not in `seconds`."""


def extra_cost(plans: Mapping[str, SeedPlan], pairs: Mapping[str, tuple[str, str]],
               trial_s: Mapping[str, float]) -> Cost:
    """The seconds the plans would take: `pairs` maps a comparison to (row, reference), `trial_s` a row to its
    measured mean seconds per trial. A reference shared by several comparisons runs its extra seeds once, as many
    as its most demanding comparison needs (the pairs need the same seeds on both sides)."""
    seeds: dict[str, int] = {}
    for name, p in plans.items():
        if p.extra is None:
            continue
        for row in pairs[name]:
            seeds[row] = max(seeds.get(row, 0), p.extra)
    unplanned = tuple(name for name, p in plans.items() if p.extra is None)
    return Cost(sum(k * trial_s[row] for row, k in seeds.items()), seeds, unplanned)
