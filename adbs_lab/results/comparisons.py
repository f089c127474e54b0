"""A verdict for every comparison a study's table makes, and where the sequential design would stop the unresolved
ones (the plan: `plan_lines`).

The statistics are adbs_lab/stats/ (docs/statistics.md names the methods and their references); this module reads a
table's trials into them and says the results in words.

- **The family**: each row against its reference (the study's baseline row, each host without ADBS, the preset's
  alpha, or --reference) and against the row it adds one change to (adbs_lab/driver/plan.py: Plan.parents), each
  pair once. The intervals are adjusted for the whole family (Bonferroni), so a verdict holds with the table's
  other verdicts: all of them are true together with probability at least 1 - α (95% at the default α; the
  study's verdict policy, adbs_lab/stats/policy.py, holds α, δ and the looks).
- **The pairs**: a comparison pairs its two rows seed by seed (the same seed is the same data draw and training
  seed), on the last session's value of the table's metric. A seed where either row's trial diverged, failed or
  was pruned leaves its pair out and is counted beside the verdict ("n=5, 1 diverged"); a collapsed seed (a
  warning, not a failure) keeps its value.
- **The verdict** is read from the interval shown beside it (adbs_lab/stats/verdicts.py: classify), so the two
  never disagree.
- **The findings**: where the policy splits α between the deciding (primary) metric and secondary ones
  (adbs_lab/stats/continuation.py: AlphaSplit), each comparison is also read on SECONDARY_METRICS (last-session
  novel and base accuracy, H last, H averaged over the incremental sessions), each interval at its share of the
  secondaries' α over n_secondaries × m (Bonferroni), at the seeds and look where the primary metric stopped; the
  table opens with one sentence per comparison saying all of them (`finding`). The secondaries never decide when
  seeds stop nor which row is best (those read `Compared.verdict` alone). Without a split: no secondaries, and the
  lines are those of a study recorded before them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from adbs.cells import duration, number
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.config_values import texts
from adbs_lab.records.trial_records import LABEL
from adbs_lab.stats import forecast, planner
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import DEFAULT_POLICY, Pair, VerdictPolicy
from adbs_lab.stats.verdicts import (CONSERVATIVE_BELOW, TOUCH, Label, Verdict, can_have_interval, family_verdicts,
                                    half_width, no_interval_reason, paired_differences, printed_ends,
                                    read_at_look, welch, why_no_interval, LABELS)

__all__ = ["Compared", "Secondary", "SECONDARY_METRICS", "secondary_values", "finding", "findings", "metric_name",
           "family", "name", "compare_rows", "verdict_text", "sentence", "sentences", "family_heading", "opening",
           "quotable", "plan_lines", "forecasts", "row_seconds", "cell", "cell_text", "ends", "note", "best_standing",
           "seed_values"]

def family(labels: Sequence[str], reference: str | Mapping[str, str] | None,
           parents: Mapping[str, str] | None = None) -> list[Pair]:
    """The table's comparisons in row order: each row against its reference, then against its parent where that is
    another row; a row is never compared with itself, nor with a row the table does not hold, and a pair is compared
    once (not again in the other direction)."""
    ref = dict(reference) if isinstance(reference, Mapping) else {lab: reference for lab in labels} if reference else {}
    present = set(labels)
    out: list[Pair] = []
    for lab in labels:
        for other in (ref.get(lab), (parents or {}).get(lab)):
            if other and other != lab and other in present and not {(lab, other), (other, lab)} & set(out):
                out.append((lab, other))
    return out


def name(pair: Pair) -> str:
    """`adb+ic vs adb`: how a comparison is named in the table's lines and the MLflow run; rows of a grid that
    differ in one setting say the rest once (`ways=5 shots=1: variant=adb+ic vs variant=baseline`)."""
    a, b = pair[0].split(" "), pair[1].split(" ")
    differ = [(x, y) for x, y in zip(a, b) if x != y]
    if len(a) == len(b) > 1 and len(differ) == 1 and "=" in differ[0][0] and "=" in differ[0][1]:
        shared = " ".join(x for x, y in zip(a, b) if x == y)
        return f"{shared}: {next(x for x, y in zip(a, b) if x != y)} vs {next(y for x, y in zip(a, b) if x != y)}"
    return f"{pair[0]} vs {pair[1]}"


SECONDARY_METRICS: tuple[tuple[str, str, str], ...] = (
    ("novel accuracy", "novel_acc", "last"),
    ("base accuracy", "base_acc", "last"),
    ("H last", "hmean", "last"),
    ("H averaged", "hmean", "incremental"),
)
"""The secondary metrics a comparison is read on where its policy splits α, in the order a finding says them:
(name, the session column after the deciding metric's split, test_ or val_, and how a trial gives one value:
"last", its last session's; "incremental", the mean over its sessions with novel classes, those whose novel
accuracy is a number; session 0 has none, and a NaN novel accuracy is no value, so a trial without such a session
has none). The columns are adbs/metrics.py's session_accuracies; H is the harmonic mean of base and novel."""


@dataclass(frozen=True)
class Secondary:
    """One comparison's verdict on one secondary metric."""

    name: str
    """How the finding names it: "novel accuracy", "H averaged"."""
    column: str
    """The session column it reads ("test_novel_acc")."""
    verdict: Verdict
    """Its interval (row - reference, points), read at the primary's look, and the verdict read from it."""
    m: int
    """How many intervals its Bonferroni adjustment is over: the family's m comparisons × the secondaries."""


@dataclass(frozen=True)
class Compared:
    """One comparison of a table: its verdict, the seeds it left out, and (unresolved) its per-seed differences for
    the plan."""

    pair: Pair
    """(row, reference): the difference is row - reference."""
    verdict: Verdict
    """The displayed interval and the verdict read from it (adbs_lab/stats/verdicts.py)."""
    left_out: dict[str, int]
    """Seeds left out of the pairs, by why ("diverged", "failed", "pruned", ...; "not run" where only one row has
    the seed)."""
    m: int
    """How many comparisons the table's adjustment is over."""
    plan: planner.SeedPlan | None
    """For an unresolved comparison, its per-seed differences (`diffs`, which the plan forecasts from: `forecasts`)
    and the fixed-size plan of adbs_lab/stats/planner.py, which no line prints; None when resolved."""
    policy: VerdictPolicy = DEFAULT_POLICY
    """The verdict policy it was read under: α (the level printed), δ, the looks of a study that added seeds in
    batches (--seeds auto; None: one look at the seeds run), the metric compared (its last session's value per seed:
    a table on another one is another family)."""
    paired: bool = True
    """False: the rows ran different seeds or different data, and the interval is Welch's over each row's values."""
    secondaries: tuple[Secondary, ...] = ()
    """Its verdicts on the secondary metrics (SECONDARY_METRICS) where the policy splits α; none without a split."""

    @property
    def resolved(self) -> bool:
        return self.verdict.verdict is not Label.NOT_RESOLVED

    @property
    def metric(self) -> str:
        return self.policy.metric


def seed_values(sessions: pd.DataFrame, trials: pd.DataFrame | None, metric: str, label: str) -> tuple[dict, dict]:
    """({row: {seed: the metric in the trial's last session}} of the complete trials, NaN where that session has no
    finite value (never an earlier session's: the table's `last` and the searcher's summary/test_last_acc read the
    last one too), {row: {seed: state}} of every trial run)."""
    done = sessions[sessions["state"] == K.COMPLETE] if "state" in sessions else sessions
    values: dict[str, dict[int, float]] = {}
    if metric in done and len(done):
        for (lab, _), t in done.groupby([label, "trial_id"], sort=False):
            if K.finite(t["seed"].iloc[0]):
                values.setdefault(str(lab), {})[int(t["seed"].iloc[0])] = float(t.loc[t["session"].idxmax(), metric])
    states: dict[str, dict[int, str]] = {lab: {s: K.COMPLETE for s in v} for lab, v in values.items()}
    if trials is not None and len(trials) and {"seed", "state", label} <= set(trials.columns):
        for lab, seed, state in zip(trials[label], trials["seed"], trials["state"]):
            if K.finite(seed) and state != K.COMPLETE:
                states.setdefault(str(lab), {}).setdefault(int(seed), str(state).lower())
    return values, states


def secondary_values(sessions: pd.DataFrame, metric: str, label: str = LABEL,
                     n: int = len(SECONDARY_METRICS)) -> list[tuple[str, str, dict[str, dict[int, float]]]]:
    """[(name, column, {row: {seed: value}})] of the first `n` SECONDARY_METRICS over the complete trials, for a
    deciding `metric` of a split (test_acc, val_acc; none for another metric, or a column the sessions lack), NaN
    where a trial has no value (a last session without novel classes, no incremental session)."""
    split = metric[: -len("_acc")] if metric in ("test_acc", "val_acc") else None
    done = sessions[sessions["state"] == K.COMPLETE] if "state" in sessions else sessions
    if split is None or not len(done):
        return []
    wanted = [(name, f"{split}_{col}", how) for name, col, how in SECONDARY_METRICS[:n] if f"{split}_{col}" in done]
    novel = f"{split}_novel_acc"
    out: list[tuple[str, str, dict[str, dict[int, float]]]] = [(name, column, {}) for name, column, _ in wanted]
    for (lab, _), t in done.groupby([label, "trial_id"], sort=False):
        if not K.finite(t["seed"].iloc[0]):
            continue
        seed, last = int(t["seed"].iloc[0]), t.loc[t["session"].idxmax()]
        with_novel = (t["session"] > 0) & np.isfinite(pd.to_numeric(t[novel], errors="coerce")) if novel in t \
            else pd.Series(False, index=t.index)
        for (_, column, how), (_, _, values) in zip(wanted, out):
            if how == "last":
                v = float(last[column])
            else:
                inc = pd.to_numeric(t.loc[with_novel, column], errors="coerce")
                v = float(inc.mean(skipna=False)) if len(inc) else math.nan
            values.setdefault(str(lab), {})[seed] = v
    return out


def _secondaries(sessions: pd.DataFrame, pairs: Sequence[Pair], unpaired: Sequence[Pair],
                 primary: Mapping[str, Verdict], states: Mapping[str, Mapping[int, str]], policy: VerdictPolicy,
                 m: int, label: str) -> dict[str, tuple[Secondary, ...]]:
    """{comparison: its Secondary verdicts} where `policy` splits α: each paired one read by
    verdicts.read_at_look at the look (and so the seeds) its primary verdict stopped at, on the secondaries' plan
    (policy.secondary_looks), at α_k / (m · n_secondaries); an unpaired one by Welch at the secondaries' share over
    the same count; {} without a split."""
    split = policy.split
    if split is None or split.n_secondaries == 0:
        return {}
    m_sec = split.secondary_m(m)
    out: dict[str, list[Secondary]] = {name(p): [] for p in pairs}
    for sec_name, column, values in secondary_values(sessions, policy.metric, label, split.n_secondaries):
        for pair in pairs:
            if pair in unpaired:
                a, b = ([values.get(r, {}).get(s, math.nan) for s in sorted(states.get(r, {}))] for r in pair)
                v = welch(a, b, split.secondary_alpha, m_sec, policy.delta)
            else:
                x = np.asarray(paired_differences(pair, values, states), dtype=float)
                plan = policy.secondary_looks(len(x))
                assert plan is not None
                r = read_at_look(x, primary[name(pair)].look, plan, m_sec, policy.delta, min_pairs=policy.min_pairs)
                v = Verdict(estimate=float(r["estimate"]), lo=float(r["lo"]), hi=float(r["hi"]), n=int(r["n"]),
                            n_left_out=int(r["n_left_out"]), level=float(r["level"]),
                            verdict=LABELS[int(r["code"])], look=int(r["look"]), n_seeds=int(r["n_seeds"]))
            out[name(pair)].append(Secondary(sec_name, column, v, m_sec))
    return {k: tuple(v) for k, v in out.items()}


def _differences(pair: Pair, values: dict, states: dict) -> tuple[list[float], list[str]]:
    """The per-seed differences row - reference in seed order (NaN where a pair is incomplete: the one pairing rule,
    adbs_lab/stats/verdicts.py: paired_differences, which --seeds auto looks with too) and, per seed, why its pair is
    missing ('' where it is not)."""
    row, ref = pair
    why = []
    for s in sorted(set(states.get(row, {})) | set(states.get(ref, {}))):
        a, b = values.get(row, {}).get(s), values.get(ref, {}).get(s)
        complete = a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
        ran = (states.get(row, {}).get(s), states.get(ref, {}).get(s))
        why.append("" if complete else next((st for st in ran if st is not None and st != K.COMPLETE),
                                            "not run" if None in ran else "without a finite value"))
    return paired_differences(pair, values, states), why


def _counted(why: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in (w for w in why if w):
        out[w] = out.get(w, 0) + 1
    return out


def compare_rows(sessions: pd.DataFrame, pairs: Sequence[Pair], *, trials: pd.DataFrame | None = None,
                 policy: VerdictPolicy = DEFAULT_POLICY, label: str = LABEL, across: bool = False) -> list[Compared]:
    """Every comparison of `pairs` on the last session's `policy.metric`, adjusted over all of them at the policy's
    α and read against its δ, with a seed plan for each unresolved one. `policy.looks`: a study that added seeds in
    batches (--seeds auto) reads each comparison at its planned looks, α spent across them
    (adbs_lab/stats/looks.py), and a verdict keeps the look that reached it.

    Rows of one study ran the same seed numbers, each an independent replication, so their differences are paired
    seed by seed (valid even where the rows' data differ, e.g. a 10-way row against a 5-way reference: the seeds'
    differences are still independent and alike). `across`: the rows come from several studies (studies/report.py
    A B), and they pair only where they ran the same seeds on the same data; otherwise Welch (unpaired); and the
    family is the comparisons that can have an interval (`_family_size`)."""
    if not pairs or sessions.empty or "seed" not in sessions:  # no seeds, no pairs
        return []
    values, states = seed_values(sessions, trials, policy.metric, label)
    unpaired = [p for p in pairs if across and not _pairable(p, values, trials, label)]
    diffs, why, sides = {}, {}, {}
    for pair in (p for p in pairs if p not in unpaired):
        diffs[name(pair)], why[name(pair)] = _differences(pair, values, states)
    for pair in unpaired:  # different seeds or data: Welch over each row's own values
        sides[name(pair)] = tuple([values.get(r, {}).get(s, math.nan) for s in sorted(states.get(r, {}))] for r in pair)
        why[name(pair)] = [states[r][s] for r in pair for s in sorted(states.get(r, {})) if states[r][s] != K.COMPLETE]
    m = _family_size(diffs, sides) if across else len(pairs)
    # the primary metric's share of α (all of it without a split); its looks, where it has them, spend that share
    verdicts = family_verdicts(diffs, policy.primary_alpha, policy.delta, policy.looks, m=m,
                               min_pairs=policy.min_pairs)
    for n, (a, b) in sides.items():
        verdicts[n] = welch(a, b, policy.primary_alpha, m, policy.delta)
    secondaries = _secondaries(sessions, pairs, unpaired, verdicts, states, policy, m, label)
    open_ = {n: d for n, d in diffs.items() if verdicts[n].verdict is Label.NOT_RESOLVED}
    # planned as a study of fixed size (all of α at one look): what a new run with that many seeds would need; a
    # --seeds auto study that stopped at its cap has no later look to plan for
    plans = planner.plan_family(open_, policy.delta, policy.primary_alpha, m=m)
    return [Compared(pair, verdicts[name(pair)], _counted(why[name(pair)][:verdicts[name(pair)].n_seeds]
                                                          if pair not in unpaired else why[name(pair)]),
                     m, plans.get(name(pair)), policy, paired=pair not in unpaired,
                     secondaries=secondaries.get(name(pair), ()))
            for pair in pairs]


def _family_size(diffs: Mapping[str, Sequence[float]], sides: Mapping[str, tuple[Sequence[float], ...]]) -> int:
    """The comparisons of a table across studies that can have an interval (verdicts.can_have_interval: enough
    finite pairs, or finite runs on each side of an unpaired one): the Bonferroni family. One that cannot is not
    resolved whatever the level, claims nothing, and would only widen the others (a one-seed k-shot cell, say);
    at least 1."""
    finite = [sum(math.isfinite(v) for v in d) for d in diffs.values()]
    finite += [min(sum(math.isfinite(v) for v in side) for side in ab) for ab in sides.values()]
    return max(1, sum(can_have_interval(n) for n in finite))


DATA_KEYS = ("dataset", "ways", "shots", "sessions", "index_list")
"""Config fields that, with the seed, fix a trial's data draw: two rows pair seed by seed only where they agree."""


def _pairable(pair: Pair, values: dict, trials: pd.DataFrame | None, label: str) -> bool:
    """Whether two rows ran the same seeds on the same data (rows of one study always do; rows of two studies in
    `studies/report.py A B` may not), so their difference can be taken seed by seed."""
    seeds = [set(values.get(r, {})) for r in pair]
    if not (seeds[0] & seeds[1]):
        return not (seeds[0] or seeds[1])  # neither ran a seed: nothing to pair or not pair (not resolved)
    keys = [k for k in DATA_KEYS if trials is not None and k in trials]
    if trials is None or label not in trials or not keys:
        return True
    of = [pd.DataFrame({k: texts(trials.loc[trials[label] == r, k]) for k in keys}).drop_duplicates() for r in pair]
    return len(of[0]) == len(of[1]) == 1 and of[0].iloc[0].tolist() == of[1].iloc[0].tolist()


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")


def verdict_text(c: Compared) -> str:
    """The verdict with δ written out: "equivalent within ±1 point", "better, by less than 1 point"."""
    return c.policy.wording(c.verdict.verdict)


def _n_text(c: Compared) -> str:
    """`n=3`, `n=5, 1 diverged`, and for a study that added seeds in batches the look that reached the verdict."""
    v = c.verdict
    looks = c.policy.looks
    reached = ([f"reached at look {v.look} of {len(looks.sizes)}, {v.n_seeds} seeds" if c.resolved else
                f"look {v.look} of {len(looks.sizes)}, {v.n_seeds} seeds"] if looks is not None and v.look else [])
    return ", ".join([f"n={v.n}"] + [f"{k} {why}" for why, k in sorted(c.left_out.items())] + reached)


def sentence(c: Compared, metric: str | None = None) -> str:
    """One line a researcher can quote: "adb+ic vs baseline: -3.40 points in the last session (95% CI -5.30 to
    -1.50, Bonferroni over 5 comparisons; paired, n=3): worse"; the metric named where it is not test_acc
    (`metric`, default the comparison's own)."""
    metric = c.metric if metric is None else metric
    v = c.verdict
    what = f"{number(v.estimate, signed=True)} points" if math.isfinite(v.estimate) else "no paired seed"
    where = "in the last session" + ("" if metric == "test_acc" else f" ({metric})")
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{name(c.pair)}: {what} {where} ({_n_text(c)}: {why_no_interval(v)}): {verdict_text(c)}"
    adjusted = [f"Bonferroni over {c.m} comparisons"] if c.m > 1 else []
    adjusted += [f"α spent over {len(c.policy.looks.sizes)} looks"] if c.policy.looks is not None else []
    how = "paired" if c.paired else "unpaired (Welch: the rows ran different seeds or data" + (
        f"; conservative df = {v.n - 1}: a side has fewer than {CONSERVATIVE_BELOW} runs)" if v.conservative_df
        else ")")
    lo, hi = ends(c)
    return (f"{name(c.pair)}: {what} {where} ({c.policy.level_text} CI {lo} to {hi}"
            f"{''.join(', ' + a for a in adjusted)}; {how}, {_n_text(c)}): {verdict_text(c)}{_tost(v)}")


def _tost(v: Verdict) -> str:
    """What an equivalence verdict read off the displayed 1 - a interval is: two one-sided tests at a/2 each
    (Schuirmann 1987), twice as strict as equivalence alone needs (the 1 - 2a interval would do): kept so that one
    interval gives every verdict (docs/statistics.md)."""
    if v.verdict is not Label.EQUIVALENT:
        return ""
    a = 1 - v.level
    return (f" (the two one-sided tests read off this interval are each at {a / 2:.2%}: twice as strict as "
            f"equivalence alone needs, {a:.2%}; docs/statistics.md)")


def ends(c: Compared) -> tuple[str, str]:
    """The interval's ends as printed (`printed_ends`: rounded outward until they give the verdict)."""
    lo, hi, _ = printed_ends(c.verdict, c.policy.delta)
    return lo, hi


def cell_text(c: Compared) -> str:
    """The Δlast paired cell: the estimate and the interval the verdict read, as the sentence prints it."""
    v = c.verdict
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{number(v.estimate, signed=True)} (n={v.n}: {no_interval_reason(v)})" if math.isfinite(v.estimate) else "-"
    lo, hi = ends(c)
    return f"{number(v.estimate, signed=True)} ({lo} to {hi}, n={v.n})"


def sentences(compared: Sequence[Compared], metric: str | None = None) -> list[str]:
    return [sentence(c, metric) for c in compared]


def family_heading(compared: Sequence[Compared]) -> str:
    """The line that opens a table's verdicts and names their family: which comparisons hold together (one table on
    one metric; the family across studies counts only the comparisons that can have an interval), so that verdicts
    of two tables, or of one table on two metrics (report.py --metric, studies/paper.py's parts), are not read as
    holding together."""
    c = compared[0]
    k, m = len(compared), c.m
    which = f"the {k} comparison{'s' * (k != 1)} of this table" + (
        f" ({m} of which can have an interval: the Bonferroni family)" if k != m else "")
    return (f"verdicts, one family: {which} on the last session's {c.metric}, {c.policy.guarantee()}; a verdict of "
            "another table, or of this table on another metric, is of another family (docs/statistics.md):")


def metric_name(metric: str) -> str:
    """How a finding names the deciding metric: "last-session accuracy" (test_acc), else its last session's column."""
    return "last-session accuracy" if metric == "test_acc" else f"last-session {metric}"


def _finding_part(what: str, v: Verdict, policy: VerdictPolicy, n: int | None = None) -> str:
    """One metric of a finding: "novel accuracy better by 24.10 points (95% CI +18.00 to +30.20)", its verdict in
    the table's words (policy.wording), its interval at the family's level, rounded outward (printed_ends), and its
    n where it differs from the comparison's (`n`)."""
    words = policy.wording(v.verdict)
    if not math.isfinite(v.estimate):
        return f"{what} {words} (no paired seed)"
    est = number(v.estimate, signed=True)
    count = [] if n is None or v.n == n else [f"n={v.n}"]
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{what} {words} ({', '.join([est, *count])}: {why_no_interval(v, policy.min_pairs)})"
    lo, hi, _ = printed_ends(v, policy.delta)
    ci = f"{policy.level_text} CI {lo} to {hi}"
    if v.verdict in (Label.BETTER, Label.WORSE):
        return f"{what} {words} by {number(abs(v.estimate))} points ({', '.join([ci, *count])})"
    return f"{what} {words} ({', '.join([est, ci, *count])})"


def finding(c: Compared) -> str:
    """The comparison in one sentence a researcher can quote, on every metric it is read on: "adb+ic vs baseline
    (5 seeds): last-session accuracy worse by 3.40 points (95% CI -6.10 to -0.70); novel accuracy better by 24.10
    points (95% CI +18.00 to +30.20); base accuracy ...; H last ...; H averaged ...". Every interval is at the
    family's simultaneous level (all of them true together), each metric's share of α given once in the note
    below the findings (`opening`)."""
    v = c.verdict
    left = [f"{k} {why}" for why, k in sorted(c.left_out.items())]
    seeds = f"{v.n} seed{'s' * (v.n != 1)}" if c.paired else f"unpaired, n={v.n}"
    parts = [_finding_part(metric_name(c.metric), v, c.policy)]
    parts += [_finding_part(sec.name, sec.verdict, c.policy, v.n) for sec in c.secondaries]
    return f"{name(c.pair)} ({', '.join([seeds, *left])}): " + "; ".join(parts)


def findings(compared: Sequence[Compared]) -> list[str]:
    """The findings block of a table whose policy splits α: its heading (the family: the comparisons on the deciding
    metric and the secondary ones), a `finding` per comparison, and the note that names the split once; [] without
    a split (a study recorded before it, or of a policy without one: its lines are as they were)."""
    if not compared or compared[0].policy.split is None:
        return []
    c = compared[0]
    policy, k, m = c.policy, len(compared), c.m
    names = [x for x, _, _ in SECONDARY_METRICS[:policy.split.n_secondaries]] if policy.split else []
    which = f"the {k} comparison{'s' * (k != 1)} of this table" + (
        f" ({m} of which can have an interval: the Bonferroni family)" if k != m else "")
    return ([f"findings, one family: {which}, {'each ' * (k != 1)}on the last session's {c.metric} (which alone "
             f"decides when seeds stop and which row is best) and on {len(names)} secondary metrics "
             f"({', '.join(names)}), {policy.guarantee()} (docs/tables.md):"]
            + [finding(x) for x in compared]
            + [f"{policy.split_text(m)}; every interval is at the family's {policy.level_text} level (all true "
               f"together), and a secondary metric is read at the seeds where its comparison's {c.metric} stopped "
               "(docs/statistics.md)"])


def _detail_heading(compared: Sequence[Compared]) -> str:
    """The heading of the deciding metric's sentences below the findings (the same family)."""
    return (f"the last session's {compared[0].metric} in full, of the family above (a verdict of another table, or "
            "of this table on another --metric, is of another family; docs/statistics.md):")


def opening(compared: Sequence[Compared], markdown: bool = False) -> list[str]:
    """A table's opening lines: the family's heading, one sentence per comparison (bullets in Markdown), a blank
    line; none without comparisons. A policy that splits α opens with its `findings` (the split's note last), then
    the deciding metric's sentences under `_detail_heading`."""
    if not compared:
        return []
    said = sentences(compared)
    bullets = (lambda lines: [f"- {x}" for x in lines]) if markdown else (lambda lines: list(lines))
    found = findings(compared)
    if not found:
        return [family_heading(compared)] + bullets(said) + [""]
    return ([found[0]] + bullets(found[1:-1]) + ["", found[-1], "", _detail_heading(compared)] + bullets(said)
            + [""])


def quotable(compared: Sequence[Compared]) -> list[str]:
    """The lines a rendering keeps as comments to quote (LaTeX): the findings, where there are, then the deciding
    metric's sentences."""
    return findings(compared) + sentences(compared)


def row_seconds(trials: pd.DataFrame | None, label: str = LABEL) -> dict[str, float]:
    """{row: mean seconds per completed trial} from trials.parquet's start and end times (what this machine took)."""
    if trials is None or not len(trials) or not {"started_at", "finished_at"} <= set(trials.columns):
        return {}
    t = trials[trials["state"] == K.COMPLETE] if "state" in trials else trials
    took = pd.to_numeric(t["finished_at"], errors="coerce") - pd.to_numeric(t["started_at"], errors="coerce")
    means = took.groupby(t[label]).mean().dropna()
    return {str(k): float(v) for k, v in means.items() if v >= 0}


def plan_lines(compared: Sequence[Compared], seconds: Mapping[str, float] | None = None) -> list[str]:
    """The plan under the table: for each unresolved comparison, where the sequential design would stop it (the
    median and 90% prediction interval of the seeds at its stop, adbs_lab/stats/forecast.py: forecast), the trials and
    time on this machine (`seconds`: each row's measured seconds per trial), how often the cap and the horizon resolve
    it, and where they would not in ENOUGH of the draws, the cap that would (forecast.cap_that_would). The looks are
    the study's recorded ones where it has them, else the design a deciding study of the family's size would run
    (forecast.planned_looks). A prediction from the seeds run, not a verdict; no forecast from fewer than 3 finite
    pairs or pairs without spread. It replaces the plan on σ's upper 80% bound (adbs_lab/stats/planner.py), which
    aimed at an interval narrower than δ whatever the truth and asked about ten times the seeds the looks stop at."""
    open_ = [c for c in compared if c.plan is not None]
    if not open_:
        return []
    first = open_[0]
    delta = first.policy.delta
    names = {name(c.pair): c for c in open_}
    looks, own, said = forecasts(open_)
    timed = seconds is not None and all(row in seconds for c in open_ for row in c.pair)
    lines = [f"where the sequential design would stop the unresolved comparisons (a forecast from the seeds run, not a "
             f"verdict: the seeds at the stop, median and {forecast.LEVEL:.0%} prediction interval over the "
             f"posterior predictive; docs/statistics.md, \"Reading the plan\"):",
             f"  looks: {_looks_text(looks, own, first.m)}"]
    for n, c in names.items():
        one = forecast.cost({n: said[n]}, {n: c.pair}, seconds or {}, looks) if timed and said[n].draws.size else None
        lines.append(f"  {n}: " + _plan_text(said[n], looks, own, one, c, delta))
    total = forecast.cost(said, {n: c.pair for n, c in names.items()}, seconds or {}, looks) if timed else None
    if total is not None and len(said) > 1 and len(total.unforecast) < len(said):
        t, sec = total.trials, total.seconds
        lines.append(f"  all of them: {t[0]:.0f} more trials (90%: {t[1]:.0f} to {t[2]:.0f}), about "
                     f"{duration(sec[0])} (90%: {duration(sec[1])} to {duration(sec[2])}) at each row's measured "
                     f"seconds per trial (a shared reference counted once; a new seed trains its own base sessions); "
                     f"every forecast comparison resolved by {_last(looks)} in {total.p_by_horizon:.0%} of draws")
    return lines


def forecasts(compared: Sequence[Compared]) -> tuple[Looks, bool, dict[str, forecast.Forecast]]:
    """(the looks the plan replays, whether they are the study's own, {comparison: its Forecast}) for a table's
    unresolved comparisons, as `plan_lines` prints them: forecast.planned_looks of the family's recorded looks, size
    and split; each forecast from the comparison's per-seed differences (its SeedPlan's), at the table's δ and m."""
    open_ = [c for c in compared if c.plan is not None]
    if not open_:
        return Looks(), False, {}
    first = open_[0]
    looks, own = forecast.planned_looks(first.policy.looks, first.m, first.policy.split)
    # forecast.forecast_family's streams (comparison k draws from seed k), each forecast computed once per table
    # however many renderings print it (text, Markdown, report.md)
    diffs = {name(c.pair): tuple(c.plan.diffs) for c in open_ if c.plan is not None}
    said = {n: _forecast(d, looks, first.m, first.policy.delta, k) for k, (n, d) in enumerate(diffs.items())}
    return looks, own, said


_forecast = functools.lru_cache(maxsize=1024)(forecast.forecast)
_cap_that_would = functools.lru_cache(maxsize=1024)(forecast.cap_that_would)


def _last(looks: Looks) -> str:
    return f"the horizon of {looks.horizon}" if looks.horizon is not None else f"the cap of {looks.max_seeds}"


def _looks_text(looks: Looks, own: bool, m: int) -> str:
    """Which looks the forecast replays, in words."""
    shape = (f"first {looks.n0} seeds, {looks.batch} more a look, the cap at {looks.max_seeds}"
             + (f", continuations to the horizon of {looks.horizon}" if looks.horizon is not None else ", no horizon"))
    if own:
        return f"the study's own, as it recorded them ({shape})"
    return (f"the sequential design a deciding study of {m} comparison{'s' * (m != 1)} would run ({shape}; "
            "adbs_lab/stats/continuation.py: design), over the seeds run")


def _plan_text(f: forecast.Forecast, looks: Looks, own: bool, one: forecast.Cost | None, c: Compared, delta: float) -> str:
    """One comparison's forecast in words: "stops at 5 seeds (90%: 3 to 9); 4 more trials, about 3 min; by the cap
    of 8 in 83% of draws"."""
    if f.median is None:
        return f.note
    if f.note == forecast.RESOLVED:  # the design's looks over the seeds run already resolve it (a study of fixed seeds)
        return (f"stops at {f.median:.0f} seeds, among the seeds run: the design's looks over them would resolve it (no "
                "more seeds; a reading of another family than the table's)")
    assert f.lo is not None and f.hi is not None and f.p_by_horizon is not None
    if f.seeds_run >= looks.last:
        head = (f"the study's looks are spent (the last at {looks.last} seeds): no more seeds resolve it under its plan"
                if own else f"the design's looks end at {looks.last} seeds, no more than the seeds run")
        return head + _larger_cap(c, looks, delta)
    hi = f"{f.hi:.0f}" if math.isfinite(f.hi) else f"beyond {looks.last}"
    stop = (f"stops at {f.median:.0f} seeds (90%: {f.lo:.0f} to {hi})" if math.isfinite(f.median)
            else f"not resolved by {_last(looks)} in most draws (90%: from {f.lo:.0f} seeds to beyond)"
            if math.isfinite(f.lo) else f"not resolved by {_last(looks)} in {1 - f.p_by_horizon:.0%} of draws")
    parts = [stop]
    if one is not None:
        parts.append(f"{one.trials[0]:.0f} more trials, about {duration(one.seconds[0])}")
    by_cap = float((f.draws <= looks.max_seeds).mean())
    where = f"by the cap of {looks.max_seeds} in {by_cap:.0%} of draws"
    if looks.horizon is not None:
        where += f", by the horizon of {looks.horizon} in {f.p_by_horizon:.0%}"
    parts.append(where)
    text = "; ".join(parts)
    return text + (_larger_cap(c, looks, delta) if f.p_by_horizon < forecast.ENOUGH else "")


def _larger_cap(c: Compared, looks: Looks, delta: float) -> str:
    """Where the looks would not resolve the comparison in ENOUGH of the draws: the cap that would."""
    assert c.plan is not None
    cap = _cap_that_would(tuple(c.plan.diffs), looks, c.m, delta)
    with_horizon = f" (horizon {2 * cap})" if cap is not None and looks.horizon is not None else ""
    if cap is None:
        return (f"; no cap up to {forecast.MOST} seeds would resolve it in {forecast.ENOUGH:.0%} of draws (its "
                "difference may lie near 0 or ±δ, where more seeds barely help)")
    return f"; a new study with a cap of {cap}{with_horizon} would resolve it by its cap in {forecast.ENOUGH:.0%}"


def cell(c: Compared) -> tuple[float, float, int]:
    """The table's Δlast paired cell: (estimate, the displayed interval's half-width, n)."""
    return c.verdict.estimate, half_width(c.verdict), c.verdict.n


def note(compared: Sequence[Compared]) -> str:
    """The table's note on its Δlast paired and verdict columns."""
    m, policy = compared[0].m, compared[0].policy
    delta = policy.delta
    share = f"; at the deciding metric's share of α, {policy.primary_alpha:g}" if policy.split is not None else ""
    return (f"Δlast paired: mean over the seeds a row and its reference both completed of (row - reference) "
            f"last-session accuracy (its {policy.level_text} confidence interval, rounded outward, adjusted over the "
            f"table's {m} comparison{'s' * (m != 1)} (Bonferroni; t over the per-seed differences"
            f"{'; α spent over the planned looks of --seeds auto' if policy.looks is not None else ''}"
            f"{share})); verdict: read "
            f"from that interval against 0 and ±δ = {_points(delta)} (--resolve; docs/statistics.md)")


_ABOVE = (Label.BETTER, Label.BETTER_SMALL)
_BELOW = (Label.WORSE, Label.WORSE_SMALL)


def best_standing(best: str, compared: Sequence[Compared]) -> tuple[bool, list[str]]:
    """Whether the verdicts resolve `best` (the row with the best mean objective) as best, and otherwise the rows it
    cannot be told from. A row is resolved below `best` by their own comparison (best better, or the row worse), or
    through a reference both are compared with: best - row = (best - ref) - (row - ref), so where best's interval
    against ref lies wholly above the row's (lo of one above hi of the other) best is the better, with the family's
    guarantee (both intervals cover together). Resolved: every other row is below `best`. Otherwise the rows neither
    below it nor resolved above it, however they are connected to it (two rows both better than a shared reference
    are not told apart by that). No comparisons: (True, [])."""
    if not compared:
        return True, []
    rows = {r for c in compared for r in c.pair} - {best}
    below: set[str] = set()
    above: set[str] = set()
    for c in compared:
        if best in c.pair:
            other = c.pair[1] if c.pair[0] == best else c.pair[0]
            sign = 1 if c.pair[0] == best else -1  # best - other has the verdict's sign (or its opposite)
            if c.verdict.verdict in (_ABOVE if sign > 0 else _BELOW):
                below.add(other)
            elif c.verdict.verdict in (_BELOW if sign > 0 else _ABOVE):
                above.add(other)
    against = {c.pair[1]: c.verdict for c in compared if c.pair[0] == best}
    for c in compared:
        row, ref = c.pair
        if row == best or ref not in against or row in below | above:
            continue
        if against[ref].lo - c.verdict.hi > TOUCH:  # NaN (no interval) resolves nothing
            below.add(row)
        elif against[ref].hi - c.verdict.lo < -TOUCH:
            above.add(row)
    ok = rows <= below
    return ok, [] if ok else sorted(rows - below - above)
