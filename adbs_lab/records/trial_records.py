"""One trial record, one classification of trial state, one schema for the tables.

A trial is read from two sources: a Ray Tune result (`from_tune`, the study's own tables) and an MLflow
run (`adbs_lab.results.from_store`, tables rebuilt from the store alone). Both become a `TrialRecord`, and
`frames` turns records into sessions.parquet / trials.parquet with the same columns whichever the
source. `classify` is the only place that decides COMPLETE / PRUNED / DIVERGED / FAILED / INTERRUPTED: StudySearch
calls it once when a Tune trial ends (adbs_lab/search/searcher.py), and Optuna's trial states, the MLflow tags, the
progress lines and the tables receive that record; `from_tune` calls it only for a trial that never ended.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from adbs.config import FIELDS
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.attempts import standing
from adbs_lab.records.config_values import MISSING, column
from adbs_lab.records.metrics_keys import BOUNDARIES_KEY, EMBEDDINGS, EMBEDDINGS_KEY, OPTUNA_TRIAL_KEY

__all__ = ["LABEL", "BASE_BOUNDARIES", "SHADOW", "is_shadow_report", "CONFIG_COLUMNS", "IDENT_COLUMNS", "TRIAL_COLUMNS",
           "classify", "objective",
           "TrialRecord", "frames", "base_boundaries", "from_tune", "from_results"]

LABEL = "label"
"""Column naming the configuration without the seed (rows of the paper table)."""
BASE_BOUNDARIES = "base_boundaries"
"""trials.parquet column (and MLflow tag adbs.base_boundaries): the base m after the base session, as JSON."""
CONFIG_COLUMNS = list(FIELDS)
IDENT_COLUMNS = ["trial_id", "state", LABEL, "optuna_trial", "mlflow_run_id"]
SHADOW = "shadow"
"""trials.parquet column (and MLflow tag adbs.shadow): True for a pruned trial that ran on as a shadow."""
TRIAL_COLUMNS = [*IDENT_COLUMNS, *CONFIG_COLUMNS, "base_epochs_run", "base_epochs_reused", "started_at", "finished_at", "error",
                 K.WARNING, BASE_BOUNDARIES, SHADOW]
"""trials.parquet: these columns, then the trial's summary/* metrics (without prefix) of complete trials."""


def classify(result: dict | None, *, error: bool = False, pruned: bool = False, ended: bool = True,
             shadow: bool = False) -> str:
    """The state of a trial from its last report.

    - a `shadow` (the pruner stopped it, and it ran on to its end to measure the pruner: adbs_lab/search/shadows.py):
      PRUNED, however it ended, as the study holds it (its values are no result of the study);
    - an exception (`error`): FAILED;
    - a numerical fault the trial reported (REPORT_KIND = FAILED: a NaN/inf loss or boundary): DIVERGED;
    - a summary report: COMPLETE when its objective is a finite number, else FAILED;
    - no summary: PRUNED when the pruner stopped it (`pruned`: Optuna holds it PRUNED), else FAILED
      when it `ended` (it stopped without finishing, for no reason the platform gave it), else
      INTERRUPTED (the study stopped before it ended; --resume continues it).
    """
    report = result or {}
    kind = report.get(K.REPORT_KIND)
    if shadow:
        return K.PRUNED
    if error:
        return K.FAILED
    if kind == K.KIND_FAILED:
        return K.DIVERGED
    if kind == K.KIND_SUMMARY:
        return K.COMPLETE if K.finite(report.get(K.OBJECTIVE)) else K.FAILED
    if pruned:
        return K.PRUNED
    return K.FAILED if ended else K.INTERRUPTED


def objective(result: dict | None) -> float | None:
    """The trial's objective value when it completed, else None (a placeholder NaN is never a value)."""
    if classify(result) != K.COMPLETE:
        return None
    assert result is not None, "classify calls a trial COMPLETE only from a summary report"
    return float(result[K.OBJECTIVE])


@dataclass
class TrialRecord:
    """What the tables hold about one trial."""

    trial_id: str
    state: str
    label: str
    config: dict[str, Any]
    """The resolved Config (to_dict)."""
    optuna_trial: int | None = None
    mlflow_run_id: str | None = None
    base_epochs_run: int = 0
    base_epochs_reused: int = 0
    """Of `base_epochs_run`, those replayed from a base session the cache held (adbs/trial.py: reported with
    base/reused = 1): loaded in a moment, not trained (report.md counts the two apart)."""
    started_at: float = math.nan
    finished_at: float = math.nan
    summary: dict[str, float] = field(default_factory=dict)
    """summary/* metrics without prefix (complete trials only)."""
    sessions: list[dict[str, float]] = field(default_factory=list)
    """One dict per session: `session` and the SESSION_METRICS it reported."""
    error: str | None = None
    warning: str = ""
    base_boundaries: str | None = None
    embeddings: str | None = None
    """The trial's embedding sample (metrics_keys.encode_embeddings) when it kept one (keep_embeddings)."""
    shadow: bool = False
    """A shadow: pruned (state PRUNED), but it ran on to its end to measure the pruner (adbs_lab/search/shadows.py);
    its summary is kept in its row for that, and no table of results reads it (they read COMPLETE trials)."""
    superseded_by: str | None = None
    """The MLflow run of the rerun that replaced this attempt (tag adbs.superseded_by)."""
    orphaned: bool = False
    """An attempt a killed driver left behind (tag adbs.orphaned): no trial of the study, superseded or not
    (adbs_lab/records/attempts.py: standing)."""

    def ident(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "state": self.state, LABEL: self.label, "optuna_trial": self.optuna_trial,
                "mlflow_run_id": self.mlflow_run_id}


def _flat(v: Any) -> Any:
    return json.dumps(list(v)) if isinstance(v, (list, tuple)) else v


def frames(records: list[TrialRecord]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sessions, trials) DataFrames: the one schema of sessions.parquet and trials.parquet. A config column holds
    each trial's value as it is, None included, and MISSING where a record lacks the field
    (adbs_lab/records/config_values.py: column; pandas alone would read [80, None] as [80.0, NaN])."""
    session_rows, trial_rows = [], []
    for r in records:
        ident = r.ident()
        cfg = {k: _flat(r.config.get(k)) for k in CONFIG_COLUMNS if k in r.config}
        for s in r.sessions:
            m = {k: s[k] for k in K.SESSION_METRICS if k in s}
            session_rows.append({**ident, **cfg, "session": int(s["session"]), **m})
        summary = r.summary if r.state == K.COMPLETE or r.shadow else {}
        trial_rows.append({**ident, **cfg, "base_epochs_run": r.base_epochs_run,
                           "base_epochs_reused": r.base_epochs_reused, "started_at": r.started_at,
                           "finished_at": r.finished_at, **summary, "error": r.error,
                           K.WARNING: r.warning if r.state == K.COMPLETE else "", BASE_BOUNDARIES: r.base_boundaries,
                           EMBEDDINGS: r.embeddings, SHADOW: r.shadow})
    return _exact(session_rows), _exact(trial_rows)


def _exact(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a frame, each config column made by config_values.column from the rows' own values."""
    frame = pd.DataFrame(rows)
    for k in (k for k in CONFIG_COLUMNS if k in frame):
        # pandas keeps every value of an object column as it is (an absent key NaN), and a None elsewhere is a NaN
        if frame[k].dtype != object and frame[k].hasnans:
            frame[k] = column([row.get(k, MISSING) for row in rows], frame.index)
    return frame


def is_shadow_report(state: str, result: dict | None) -> bool:
    """Whether a trial that ended in `state` with last report `result` is a shadow: PRUNED with a summary report. A
    trial the pruner stopped never reports its summary; a seed whose summary came before its configuration was
    pruned is COMPLETE (classify reads the summary first), so only a shadow is both."""
    return state == K.PRUNED and (result or {}).get(K.REPORT_KIND) == K.KIND_SUMMARY


def base_boundaries(boundaries_json: str | None) -> str | None:
    """m of the base classes as they enter the sessions (JSON list, 4 decimals), from a trial's boundaries."""
    if not boundaries_json:
        return None
    return json.dumps([round(float(m), 4) for m in json.loads(boundaries_json)[0]])


def from_results(results, *, varying: list[str], runs: dict[str, Any]) -> list[TrialRecord]:
    """The records of Ray Tune's results (`runs`: the study's runs file, adbs_lab/driver/tracker.py), one per trial
    (adbs_lab/records/attempts.py: standing, the rule every reader of trials applies). A trial Tune made but that
    never reported (the study was stopped as it was about to start) has no config in its Result (Tune reads it back
    from the trial's result.json): it never ran, so it has no record and counts as unfinished."""
    from adbs_lab.records.tune_keys import CONFIG_KEY

    return standing([from_tune(r, varying=varying, run_ids=runs["trials"], ended=runs.get("ended", {}))
                     for r in results if CONFIG_KEY in (r.config or {})])


def from_tune(result, *, varying: list[str], run_ids: dict[str, str], ended: dict[str, str]) -> TrialRecord:
    """A TrialRecord from a Ray Tune Result; `ended`: trial id -> the state it ended in, as the study classified it
    when it ended (adbs_lab/search/searcher.py: StudySearch.ended; the runs file holds it: adbs_lab/driver/tracker.py)."""
    from adbs_lab.records.tune_keys import SEED_KEY, describe, trial_config

    config = result.config or {}
    last = result.metrics or {}
    df = result.metrics_dataframe
    trial_id = last.get("trial_id") or str(result.path).rstrip("/").rsplit("/", 1)[-1]
    # No record: it never ended (the study stopped first: Ctrl-C, SIGTERM, a crash), or Tune's Result says how.
    state = ended.get(trial_id) or classify(last, error=bool(result.error),
                                            ended=bool(last.get("done")) or bool(result.error))
    label_keys = [k for k in varying if k != SEED_KEY]
    rec = TrialRecord(
        trial_id=trial_id, state=state, label=describe(config, label_keys) if label_keys else "all",
        config=trial_config(config).to_dict(), optuna_trial=config.get(OPTUNA_TRIAL_KEY),
        mlflow_run_id=run_ids.get(trial_id),
        error=str(result.error)[-2000:] if result.error else last.get(K.ERROR),  # the end names the error
        warning=last.get(K.WARNING) or "", base_boundaries=base_boundaries(last.get(BOUNDARIES_KEY)),
        embeddings=last.get(EMBEDDINGS_KEY) or None, summary=K.strip(K.SUMMARY, last),
        shadow=is_shadow_report(state, last),
    )
    if df is not None and K.REPORT_KIND in df.columns:
        sess = df[df[K.REPORT_KIND] == K.KIND_SESSION]
        if K.SESSION_STEP in sess:  # a trial restarted from a checkpoint reports some sessions twice
            sess = sess.drop_duplicates(subset=K.SESSION_STEP, keep="last")
        for _, row in sess.iterrows():
            m = {k: row[K.SESSION + k] for k in ("session",) + K.SESSION_METRICS if K.SESSION + k in row}
            rec.sessions.append(m)
        base = df[df[K.REPORT_KIND] == K.KIND_BASE]
        rec.base_epochs_run = int(base[K.BASE_STEP].max()) if len(base) else 0
        reused = base[base[K.REUSED] == 1] if K.REUSED in base else base.iloc[:0]
        rec.base_epochs_reused = int(reused[K.BASE_STEP].max()) if len(reused) else 0
    if df is not None and {"timestamp", "time_total_s"} <= set(df.columns) and len(df):
        # Tune's `timestamp` has 1 s resolution; bench/bench.py uses these spans for throughput.
        rec.started_at = float((df["timestamp"] - df["time_total_s"]).min())
        rec.finished_at = float(df["timestamp"].max())
    return rec
