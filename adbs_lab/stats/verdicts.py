"""One comparison's verdict, read from the interval the table displays, with an error guarantee for the table.

- The interval: the paired t-interval of Student (1908) over the per-seed differences row - reference (accuracy
  points), mean ± t_{1-a/2, n-1} s / √n. A seed whose difference is not finite (a diverged or failed trial) is
  left out and counted (adbs_lab/stats/intervals.py: paired_t, the one owner of the t-intervals).
- No verdict from too little: with fewer than MIN_PAIRS = 3 finite pairs, or pairs whose differences do not spread
  (`no_spread`), there is no interval and the comparison is not resolved. Accuracies are counts over a finite
  evaluation set, so differences lie on a grid of 100 / N points and several can be equal: their s = 0 would give a
  zero-width interval and an immediate verdict. Under no true difference, a 3-comparison table of 2 seeds on the
  grid of N = 700 test images gave a false verdict in 11% of tables where 5% were allowed; with both rules, at most
  α at 2 to 8 seeds and N = 700, 2,000, 10,000 (tests/adbs_lab/stats/test_zero_spread.py, docs/statistics.md).
  A spread below the grid's own (step / √12, the SD of rounding to the grid) is no spread: on the grid, with at most
  12 pairs, that is a spread of exactly 0 (one pair off by a step already gives s = step / √n); the step is taken
  from the evaluation set's size where a caller knows it (`step`), else the spread must be 0 within SPREAD_TOL.
- The adjustment: Bonferroni (Dunn 1961, "Multiple comparisons among means", JASA 56:52) over the m comparisons of
  a table, a = α_k / m, so the table's intervals cover together with probability ≥ 1 - α; with planned looks
  (adbs_lab/stats/looks.py) α_k is the share of α spent at look k, and the union bound covers every look too.
- The verdict: one function (`classify`) reads it from the displayed interval, so the two cannot disagree. Given
  δ > 0: inside (-δ, +δ) and containing 0: equivalent within ±δ; inside and above 0: better, by less than δ;
  inside and below 0: worse, by less than δ; otherwise lower bound > 0: better; upper bound < 0: worse; else not
  resolved. Equivalence by the inclusion of a confidence interval in (-δ, δ) is Schuirmann's two one-sided tests
  (Schuirmann 1987, J Pharmacokinet Biopharm 15:657) at the interval's level, and valid at that level together with
  the directional verdicts (Berger & Hsu 1996, "Bioequivalence trials, intersection-union tests and equivalence
  confidence sets", Statistical Science 11:283). When every interval covers the true difference, every verdict is
  true: the error guarantee of a verdict is the coverage guarantee of its interval.

The arithmetic works on numpy arrays (the last axis the seeds) so the simulations of the tests run the same code
as a table; `family_verdicts` is the entry for a table's comparisons.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from adbs_lab.stats.intervals import finite_moments, paired_t, welch_t
from adbs_lab.stats.looks import Looks

__all__ = ["MIN_PAIRS", "LEGACY_MIN_PAIRS", "SPREAD_TOL", "spread_floor", "no_spread", "decisive_t",
           "no_interval_reason", "why_no_interval", "Label", "LABELS", "CODE", "Verdict", "classify", "label",
           "printed_ends", "bonferroni", "replay", "read_at_look", "family_verdicts", "paired_differences", "half_width",
           "CONSERVATIVE_BELOW", "welch", "can_have_interval"]


class Label(str, enum.Enum):
    """What a comparison's interval says, as a table displays it; exactly one holds for any interval."""

    EQUIVALENT = "equivalent within ±δ"
    BETTER_SMALL = "better, by less than δ"
    WORSE_SMALL = "worse, by less than δ"
    BETTER = "better"
    WORSE = "worse"
    NOT_RESOLVED = "not resolved"


LABELS: tuple[Label, ...] = tuple(Label)
"""The labels in code order: `classify` returns an index into this tuple."""
CODE = {label: i for i, label in enumerate(LABELS)}
"""A label's code: its index in LABELS."""


@dataclass(frozen=True)
class Verdict:
    """One comparison's displayed interval and the verdict read from it."""

    estimate: float
    """Mean of the finite per-seed differences row - reference (NaN with none)."""
    lo: float
    """Lower end of the displayed interval (NaN with fewer than MIN_PAIRS finite pairs, or no spread)."""
    hi: float
    """Upper end of the displayed interval (NaN as `lo`)."""
    n: int
    """Finite pairs the interval is over."""
    n_left_out: int
    """Pairs left out because a difference was not finite (a diverged or failed seed)."""
    level: float
    """The interval's own confidence level, 1 - α_k / m (NaN before the first look)."""
    verdict: Label
    """What the interval says."""
    look: int
    """The look (1 = the first batch) at which the verdict was reached, or the latest look if it is not; 0: none yet."""
    n_seeds: int
    """Seeds run (finite or not) at that look."""
    conservative_df: bool = False
    """An unpaired interval on the conservative degrees of freedom min(n_a, n_b) - 1 (`welch`)."""


MIN_PAIRS = 3
"""The fewest finite pairs a verdict (and a plan: adbs_lab/stats/planner.py) is read from; for an unpaired one, the
finite runs on each side (module docstring)."""
LEGACY_MIN_PAIRS = 2
"""The rule before MIN_PAIRS: an interval from 2 finite pairs, and no spread check (what a study recorded before the
rule read its verdicts by: adbs_lab/stats/policy.py, VerdictPolicy.min_pairs)."""
SPREAD_TOL = 1e-9
"""Points: differences whose SD is at most this (float rounding of equal differences) do not spread."""


def spread_floor(step: float | None = None) -> float:
    """The SD at or below which differences do not spread: the grid's rounding SD step / √12 for an evaluation set
    of step = 100 / N points, else SPREAD_TOL (module docstring)."""
    return SPREAD_TOL if step is None else max(SPREAD_TOL, step / math.sqrt(12.0))


def no_spread(values: np.ndarray, step: float | None = None) -> np.ndarray:
    """Over the last axis: whether the finite values spread by no more than `spread_floor(step)` (two or more of
    them; fewer is MIN_PAIRS's case)."""
    n, _, var = finite_moments(values)
    return (n >= 2) & ~(np.sqrt(var) > spread_floor(step))


def decisive_t(values: np.ndarray, a: float, step: float | None = None,
               min_pairs: int = MIN_PAIRS) -> tuple[np.ndarray, ...]:
    """`paired_t` as a verdict reads it: (estimate, lo, hi, n, n_left_out), the ends NaN where there are fewer than
    `min_pairs` finite pairs or they do not spread (`no_spread`), so that nothing resolves there. `min_pairs` =
    LEGACY_MIN_PAIRS: the rule before, without the spread check (a study recorded under it)."""
    est, lo, hi, n, left = paired_t(values, a)
    none = n < min_pairs
    if min_pairs >= MIN_PAIRS:
        none = none | no_spread(values, step)
    return est, np.where(none, np.nan, lo), np.where(none, np.nan, hi), n, left


def no_interval_reason(v: "Verdict", min_pairs: int = MIN_PAIRS) -> str:
    """Why a verdict has no interval, as a table cell says it: too few pairs, or no spread."""
    if v.n < min_pairs:
        return f"fewer than {min_pairs} finite pairs"
    return "no spread: every pair's difference is the same"


def why_no_interval(v: "Verdict", min_pairs: int = MIN_PAIRS) -> str:
    """Why a verdict has no interval, as its line says it."""
    return f"{no_interval_reason(v, min_pairs)}, no interval"


def can_have_interval(n: int) -> bool:
    """Whether a comparison of `n` finite pairs (unpaired: the smaller side's finite runs) gets an interval: a family
    across studies counts only those (adbs_lab/results/comparisons.py: compare_rows), as one that cannot claims
    nothing."""
    return n >= MIN_PAIRS


TOUCH = 1e-9
"""Points: an interval end this close to 0 or ±δ counts as touching it (the verdict is the unresolved side)."""


def classify(lo: np.ndarray | float, hi: np.ndarray | float, delta: float) -> np.ndarray:
    """The code (index into LABELS) of the verdict each interval [lo, hi] gives; NaN ends: not resolved."""
    if not delta > 0:
        raise ValueError(f"delta must be > 0, not {delta}")
    # an end within TOUCH of 0 or ±δ touches it: floating-point rounding never resolves a comparison
    lo, hi = np.asarray(lo, dtype=float) - TOUCH, np.asarray(hi, dtype=float) + TOUCH
    inside = (lo > -delta) & (hi < delta)  # comparisons with NaN are False: a missing interval resolves nothing
    code = np.full(np.broadcast(lo, hi).shape, CODE[Label.NOT_RESOLVED])
    code = np.where(hi < 0, CODE[Label.WORSE], code)
    code = np.where(lo > 0, CODE[Label.BETTER], code)
    code = np.where(inside & (lo <= 0) & (hi >= 0), CODE[Label.EQUIVALENT], code)
    code = np.where(inside & (lo > 0), CODE[Label.BETTER_SMALL], code)
    return np.where(inside & (hi < 0), CODE[Label.WORSE_SMALL], code)


def label(lo: float, hi: float, delta: float) -> Label:
    """The verdict of one interval [lo, hi] (`classify` for one)."""
    return LABELS[int(classify(lo, hi, delta))]


def printed_ends(v: Verdict, delta: float) -> tuple[str, str, int]:
    """The interval's ends as printed, and their decimals: rounded outward (the printed interval holds the computed
    one), with as many decimals as it takes for the printed ends to give `v`'s verdict (2, or more where an end is
    within rounding of 0 or ±δ), so a verdict never stands beside a printed interval that says otherwise. Up to 17
    decimals: an end resolves once it clears 0 or ±δ by TOUCH, 1e-9, and at 6 an end 1.5e-9 above 0 printed
    +0.00000000 beside "better" (tests/adbs_lab/stats/test_attack_corners.py)."""
    for d in range(2, 18):
        k = 10 ** d
        lo, hi = math.floor(v.lo * k) / k, math.ceil(v.hi * k) / k
        if label(lo, hi, delta) is v.verdict:
            return f"{lo:+.{d}f}", f"{hi:+.{d}f}", d
    return f"{v.lo:+.8f}", f"{v.hi:+.8f}", 8


def bonferroni(alpha: float, m: int) -> float:
    """The error rate of each of m intervals so that all cover together with probability ≥ 1 - alpha (Dunn 1961)."""
    if m < 1:
        raise ValueError(f"a family has at least one comparison, not {m}")
    return alpha / m


def replay(values: np.ndarray, looks: Looks, m: int, delta: float, step: float | None = None,
           min_pairs: int = MIN_PAIRS) -> dict[str, np.ndarray]:
    """Every comparison's verdict after the looks its seeds reach (the last axis of `values`, in seed order): at
    look k the interval over the first n_k seeds at error rate α_k / m; the first look that resolves a comparison
    freezes its verdict, interval and n. Before the first look: NaN interval, not resolved, look 0. Nothing
    resolves from fewer than `min_pairs` finite pairs or without spread (`decisive_t`; `step`: the grid's)."""
    x = np.asarray(values, dtype=float)
    shape = x.shape[:-1]
    out = {"code": np.full(shape, CODE[Label.NOT_RESOLVED]), "look": np.zeros(shape, dtype=int),
           "n_seeds": np.full(shape, x.shape[-1]), "level": np.full(shape, np.nan)}
    est, lo, hi, n, left = decisive_t(x, 1.0, step, min_pairs)  # the estimate and counts before any look; ends NaN below
    out.update(estimate=est, lo=np.full(shape, np.nan), hi=np.full(shape, np.nan), n=n, n_left_out=left)
    open_ = np.ones(shape, dtype=bool)
    for k, (size, alpha_k) in enumerate(zip(looks.sizes, looks.alphas), start=1):
        if size > x.shape[-1]:
            break
        a = bonferroni(alpha_k, m)
        est, lo, hi, n, left = decisive_t(x[..., :size], a, step, min_pairs)
        code = classify(lo, hi, delta)
        for key, v in (("code", code), ("estimate", est), ("lo", lo), ("hi", hi), ("n", n), ("n_left_out", left),
                       ("look", k), ("n_seeds", size), ("level", 1.0 - a)):
            out[key] = np.where(open_, v, out[key])  # a resolved comparison keeps what it had
        open_ &= code == CODE[Label.NOT_RESOLVED]
    return out


def read_at_look(values: np.ndarray, look: np.ndarray | int, looks: Looks, m: int, delta: float,
                 step: float | None = None, min_pairs: int = MIN_PAIRS) -> dict[str, np.ndarray]:
    """Every comparison's verdict at one given look of `looks` (`look`, per comparison: 1 = the first batch; 0 or
    a look its seeds do not reach: none, not resolved): the interval over the first n_k seeds at α_k / m, the same
    keys as `replay`. How a secondary metric is read: at the look where its comparison's primary metric stopped
    (`replay`'s "look"), on the secondaries' plan (adbs_lab/stats/continuation.py: AlphaSplit.secondary), so each
    secondary interval is one of the α_k / m intervals the union bound counts, read once (docs/statistics.md)."""
    x = np.asarray(values, dtype=float)
    shape = x.shape[:-1]
    look = np.broadcast_to(np.asarray(look, dtype=int), shape)
    est, _, _, n, left = decisive_t(x, 1.0, step, min_pairs)  # before any look: the estimate and counts, no ends
    out = {"code": np.full(shape, CODE[Label.NOT_RESOLVED]), "look": np.zeros(shape, dtype=int),
           "n_seeds": np.full(shape, x.shape[-1]), "level": np.full(shape, np.nan), "estimate": est,
           "lo": np.full(shape, np.nan), "hi": np.full(shape, np.nan), "n": n, "n_left_out": left}
    for k, (size, alpha_k) in enumerate(zip(looks.sizes, looks.alphas), start=1):
        here = look == k
        if size > x.shape[-1] or not here.any():
            continue
        a = bonferroni(alpha_k, m)
        est, lo, hi, n, left = decisive_t(x[..., :size], a, step, min_pairs)
        for key, v in (("code", classify(lo, hi, delta)), ("estimate", est), ("lo", lo), ("hi", hi), ("n", n),
                       ("n_left_out", left), ("look", k), ("n_seeds", size), ("level", 1.0 - a)):
            out[key] = np.where(here, v, out[key])
    return out


def family_verdicts(diffs_by_comparison: Mapping[str, Sequence[float]], alpha: float = 0.05, delta: float = 1.0,
                    looks: Looks | None = None, m: int | None = None, min_pairs: int = MIN_PAIRS) -> dict[str, Verdict]:
    """{comparison: its Verdict} for a table's comparisons, each given its per-seed differences row - reference in
    seed order. Without `looks`, one look at the seeds each comparison has, at alpha / m (a study of fixed size);
    with them, the planned looks (their own alpha is the family's), each at α_k / m. `m`: the family's size when
    it holds comparisons not given here (unpaired ones: `welch`); default, those given."""
    m = len(diffs_by_comparison) if m is None else m
    out = {}
    for name, diffs in diffs_by_comparison.items():
        x = np.asarray(list(diffs), dtype=float)
        plan = looks if looks is not None else Looks.fixed(max(len(x), 1), alpha)
        r = replay(x, plan, m, delta, min_pairs=min_pairs)
        out[name] = Verdict(estimate=float(r["estimate"]), lo=float(r["lo"]), hi=float(r["hi"]), n=int(r["n"]),
                            n_left_out=int(r["n_left_out"]), level=float(r["level"]), verdict=LABELS[int(r["code"])],
                            look=int(r["look"]), n_seeds=int(r["n_seeds"]))
    return out


def paired_differences(pair: tuple[str, str], values: Mapping[str, Mapping[int, float]],
                       states: Mapping[str, Mapping[int, str]]) -> list[float]:
    """The per-seed differences row - reference of `pair` in seed order over the seeds either row ended (`states`:
    {row: {seed: how it ended}}), NaN where a pair is incomplete (a seed without a finite value in both, `values`:
    {row: {seed: value}}): the one pairing rule of a table's comparisons and of the looks."""
    row, ref = pair
    out: list[float] = []
    for s in sorted(set(states.get(row, {})) | set(states.get(ref, {}))):
        a, b = values.get(row, {}).get(s), values.get(ref, {}).get(s)
        ok = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
        out.append(a - b if ok else math.nan)  # type: ignore[operator]
    return out


def half_width(v: Verdict) -> float:
    """The displayed interval's half-width (NaN with none), for a table cell `estimate ± half-width`."""
    return (v.hi - v.lo) / 2.0 if math.isfinite(v.lo) and math.isfinite(v.hi) else math.nan


CONSERVATIVE_BELOW = 8
"""An unpaired comparison with a side of fewer runs than this takes the conservative degrees of freedom
min(n_a, n_b) - 1 (`welch`; adbs_lab/stats/intervals.py: welch_t): Welch-Satterthwaite's estimated df undercovers
there at Bonferroni levels with unequal spreads (5 runs against 8, SDs 3:1, at 0.05/6: 1.2% missed for 0.83% claimed;
8 against 8: 0.82%; measured by bench/corner_simulation.py, docs/statistics.md)."""


def welch(a: Sequence[float], b: Sequence[float], alpha: float, m: int, delta: float) -> Verdict:
    """An unpaired comparison (two rows that ran different seeds or different data, so no seed pairs them): Welch's
    t-interval for mean(a) - mean(b) (Welch 1947, "The generalization of 'Student's' problem when several different
    population variances are involved", Biometrika 34:28) at alpha / m, with Welch-Satterthwaite degrees of freedom,
    or the conservative min(n_a, n_b) - 1 where a side has fewer than CONSERVATIVE_BELOW finite runs
    (adbs_lab/stats/intervals.py: welch_t; the verdict says so: `conservative_df`); the verdict read from it by
    `classify` as for a paired one. `n` is the smaller of the two samples' finite counts; non-finite values are left
    out and counted."""
    x, y = (np.asarray(list(v), dtype=float) for v in (a, b))
    fx, fy = x[np.isfinite(x)], y[np.isfinite(y)]
    left = int(len(x) - len(fx) + len(y) - len(fy))
    est = float(fx.mean() - fy.mean()) if len(fx) and len(fy) else math.nan
    a_ = bonferroni(alpha, m)
    lo = hi = math.nan
    conservative = False
    if can_have_interval(min(len(fx), len(fy))) and not (no_spread(fx) and no_spread(fy)):  # neither side spreads: none
        _, lo_, hi_, _ = welch_t(fx, fy, a_, CONSERVATIVE_BELOW)
        lo, hi = float(lo_), float(hi_)
        conservative = min(len(fx), len(fy)) < CONSERVATIVE_BELOW
    code = int(classify(lo, hi, delta))  # NaN ends: not resolved
    return Verdict(estimate=est, lo=lo, hi=hi, n=int(min(len(fx), len(fy))), n_left_out=left, level=1.0 - a_,
                   verdict=LABELS[code], look=1, n_seeds=int(max(len(x), len(y))), conservative_df=conservative)
