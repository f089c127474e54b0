"""The planned looks of a study that adds seeds in batches, and the error rate α spent at each look.

A study looks at its comparisons only after complete batches: the first batch of `n0` seeds, then batches of
`batch` seeds up to the cap `max_seeds` = N (the last batch is cut short to end at N). The looks are known before
any seed runs, so the levels are too: look k, at n_k seeds, spends α_k = α(t_k) - α(t_{k-1}) of the family's α,
with t_k = n_k / N the information fraction and α(t) a Lan-DeMets spending function (Lan & DeMets 1983,
"Discrete sequential boundaries for clinical trials", Biometrika 70:659):

- "obrien_fleming": α(t) = 2 - 2 Φ(z_{1-α/2} / √t), the O'Brien-Fleming type (O'Brien & Fleming 1979): almost
  nothing early, nearly all of α at the cap;
- "pocock": α(t) = α ln(1 + (e - 1) t), the Pocock type: more of α early;
- "equal": α / K at each of the K looks.

The α_k sum to α, so by the union bound every interval at every look covers with probability ≥ 1 - α
(adbs_lab/stats/verdicts.py divides α_k by the m comparisons of the table: Bonferroni). A study of one fixed size
is the one-look case, `Looks.fixed(n)`.

The defaults (O'Brien-Fleming type, batches of 2, N = 8) were chosen by simulated power at δ:
docs/statistics.md and `python bench/verdict_simulation.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy import stats

__all__ = ["Spending", "SPENDINGS", "DEFAULT_SPENDING", "DEFAULT_N0", "DEFAULT_BATCH", "DEFAULT_MAX_SEEDS", "spent", "Looks"]

Spending = Literal["obrien_fleming", "pocock", "equal"]
SPENDINGS: tuple[Spending, ...] = ("obrien_fleming", "pocock", "equal")
"""The spending functions `Looks.spending` may name."""

DEFAULT_SPENDING: Spending = "obrien_fleming"
"""The spending function a study uses unless told otherwise (chosen by simulated power: docs/statistics.md)."""
DEFAULT_N0 = 3
"""Seeds in the first batch: three, the fewest whose spread says anything about σ."""
DEFAULT_BATCH = 2
"""Seeds added per look after the first batch (chosen by simulated power: docs/statistics.md)."""
DEFAULT_MAX_SEEDS = 8
"""The cap N on seeds per row."""


def spent(alpha: float, t: float, spending: Spending, k: int = 1, n_looks: int = 1) -> float:
    """α(t): the share of `alpha` spent by information fraction t (0 < t ≤ 1); "equal" counts looks, k of n_looks."""
    if spending == "obrien_fleming":
        return float(2.0 * stats.norm.sf(stats.norm.isf(alpha / 2.0) / math.sqrt(t)))
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "equal":
        return alpha * k / n_looks
    raise ValueError(f"unknown spending function {spending!r}; one of {', '.join(SPENDINGS)}")


@dataclass(frozen=True)
class Looks:
    """When a study looks at its comparisons and how much of α each look spends."""

    n0: int = DEFAULT_N0
    """Seeds in the first batch: the first look."""
    batch: int = DEFAULT_BATCH
    """Seeds added before each later look."""
    max_seeds: int = DEFAULT_MAX_SEEDS
    """The cap N: the last look, after which a comparison stays unresolved."""
    alpha: float = 0.05
    """The family's error rate, spent across the looks (and split over the comparisons by the verdicts)."""
    spending: Spending = DEFAULT_SPENDING
    """The spending function: "obrien_fleming", "pocock" or "equal"."""

    def __post_init__(self) -> None:
        if not (1 <= self.n0 <= self.max_seeds and self.batch >= 1):
            raise ValueError(f"looks need 1 <= n0 <= max_seeds and batch >= 1, not {self}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), not {self.alpha}")
        if self.spending not in SPENDINGS:
            raise ValueError(f"unknown spending function {self.spending!r}; one of {', '.join(SPENDINGS)}")

    @classmethod
    def fixed(cls, n: int, alpha: float = 0.05) -> Looks:
        """One look at n seeds, all of α spent there: a study of fixed size."""
        return cls(n0=n, batch=1, max_seeds=n, alpha=alpha)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The seeds at each look: n0, n0 + batch, ..., max_seeds."""
        return tuple(range(self.n0, self.max_seeds, self.batch)) + (self.max_seeds,)

    @property
    def alphas(self) -> tuple[float, ...]:
        """α_k, the family's error rate spent at each look; they sum to alpha."""
        sizes = self.sizes
        total = [spent(self.alpha, n / self.max_seeds, self.spending, k + 1, len(sizes)) for k, n in enumerate(sizes)]
        total[-1] = self.alpha  # every function spends all of α at t = 1; exact, not rounded
        return tuple(b - a for a, b in zip([0.0] + total[:-1], total))
