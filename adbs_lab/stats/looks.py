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

**Continuations.** With a `horizon` H beyond the cap N, the plan also has the looks a later continuation of the
same study may take (N + b, N + 2b, ..., H), and reserves a share r of α for them (`reserve`): the looks up to the
cap spend (1 - r) α by the spending function at level (1 - r) α over t = n / N (so a default run that pauses at N
has spent exactly that), and the continuation looks spend r α by `reserve_spending` over t = (n - N) / (H - N).
Every α_k of every look up to H is fixed before the first seed runs (`to_json` records them), so a study and all
its continuations together still spend α, and every verdict any of them prints is true together with probability
≥ 1 - α (the route chosen by simulated power: docs/statistics.md, "Continuing a study").

The defaults (O'Brien-Fleming type, batches of 2, N = 8) were chosen by simulated power at δ:
docs/statistics.md and `python bench/verdict_simulation.py`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, Mapping

from scipy import special

__all__ = ["Spending", "SPENDINGS", "DEFAULT_SPENDING", "DEFAULT_N0", "DEFAULT_BATCH", "DEFAULT_MAX_SEEDS", "spent", "Looks",
           "DEFAULT_RESERVE", "DEFAULT_RESERVE_SPENDING", "continuable"]

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
DEFAULT_RESERVE = 0.25
"""The share of α a plan with a horizon keeps for continuations (chosen by simulated power: docs/statistics.md,
"Continuing a study")."""
DEFAULT_RESERVE_SPENDING: Spending = "equal"
"""How a plan with a horizon spends its reserve over the continuation looks (docs/statistics.md, "Continuing a
study")."""


def spent(alpha: float, t: float, spending: Spending, k: int = 1, n_looks: int = 1) -> float:
    """α(t): the share of `alpha` spent by information fraction t (0 < t ≤ 1); "equal" counts looks, k of n_looks."""
    if spending == "obrien_fleming":
        # 2 Φ̄(z_{1-α/2} / √t), with Φ̄(x) = ndtr(-x) and z_{1-q} = -ndtri(q): what scipy.stats.norm.sf and .isf
        # compute, bit for bit (tests/adbs_lab/stats/test_looks.py), without importing scipy.stats
        return float(2.0 * special.ndtr(special.ndtri(alpha / 2.0) / math.sqrt(t)))
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
    """The spending function: "obrien_fleming", "pocock" or "equal" (over the looks up to the cap)."""
    horizon: int | None = None
    """The last look any continuation of the study may take (seeds per row); None: the cap, no continuation."""
    reserve: float = 0.0
    """The share of alpha kept for the looks after the cap (0 without a horizon; in (0, 1) with one)."""
    reserve_spending: Spending = DEFAULT_RESERVE_SPENDING
    """How the reserve is spent over the looks after the cap: "obrien_fleming", "pocock" or "equal"."""

    def __post_init__(self) -> None:
        if not (1 <= self.n0 <= self.max_seeds and self.batch >= 1):
            raise ValueError(f"looks need 1 <= n0 <= max_seeds and batch >= 1, not {self}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), not {self.alpha}")
        for name in ("spending", "reserve_spending"):
            if getattr(self, name) not in SPENDINGS:
                raise ValueError(f"unknown spending function {getattr(self, name)!r} for {name}; one of "
                                 f"{', '.join(SPENDINGS)}")
        if self.horizon is None:
            if self.reserve != 0.0:
                raise ValueError(f"reserve={self.reserve}: a reserve is for the looks after the cap; give a horizon "
                                 f"beyond max_seeds={self.max_seeds}, or reserve=0")
        elif not self.horizon > self.max_seeds or not 0.0 < self.reserve < 1.0:
            raise ValueError(f"horizon={self.horizon}, reserve={self.reserve}: a horizon lies beyond the cap "
                             f"max_seeds={self.max_seeds} and reserves a share of alpha in (0, 1) for its looks")

    @classmethod
    def fixed(cls, n: int, alpha: float = 0.05) -> Looks:
        """One look at n seeds, all of α spent there: a study of fixed size."""
        return cls(n0=n, batch=1, max_seeds=n, alpha=alpha)

    @property
    def last(self) -> int:
        """The seeds at the last look: the horizon, or the cap without one."""
        return self.max_seeds if self.horizon is None else self.horizon

    @property
    def sizes(self) -> tuple[int, ...]:
        """The seeds at each look: n0, n0 + batch, ..., max_seeds, then max_seeds + batch, ..., horizon."""
        head = tuple(range(self.n0, self.max_seeds, self.batch)) + (self.max_seeds,)
        if self.horizon is None:
            return head
        return head + tuple(range(self.max_seeds + self.batch, self.horizon, self.batch)) + (self.horizon,)

    @property
    def alphas(self) -> tuple[float, ...]:
        """α_k, the family's error rate spent at each look; they sum to alpha (module docstring)."""
        head = [n for n in self.sizes if n <= self.max_seeds]
        before = self.alpha * (1.0 - self.reserve)
        total = [spent(before, n / self.max_seeds, self.spending, k + 1, len(head)) for k, n in enumerate(head)]
        total[-1] = before  # every function spends all of its level at t = 1; exact, not rounded
        if self.horizon is not None:
            tail = [n for n in self.sizes if n > self.max_seeds]
            span = self.horizon - self.max_seeds
            total += [before + spent(self.alpha * self.reserve, (n - self.max_seeds) / span, self.reserve_spending,
                                     k + 1, len(tail)) for k, n in enumerate(tail)]
            total[-1] = self.alpha
        return tuple(b - a for a, b in zip([0.0] + total[:-1], total))

    def to_json(self) -> dict[str, object]:
        """The plan as JSON-able data, with every look's seeds and α_k (what a study records before it runs)."""
        return {**dataclasses.asdict(self), "sizes": list(self.sizes), "alphas": list(self.alphas)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Looks:
        """The plan `to_json` recorded; refused when its recorded looks or α_k are not the ones it computes."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields - {"sizes", "alphas"})
        if unknown:
            raise ValueError(f"unknown fields {unknown} in a recorded plan; valid: {sorted(fields)}")
        looks = cls(**{k: v for k, v in data.items() if k in fields})  # type: ignore[arg-type]
        sizes = [int(n) for n in data.get("sizes", looks.sizes)]  # type: ignore[attr-defined]
        alphas = [float(a) for a in data.get("alphas", looks.alphas)]  # type: ignore[attr-defined]
        same = len(alphas) == len(looks.alphas) and all(
            math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15) for a, b in zip(alphas, looks.alphas))
        if sizes != list(looks.sizes) or not same:
            raise ValueError(f"the recorded looks {sizes} and alphas {alphas} are not those of {looks}: the record "
                             f"was made by other code; rerun the study or restore its plan")
        return looks


def continuable(cap: int = DEFAULT_MAX_SEEDS, horizon: int | None = None, reserve: float = DEFAULT_RESERVE, alpha: float = 0.05,
                spending: Spending = DEFAULT_SPENDING, reserve_spending: Spending = DEFAULT_RESERVE_SPENDING,
                n0: int = DEFAULT_N0, batch: int = DEFAULT_BATCH) -> Looks:
    """A plan that pauses at `cap` and keeps `reserve` of alpha for continuations up to `horizon` (default twice
    the cap)."""
    return Looks(n0=n0, batch=batch, max_seeds=cap, alpha=alpha, spending=spending,
                 horizon=2 * cap if horizon is None else horizon, reserve=reserve, reserve_spending=reserve_spending)
