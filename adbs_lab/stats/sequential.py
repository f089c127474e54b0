"""Seeds added in complete batches until every comparison of a table is resolved, or the cap is reached.

The looks are planned (adbs_lab/stats/looks.py: n0, n0 + b, ..., N) and each spends a share α_k of the family's
α by a Lan-DeMets spending function (Lan & DeMets 1983; the O'Brien-Fleming type by default, O'Brien & Fleming
1979); look k's intervals are at α_k / m (Bonferroni over the m comparisons, adbs_lab/stats/verdicts.py). Since
Σ α_k = α, the union bound gives: every interval of every comparison at every look covers its true difference
together with probability ≥ 1 - α, so every verdict ever printed (better, worse and equivalent alike) is true
with that probability, and a comparison resolved at a look keeps its verdict, interval and n.

This is conservative against exact group-sequential boundaries (Jennison & Turnbull 2000, "Group Sequential
Methods with Applications to Clinical Trials", ch. 7), which use the correlation between looks to spend less. We
accept it: those boundaries are computed for z statistics with known σ and lose their level with t statistics
over 3 to 8 seeds, the union bound needs no such computation and holds for any dependence between looks and
comparisons, and each displayed interval is an ordinary t-interval whose verdict is read from it.

Everything here is a pure function of the finished trials' values in seed order, so a resumed study reaches the
same verdicts and asks for the same seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import MIN_PAIRS, Label, Verdict, family_verdicts

__all__ = ["ALL_RESOLVED", "CAP", "PAUSE", "MORE", "DEFAULT_LOOKS", "NextBatch", "next_look", "next_batch"]

ALL_RESOLVED = "all resolved"
CAP = "cap reached"
PAUSE = "paused"
"""Stopped at the invocation's pause (the cap of a plan with a horizon) with comparisons open that the plan has looks
left for: a continuation of the study may take them (adbs_lab/stats/continuation.py)."""
MORE = "more seeds"
DEFAULT_LOOKS = Looks()
"""The default plan: first batch 3, batches of 2, cap 8, α = 0.05, O'Brien-Fleming-type spending."""


@dataclass(frozen=True)
class NextBatch:
    """What a sequential study does next."""

    done: bool
    """True when every comparison is resolved or every unresolved one has reached the cap (or the pause)."""
    reason: str
    """ALL_RESOLVED, CAP (no look left in the plan for an open comparison), PAUSE (looks left beyond this
    invocation's pause) or MORE (not done)."""
    seeds: dict[str, int]
    """{row: the seeds it should have after the next batch}, for each unresolved comparison's row and reference
    (each row once); empty when done."""
    verdicts: dict[str, Verdict]
    """Every comparison's verdict so far (frozen once resolved)."""


def next_look(seeds_run: int, looks: Looks) -> int | None:
    """The seeds at the first planned look beyond `seeds_run`; None past the last look (the cap, or the horizon of a
    plan that has one: adbs_lab/stats/continuation.py says where each invocation pauses)."""
    return next((n for n in looks.sizes if n > seeds_run), None)


def next_batch(diffs_by_comparison: Mapping[str, Sequence[float]], pairs: Mapping[str, tuple[str, str]],
               looks: Looks = DEFAULT_LOOKS, delta: float = 1.0, m: int | None = None,
               min_pairs: int = MIN_PAIRS, stop: int | None = None) -> NextBatch:
    """The verdicts after the finished trials and which rows need more seeds. `diffs_by_comparison`: per-seed
    differences row - reference in seed order (NaN for a failed seed), `pairs`: comparison -> (row, reference).
    `m`: the family's size when it holds comparisons not given here (a race's pairs of contenders:
    adbs_lab/search/seeds/race.py); default, those given. `min_pairs`: the verdict policy's rule of too few pairs.
    `stop`: the most seeds this invocation runs (its pause; default the plan's last look): a look beyond it is left to
    a continuation, and the study stops with PAUSE."""
    verdicts = family_verdicts(diffs_by_comparison, looks.alpha, delta, looks, m, min_pairs)
    open_ = [name for name, v in verdicts.items() if v.verdict is Label.NOT_RESOLVED]
    if not open_:
        return NextBatch(True, ALL_RESOLVED, {}, verdicts)
    seeds: dict[str, int] = {}
    later = False
    for name in open_:
        target = next_look(len(diffs_by_comparison[name]), looks)
        if target is None:
            continue  # at the plan's last look: stays unresolved
        if stop is not None and target > stop:
            later = True  # a continuation's look
            continue
        for row in pairs[name]:
            seeds[row] = max(seeds.get(row, 0), target)
    if not seeds:
        return NextBatch(True, PAUSE if later else CAP, {}, verdicts)
    return NextBatch(False, MORE, seeds, verdicts)
