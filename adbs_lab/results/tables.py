"""Result tables: the paper-style table, its text/Markdown rendering with departures and warnings, the best
configuration, and the study's result files.

`paper_table` is a pure function of the sessions DataFrame (adbs_lab.records.trial_records.frames), so the same table is
rebuilt from any source of TrialRecords: a study's Tune results or the MLflow store (studies/report.py).
"""

from __future__ import annotations

import json
import math
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from adbs.cells import mean_ci, number
from adbs_lab.results import compare
from adbs_lab.results import comparisons as cmp
from adbs_lab.results import seed_counts
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.config_values import is_missing, write_parquet
from adbs_lab.records.value_text import plain
from adbs_lab.stats.intervals import DESCRIPTIVE_LEVEL, mean_t
from adbs_lab.stats.policy import DEFAULT_POLICY, VerdictPolicy
from adbs_lab.records.trial_records import CONFIG_COLUMNS, LABEL


def paper_table(sessions: pd.DataFrame, *, metric: str = "test_acc", baseline: str | dict[str, str] | None = None,
                order: list[str] | None = None, label: str = LABEL, trials: pd.DataFrame | None = None,
                front: list[str] | None = None, verdicts: VerdictPolicy = DEFAULT_POLICY, across: bool = False) -> pd.DataFrame:
    """Rows = configurations, columns = sessions 0..N, average, (Delta_last vs `baseline`), (D_cs).

    When rows ran different numbers of incremental sessions (a k-shot grid: 10-way rows 4, 5-way rows 8 on
    the embedded benchmark), a `sessions` column after `seeds` says how many each row's average covers.

    Cells are mean over seeds (trials) of `metric` in percent, with the 95% CI half-width
    (adbs_lab/stats/intervals.py: mean_t; unadjusted, descriptive) when a row has several seeds. Only COMPLETE
    trials count. `baseline` is one row every row is compared with, or {row: its reference row} (the hosts study: each host with
    ADBS against the same host without); rows without a reference get no Delta_last. With `trials`
    (trials.parquet), a `d_cs` column holds each row's class separation after the last session, so the
    geometry the accuracies come from is visible beside them (paper Table 4; docs/metrics.md). `front`: the rows
    on the Pareto front of a multi-objective search (adbs_lab/results/pareto.py: front_labels), marked '*' in a last
    `front` column; None (a single-objective study): no such column.

    `verdicts`: the study's verdict policy (adbs_lab/stats/policy.py): its comparisons (`pairs`; None: each row
    against its reference, adbs_lab/results/comparisons.py: family), each given a verdict on `metric` at its α and δ
    (its looks: read at the planned looks of a study that added seeds in batches, --seeds auto; `across`: rows of
    several studies, paired only where they ran the same seeds on the same data, comparisons.compare_rows); the
    row-against-reference ones fill the Δlast paired and verdict columns, and all of them are in
    `table.attrs["comparisons"]` (format_table's opening lines).
    """
    s = sessions[sessions["state"] == K.COMPLETE] if "state" in sessions else sessions
    if s.empty:
        return pd.DataFrame()
    table = _Table.of(s, metric=metric, baseline=baseline, order=order, label=label, trials=trials, front=front)
    known = list(dict.fromkeys([*table.labels, *([str(x) for x in trials[label]] if trials is not None and label in
                                                  trials else [])]))
    pairs = verdicts.pairs if verdicts.pairs is not None else cmp.family(known, table.reference())
    table = dataclasses.replace(table, compared=cmp.compare_rows(
        s, pairs, trials=trials, policy=dataclasses.replace(verdicts, metric=metric), label=label, across=across))
    rows: list[dict[str, Any]] = [{"config": lab} for lab in table.labels]
    for column in COLUMNS:
        column(table, rows)
    out = pd.DataFrame(rows)
    out.attrs["comparisons"] = table.compared
    return out


@dataclass(frozen=True)
class _Table:
    """What the columns of one paper_table read: the COMPLETE rows of `sessions`, each row's trials x sessions of
    the metric, and the call's options."""

    sessions: pd.DataFrame
    metric: str
    label: str
    labels: list[str]  # the rows, in the table's order
    per_trial: pd.DataFrame  # (row, trial_id) x session: the metric
    per_trial_h: pd.DataFrame | None  # the same for the metric's harmonic mean, where the sessions hold it
    n_sessions: int
    baseline: str | dict[str, str] | None
    trials: pd.DataFrame | None
    front: list[str] | None
    by_row: dict[Any, pd.DataFrame]  # {row: per_trial.loc[row]}
    by_row_h: dict[Any, pd.DataFrame]  # the same of per_trial_h ({} without it)
    last_of: dict[Any, Any]  # {row: last_session(row)}
    compared: list[cmp.Compared] = dataclasses.field(default_factory=list)  # the table's comparisons and verdicts

    @classmethod
    def of(cls, s: pd.DataFrame, *, metric: str, baseline: str | dict[str, str] | None, order: list[str] | None,
           label: str, trials: pd.DataFrame | None, front: list[str] | None) -> _Table:
        labels = list(dict.fromkeys(s[label]))
        if order:
            labels = [x for x in order if x in labels] + [x for x in labels if x not in order]
        else:  # no order of the study's own: by the swept values (alpha_sweep in alpha order), not trial order
            labels = compare.sort_by_swept(s, labels, label)
        hmean = compare.hmean_metric(metric)
        per_trial_h = (s.pivot_table(index=[label, "trial_id"], columns="session", values=hmean, aggfunc="first")
                       if hmean in s else None)
        per_trial = s.pivot_table(index=[label, "trial_id"], columns="session", values=metric, aggfunc="first")
        # a row none of whose complete trials has a number of the metric (pivot_table leaves such trials out) has
        # no cell to show: left out, as a row without complete trials is, rather than a KeyError for the whole table
        labels = [x for x in labels if x in per_trial.index.get_level_values(0)]
        return cls(s, metric, label, labels, per_trial, per_trial_h, int(s["session"].max()) + 1, baseline, trials,
                   front, by_row(per_trial), by_row(per_trial_h) if per_trial_h is not None else {},
                   last_sessions(per_trial))

    def trials_of(self, lab: str) -> pd.DataFrame:
        """Row `lab`'s trials x sessions."""
        return self.by_row[lab]

    def last_session(self, lab: str):
        """The last session where row `lab` has a number (10-way rows have fewer sessions than 5-way ones)."""
        return self.last_of[lab]

    def reference(self) -> dict[str, str]:
        """{row: the row its Delta_last is against}."""
        b = self.baseline
        return b if isinstance(b, dict) else {lab: b for lab in self.labels} if b else {}

    def done_trials(self) -> pd.DataFrame | None:
        """The trials table's COMPLETE trials, or None without one."""
        if self.trials is None or not len(self.trials):
            return None
        return self.trials[self.trials["state"] == K.COMPLETE] if "state" in self.trials else self.trials


def by_row(per_trial: pd.DataFrame) -> dict[Any, pd.DataFrame]:
    """{row: its trials x sessions} of a (row, trial_id) x session frame, each as per_trial.loc[row] gives it, split
    in one pass: a .loc per row and column was most of paper_table's 4 s at 1,000 rows (docs/benchmarks.md)."""
    flat = per_trial.droplevel(0)
    return {lab: flat.iloc[rows] for lab, rows in per_trial.groupby(level=0, sort=False).indices.items()}


def last_sessions(per_trial: pd.DataFrame) -> dict[Any, Any]:
    """{row: the last session where it has a number} of a (row, trial_id) x session frame (10-way rows have fewer
    sessions than 5-way ones)."""
    has = per_trial.notna().groupby(level=0, sort=False).any()
    sessions = list(has.columns)
    return {lab: max(c for c, seen in zip(sessions, flags) if seen) for lab, flags in zip(has.index, has.to_numpy())}


# paper_table's columns, in the table's order: each adds its column to every row (or, where it does not apply to
# this table, none). A new column is one function and one entry of COLUMNS.

def _seeds(t: _Table, rows: list[dict[str, Any]]) -> None:
    """How many trials (seeds) a row's cells average; then, where rows ran different numbers of incremental
    sessions (a k-shot grid), `sessions`: how many each row's average covers."""
    for row in rows:
        row["seeds"] = len(t.trials_of(row["config"]))
        row["sessions"] = int(t.last_session(row["config"]))  # incremental sessions the row ran (avg covers 0..this)
    if len({row["sessions"] for row in rows}) < 2:  # one number for every row: nothing to mark
        for row in rows:
            del row["sessions"]


def _per_session(t: _Table, rows: list[dict[str, Any]]) -> None:
    """One column per session, "0".."N": mean ± CI over the row's seeds."""
    for row in rows:
        trials = t.trials_of(row["config"])
        for sess in range(t.n_sessions):
            row[str(sess)] = mean_t(list(trials[sess])) if sess in trials else (math.nan, math.nan)


def _avg(t: _Table, rows: list[dict[str, Any]]) -> None:
    """Each trial's average over its own sessions (10-way rows have fewer sessions than 5-way ones)."""
    for row in rows:
        row["avg"] = mean_t(list(t.trials_of(row["config"]).mean(axis=1, skipna=True)))


# the two other numbers FSCIL papers quote beside the average: the last session's accuracy and the performance drop
# PD = session 0 - last session (per trial, then mean ± CI over trials)

def _last(t: _Table, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["last"] = mean_t(list(t.trials_of(row["config"])[t.last_session(row["config"])]))


def _pd(t: _Table, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        trials = t.trials_of(row["config"])
        row["pd"] = mean_t(list(trials[0] - trials[t.last_session(row["config"])])) if 0 in trials else (math.nan, math.nan)


def _hmean(t: _Table, rows: list[dict[str, Any]]) -> None:
    """The harmonic mean of base and novel accuracy in the last session: the trade-off ADBS is about, in one number
    per trial (where the sessions hold it)."""
    if t.per_trial_h is None:
        return
    for row in rows:
        lab, last_col = row["config"], t.last_session(row["config"])
        h = t.by_row_h.get(lab)
        row["hmean"] = mean_t(list(h[last_col])) if h is not None and last_col in h else (math.nan, math.nan)


def _delta_last(t: _Table, rows: list[dict[str, Any]]) -> None:
    """Each row's last-session mean minus its reference row's, where any row has a reference in the table."""
    last_of = {row["config"]: row["last"][0] for row in rows}
    reference = t.reference()
    if any(ref in last_of for ref in reference.values()):
        for row in rows:
            ref = reference.get(row["config"])
            row["delta_last"] = last_of[row["config"]] - last_of[ref] if ref in last_of else math.nan


def _delta_paired(t: _Table, rows: list[dict[str, Any]]) -> None:
    """Delta_last seed by seed against the row's reference (the same data draw and training seed), its interval the
    one adjusted over the table's comparisons, and the verdict read from it (adbs_lab/results/comparisons.py)."""
    if "delta_last" not in rows[0]:
        return
    reference = t.reference()
    against = {c.pair[0]: c for c in t.compared if c.pair[1] == reference.get(c.pair[0])}
    if against:
        for row in rows:
            c = against.get(row["config"])
            row["delta_paired"] = cmp.cell(c) if c and c.paired else (math.nan, math.nan, 0)
            row[VERDICT] = (cmp.verdict_text(c) + ("" if c.paired else " (unpaired)")) if c else ""


def _d_cs(t: _Table, rows: list[dict[str, Any]]) -> None:
    """Class separation after the last session (trials.parquet's d_cs), beside the accuracies it explains."""
    done = t.done_trials()
    if done is None or "d_cs" not in done:
        return
    d_cs = {lab: list(values) for lab, values in done.groupby(t.label, sort=False)["d_cs"]}  # one pass, not a mask a row
    for row in rows:
        row["d_cs"] = mean_t(d_cs.get(row["config"], []))


def _seed_states_column(t: _Table, rows: list[dict[str, Any]]) -> None:
    if t.trials is not None and len(t.trials) and "state" in t.trials:
        _seed_states(rows, t.trials, t.label)


def _front(t: _Table, rows: list[dict[str, Any]]) -> None:
    """'*' on the rows of a multi-objective search's Pareto front (no column for a single-objective study)."""
    if t.front is not None:
        for row in rows:
            row[FRONT] = "*" if row["config"] in t.front else ""


COLUMNS = (_seeds, _per_session, _avg, _last, _pd, _hmean, _delta_last, _delta_paired, _d_cs, _seed_states_column,
           _front)
"""paper_table's columns after `config`, in order (see the functions above)."""

SEED_STATES = "seed_states"
"""paper_table's column (with `trials`): how many of the row's seeds completed, "2 of 2" / "1 of 2, 1 diverged"
(adbs_lab/results/seed_counts.py); format_table shows it as the seeds cell."""


def _seed_states(out: list[dict[str, Any]], trials: pd.DataFrame, label: str) -> None:
    """Each row's seed counts, and a row (no numbers) for every configuration none of whose seeds completed, so a
    configuration that diverged or failed is never missing from its table (one the pruner stopped before any seed
    completed is counted under the report's pruning instead: seed_counts.pruned_out)."""
    counts = seed_counts.counts(trials, label)
    template = out[0]
    shown = {row["config"] for row in out}
    for lab in [lab for lab, c in counts.items() if lab not in shown and not seed_counts.pruned_out(c)]:
        out.append({k: (math.nan, math.nan) if isinstance(v, tuple) and len(v) == 2 else
                    (math.nan, math.nan, 0) if isinstance(v, tuple) else math.nan for k, v in template.items()}
                   | {"config": lab, "seeds": 0} | ({"sessions": 0} if "sessions" in template else {}))
    for row in out:
        row[SEED_STATES] = seed_counts.text(counts.get(str(row["config"]), {K.COMPLETE: int(row["seeds"])}))


VERDICT = "verdict"
"""paper_table's column: the verdict of the row against its reference (adbs_lab/results/comparisons.py)."""

FRONT = "front"
"""paper_table's column marking the Pareto front of a multi-objective search (adbs_lab/records/objectives.py)."""
FRONT_NOTE = ("front: * = on the Pareto front of its study's --objectives (validation, mean over seeds; no other row "
              "of that study is at least as good on every objective and better on one; pareto.json)")


def format_table(table: pd.DataFrame, *, markdown: bool = False, seconds: dict[str, float] | None = None) -> str:
    """Fixed-width text (or Markdown) rendering of `paper_table`: `58.71 ± 1.20` cells, opened by one sentence per
    comparison and closed by the seed planner's advice for the unresolved ones (`seconds`: each row's measured
    seconds per trial, for their cost: adbs_lab/results/comparisons.py: row_seconds)."""
    if table.empty:
        return "(no completed trials)"

    def cell(v: Any, seeds: int, digits: int = 2, column: str = "", row: str = "") -> str:
        if column == "delta_paired":
            shown = next((c for c in compared if c.pair[0] == row and cmp.cell(c) == v), None)
            return cmp.cell_text(shown) if shown is not None else compare.format_paired(v)
        if isinstance(v, tuple):
            m, h = v
            return mean_ci(m, h if seeds >= 2 else None, digits)
        if isinstance(v, float):
            return number(v, signed=True)
        return str(v)

    compared = table.attrs.get("comparisons") or []
    labels = [str(x) for x in table["config"]]  # before _numbered renames long ones
    table, legend = _numbered(table)
    headers = ["config", "seeds"] + [c for c in table.columns if c not in ("config", "seeds", SEED_STATES)]
    names = {"avg": "avg", "last": "last", "pd": "PD", "delta_last": "Δlast", "d_cs": "D_cs", "hmean": "H last",
             "delta_paired": "Δlast paired", VERDICT: "verdict"}
    digits = {"d_cs": 3}  # D_cs is a mean of 1 - cos in [0, 2], not a percentage
    head = [names.get(h, h if not h.isdigit() else f"s{h}") for h in headers]
    body = [[seeds_cell(r) if h == "seeds" else cell(r[h], int(r["seeds"]), digits.get(h, 2), h, label)
             for h in headers] for label, (_, r) in zip(labels, table.iterrows())]
    note = ([SESSIONS_NOTE] if "sessions" in table else []) + ([CI_NOTE] if (table["seeds"] > 1).any() else [])
    note += [seed_counts.NOTE] if not whole_rows(table) else []
    note += [compare.HMEAN_NOTE] if "hmean" in table else []
    note += [cmp.note(compared) if compared else compare.PAIRED_NOTE] if "delta_paired" in table else []
    note += [FRONT_NOTE] if FRONT in table else []
    note += legend
    table_text = render_cells(head, body, "markdown" if markdown else "text")
    advice, opening = cmp.plan_lines(compared, seconds), cmp.opening(compared, markdown)  # the family's heading first
    if markdown:
        return "\n".join(opening + [table_text] + [line for n in note for line in ("", n)]
                         + (["", "\n".join(advice)] if advice else []))
    return "\n".join(opening + [table_text] + note + advice)


def seeds_cell(row: Any) -> str:
    """A row's seeds cell: "2 of 2" / "1 of 2, 1 diverged" (SEED_STATES), or the count of its completed seeds in a
    table built without the trials."""
    states = row.get(SEED_STATES) if hasattr(row, "get") else None
    return str(states) if isinstance(states, str) else str(int(row["seeds"]))


def whole_rows(table: pd.DataFrame) -> bool:
    """Whether every row of `table` completed every seed it ran (a table built without the trials: as far as known)."""
    if SEED_STATES not in table:
        return True
    return all(str(t) == f"{n} of {n}" for t, n in zip(table[SEED_STATES], table["seeds"]))


LABEL_WIDTH = 60
"""Longest row label the config column shows as it is; a search of several knobs (studies/knobs.py) labels its rows
with every searched value (~150 characters), and its table numbers the rows instead (`_numbered`)."""


def _numbered(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """`table` with its rows numbered #1, #2, ... in the config column and the legend lines naming each, when a
    label is longer than LABEL_WIDTH; else `table` as it is and no legend."""
    labels = [str(x) for x in table["config"]]
    if max(map(len, labels), default=0) <= LABEL_WIDTH:
        return table, []
    numbers = [f"#{i}" for i in range(1, len(labels) + 1)]
    return table.assign(config=numbers), [f"{n}: {lab}" for n, lab in zip(numbers, labels)]


def render_cells(head: list[str], body: list[list[str]], fmt: str, *, left: int = 1) -> str:
    """The one renderer of every table (the study's, report.py's, paper.py's): formatted cells as fixed-width
    "text" (the first `left` columns left-aligned, the others right-aligned), "markdown" or "latex" (a booktabs
    tabular; the cells already in LaTeX). Ours rather than tabulate's: tabulate widens each column to its header
    + 2, pads Markdown cells and escapes the cells' LaTeX ($\\pm$), so every table would change."""
    if fmt == "markdown":
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(b) + " |" for b in body])
    if fmt == "latex":
        return "\n".join([f"\\begin{{tabular}}{{{'l' * left}{'r' * (len(head) - left)}}}", "\\toprule",
                          " & ".join(head) + " \\\\", "\\midrule"] + [" & ".join(b) + " \\\\" for b in body]
                         + ["\\bottomrule", "\\end{tabular}"])
    if fmt != "text":
        raise ValueError(f"unknown table format {fmt!r}; choose text, markdown or latex")
    widths = [max(len(x) for x in col) for col in zip(head, *body)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


CI_NOTE = (f"a ± b: mean over the row's n = seeds trials ± the half-width of its {DESCRIPTIVE_LEVEL:.0%} confidence "
           "interval (t-distribution, n - 1 degrees of freedom; unadjusted, describing the seeds' spread: the verdicts "
           "carry the family's guarantee); PD = s0 - last session, per trial")
SESSIONS_NOTE = ("sessions: incremental sessions of each row; its avg is over sessions 0..sessions, so avg compares "
                 "rows with the same sessions only")


def departure_lines(trials: pd.DataFrame) -> list[str]:
    """A header line when every trial departs from the released code's boundary handling in the same way (the line
    itself: adbs/departures.py: lines)."""
    from adbs import departures
    from adbs.config import BOUNDARY_REMEDIES

    if trials.empty:
        return []
    one_value = {name: values[0] for name in BOUNDARY_REMEDIES
                 if name in trials and len(values := trials[name].dropna().unique()) == 1}
    return departures.lines(departures.changed(one_value), " in every trial")


def annotate(text: str, trials: pd.DataFrame, *, markdown: bool = False, order: list[str] | None = None,
             notes: list[str] | tuple[str, ...] = ()) -> str:
    """The table with the study's `notes` (adbs_lab/results/notes.py: a smoke run, the settings changed from the
    study's defaults) and its departures from the released code above it, and the collapse warnings below it."""
    head, foot = [*notes, *departure_lines(trials)], warning_lines(trials, order)
    if not markdown:
        return "\n".join([*head, text, *foot])
    return "\n\n".join([*head, text] + (["\n".join(f"- {w}" for w in foot)] if foot else []))


def warning_lines(trials: pd.DataFrame, order: list[str] | None = None) -> list[str]:
    """One line per completed trial with a collapse warning (printed under the study's table, in its row order)."""
    if trials.empty or K.WARNING not in trials:
        return []
    flagged = trials[(trials["state"] == K.COMPLETE) & trials[K.WARNING].fillna("").astype(bool)]
    rank = {lab: i for i, lab in enumerate(order or [])}
    rows = sorted(flagged.to_dict("records"), key=lambda r: (rank.get(r[LABEL], len(rank)), str(r[LABEL]),
                                                             r.get("seed") if K.finite(r.get("seed")) else 0))
    return [f"WARNING {_trial_name(r)}: {r[K.WARNING]}" for r in rows]


def _trial_name(r: dict) -> str:
    seed = r.get("seed")
    return f"{r[LABEL]} seed={int(seed)}" if seed is not None and K.finite(seed) else str(r[LABEL])


def best_config(trials: pd.DataFrame, objectives: tuple | None = None) -> dict[str, Any] | None:
    """The configuration with the best mean objective over its seeds (validation, never test).

    `objectives` (adbs_lab/records/objectives.py; default: maximise summary/val_avg_acc): the best on the first one; with
    several, among the configurations on their Pareto front (so a point another beats on every objective is never
    chosen, even when it ties on the first).

    Only configurations every seed of which completed are ranked (adbs_lab/results/seed_counts.py); the others are listed
    in `not_ranked` with their counts, and None comes back when none is whole. Rows that ran different ways or
    sessions (the k-shot grid) average over different sessions, so the best is chosen within each group of the
    same ways, sessions and dataset (adbs_lab/results/compare.py: ranking_groups, the rule pareto.json's front follows
    too): the result is the group of the dataset's standard ways, and `per_group` names the best of every group."""
    from adbs_lab.records.objectives import DEFAULT

    objs = tuple(objectives or DEFAULT)
    t = seed_counts.ranked(trials) if len(trials) else trials
    if t.empty or any(o.name not in t for o in objs) or not t[objs[0].name].notna().any():
        return None
    groups, default = compare.ranking_groups(t)
    out = _best_of(groups[default][1], objs, trials)
    if out is None:
        return None
    if len(groups) > 1:
        out["compared_within"] = _plain_dict(groups[default][0])
        out["per_group"] = []
        for key, g in groups:
            b = _best_of(g, objs, trials)
            if b is not None:
                out["per_group"].append({**_plain_dict(key), "config_label": b["config_label"],
                                         "mean_over_seeds": b["mean_over_seeds"], "seeds": b["seeds"]})
    out["not_ranked"] = seed_counts.not_ranked(trials)
    return out


def _plain_dict(d: dict[str, Any]) -> dict[str, Any]:
    return {k: plain(v) for k, v in d.items()}


def _best_of(t: pd.DataFrame, objs: tuple, trials: pd.DataFrame) -> dict[str, Any] | None:
    """The best of the complete trials `t` of whole configurations (None when no configuration's mean of the first
    objective is a number: a seed's NaN is never averaged away); `trials`: every trial, for the seed counts."""
    from adbs_lab.results.pareto import front_labels

    if len(objs) > 1:
        on = front_labels(t, objs)
        if on:  # else no configuration measured every objective: the best on the first alone
            t = t[t[LABEL].isin(on)]
    first = objs[0]
    means = t.groupby(LABEL)[first.name].mean(skipna=False).dropna()
    if means.empty:
        return None
    lab = means.idxmax() if first.direction == "max" else means.idxmin()
    rows = t[t[LABEL] == lab]
    out = {"config_label": lab, "objective": first.key, "mean_over_seeds": float(means[lab]),
           "seeds": int(len(rows)), "seed_states": seed_counts.states(seed_counts.counts(trials).get(str(lab), {})),
           "config": configuration(rows.iloc[0]),
           "trial_seeds": sorted(int(s) for s in rows["seed"] if K.finite(s)) if "seed" in rows else []}
    if len(objs) > 1:  # the chosen point's value of every objective, and how it was chosen
        out["direction"] = first.direction
        out["objectives"] = {o.name: float(t.loc[t[LABEL] == lab, o.name].mean()) for o in objs}
        out["chosen"] = f"on the Pareto front of {', '.join(o.text for o in objs)}, the best on {first.text}"
    elif first.direction != "max":
        out["direction"] = first.direction
    return out


SEED_FIELDS = ("seed", "split_seed")
"""What a study sets per trial from --seeds (adbs_lab/driver/flags.py: SEEDED): a repetition, not the
configuration."""


def configuration(trial: pd.Series) -> dict[str, Any]:
    """The configuration a trial ran, as a config file: its fields without the seed (the seeds are repetitions of
    it) and without the fields it never reads (adbs/config/schema.py: Config.inert_fields), so the file is the same
    whichever seed ran first and names only what applies."""
    from adbs.config import Config

    # None is a value ("all images"), kept; a field the trial's record lacks is left out: its default applies
    cfg = {k: plain(json.loads(trial[k]) if isinstance(trial[k], str) and trial[k].startswith("[") else trial[k])
           for k in CONFIG_COLUMNS if k in trial and not is_missing(trial[k])}
    what = {k: cfg[k] for k in ("schedule", "variant") if cfg.get(k) is not None}  # what inert_fields reads
    drop = set(SEED_FIELDS) | set(Config(**what).inert_fields())
    return {k: v for k, v in cfg.items() if k not in drop}


def write(study_dir: Path, sessions: pd.DataFrame, trials: pd.DataFrame, table_text: str,
          best: dict | None) -> list[Path]:
    """Write the study's result files; returns their paths (attached to the parent MLflow run)."""
    files = [study_dir / "sessions.parquet", study_dir / "trials.parquet", study_dir / "table.txt",
             study_dir / "best_config.json"]
    write_parquet(sessions, files[0], CONFIG_COLUMNS)  # every config value as it was (None, mixed types)
    write_parquet(trials, files[1], CONFIG_COLUMNS)
    files[2].write_text(table_text + "\n")
    files[3].write_text(json.dumps(best if best is not None else no_best(trials), indent=1, default=str) + "\n")
    return files


def no_best(trials: pd.DataFrame) -> dict[str, Any] | None:
    """best_config.json when no configuration is ranked: why, with the configurations missing a seed and their
    counts (adbs_lab/results/seed_counts.py); None (JSON null) when no trial completed at all."""
    missing = seed_counts.not_ranked(trials) if len(trials) else []
    if not missing:
        return None
    return {"config_label": None, "why": "no configuration completed every seed, and one missing a seed is never "
                                         "ranked (its mean would cover other seeds than the others')",
            "not_ranked": missing}
