"""The Pareto front of a study's objectives over its whole configurations (mean over seeds), pareto.json and the
lines that print it. The objectives themselves (what `--objectives` names and how it is parsed) are
adbs_lab/records/objectives.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.objectives import Objective, texts

__all__ = ["PARETO_JSON", "front", "config_means", "front_labels", "pareto_record", "write_pareto", "front_lines"]

PARETO_JSON = "pareto.json"


def front(rows: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Positions of the rows no other row dominates: at least as good on every objective and better on one (ties do
    not dominate). A row with a non-finite value is never on the front.

    The rows are taken best first in lexicographic order, so a row's dominators all come before it, and each is
    compared with the front found so far only (a dominated row's dominator is dominated by a row on the front or is
    on it): comparing every pair in Python took 1.8 s for the 1,000 points of a trade-off panel (tradeoff.py)."""
    import numpy as np

    sign = np.array([1.0 if d == "max" else -1.0 for d in directions])
    vals = np.array(rows, dtype=float).reshape(len(rows), len(sign)) * sign
    ok = np.flatnonzero(np.isfinite(vals).all(axis=1))
    w = vals[ok]
    on = np.empty_like(w)  # the front found so far, in its first len(found) rows
    found: list[int] = []
    for i in np.lexsort([-w[:, c] for c in reversed(range(w.shape[1]))]):
        f = on[:len(found)]
        if not ((f >= w[i]).all(axis=1) & (f > w[i]).any(axis=1)).any():
            on[len(found)] = w[i]
            found.append(i)
    return [int(j) for j in ok[sorted(found)]]


def config_means(trials, objectives: Sequence[Objective], label: str = "label"):
    """One row per configuration whose every seed completed (adbs_lab/results/seed_counts.py: a configuration missing a
    seed is never ranked): the mean over its seeds of each objective, and `seeds`. A seed's NaN makes its
    configuration's mean NaN (never averaged away), and `front` leaves a non-finite row off the front."""
    import pandas as pd

    from adbs_lab.results import seed_counts

    names = [o.name for o in objectives]
    t = seed_counts.ranked(trials, label) if len(trials) and "state" in trials else trials
    if t.empty or label not in t or not set(names) <= set(t.columns):
        return pd.DataFrame(columns=[label, *names, "seeds"])
    g = t.groupby(label, sort=False)
    return pd.DataFrame({**{n: g[n].mean(skipna=False) for n in names}, "seeds": g.size()}).reset_index()


def _front_of(trials, objectives: Sequence[Objective], label: str) -> list[str]:
    means = config_means(trials, objectives, label)
    rows = means[[o.name for o in objectives]].to_numpy().tolist()
    return [str(means[label].iloc[i]) for i in front(rows, [o.direction for o in objectives])]


def front_labels(trials, objectives: Sequence[Objective], label: str = "label") -> list[str]:
    """The configurations on the Pareto front of `objectives` (means over seeds of whole configurations), taken
    within each group of rows that ran the same ways and sessions (adbs_lab/results/compare.py: ranking_groups, the group
    rule best_config.json follows too): every group's front."""
    from adbs_lab.results import compare
    from adbs_lab.results import seed_counts

    groups, _ = compare.ranking_groups(seed_counts.ranked(trials, label) if len(trials) else trials)
    return [lab for _, g in groups for lab in _front_of(g, objectives, label)]


def _plain(v: Any) -> Any:
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and math.isnan(v) else v


def _points(trials, objectives: Sequence[Objective], label: str) -> tuple[list[dict[str, Any]], int]:
    """The front's points of one group of rows (best on the first objective first), and how many configurations
    were compared."""
    from adbs_lab.results import compare
    from adbs_lab.results import seed_counts
    from adbs_lab.records.config_values import is_missing
    from adbs_lab.records.trial_records import CONFIG_COLUMNS

    means = config_means(trials, objectives, label)
    by_label = seed_counts.counts(trials, label)
    t = trials[trials["state"] == K.COMPLETE] if len(trials) else trials
    # the config fields the configurations differ in (the summary metrics differ too, but are not parameters)
    swept = [c for c in compare.swept_columns(t, label) if c in CONFIG_COLUMNS] if len(t) else []
    first = t.drop_duplicates(label).set_index(label) if len(t) else None
    points: list[dict[str, Any]] = []
    for lab in _front_of(trials, objectives, label):
        m = means[means[label] == lab].iloc[0]
        # each searched value as the trial ran it (None is one); a field the trial's record lacks is left out
        params = ({c: _plain(first.at[lab, c]) for c in swept if not is_missing(first.at[lab, c])}
                  if first is not None else {})
        points.append({"config_label": lab, "params": params,
                       "values": {o.name: float(m[o.name]) for o in objectives}, "seeds": int(m["seeds"]),
                       "seed_states": seed_counts.states(by_label.get(lab, {}))})
    o1 = objectives[0]
    sign = -1.0 if o1.direction == "max" else 1.0  # best first; ties by label, as tables.best_config breaks them
    points.sort(key=lambda p: (sign * p["values"][o1.name], p["config_label"]))
    return points, int(len(means))


def pareto_record(trials, objectives: Sequence[Objective], label: str = "label") -> dict[str, Any]:
    """pareto.json: the objectives, and the front's configurations (label, searched params, mean over seeds of
    each objective, seeds and their states), best on the first objective first; `not_ranked`: the configurations
    missing a seed (adbs_lab/results/seed_counts.py), with their counts. Rows that ran different ways or sessions: the
    front of the group best_config.json is chosen in (`compared_within`), and every group's in `per_group`
    (adbs_lab/results/compare.py: ranking_groups, one rule for both)."""
    from adbs_lab.results import compare
    from adbs_lab.results import seed_counts

    ranked = seed_counts.ranked(trials, label) if len(trials) else trials
    groups, default = compare.ranking_groups(ranked)
    points, n = _points(trials[trials[label].isin(groups[default][1][label])] if len(ranked) else ranked,
                        objectives, label)
    out: dict[str, Any] = {"objectives": texts(objectives), "configurations": n, "front": points}
    if len(groups) > 1:
        out["compared_within"] = {k: _plain(v) for k, v in groups[default][0].items()}
        out["per_group"] = [{**{k: _plain(v) for k, v in key.items()}, "front": _points(g, objectives, label)[0]}
                            for key, g in groups]
    out["not_ranked"] = seed_counts.not_ranked(trials, label) if len(trials) else []
    out["note"] = ("Pareto front of the objectives (validation; each value the mean over the configuration's seeds, "
                   "every one of which completed): no other configuration is at least as good on every objective "
                   "and better on one. Best on the first objective first: best_config.json is that point. "
                   "not_ranked: configurations missing a seed, never on the front.")
    return out


def write_pareto(folder: Path, record: dict[str, Any]) -> Path:
    """pareto.json (`pareto_record`) into `folder`."""
    path = Path(folder) / PARETO_JSON
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")
    return path


def front_lines(record: dict[str, Any]) -> list[str]:
    """The front as printed at the end of a study (and by studies/report.py), with the configurations that are not
    ranked because they miss a seed (adbs_lab/results/seed_counts.py)."""
    from adbs_lab.results import seed_counts

    pts = record["front"]
    within = record.get("compared_within")
    head = (f"Pareto front of {', '.join(record['objectives'])} (validation, mean over seeds): {len(pts)} of "
            f"{record['configurations']} configurations"
            + (f" of {', '.join(f'{k} {v}' for k, v in within.items())}" if within else "") + "; pareto.json")
    width = max([len(p["config_label"]) for p in pts], default=0)
    return ([head] + [f"  {p['config_label']:<{width}}  "
                      + "  ".join(f"{k} {v:.2f}" for k, v in p["values"].items())
                      + (f"  ({p['seeds']} seeds)" if p["seeds"] > 1 else "") for p in pts]
            + seed_counts.not_ranked_lines(record.get("not_ranked", [])))
