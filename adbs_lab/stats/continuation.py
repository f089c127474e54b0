"""What a study does after a look under a plan with a horizon (adbs_lab/stats/looks.py: `Looks.horizon`): run this
invocation's next look, offer a continuation of the same study, or say that the horizon is spent; and the split of
α between the primary metric, which alone decides when seeds stop, and the secondary metrics read beside it.

A default run pauses at the cap; the continuation it prints takes the next planned looks to the next pause, and so
on up to the horizon (`pauses`: the cap, the first look at or past the midpoint of cap and horizon, the horizon).
Each look spends the α_k recorded in the plan before any seed ran, whichever invocation takes it, and a
continuation runs the next unused seeds, so every verdict of the study and of its continuations is one of the
plan's intervals and the union bound covers them all together (docs/statistics.md, "Continuing a study"). A
comparison open at a pause is "continue" when the plan has looks left for it, and "inconclusive at the horizon" when
it has none: then no continuation is offered, since any further seed would spend α the plan does not have.

The split of α (docs/statistics.md, "Continuing a study"): the primary metric's intervals use `primary_alpha` of
the family's α, spent over the looks as the plan says, at α_k / m; each of the secondary metrics' intervals uses
`secondary_alpha` spent the same way, at α_k / (m · n_secondaries) (Bonferroni over secondaries × comparisons), so
all of them together still cover with probability ≥ 1 - α.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from adbs_lab.stats.looks import DEFAULT_MAX_SEEDS, DEFAULT_RESERVE, Looks, continuable
from adbs_lab.stats.verdicts import Label, Verdict

__all__ = ["RESOLVED", "MORE", "CONTINUE", "INCONCLUSIVE", "DEFAULT_PRIMARY_ALPHA",
           "DEFAULT_SECONDARY_ALPHA", "DEFAULT_SECONDARIES", "CAP_FOR_FAMILY", "pauses", "next_pause", "Step", "step",
           "advise", "AlphaSplit", "design"]

RESOLVED = "resolved"
MORE = "more seeds"
CONTINUE = "continue"
INCONCLUSIVE = "inconclusive at the horizon"

DEFAULT_PRIMARY_ALPHA = 0.04
"""The primary metric's share of the family's α = 0.05."""
DEFAULT_SECONDARY_ALPHA = 0.01
"""The secondary metrics' share, split over secondaries × comparisons."""
DEFAULT_SECONDARIES = 4
"""Secondary metrics read beside the primary: last-session base and novel accuracy, H last, H averaged."""
CAP_FOR_FAMILY = ((3, DEFAULT_MAX_SEEDS), (12, 9), (20, 11))
"""(largest family m, cap): a cap whose simulated power at Δ/σ_d = 2 is at least 80% by the cap for every family
up to that size, with the default split and reserve, batches of 2 from 3 seeds (bench/continuation_simulation.py;
docs/statistics.md, "Continuing a study")."""


def pauses(looks: Looks) -> tuple[int, ...]:
    """Where the invocations of a study stop: the cap, then the first look at or past the midpoint between cap and
    horizon, then the horizon (only the cap without a horizon)."""
    if looks.horizon is None:
        return (looks.max_seeds,)
    middle = next(n for n in looks.sizes if 2 * n >= looks.max_seeds + looks.horizon)
    return tuple(sorted({looks.max_seeds, middle, looks.horizon}))


def next_pause(looks: Looks, seeds_run: int) -> int | None:
    """The first pause beyond `seeds_run` seeds; None at or past the horizon."""
    return next((p for p in pauses(looks) if p > seeds_run), None)


@dataclass(frozen=True)
class Step:
    """What one comparison does next."""

    state: str
    """RESOLVED, MORE (this invocation's next look), CONTINUE (a continuation's) or INCONCLUSIVE (at the horizon)."""
    seeds: int | None
    """Seeds its rows reach at its next look; None when it has none."""
    until: int | None
    """Where the invocation that takes that look pauses; None when there is no such look."""


def step(resolved: bool, seeds_run: int, looks: Looks, stop: int) -> Step:
    """The next step of a comparison after `seeds_run` seeds, in an invocation that pauses at `stop` seeds."""
    if stop not in pauses(looks):
        raise ValueError(f"an invocation pauses at one of {pauses(looks)} seeds, not {stop}")
    if resolved:
        return Step(RESOLVED, None, None)
    nxt = next((n for n in looks.sizes if n > seeds_run), None)
    if nxt is None:
        return Step(INCONCLUSIVE, None, None)
    if nxt <= stop:
        return Step(MORE, nxt, stop)
    return Step(CONTINUE, nxt, next_pause(looks, max(stop, seeds_run)))


def advise(verdicts: Mapping[str, Verdict], looks: Looks, stop: int) -> dict[str, Step]:
    """{comparison: its Step} for a family's verdicts (adbs_lab/stats/verdicts.py: family_verdicts with `looks`)
    in an invocation that pauses at `stop`: a continuation is offered only where some comparison is CONTINUE."""
    return {name: step(v.verdict is not Label.NOT_RESOLVED, v.n_seeds, looks, stop) for name, v in verdicts.items()}


@dataclass(frozen=True)
class AlphaSplit:
    """The family's α split between the primary metric and the secondary ones."""

    primary_alpha: float = DEFAULT_PRIMARY_ALPHA
    """The primary metric's share: its intervals at α_k / m, α_k its plan's share at look k."""
    secondary_alpha: float = DEFAULT_SECONDARY_ALPHA
    """The secondaries' share: each interval at α_k / (m · n_secondaries)."""
    n_secondaries: int = DEFAULT_SECONDARIES
    """How many secondary metrics each comparison is read on."""

    def __post_init__(self) -> None:
        if not (self.primary_alpha > 0 and self.secondary_alpha >= 0 and self.primary_alpha + self.secondary_alpha < 1):
            raise ValueError(f"shares must be > 0 (primary), >= 0 (secondary) and sum below 1, not {self}")
        if self.n_secondaries < 0 or (self.n_secondaries == 0) != (self.secondary_alpha == 0):
            raise ValueError(f"secondary_alpha > 0 needs n_secondaries >= 1 (and 0 needs none), not {self}")

    @property
    def alpha(self) -> float:
        """The family's α: every verdict on every metric true together with probability ≥ 1 - alpha."""
        return self.primary_alpha + self.secondary_alpha

    def primary(self, looks: Looks) -> Looks:
        """The primary metric's plan: `looks` at its share."""
        return dataclasses.replace(looks, alpha=self.primary_alpha)

    def secondary(self, looks: Looks) -> Looks:
        """Each secondary metric's plan at the secondaries' share (read at m · n_secondaries: `secondary_m`)."""
        return dataclasses.replace(looks, alpha=self.secondary_alpha)

    def secondary_m(self, m: int) -> int:
        """The Bonferroni family size of the secondaries' intervals for m comparisons."""
        return m * self.n_secondaries


def design(m: int, split: AlphaSplit | None = None) -> Looks:
    """The recommended plan of the primary metric for a family of m comparisons: the cap of CAP_FOR_FAMILY, a
    horizon twice the cap, DEFAULT_RESERVE of the primary's share kept for continuations."""
    if not 1 <= m <= CAP_FOR_FAMILY[-1][0]:
        raise ValueError(f"a family of {m} comparisons: the caps are simulated for 1 to {CAP_FOR_FAMILY[-1][0]} "
                         f"(CAP_FOR_FAMILY); give the plan's cap yourself (adbs_lab/stats/looks.py: continuable)")
    cap = next(c for most, c in CAP_FOR_FAMILY if m <= most)
    share = (split or AlphaSplit()).primary_alpha
    return continuable(cap=cap, reserve=DEFAULT_RESERVE, alpha=share)
