"""One record per trial: which of a trial's attempts stands.

A study runs each of its trials once, but a driver killed before Ray Tune saved its state runs some of them again
on --resume: a trial Tune had not recorded is handed out by the searcher again, with the same configuration, seed
and Optuna trial (adbs_lab/search/searcher.py: StudySearch._requeue_orphans), and runs as another Tune trial in a
run of its own, while the first attempt's MLflow run stays in the store, closed KILLED with state INTERRUPTED (tag
adbs.orphaned; adbs_lab/driver/tracker.py). Counted as a trial it is a seed that never was ("3 of 4, 1 interrupted"),
and a row missing a seed is never ranked (adbs_lab/results/seed_counts.py).

The rule, here and nowhere else: a trial is named by its `identity` (the Optuna trial that asked for it, its
configuration, which is the table's row, and its seed); of the attempts of one identity, the one started last stands
and the others are no trial of the study; an attempt marked SUPERSEDED_BY (the rerun's MLflow run id, written by the
tracker when the rerun starts) never stands. The tracker (marking), the study's own tables (Tune's results:
adbs_lab/records/trial_records.py: from_results), studies/report.py and studies/paper.py (the store:
adbs_lab/results/from_store.py) and --plan (the study's files: adbs_lab/driver/run.py: seed_plan) all call `standing`,
so they cannot count differently; a store written before the tag existed is read by the identity alone.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, TypeVar

import pandas as pd

__all__ = ["SUPERSEDED_BY", "Identity", "identity", "run_label", "run_identity", "standing", "standing_frames"]

SUPERSEDED_BY = "adbs.superseded_by"
"""MLflow tag of an attempt that a rerun of the same trial replaced: the rerun's run id."""

Identity = tuple[int | None, str, int | None]
"""(Optuna trial number, configuration label, seed): one trial of one study run."""


def _number(value: Any) -> int | None:
    """An Optuna trial number or a seed as an int: from an int, a whole float (a parquet column with a gap), or the
    digits of a tag or param; None when there is none (a NaN, "", None)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        return int(value) if value.lstrip("-").isdigit() else None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) else None


def identity(optuna_trial: Any, label: Any, seed: Any) -> Identity:
    """What names one trial of a study: the Optuna trial that asked for it (two samples of the same values are two
    trials; a race's seeds of a contender belong to the race's trial of it), its configuration (the label of its
    table row) and its seed (a configuration runs once per seed)."""
    return _number(optuna_trial), str(label), _number(seed)


def run_label(tags: dict[str, str], run_name: str | None) -> str:
    """The configuration label of a trial's MLflow run: its tag adbs.label, or for a run logged before that tag its
    name (describe(config, varying), the seed last) without the seed."""
    tag = tags.get("adbs.label")
    if tag is not None:
        return tag
    words = [w for w in (run_name or "").split(" ") if not w.startswith("seed=")]
    return " ".join(words) or "all"


def run_identity(run) -> Identity:
    """The identity of a trial's MLflow run (mlflow.entities.Run): its tags adbs.optuna_trial and adbs.label (or its
    name) and its param seed, as the tracker logged them."""
    tags = run.data.tags
    return identity(tags.get("adbs.optuna_trial"), run_label(tags, run.info.run_name), run.data.params.get("seed"))


class Attempt(Protocol):
    """What `standing` reads of an attempt (adbs_lab/records/trial_records.py: TrialRecord has it)."""

    optuna_trial: int | None
    label: str
    config: dict[str, Any]
    started_at: float
    mlflow_run_id: str | None
    superseded_by: str | None


A = TypeVar("A", bound=Attempt)


def _standing(keys: Sequence[Identity], starts: Sequence[float], superseded: Sequence[bool]) -> list[int]:
    """The positions of the attempts that stand, in the order given: no superseded one, and of each identity's
    others the last started (an unknown start counts as earliest; a tie goes to the later position)."""
    last: dict[Identity, int] = {}
    for i, key in enumerate(keys):
        if superseded[i]:
            continue
        j = last.get(key)
        if j is None or _start(starts[i]) >= _start(starts[j]):
            last[key] = i
    kept = set(last.values())
    return [i for i in range(len(keys)) if i in kept]


def _start(t: Any) -> float:
    try:
        f = float(t)
    except (TypeError, ValueError):
        return -math.inf
    return f if math.isfinite(f) else -math.inf


def standing(attempts: Sequence[A]) -> list[A]:
    """The attempts that count as the study's trials, one per identity (see the module's docstring), in the order
    given."""
    keys = [identity(a.optuna_trial, a.label, (a.config or {}).get("seed")) for a in attempts]
    keep = _standing(keys, [a.started_at for a in attempts], [bool(a.superseded_by) for a in attempts])
    return [attempts[i] for i in keep]


def standing_frames(sessions: pd.DataFrame, trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """sessions.parquet and trials.parquet (adbs_lab/records/trial_records.py: frames) with the rows of the attempts
    that stand only, by the same rule as `standing`."""
    if trials is None or trials.empty or "label" not in trials:
        return sessions, trials
    column = lambda name: trials[name] if name in trials else pd.Series([None] * len(trials))  # noqa: E731
    keys = [identity(n, lab, s) for n, lab, s in zip(column("optuna_trial"), trials["label"], column("seed"))]
    superseded = [isinstance(v, str) and bool(v) for v in column("superseded_by")]
    keep = _standing(keys, list(column("started_at")), superseded)
    if len(keep) == len(trials):
        return sessions, trials
    kept = trials.iloc[keep]
    if sessions is not None and len(sessions) and "trial_id" in sessions and "trial_id" in kept:
        sessions = sessions[sessions["trial_id"].isin(set(kept["trial_id"]))]
    return sessions, kept
