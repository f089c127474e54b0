"""What a search optimises: `--objectives NAME:max|min ...`, per-trial summary metrics with a direction.

Without the flag a study maximises `summary/val_avg_acc` (metrics_keys.OBJECTIVE), as it always did. One objective
is a single-objective search on that metric; two or more are a multi-objective search: Optuna's study gets one
direction per objective (TPE and the grid sampler handle several), it is told each configuration's mean over its
seeds of every objective (adbs_lab/search.py), and the result is a Pareto front (`front`): the configurations no other
configuration beats on every objective. The front goes to pareto.json and the table's `front` column, and
best_config.json is the front's point that is best on the first objective.

Only validation metrics and metrics of the trained model are objectives: test metrics, and the geometry measured
on test images, are reported, never searched (docs/protocols.md, "Validation, not test").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

from adbs_lab import metrics_keys as K

__all__ = ["Objective", "ObjectiveError", "CHOICES", "DEFAULT", "PARETO_JSON", "TAG", "parse",
           "effective", "texts", "PRUNED_ON", "no_pruning", "pruner_problem", "front", "config_means", "front_labels",
           "pareto_record", "write_pareto", "from_tag", "front_lines"]

CHOICES = (
    "val_avg_acc", "val_last_acc", "val_pd", "val_last_base_acc", "val_last_novel_acc", "val_mean_base_acc",
    "val_mean_novel_acc", "val_last_hmean", "d_cs", "base_mean_cos", "novel_nearest_base_cos",
    "boundary_base_mean", "boundary_novel_mean", "boundary_negative",
)
"""Per-trial summary metrics (summary/<name>, adbs/loops.py and adbs.metrics.base_novel_summary) a search may target:
validation accuracies and what the trained classifier's weights and boundaries say. Left out: every test_* metric,
the geometry of the test images (TEST_IMAGES), and bookkeeping (best_base_epoch, collapse_warning, base_reused,
wall_time_s), which describe how a trial ran, not how good its configuration is."""

TEST_IMAGES = ("novel_own_cos", "novel_best_base_cos", "novel_own_wins")
"""Summary metrics measured on the test images (adbs.metrics.novel_image_geometry): test data, never searched."""

DIRECTIONS = ("max", "min")
OptunaDirection = Literal["minimize", "maximize"]
"""A direction as optuna.create_study takes it."""
PARETO_JSON = "pareto.json"
TAG = "adbs.objectives"
"""Parent-run tag: the objectives as a JSON list of NAME:max|min (studies/report.py redraws the front from it)."""


@dataclass(frozen=True)
class Objective:
    name: str
    """The summary metric without its prefix, e.g. val_last_novel_acc (a trials.parquet column)."""
    direction: str
    """max or min."""

    @property
    def key(self) -> str:
        """The metric as a trial reports it (summary/<name>)."""
        return K.SUMMARY + self.name

    @property
    def text(self) -> str:
        return f"{self.name}:{self.direction}"

    @property
    def optuna_direction(self) -> OptunaDirection:
        return "maximize" if self.direction == "max" else "minimize"


DEFAULT = (Objective(K.OBJECTIVE[len(K.SUMMARY):], K.MODE),)


class ObjectiveError(ValueError):
    """Bad --objectives; adbs_lab/options.py raises it again as its StudyInputError (exit 2, before anything
    starts)."""


def _refuse(msg: str):
    raise ObjectiveError(msg)


def parse(given: Iterable[str]) -> tuple[Objective, ...]:
    """`--objectives` as typed, checked: NAME:max|min each, NAME one of CHOICES, no name twice; () for none given
    (the caller uses DEFAULT then: `effective`). ObjectiveError saying what was wrong and what is allowed."""
    out: list[Objective] = []
    for item in given:
        name, sep, direction = str(item).rpartition(":")
        if not sep or not name:
            _refuse(f"--objectives {item}: each objective is NAME:max or NAME:min, e.g. --objectives "
                    "val_last_base_acc:max val_last_novel_acc:max")
        if direction not in DIRECTIONS:
            _refuse(f"--objectives {item}: the direction is max or min, not {direction!r}")
        if name.startswith("test_") or name in TEST_IMAGES:
            twin = "val_" + name[len("test_"):] if name.startswith("test_") else None
            _refuse(f"--objectives {item}: {name} is measured on the test set, and test metrics never feed a search "
                    "(they are reported only)"
                    + (f"; search its validation twin, {twin}:{direction}" if twin in CHOICES else "")
                    + f"; valid objectives: {', '.join(CHOICES)}")
        if name not in CHOICES:
            _refuse(f"--objectives {item}: {name!r} is not a per-trial summary metric a search can target; valid "
                    f"objectives: {', '.join(CHOICES)}")
        if any(o.name == name for o in out):
            _refuse(f"--objectives names {name} twice; give each objective once")
        out.append(Objective(name, direction))
    return tuple(out)


def effective(given: Iterable[str]) -> tuple[Objective, ...]:
    """The objectives a study optimises: --objectives, or DEFAULT without it."""
    return parse(given) or DEFAULT


def texts(objectives: Sequence[Objective]) -> list[str]:
    return [o.text for o in objectives]


PRUNED_ON = "val_avg_acc"
"""The one objective the pruner may stop trials for. The pruner sees base-session validation accuracy per base
epoch (adbs_lab/search.py: BaseEpochStopper; metrics_keys.BASE_PRUNE_VALUE), never an incremental session, so it
can only prune on an intermediate of the objective known before the sessions run: the base session's validation
accuracy is the first term of val_avg_acc (the mean over sessions 0..N, adbs/metrics.py), and of no other
objective (val_last_*, val_mean_* of sessions 1..N, the geometry, the boundaries), which it would rank on a metric
the study does not optimise."""


def no_pruning(given: Sequence[str]) -> bool:
    """Whether `--objectives` as typed (checked or not) rules pruning out: several objectives (Optuna prunes
    single-objective studies only), or one other than maximising PRUNED_ON (the pruner's base-session validation
    accuracy is an intermediate of that objective only)."""
    return len(given) > 1 or (len(given) == 1 and str(given[0]) != f"{PRUNED_ON}:max")


def pruner_problem(given: Sequence[str], pruner: str) -> str | None:
    """Why `--pruner` cannot go with `--objectives`, or None."""
    if pruner == "none" or not no_pruning(given):
        return None
    if len(given) > 1:
        return (f"--pruner {pruner} with {len(given)} --objectives: Optuna prunes single-objective studies only; drop "
                "--pruner (a multi-objective study runs every trial to the end) or give one objective")
    if str(given[0]).endswith(":min"):
        return (f"--pruner {pruner} with --objectives {given[0]}: the pruner stops trials whose base-session "
                "validation accuracy lags, ranked in the study's direction, so with an objective to minimise it would "
                "stop the best ones; drop --pruner, or maximise")
    return (f"--pruner {pruner} with --objectives {given[0]}: the pruner stops trials whose base-session validation "
            f"accuracy lags, and that accuracy is part of {PRUNED_ON} only, not of {str(given[0]).rpartition(':')[0]}, "
            f"so it would stop trials on a metric the study does not optimise; drop --pruner (every trial then runs "
            f"to the end), or search {PRUNED_ON}:max")


# -- the Pareto front -----------------------------------------------------------------------------------------
def front(rows: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Positions of the rows no other row dominates: at least as good on every objective and better on one (ties do
    not dominate). A row with a non-finite value is never on the front."""
    sign = [1.0 if d == "max" else -1.0 for d in directions]
    vals = [[s * float(v) for s, v in zip(sign, r)] for r in rows]
    ok = [all(math.isfinite(v) for v in r) for r in vals]

    def beats(a: list[float], b: list[float]) -> bool:
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    return [i for i, r in enumerate(vals)
            if ok[i] and not any(ok[j] and beats(o, r) for j, o in enumerate(vals) if j != i)]


def config_means(trials, objectives: Sequence[Objective], label: str = "label"):
    """One row per configuration whose every seed completed (adbs_lab/seed_counts.py: a configuration missing a
    seed is never ranked): the mean over its seeds of each objective, and `seeds`. A seed's NaN makes its
    configuration's mean NaN (never averaged away), and `front` leaves a non-finite row off the front."""
    import pandas as pd

    from adbs_lab import seed_counts

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
    within each group of rows that ran the same ways and sessions (adbs_lab/compare.py: ranking_groups, the group
    rule best_config.json follows too): every group's front."""
    from adbs_lab import compare, seed_counts

    groups, _ = compare.ranking_groups(seed_counts.ranked(trials, label) if len(trials) else trials)
    return [lab for _, g in groups for lab in _front_of(g, objectives, label)]


def _plain(v: Any) -> Any:
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and math.isnan(v) else v


def _points(trials, objectives: Sequence[Objective], label: str) -> tuple[list[dict[str, Any]], int]:
    """The front's points of one group of rows (best on the first objective first), and how many configurations
    were compared."""
    from adbs_lab import compare, seed_counts
    from adbs_lab.trial_records import CONFIG_COLUMNS

    means = config_means(trials, objectives, label)
    by_label = seed_counts.counts(trials, label)
    t = trials[trials["state"] == K.COMPLETE] if len(trials) else trials
    # the config fields the configurations differ in (the summary metrics differ too, but are not parameters)
    swept = [c for c in compare.swept_columns(t, label) if c in CONFIG_COLUMNS] if len(t) else []
    first = t.drop_duplicates(label).set_index(label) if len(t) else None
    points: list[dict[str, Any]] = []
    for lab in _front_of(trials, objectives, label):
        m = means[means[label] == lab].iloc[0]
        params = {c: _plain(first.at[lab, c]) for c in swept} if first is not None else {}
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
    missing a seed (adbs_lab/seed_counts.py), with their counts. Rows that ran different ways or sessions: the
    front of the group best_config.json is chosen in (`compared_within`), and every group's in `per_group`
    (adbs_lab/compare.py: ranking_groups, one rule for both)."""
    from adbs_lab import compare, seed_counts

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


def from_tag(tags: dict[str, str]) -> tuple[Objective, ...]:
    """The objectives a study's parent run recorded (TAG); DEFAULT for a run from before the tag existed."""
    raw = tags.get(TAG)
    if not raw:
        return DEFAULT
    try:
        return parse(json.loads(raw)) or DEFAULT
    except Exception:  # noqa: BLE001 - a tag this version cannot read: the study's default objective
        return DEFAULT


def front_lines(record: dict[str, Any]) -> list[str]:
    """The front as printed at the end of a study (and by studies/report.py), with the configurations that are not
    ranked because they miss a seed (adbs_lab/seed_counts.py)."""
    from adbs_lab import seed_counts

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
