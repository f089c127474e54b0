"""One record per trial: which of a trial's attempts stands.

A study runs each of its trials once, but a driver killed before Ray Tune saved its state leaves behind the trials
it started since: Tune's restored state does not know them, and their MLflow runs stay in the store, closed KILLED
with state INTERRUPTED and tag ORPHANED (adbs_lab/driver/reruns.py). --resume hands such a trial out again, with the
same configuration, seed and Optuna trial (adbs_lab/search/searcher.py: StudySearch._adopt_orphans), and it runs as
another Tune trial, whose run the orphan's tag SUPERSEDED_BY names; so does a sample the searcher had already told
Optuna, which keeps its told value and gets no other trial for it (adbs_lab/search/orphans.py). Counted as a trial,
an orphan is a seed that never was ("3 of 4, 1 interrupted"), and a row missing a seed is never ranked
(adbs_lab/results/seed_counts.py).

The rule, here and nowhere else: a trial is named by its `identity` (the Optuna trial that asked for it, its
configuration, which is the table's row, and its seed); an attempt left behind (ORPHANED, or SUPERSEDED_BY a rerun)
is no trial of the study, as the study's own tables, read from Tune's results, never hold it; and of the other
attempts of one identity the one started last stands. The study's own records (adbs_lab/records/trial_records.py:
from_results), studies/report.py and studies/paper.py (the store: adbs_lab/results/from_store.py) and --plan (the
study's files: adbs_lab/driver/run.py: seed_plan) all call `standing`, so they cannot count differently; a store
written before these tags existed is read by the identity alone.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, TypeVar

import pandas as pd

__all__ = ["ORPHANED", "SUPERSEDED_BY", "Identity", "identity", "run_label", "run_identity", "standing", "standing_frames"]

ORPHANED = "adbs.orphaned"
"""MLflow tag of a trial's run that a killed driver left behind: why (bench/load_check.py counts them)."""
SUPERSEDED_BY = "adbs.superseded_by"
"""MLflow tag of a run left behind whose trial ran again: the rerun's run id."""

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
    orphaned: bool


A = TypeVar("A", bound=Attempt)


def _standing(keys: Sequence[Identity], starts: Sequence[float], left_behind: Sequence[bool]) -> list[int]:
    """The positions of the attempts that stand, in the order given: none left behind, and of each identity's
    others the last started (an unknown start counts as earliest; a tie goes to the later position)."""
    last: dict[Identity, int] = {}
    for i, key in enumerate(keys):
        if left_behind[i]:
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
    keep = _standing(keys, [a.started_at for a in attempts], [bool(a.superseded_by) or a.orphaned for a in attempts])
    return [attempts[i] for i in keep]


def standing_frames(sessions: pd.DataFrame, trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """sessions.parquet and trials.parquet (adbs_lab/records/trial_records.py: frames) with the rows of the attempts
    that stand only, by the same rule as `standing`."""
    if trials is None or trials.empty or "label" not in trials:
        return sessions, trials
    column = lambda name: trials[name] if name in trials else pd.Series([None] * len(trials))  # noqa: E731
    keys = [identity(n, lab, s) for n, lab, s in zip(column("optuna_trial"), trials["label"], column("seed"))]
    left = [isinstance(v, str) and bool(v) or o is True for v, o in zip(column("superseded_by"), column("orphaned"))]
    keep = _standing(keys, list(column("started_at")), left)
    if len(keep) == len(trials):
        return sessions, trials
    kept = trials.iloc[keep]
    if sessions is not None and len(sessions) and "trial_id" in sessions and "trial_id" in kept:
        sessions = sessions[sessions["trial_id"].isin(set(kept["trial_id"]))]
    return sessions, kept
