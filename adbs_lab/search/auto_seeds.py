"""--seeds auto: which seeds each row of a grid runs, replayed from the trials that ended.

A study of fixed rows runs every row over seeds 0, 1, 2 (the first batch, `Looks.n0`); when every trial of a batch
has ended it looks (adbs_lab/stats/sequential.py: next_batch) at the comparisons of its table, on the per-seed
differences row - reference of the last session's test accuracy, and either stops (every comparison resolved, or
the unresolved ones at the cap) or asks the rows of the unresolved comparisons, and their references, for the seeds
of the next planned look (the next seed numbers: 3, 4; then 5, 6; ...). The values and the pairing are the table's
(adbs_lab/results/comparisons.py: `values` and `states` as it reads them, paired seed by seed as its `_differences`
pairs them); the search sits below the results in the import layers, so `differences` writes that pairing again
and tests/adbs_lab/search/test_auto_seeds.py holds the two equal.

`replay` is the whole rule, a pure function of the trials that ended: the searcher (adbs_lab/search/searcher.py:
StudySearch) calls it each time a trial ends, and the summary (adbs_lab/driver/summarise.py) calls it on the study's
records, so a --resume'd study takes the same looks, and the table's verdicts are the searcher's (the same
differences, the same `next_batch`). A trial that diverged, failed or was pruned has ended: its seed counts as run,
its difference NaN (left out and counted by the verdicts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from adbs_lab.records import metrics_keys as K
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP, next_batch
from adbs_lab.stats.verdicts import Label

__all__ = ["LAST_KEY", "AutoPlan", "Look", "AutoSeeds", "differences", "by_target", "replay", "look_line", "end_line",
           "start_text"]

LAST_KEY = K.SUMMARY + "test_last_acc"
"""The trial's last-session test accuracy in its summary report: adbs/metrics.py sets it to the last session's
test_acc, the value the table's comparisons read from sessions.parquet (comparisons.seed_values)."""


def differences(pair: tuple[str, str], values: Mapping[str, Mapping[int, float]],
                states: Mapping[str, Mapping[int, str]]) -> list[float]:
    """The per-seed differences row - reference in seed order over the seeds either row ended, NaN where a pair is
    incomplete (a seed not complete in both, or not run by one): adbs_lab/results/comparisons.py's `_differences`."""
    row, ref = pair
    out: list[float] = []
    for s in sorted(set(states.get(row, {})) | set(states.get(ref, {}))):
        a, b = values.get(row, {}).get(s), values.get(ref, {}).get(s)
        ok = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
        out.append(a - b if ok else math.nan)  # type: ignore[operator]
    return out


@dataclass(frozen=True)
class Look:
    """One look the study took: after its k-th batch, with `n` seeds in the largest row."""

    k: int
    n: int
    resolved: int
    """Comparisons resolved at this look or before."""
    m: int
    """Comparisons in the table."""
    next: dict[str, int]
    """{row: the seeds it runs to} for the next batch; empty when the study stops here."""
    reason: str
    """sequential.ALL_RESOLVED, CAP, or MORE."""


@dataclass(frozen=True)
class AutoSeeds:
    """Where a --seeds auto study stands, replayed from the trials that ended."""

    targets: dict[str, int]
    """{row: the seeds it runs (0 .. target - 1)} as of the last look (the first batch before any)."""
    looks: tuple[Look, ...]
    """The looks taken, in order."""
    done: bool
    """The last look stopped the study: nothing more to run."""
    reason: str = ""
    """Why it stopped (ALL_RESOLVED or CAP); '' while it runs."""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """{row: seeds below its target that have not ended}: the rest of the batch under way."""

    def final(self, row: str) -> bool:
        """Whether `row` runs no more seeds: the study stopped, or the last look, taken after the row's seeds had
        all ended, did not extend it (a comparison once resolved stays resolved, so a row left out once is left out
        for good)."""
        return self.done or (bool(self.looks) and row not in self.missing and row not in self.looks[-1].next)


def replay(rows: Sequence[str], values: Mapping[str, Mapping[int, float]], states: Mapping[str, Mapping[int, str]],
           pairs: Sequence[tuple[str, str]], looks: Looks, delta: float) -> AutoSeeds:
    """The looks a --seeds auto study takes on the trials that ended: `values` {row: {seed: last-session test
    accuracy}} of the complete ones, `states` {row: {seed: how it ended}} of all of them; `rows` every row of the
    grid (a row in no comparison runs the first batch only), `pairs` the table's comparisons (row, reference)."""
    targets = {row: looks.n0 for row in rows}
    named = {f"{pair[0]} vs {pair[1]}": pair for pair in pairs}
    taken: list[Look] = []
    while True:
        missing = {row: [s for s in range(n) if s not in states.get(row, {})] for row, n in targets.items()}
        missing = {row: seeds for row, seeds in missing.items() if seeds}
        if missing:
            return AutoSeeds(dict(targets), tuple(taken), False, "", missing)
        seen_values = {row: {s: v for s, v in values.get(row, {}).items() if s < targets.get(row, 0)} for row in rows}
        seen_states = {row: {s: v for s, v in states.get(row, {}).items() if s < targets.get(row, 0)} for row in rows}
        diffs = {n: differences(pair, seen_values, seen_states) for n, pair in named.items()}
        nb = next_batch(diffs, named, looks, delta)
        resolved = sum(v.verdict is not Label.NOT_RESOLVED for v in nb.verdicts.values())
        taken.append(Look(len(taken) + 1, max(targets.values(), default=0), resolved, len(named), dict(nb.seeds),
                          nb.reason))
        if nb.done:
            return AutoSeeds(dict(targets), tuple(taken), True, nb.reason)
        targets.update({row: max(targets.get(row, 0), n) for row, n in nb.seeds.items()})


def _rows_text(rows: Sequence[str]) -> str:
    return ", ".join(rows)


def by_target(nxt: dict[str, int]) -> list[tuple[int, list[str]]]:
    """The next batch {row: seeds it runs to} grouped by that target, smallest first (rows in their given order):
    what a look line names after "next:" (here and adbs_lab/search/racing.py)."""
    groups: dict[int, list[str]] = {}
    for row, n in nxt.items():
        groups.setdefault(n, []).append(row)
    return sorted(groups.items())


def look_line(look: Look, looks: Looks) -> str:
    """"look 2 at 5 seeds: 2 of 3 comparisons resolved; next: rows a, b to 7 seeds" (or why the study stops)."""
    head = f"look {look.k} of at most {len(looks.sizes)} at {look.n} seeds: {look.resolved} of {look.m} comparisons resolved"
    if look.reason == ALL_RESOLVED:
        return f"{head}; stop: all resolved"
    if look.reason == CAP:
        return f"{head}; stop: the cap of {looks.max_seeds} seeds is reached, {look.m - look.resolved} unresolved"
    nxt = "; ".join(f"row{'s' * (len(r) > 1)} {_rows_text(r)} to {n} seeds" for n, r in by_target(look.next))
    return f"{head}; next: {nxt}"


def end_line(state: AutoSeeds, looks: Looks) -> str:
    """Why a --seeds auto study stopped, or that it did not reach its next look."""
    if not state.done:
        left = sum(len(s) for s in state.missing.values())
        return (f"--seeds auto: stopped before look {len(state.looks) + 1} ({left} trial{'s' * (left != 1)} of the "
                "batch did not end); --resume continues it")
    last = state.looks[-1]
    seeds = sum(state.targets.values())
    if state.reason == ALL_RESOLVED:
        why = f"all {last.m} comparisons resolved at look {last.k} ({last.n} seeds)"
    else:
        why = (f"the cap of {looks.max_seeds} seeds was reached with {last.m - last.resolved} of {last.m} comparisons "
               "unresolved")
    return f"--seeds auto: stopped after look {last.k}: {why}; {seeds} trials in all"


def start_text(looks: Looks) -> str:
    return (f"--seeds auto: first batch {looks.n0} seeds, up to {looks.max_seeds} (looks at "
            f"{', '.join(map(str, looks.sizes))} seeds; docs/statistics.md)")


@dataclass(frozen=True)
class AutoPlan:
    """What the searcher of a --seeds auto study needs to take its looks (Prepared.looks and the table's rows and
    comparisons, adbs_lab/driver/launch.py builds it)."""

    looks: Looks
    rows: tuple[str, ...]
    """Every row of the grid, by its label in the table (tune_keys.describe over `label_keys`)."""
    pairs: tuple[tuple[str, str], ...]
    """The table's comparisons, (row, reference)."""
    delta: float
    """δ (--resolve), in points."""
    label_keys: tuple[str, ...]
    """The keys a row's label names (the row axis, the grid axes): a configuration's row is
    tune_keys.describe(its point, label_keys)."""
