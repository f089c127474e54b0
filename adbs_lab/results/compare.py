"""Tables that compare like with like (used by adbs_lab/results/tables.py: paper_table and best_config).

- rows in the order of the values they swept, when the study gives no order of its own (alpha_sweep: by alpha);
- a paired Δlast: rows that ran the same seeds share the seed's data draw and training seed, so the difference
  row - reference is taken seed by seed and its 95% interval is the t-interval over those differences (n - 1
  degrees of freedom), narrower than the two rows' own intervals suggest when seeds move both rows alike;
- the harmonic mean of the last session's base and novel accuracy, per trial;
- the best configuration within rows that ran the same ways and sessions (an average over 4 sessions is not
  comparable with one over 8).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from adbs.cells import MISSING, finite, mean_ci
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.config_values import texts

NOT_SWEPT = ("seed", "split_seed", "trial_id", "state", "optuna_trial", "mlflow_run_id", "session")
"""Columns that differ between trials without being what a row is about."""

PAIRED_NOTE = ("paired Δlast: mean over the seeds a row and its reference both ran of (row - reference) "
               "last-session accuracy, ± the half-width of the paired 95% confidence interval (t over the per-seed "
               "differences, n - 1 degrees of freedom); n < 2: no interval")
HMEAN_NOTE = "H last: harmonic mean of the last session's base and novel accuracy, per trial"


def _key(v: Any) -> tuple:
    """A sort key for one config value: numbers before text, missing values last."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (2, 0.0, "")
    if isinstance(v, (bool,)):
        return (1, 0.0, str(v))
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def swept_columns(frame: pd.DataFrame, label: str) -> list[str]:
    """The config columns whose value differs between rows (seeds and bookkeeping columns left out; None is a value:
    adbs_lab/records/config_values.py)."""
    if frame.empty or label not in frame:
        return []
    first = frame.drop_duplicates(label)
    out = []
    for c in first.columns:
        if c in NOT_SWEPT or c == label or c in K.SESSION_METRICS:
            continue
        try:
            if texts(first[c]).nunique() > 1:
                out.append(c)
        except TypeError:  # unhashable cells: not a config value
            continue
    return out


def sort_by_swept(frame: pd.DataFrame, labels: list[str], label: str) -> list[str]:
    """`labels` ordered by the values they swept (in the frame's column order); labels tie-break by name."""
    cols = swept_columns(frame, label)
    if not cols:
        return labels
    first = frame.drop_duplicates(label)
    at = {lab: i for i, lab in enumerate(first[label])}
    # each column's cells as `.at` gives them (numpy scalars, Timestamps), read by position: `.at` per label and
    # column took 2.3 s for 5,000 rows of 3 swept columns (a figure's row_order, the table's row order)
    cells = [first[c].array for c in cols]
    return sorted(labels, key=lambda lab: (tuple(_key(v[at[lab]]) for v in cells), str(lab)))


def format_paired(v: Any) -> str:
    """`+8.00 ± 1.20 (n=3)`, `+8.00 (n < 2: no interval)`, or `-`."""
    if not isinstance(v, tuple) or not finite(v[0]):
        return MISSING
    mean, half, n = v
    interval = n > 1 and finite(half)
    return mean_ci(mean, half if interval else None, signed=True) + (f" (n={n})" if interval else " (n < 2: no interval)")


def hmean_metric(metric: str) -> str | None:
    """The session hmean of the table's split (test_acc -> test_hmean); None for a metric of no split."""
    for split in ("val", "test"):
        if metric.startswith(f"{split}_"):
            return f"{split}_hmean"
    return None


# -- the best configuration within comparable rows ----------------------------------------------------------
def _ways(t: pd.DataFrame) -> pd.Series:
    """Each trial's ways, None (the dataset's standard) resolved from the dataset's spec."""
    def resolve(row) -> Any:
        w = row.get("ways")
        if w is not None and K.finite(w):
            return int(w)
        try:
            from adbs.data.registry import get_spec

            return int(get_spec(str(row.get("dataset"))).default_ways)
        except Exception:  # noqa: BLE001 - a dataset this process does not know: its own group
            return None
    return t.apply(resolve, axis=1) if len(t) else pd.Series(dtype=object)


def comparable_groups(t: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Complete trials grouped by (ways, sessions, dataset): rows whose average covers the same sessions."""
    t = t.assign(_ways=_ways(t))
    keys = [c for c in ("_ways", "sessions", "dataset") if c in t]
    t = t.assign(**{c: t[c].astype(object).where(t[c].notna(), None) for c in keys})
    out = []
    for vals, g in t.groupby(keys, dropna=False, sort=False):
        vals = vals if isinstance(vals, tuple) else (vals,)
        key = {k.lstrip("_"): (None if isinstance(v, float) and math.isnan(v) else v) for k, v in zip(keys, vals)}
        out.append((key, g.drop(columns="_ways")))
    return out


def default_group(groups: list[tuple[dict[str, Any], pd.DataFrame]]) -> int:
    """Index of the group of the dataset's standard ways (best_config.json's), else the one with most trials."""
    for i, (key, _) in enumerate(groups):
        try:
            from adbs.data.registry import get_spec

            if key.get("ways") == get_spec(str(key.get("dataset"))).default_ways and not K.finite(key.get("sessions")):
                return i
        except Exception:  # noqa: BLE001 - unknown dataset: fall through
            pass
    return max(range(len(groups)), key=lambda i: len(groups[i][1]))


def ranking_groups(t: pd.DataFrame) -> tuple[list[tuple[dict[str, Any], pd.DataFrame]], int]:
    """The one group rule of best_config.json and the Pareto front (adbs_lab/results/tables.py: best_config,
    adbs_lab/results/pareto.py: front_labels and pareto_record): rows that ran different ways or sessions are ranked
    only within their group (`comparable_groups`), and the group best_config.json and pareto.json's front are
    taken in is `default_group`'s. One group (no ways/sessions columns, or every row alike): ([({}, t)], 0)."""
    groups = comparable_groups(t) if len(t) and {"ways", "sessions"} & set(t.columns) else []
    if len(groups) < 2:
        return [({}, t)], 0
    return groups, default_group(groups)
