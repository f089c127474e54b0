"""--seeds auto on a grid: every row runs seeds 0, 1, 2 (the first batch, `Looks.n0`); when every trial of a batch has
ended the study looks (adbs_lab/search/seeds/engine.py, the table's comparisons) and either stops (every comparison
resolved, or the unresolved ones at the cap) or asks the rows of the unresolved comparisons, and their references,
for the seeds of the next planned look (the next seed numbers: 3, 4; then 5, 6; ...).

The values and the pairing are the table's (adbs_lab/results/comparisons.py: seed_values reads the last session's
test accuracy per seed; adbs_lab/stats/verdicts.py: paired_differences pairs them), so the table's verdicts are the
searcher's: the searcher reads each trial's summary report (`LAST_KEY`, the same value: adbs/metrics.py), the summary
reads sessions.parquet. A row the looks leave out runs no more seeds: Optuna is told its value then, the mean over
all the seeds it ran.

A plan with a horizon (adbs_lab/stats/continuation.py: design, the default of the studies that decide) pauses at its
cap: the looks beyond it are a continuation's, which the plan has kept a share of α for; the study stops there with
the open comparisons "continue" (more seeds would help, within the guarantee), or, at the horizon, "inconclusive at
the horizon" (the plan has no α left for them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.tune_keys import describe
from adbs_lab.search.seeds import engine
from adbs_lab.search.seeds.policy import FINISHED, Ended, Look, Opening, Standing, TableDecides, by_target
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP, PAUSE

__all__ = ["LAST_KEY", "UntilResolved", "looks_identity"]

LAST_KEY = K.SUMMARY + "test_last_acc"
"""The trial's last-session test accuracy in its summary report: adbs/metrics.py sets it to the last session's
test_acc, the value the table's comparisons read from sessions.parquet (adbs_lab/results/comparisons.py:
seed_values)."""


def looks_identity(looks: Looks) -> str:
    """The looks' part of a study's fingerprint, as the code that started it wrote them: a plan without a horizon
    as Looks was before its horizon and reserve existed (adbs_lab/stats/looks.py), so such a study keeps its
    fingerprint and --resume continues it."""
    if looks.horizon is not None or looks.reserve:
        return repr(looks)
    return (f"Looks(n0={looks.n0!r}, batch={looks.batch!r}, max_seeds={looks.max_seeds!r}, alpha={looks.alpha!r}, "
            f"spending={looks.spending!r})")


@dataclass(frozen=True)
class UntilResolved(TableDecides):
    """The rows of a grid, seeds added until their comparisons are resolved (module docstring)."""

    verdicts: VerdictPolicy
    """The table's comparisons (`pairs`), α, δ and the planned looks (`looks`, never None here)."""
    rows: tuple[str, ...]
    """Every row of the grid by its label in the table (a row in no comparison runs the first batch only)."""
    label_keys: tuple[str, ...]
    """The keys a row's label names (the row axis, the grid axes: tune_keys.describe)."""
    pause: int | None = None
    """The most seeds a row runs in this invocation: one of the plan's pauses (continuation.pauses); None: the cap.
    Not part of the study's identity: a continuation is the same study."""

    @property
    def looks(self) -> Looks:
        assert self.verdicts.looks is not None, "--seeds auto's policy has its looks"
        return self.verdicts.looks

    @property
    def stop(self) -> int:
        """The seeds at which this invocation pauses."""
        return self.looks.max_seeds if self.pause is None else self.pause

    def checked_seeds(self) -> list[int]:
        return list(range(self.looks.max_seeds))

    def trials(self, n_configs: int) -> tuple[int, int]:
        return n_configs * self.looks.n0, n_configs * self.stop

    def identity(self) -> str | None:
        return looks_identity(self.looks)

    def _mode(self) -> str:
        return "--seeds auto"  # the default of the studies that decide, and the flag that asks for it

    def size_text(self, n_configs: int, dry: bool = False) -> str:
        fewest, most = self.trials(n_configs)
        if fewest == most:  # a cap of 3: the first batch is the only look
            return f"{most} trials ({n_configs} configurations x {self.stop} seeds, {self._mode()})"
        return (f"{fewest} to {most} trials ({n_configs} configurations x {self.looks.n0} to {self.stop} "
                f"seeds, {self._mode()})")

    def _split_text(self) -> str:
        split = self.verdicts.split
        if split is None:
            return ""
        return (f"; α {split.alpha:g} for the family: {split.primary_alpha:g} for last-session accuracy, which alone "
                f"decides, {split.secondary_alpha:g} for the {split.n_secondaries} secondary metrics")

    def _horizon_text(self) -> str:
        if self.looks.horizon is None:
            return ""
        return (f"; a quarter of that α is kept for continuations up to {self.looks.horizon} seeds"
                if self.looks.reserve == 0.25 else
                f"; {self.looks.reserve:g} of that α is kept for continuations up to {self.looks.horizon} seeds")

    def start_line(self, n_configs: int) -> str | None:
        sizes = [n for n in self.looks.sizes if n <= self.stop]
        return (f"{self._mode()}: first batch {self.looks.n0} seeds, up to {self.stop} (looks at "
                f"{', '.join(map(str, sizes))} seeds{self._split_text()}{self._horizon_text()}; docs/statistics.md); "
                "a line per look as it happens")

    def description(self, n_configs: int) -> str:
        fewest, most = self.trials(n_configs)
        return (f"seeds 0, 1, 2, then 2 more at a time for the rows of unresolved comparisons, up to "
                f"{self.stop} ({self._mode()}: {fewest} to {most} trials{self._horizon_text()})")

    def params(self) -> dict[str, str]:
        return {"study.seeds_auto": f"looks at {list(self.looks.sizes)}"}

    def opening(self, standing: Standing, opened: int) -> Opening | str | None:
        if standing.done:
            return FINISHED
        if opened < len(self.rows):
            return Opening(list(range(self.looks.n0)), final=True)
        return None  # the batch under way must end before the next look

    def adopted(self, copy: bool) -> Opening:
        return Opening(list(range(self.looks.n0)), final=True)

    copies = False
    """Every row is asked once, its seeds extended by the looks."""

    def label(self, params: Mapping[str, Any]) -> str | None:
        return describe(dict(params), list(self.label_keys))

    def value(self, state: str, result: Mapping[str, Any] | None, values: Sequence[float] | None) -> float:
        return float((result or {}).get(LAST_KEY, math.nan)) if state == K.COMPLETE else math.nan

    def standing(self, ended: Sequence[Ended]) -> Standing:
        values: dict[str, dict[int, float]] = {}
        states: dict[str, dict[int, str]] = {}
        for e in ended:
            states.setdefault(e.unit, {})[e.seed] = e.state
            if e.state == K.COMPLETE:
                values.setdefault(e.unit, {})[e.seed] = e.value
        return engine.replay(self.rows, self.looks.n0, values, states, lambda i: i,
                             engine.TablePairs(tuple(self.verdicts.pairs or ())), self.looks, self.verdicts.delta,
                             min_pairs=self.verdicts.min_pairs, stop=self.stop)

    def wanted(self, standing: Standing) -> dict[str, list[int]]:
        return {row: standing.seeds(row) for row in self.rows if row in standing.targets}

    def look_line(self, look: Look) -> str:
        """"look 2 of at most 3 at 5 seeds: 2 of 3 comparisons resolved; next: rows a, b to 7 seeds"."""
        planned = len([n for n in self.looks.sizes if n <= self.stop])
        head = (f"look {look.k} of at most {planned} at {look.n} seeds: {look.resolved} of {look.m} "
                "comparisons resolved")
        if look.reason == ALL_RESOLVED:
            return f"{head}; stop: all resolved"
        if look.reason == PAUSE:
            return (f"{head}; pause: {self.stop} seeds are this run's most, {look.m - look.resolved} open "
                    f"(the plan keeps looks for them up to {self.looks.last} seeds)")
        if look.reason == CAP:
            return (f"{head}; stop: the cap of {self.looks.max_seeds} seeds is reached, {look.m - look.resolved} "
                    "unresolved")
        nxt = "; ".join(f"row{'s' * (len(r) > 1)} {', '.join(r)} to {n} seeds" for n, r in by_target(look.next))
        return f"{head}; next: {nxt}"

    def end_line(self, standing: Standing) -> str | None:
        """Why the study stopped adding seeds, or that it did not reach its next look."""
        if not standing.done:
            left = sum(len(s) for s in standing.missing.values())
            return (f"--seeds auto: stopped before look {len(standing.looks) + 1} ({left} trial{'s' * (left != 1)} "
                    "of the batch did not end); --resume continues it")
        last = standing.looks[-1]
        if standing.reason == ALL_RESOLVED:
            why = f"all {last.m} comparisons resolved at look {last.k} ({last.n} seeds)"
        elif standing.reason == PAUSE:
            why = (f"{self.stop} seeds reached with {last.m - last.resolved} of {last.m} comparisons open; more seeds "
                   f"would help them: the plan keeps looks for them up to {self.looks.last} seeds")
        elif self.looks.horizon is not None:
            why = (f"the horizon of {self.looks.last} seeds was reached with {last.m - last.resolved} of {last.m} "
                   "comparisons inconclusive (the plan has no error rate left for more seeds)")
        else:
            why = (f"the cap of {self.looks.max_seeds} seeds was reached with {last.m - last.resolved} of {last.m} "
                   "comparisons unresolved")
        return f"{self._mode()}: stopped after look {last.k}: {why}; {sum(standing.targets.values())} trials in all"

    def unfinished(self, standing: Standing, interrupted: int, not_started: int) -> int:
        """The batch under way: a --seeds auto study runs the trials its looks ask for, not its cap."""
        return sum(len(s) for s in standing.missing.values())
