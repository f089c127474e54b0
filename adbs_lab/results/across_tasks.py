"""The comparisons of a table across tasks: for `studies/report.py A B ...` over datasets or hosts (and
`studies/report.py hosts`, one study of several hosts or k-shot cells), each comparison
of the verdict family (adbs_lab/results/comparisons.py: the pairs the table gave verdicts) that ran in two or more
tasks gets, over its tasks, the per-seed differences X - Y (their interquartile mean and the mean of the task
means) and the paired probability of improvement, each with its interval (adbs_lab/stats/aggregate.py; after
Agarwal et al. 2021, "Deep reinforcement learning at the edge of the statistical precipice").

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
values: comparisons.seed_values), paired seed by seed within a task; a diverged or failed seed has none and is left
out, and named under its comparison (`left_out`). A task with fewer than MIN_RUNS paired runs is left out of the
statistics and named in one line (`Across.short`): its spread is unknown, and it would neither widen nor test them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from adbs.cells import number
from adbs_lab.records.metrics_keys import COMPLETE
from adbs_lab.records.trial_records import LABEL
from adbs_lab.results.comparisons import seed_values
from adbs_lab.stats.aggregate import (MIN_RUNS, Interval, differences, improvement_interval, iqm_difference,
                                      mean_difference, wins_ties)
from adbs_lab.stats.policy import DEFAULT_POLICY, Pair, VerdictPolicy

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
    """One comparison over its tasks: the per-seed differences X - Y (their IQM and the mean of the task means) and
    the paired probability of improvement, over the tasks with at least MIN_RUNS paired runs."""

    key: Pair
    tasks: tuple[str, ...]
    """The tasks the statistics are over (at least MIN_RUNS paired runs each)."""
    iqm: Interval | None
    """The IQM of the per-seed differences X - Y pooled over `tasks`; None with fewer than 2 such tasks."""
    mean: Interval | None
    """The mean over `tasks` of each task's mean difference X - Y."""
    improvement: Interval | None
    """The paired probability of improvement P(X > Y) over `tasks`."""
    m: int
    """How many comparisons across tasks the intervals are adjusted over (Bonferroni): those with statistics."""
    left_out: str = ""
    """The runs of its rows the statistics left out, each named with its task and why (`left_out`); "" if none."""
    short: tuple[tuple[str, int], ...] = ()
    """(task, its paired runs) of the tasks left out for fewer than MIN_RUNS paired runs."""
    ties: int = 0
    """Paired runs of `tasks` where X and Y are equal."""


def _paired(x: dict, y: dict) -> tuple[list[float], list[float]]:
    both = sorted(set(x) & set(y))
    return [x[s] for s in both], [y[s] for s in both]


def across(pairs: Sequence[Pair], sessions: pd.DataFrame, trials: pd.DataFrame | None,
           metric: str = "test_acc", label: str = LABEL, policy: VerdictPolicy = DEFAULT_POLICY) -> list[Across]:
    """Every comparison of the family `pairs` (the table's: `table.attrs["comparisons"]`) that ran in two or more
    tasks. A task with fewer than MIN_RUNS paired runs is left out (`short`); a comparison left with fewer than two
    tasks has no statistics, and the others' intervals are at 1 - alpha/m for the m comparisons that have them, alpha
    the policy's (Bonferroni, as the table's verdicts: a comparison that cannot have an interval claims nothing)."""
    many = {k: v for k, v in groups(pairs).items() if len(v) > 1}
    if not many or sessions.empty:
        return []
    values, states = seed_values(sessions, trials, metric, label)
    kept: dict[Pair, list[tuple[str, tuple[list[float], list[float]]]]] = {}
    short: dict[Pair, tuple[tuple[str, int], ...]] = {}
    for key, where in many.items():
        paired = [(task, _paired(values.get(p[0], {}), values.get(p[1], {}))) for task, p in where]
        runs = [(task, int(differences([xy])[0].size)) for task, xy in paired]
        kept[key] = [(task, xy) for (task, xy), (_, n) in zip(paired, runs) if n >= MIN_RUNS]
        short[key] = tuple((task, n) for task, n in runs if n < MIN_RUNS)
    m = sum(len(k) >= 2 for k in kept.values())
    level = 1 - policy.primary_alpha / max(m, 1)  # the deciding metric's share where the policy splits α
    out = []
    for key, where in many.items():
        use = [xy for _, xy in kept[key]] if len(kept[key]) >= 2 else None
        out.append(Across(key, tuple(t for t, _ in kept[key]), iqm_difference(use, level) if use else None,
                          mean_difference(use, level) if use else None,
                          improvement_interval(use, level) if use else None, m,
                          left_out(key, where, values, states), short[key],
                          int(wins_ties(use)[1].sum()) if use else 0))
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


def _ends(i: Interval, signed: bool) -> str:
    """The interval's ends to 2 decimals, rounded outward (the printed interval holds the computed one)."""
    lo, hi = math.floor(i.lo * 100 + 1e-9) / 100, math.ceil(i.hi * 100 - 1e-9) / 100
    return f"{lo:+.2f} to {hi:+.2f}" if signed else f"{lo:.2f} to {hi:.2f}"


def _iv(i: Interval, confidence: str, signed: bool = True) -> str:
    if not (math.isfinite(i.lo) and math.isfinite(i.hi)):  # why, where the statistic says (aggregate.NO_SPREAD)
        return f"{number(i.estimate, signed=signed)} ({i.method or 'no interval'})"
    return f"{number(i.estimate, signed=signed)} ({confidence} CI {_ends(i, signed)}, {i.method})"


def _runs(i: Interval) -> str:
    return f"n={i.n}: {', '.join(str(r) for r in i.runs)} per task"


def names(key: Pair) -> Pair:
    """How X and Y read in the lines: `with +ADBS` and `without` for a row against itself without a change."""
    return (f"with {key[0]}", WITHOUT) if key[1] == WITHOUT else key


def _ties(k: int) -> str:
    """How the probability of improvement counted ties (seeds where X and Y are equal), said where there were."""
    if not k:
        return ""
    return (f"; {k} tie{'s' * (k != 1)}: half a win in the estimate, a loss for the lower end and a win for the "
            "upper")


def _comparison(r: Across, confidence: str) -> list[str]:
    """One comparison's lines: the differences, the probability of improvement, what was left out."""
    x, y = names(r.key)
    short = "; ".join(f"{task} ({n} run{'s' * (n != 1)})" for task, n in r.short)
    said = [f"    left out (no value to compare): {r.left_out}"] if r.left_out else []
    if r.iqm is None or r.mean is None or r.improvement is None:
        return [f"  {x} vs {y}: fewer than 2 tasks with at least {MIN_RUNS} paired runs; no statistics across tasks"
                + (f" (left out: {short})" if short else "")] + said
    out = [f"  {x} vs {y} over {len(r.tasks)} tasks ({', '.join(r.tasks)}):",
           f"    {x} - {y} per seed, paired within its task: IQM {_iv(r.iqm, confidence)}; mean of the task means "
           f"{_iv(r.mean, confidence)}; {_runs(r.iqm)}",
           f"    paired P({x} > {y}) per seed, averaged over tasks: {_iv(r.improvement, confidence, signed=False)}; "
           f"{_runs(r.improvement)}{_ties(r.ties)}"]
    if short:
        out.append(f"    left out (fewer than {MIN_RUNS} paired runs): {short}")
    return out + said


def lines(results: Sequence[Across], metric: str = "test_acc", policy: VerdictPolicy = DEFAULT_POLICY) -> list[str]:
    """The lines report.py prints under the table (and report.md holds): the method, then per comparison its
    differences, its paired probability of improvement and what was left out."""
    if not results:
        return []
    m = results[0].m
    out = [f"across tasks (last-session {metric.replace('_', ' ')}; each study run, and each host or k-shot cell "
           f"within it, is a task; a run is a seed both rows completed, taken as its difference X - Y within its "
           f"task (tasks at different levels are not pooled); a task with fewer than {MIN_RUNS} paired runs is left "
           f"out{f'; Bonferroni over {m} comparisons' if m > 1 else ''}; docs/statistics.md):"]
    confidence = policy.level_text
    for r in results:
        out += _comparison(r, confidence)
    return out


def table_lines(table: pd.DataFrame, sessions: pd.DataFrame, trials: pd.DataFrame | None,
                metric: str = "test_acc") -> list[str]:
    """`lines` for the comparisons of a table (tables.paper_table: `table.attrs["comparisons"]`, its verdict family)
    that ran in two or more tasks: of several studies (`report.py A B`), or of one study whose hosts or k-shot
    cells are its tasks (`report.py hosts`, `report.py kshot_grid`); [] where none did."""
    compared = table.attrs.get("comparisons", [])
    policy = compared[0].policy if compared else DEFAULT_POLICY
    family = [c.pair for c in compared]
    return lines(across(family, sessions, trials, metric=metric, policy=policy), metric, policy)
