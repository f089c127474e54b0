"""The comparisons of a table across tasks: for `studies/report.py A B ...` over datasets or hosts (and
`studies/report.py hosts`, one study of several hosts or k-shot cells), each comparison
of the verdict family (adbs_lab/results/comparisons.py: the pairs the table gave verdicts) that ran in two or more
tasks gets the interquartile mean of each side and the paired probability of improvement, with stratified-bootstrap
intervals (adbs_lab/stats/aggregate.py; Agarwal et al. 2021, "Deep reinforcement learning at the edge of the
statistical precipice").

**What a task is.** A comparison X vs Y of the family is the same comparison in several tasks when only the setting
it ran in differs:

- each study run of the report is a task (`ablation (1a2b3c4d): adb+ic vs ablation (1a2b3c4d): baseline` and the
  same rows of another `ablation` run, e.g. on another dataset, are `adb+ic vs baseline` in two tasks);
- within a study (one of several, or the one study of `studies/report.py hosts`, whose rows carry no study
  name), rows that differ in one `key=value` setting share the rest as their task (a k-shot cell:
  `ways=5 shots=1: variant=adb+ic vs variant=baseline` is `variant=adb+ic vs variant=baseline` in the task
  `kshot_grid: ways=5 shots=1`);
- a row that is its reference plus a change (`SAVC+ADBS` against `SAVC`, the hosts study) is `+ADBS vs without` in
  the task of that host (`hosts: SAVC`), so each host is a task;
- a comparison between rows of two different studies (--reference across studies) is a task of its own.

The values are the last session's value of the table's metric per seed, of the complete trials (the verdicts'
values: comparisons.seed_values); a diverged or failed seed has none and is left out of both statistics, and
named under its comparison (`left_out`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from adbs.cells import number
from adbs_lab.records.metrics_keys import COMPLETE
from adbs_lab.records.trial_records import LABEL
from adbs_lab.results.comparisons import ALPHA, Pair, seed_values
from adbs_lab.stats.aggregate import FEW_RUNS, Interval, improvement_interval, iqm_interval

__all__ = ["WITHOUT", "Across", "task_of", "groups", "across", "left_out", "names", "lines", "table_lines"]

WITHOUT = "without"
"""Y's name in a comparison of a row with its reference plus a change (`+ADBS vs without`)."""


def _split(label: str) -> tuple[str, str]:
    """('<study>', '<row>') of a combined table's row ('<study>: <row>', from_store.combine)."""
    study, sep, row = label.partition(": ")
    return (study, row) if sep else ("", label)


def _join(*parts: str) -> str:
    return ": ".join(p for p in parts if p)


def task_of(pair: Pair) -> tuple[str, Pair]:
    """(the task, the comparison as it reads across tasks) of one comparison of the family (module docstring)."""
    (sa, ra), (sb, rb) = _split(pair[0]), _split(pair[1])
    if sa != sb:
        return f"{pair[0]} / {pair[1]}", pair
    a, b = ra.split(" "), rb.split(" ")
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) == len(b) > 1 and len(differ) == 1 and "=" in a[differ[0]] and "=" in b[differ[0]]:
        shared = " ".join(x for i, x in enumerate(a) if i != differ[0])
        return _join(sa, shared), (a[differ[0]], b[differ[0]])
    if ra.startswith(rb + "+"):
        return _join(sa, rb), (ra[len(rb):], WITHOUT)
    return sa, (ra, rb)


def groups(pairs: Sequence[Pair]) -> dict[Pair, list[tuple[str, Pair]]]:
    """{comparison across tasks: [(task, the table's pair in that task)]}, in the family's order."""
    out: dict[Pair, list[tuple[str, Pair]]] = {}
    for pair in pairs:
        task, key = task_of(pair)
        out.setdefault(key, []).append((task, pair))
    return out


@dataclass(frozen=True)
class Across:
    """One comparison over its tasks: the IQM of each side, the paired probability of improvement."""

    key: Pair
    tasks: tuple[str, ...]
    iqm_x: Interval
    iqm_y: Interval
    improvement: Interval
    m: int
    """How many comparisons across tasks the intervals are adjusted over (Bonferroni)."""
    left_out: str = ""
    """The runs of its rows the statistics left out, each named with its task and why (`left_out`); "" if none."""


def across(pairs: Sequence[Pair], sessions: pd.DataFrame, trials: pd.DataFrame | None,
           metric: str = "test_acc", label: str = LABEL, alpha: float = ALPHA) -> list[Across]:
    """Every comparison of the family `pairs` (the table's: `table.attrs["comparisons"]`) that ran in two or more
    tasks, its intervals at 1 - alpha/m for the m such comparisons (Bonferroni, as the table's verdicts)."""
    many = {k: v for k, v in groups(pairs).items() if len(v) > 1}
    if not many or sessions.empty:
        return []
    values, states = seed_values(sessions, trials, metric, label)
    level = 1 - alpha / len(many)
    out = []
    for key, where in many.items():
        xs = [values.get(p[0], {}) for _, p in where]
        ys = [values.get(p[1], {}) for _, p in where]
        paired = [([x[s] for s in sorted(set(x) & set(y))], [y[s] for s in sorted(set(x) & set(y))])
                  for x, y in zip(xs, ys)]
        out.append(Across(key, tuple(t for t, _ in where), iqm_interval([list(x.values()) for x in xs], level),
                          iqm_interval([list(y.values()) for y in ys], level), improvement_interval(paired, level),
                          len(many), left_out(key, where, values, states)))
    return out


def left_out(key: Pair, where: Sequence[tuple[str, Pair]], values: dict, states: dict) -> str:
    """The seeds of the comparison's rows that ran but have no finite value (diverged, failed, pruned, or complete
    without a last-session value), which both statistics leave out: per row and task, the seeds by why; "" if none.
    Said, so that a left-out run is never seen only as a smaller n."""
    said = []
    for task, pair in where:
        for side, row in zip(names(key), pair):
            why: dict[str, list[int]] = {}
            for s in sorted(set(values.get(row, {})) | set(states.get(row, {}))):
                if not math.isfinite(values.get(row, {}).get(s, math.nan)):
                    state = states.get(row, {}).get(s, "")
                    why.setdefault("without a finite value" if state in (COMPLETE, "") else state, []).append(s)
            if why:
                seeds = ", ".join(f"seed{'s' * (len(v) > 1)} {', '.join(map(str, v))} ({w})" for w, v in why.items())
                said.append(f"{side} {seeds} in {task}")
    return "; ".join(said)


def _iv(i: Interval, confidence: str) -> str:
    per = ", ".join(str(r) for r in i.runs)
    if not (math.isfinite(i.lo) and math.isfinite(i.hi)):
        return f"{number(i.estimate)} (no interval; n={i.n}: {per} per task)"
    return f"{i.estimate:.2f} ({confidence} CI {i.lo:.2f} to {i.hi:.2f}; n={i.n}: {per} per task)"


def names(key: Pair) -> Pair:
    """How X and Y read in the lines: `with +ADBS` and `without` for a row against itself without a change."""
    return (f"with {key[0]}", WITHOUT) if key[1] == WITHOUT else key


def lines(results: Sequence[Across], metric: str = "test_acc", alpha: float = ALPHA) -> list[str]:
    """The lines report.py prints under the table (and report.md holds): the method, three lines per comparison,
    and a warning where a task has fewer than FEW_RUNS runs."""
    if not results:
        return []
    m = results[0].m
    out = [f"across tasks (last-session {metric.replace('_', ' ')}; each study run, and each host or k-shot cell "
           f"within it, is a task; IQM: interquartile mean of all runs; P(X > Y): per task the share of shared seeds "
           f"where X beats Y, ties half, averaged over tasks; stratified bootstrap over seeds within tasks"
           f"{f', Bonferroni over {m} comparisons' if m > 1 else ''}; Agarwal et al. 2021; docs/statistics.md):"]
    confidence = f"{1 - alpha:.0%}"
    for r in results:
        x, y = names(r.key)
        out.append(f"  {x} vs {y} over {len(r.tasks)} tasks ({', '.join(r.tasks)}):")
        out.append(f"    IQM {x}: {_iv(r.iqm_x, confidence)}; IQM {y}: {_iv(r.iqm_y, confidence)}")
        out.append(f"    P({x} > {y}) = {_iv(r.improvement, confidence)}, paired seeds")
        if r.left_out:
            out.append(f"    left out (no value to compare): {r.left_out}")
        few = min((n for i in (r.iqm_x, r.iqm_y, r.improvement) for n in i.runs), default=0)
        if few < FEW_RUNS:
            out.append(f"    warning: fewer than {FEW_RUNS} runs per task (the fewest: {few}); with 3 runs per task "
                       f"these intervals cover 91-93% where they claim 95% (docs/statistics.md)")
    return out


def table_lines(table: pd.DataFrame, sessions: pd.DataFrame, trials: pd.DataFrame | None,
                metric: str = "test_acc") -> list[str]:
    """`lines` for the comparisons of a table (tables.paper_table: `table.attrs["comparisons"]`, its verdict family)
    that ran in two or more tasks: of several studies (`report.py A B`), or of one study whose hosts or k-shot
    cells are its tasks (`report.py hosts`, `report.py kshot_grid`); [] where none did."""
    family = [c.pair for c in table.attrs.get("comparisons", [])]
    return lines(across(family, sessions, trials, metric=metric), metric)
