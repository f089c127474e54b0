"""The MLflow runs of trials a killed driver left behind: closed on --resume, and marked once their trial runs again.

A driver killed after a trial started (its MLflow run made and recorded, adbs_lab/driver/tracker.py) but before Ray
Tune saved its state comes back without that trial. Its run is an orphan: `close_orphans` closes it KILLED, state
INTERRUPTED, tag adbs.orphaned, and takes it out of the study's trial map; no reader counts it (adbs_lab/records/
attempts.py: standing), as the study's own tables, read from Tune's results, never hold it. --resume runs the trial
again as another Tune trial (adbs_lab/search/searcher.py: StudySearch._adopt_orphans: every trial it had asked Optuna
for, running or told): the same identity (Optuna trial, configuration, seed) in a run of its own; when that
rerun starts, `supersede` tags the orphan adbs.superseded_by with the rerun's run id (the runs file keeps the pair
under "superseded"), so the MLflow UI says which run holds the trial.
"""

from __future__ import annotations

from typing import Any

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.attempts import ORPHANED, SUPERSEDED_BY, Identity, run_identity

__all__ = ["close_orphans", "awaiting_rerun", "supersede"]


def close_orphans(client, experiment_id: str | None, parent_run_id: str | None, runs: dict[str, Any],
                  known: set[str]) -> bool:
    """Close the runs of the trials Ray Tune does not know (`known`: the trial ids it restored): those in the runs
    file `runs` and those made in the store whose id the driver died before recording (killed between create_run and
    the file's save). Returns whether `runs` changed (the caller saves it)."""
    lost = {tid: runs["trials"].pop(tid) for tid in list(runs["trials"]) if tid not in known}
    mapped = set(runs["trials"].values()) | set(lost.values())
    for run in client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_run_id}'"
                                  " and attributes.status = 'RUNNING'", max_results=10000):
        tid = run.data.tags.get("adbs.trial_id", run.info.run_id)
        if run.info.run_id not in mapped and tid not in known:
            lost[tid] = run.info.run_id
    for tid, run_id in lost.items():
        runs.setdefault("orphaned", {})[tid] = run_id
        runs.get("ended", {}).pop(tid, None)
        client.set_tag(run_id, "adbs.state", K.INTERRUPTED)
        client.set_tag(run_id, ORPHANED, "started by a driver that was killed before Ray Tune saved this trial: not "
                       "one of the study's trials (--resume runs it again as another trial where the study needs it)")
        client.set_terminated(run_id, status="KILLED")
    return bool(lost)


def awaiting_rerun(client, runs: dict[str, Any]) -> dict[Identity, list[str]]:
    """{identity: run ids} of the orphans in the runs file that no rerun has superseded yet (this --resume's and an
    earlier one's, whose driver was killed again before the rerun started): one read of each."""
    out: dict[Identity, list[str]] = {}
    done = runs.get("superseded", {})
    for run_id in runs.get("orphaned", {}).values():
        if run_id in done:
            continue
        run = client.get_run(run_id)
        if not run.data.tags.get(SUPERSEDED_BY):
            out.setdefault(run_identity(run), []).append(run_id)
    return out


def supersede(client, runs: dict[str, Any], waiting: dict[Identity, list[str]], key: Identity, run_id: str) -> None:
    """The run `run_id` of trial `key` has started: the orphans of that trial (`waiting`, from awaiting_rerun) are
    marked superseded by it, in the store and in `runs` (the caller saves it)."""
    for old in waiting.pop(key, []):
        client.set_tag(old, SUPERSEDED_BY, run_id)
        runs.setdefault("superseded", {})[old] = run_id
