"""Rebuild a study's tables and figures from the MLflow tracking store alone.

A study run on a cluster can be reported on a laptop: the nested trial runs hold everything
(params = the resolved Config, `session/*` metric histories stepped by session, `summary/*`,
tags adbs.state / adbs.trial_id / adbs.optuna_trial). They become the same TrialRecords a study builds
from its Tune results (adbs_lab.records.trial_records), so `tables.paper_table` gives the table the study printed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from adbs.config import ConfigError, canonical, coerce
from adbs_lab.results import compare
from adbs_lab.results.best import choose as choose_best, from_tag as no_best_of
from adbs_lab.results import comparisons
from adbs_lab.stats.policy import Pair, VerdictPolicy
from adbs_lab.records import attempts
from adbs_lab.records import objectives
from adbs_lab.results import pareto
from adbs_lab.results import run_files
from adbs_lab.results.names import EXT
from adbs_lab.records import trial_records
from adbs_lab.results import tables
from adbs_lab.records import metrics_keys as K
from adbs_lab.results.renderings import (
    paper_beside,
    render,
    render_plain,
)
from adbs_lab.records.config_values import write_parquet
from adbs_lab.records.trial_records import CONFIG_COLUMNS

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


class ReportError(LookupError):
    """The study or run cannot be found in the store; the message lists what exists."""


@dataclass
class Recorded:
    """A study as its MLflow store holds it: its parent run, its trials' tables and what its tags recorded."""

    parent: Any  # mlflow.entities.Run (role=study)
    name: str
    sessions: pd.DataFrame
    trials: pd.DataFrame
    baseline: str | dict[str, str] | None
    order: list[str] | None
    objectives: tuple = objectives.DEFAULT
    """What the study's search optimised (its parent run's tag adbs.objectives; adbs_lab/records/objectives.py)."""
    notes: tuple[str, ...] = ()
    """The lines the study wrote above its tables (a smoke run, settings changed from its defaults; its parent
    run's tag adbs.notes; adbs_lab/results/notes.py)."""
    verdicts: VerdictPolicy = VerdictPolicy()
    """Its verdict policy as its tags recorded it (adbs_lab/stats/policy.py: VerdictPolicy.from_tags): the
    comparisons its table made (None for a study that recorded none: each row against its reference, as its table did
    then), α, δ and the looks of a --seeds auto study, its verdicts read at them."""
    experiment: str | None = None
    """The MLflow experiment its parent run is in (`<study>-smoke` for a --smoke run); None: the study's name."""

    @property
    def multi(self) -> bool:
        """A study of two or more objectives: its table marks the Pareto front, and pareto.json is redrawn."""
        return len(self.objectives) > 1

    @property
    def dataset(self) -> str | None:
        if self.trials.empty or "dataset" not in self.trials:
            return None
        ds = self.trials["dataset"].dropna().unique()
        return str(ds[0]) if len(ds) == 1 else None


# -- finding runs ----------------------------------------------------------------------------
def all_runs(client, experiment_ids: list[str], filter_string: str) -> list:
    """Every run of the experiments that matches `filter_string`, oldest first (all pages)."""
    out, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000,
                                  order_by=["attributes.start_time ASC"], page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def trial_runs(client, parent) -> list:
    """The parent's nested runs, oldest first: all_runs of tag mlflow.parentRunId = its id, read as rows from a
    database store (`sql_trial_runs`) where this MLflow has what that reads, else through search_runs."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    runs = sql_trial_runs(store, parent.info.experiment_id, parent.info.run_id)
    if runs is not None:
        return runs
    return all_runs(client, [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")


def sql_trial_runs(store, experiment_id: str, parent_id: str) -> list | None:
    """The runs all_runs gives for tag mlflow.parentRunId = `parent_id` (mlflow.entities.Run: info, latest metrics,
    params, tags, each in the order search_runs reads them), from a database store as plain rows: the query of
    MLflow's SqlAlchemyStore._search_runs (its sqlalchemy_store.py: the experiment's active runs with that
    tag's value, ordered start_time ASC with no start time last, then run id; a run has one tag of a key, so no
    DISTINCT) and of the selectin loads of its SqlRun model (the rows of BULK_RUNS runs at a time, no order of their
    own), without its ORM objects: those were most of the 2.4 s it took at 1,000 trials (docs/benchmarks.md).
    None where this MLflow or store lacks what it reads."""
    maker = getattr(store, "ManagedSessionMaker", None)
    try:
        from sqlalchemy import case, select

        from mlflow.entities import LifecycleStage
        from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag
    except ImportError:
        return None
    if maker is None:
        return None
    with maker() as session:
        ids = [experiment_id]
        if hasattr(store, "_filter_experiment_ids"):  # search_runs' hook: a workspace store's own experiments
            ids = store._filter_experiment_ids(session, ids)
        columns = (SqlRun.run_uuid, SqlRun.name, SqlRun.experiment_id, SqlRun.user_id, SqlRun.status,
                   SqlRun.start_time, SqlRun.end_time, SqlRun.lifecycle_stage, SqlRun.artifact_uri)
        rows = session.execute(
            select(*columns).join(SqlTag, SqlTag.run_uuid == SqlRun.run_uuid)
            .where(SqlTag.key == "mlflow.parentRunId", SqlTag.value == parent_id,
                   SqlRun.experiment_id.in_([int(i) for i in ids]), SqlRun.lifecycle_stage == LifecycleStage.ACTIVE)
            .order_by(case((SqlRun.start_time.is_(None), 1), else_=0), SqlRun.start_time, SqlRun.run_uuid)).all()
        return _runs_of_rows(session, rows)


def _runs_of_rows(session, rows: list) -> list:
    """mlflow.entities.Run of each row of `sql_trial_runs`' query, with its latest metrics, params and tags read
    BULK_RUNS runs a query, as SqlRun.to_mlflow_entity makes them (a NaN metric NaN; no run name: its tag's)."""
    from sqlalchemy import select

    from mlflow.entities import Metric, Param, Run, RunData, RunInfo, RunTag
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric as L, SqlParam as P, SqlTag as T

    ids = [row[0] for row in rows]
    metrics: dict[str, list] = {i: [] for i in ids}
    params: dict[str, list] = {i: [] for i in ids}
    tags: dict[str, list] = {i: [] for i in ids}
    for i in range(0, len(ids), BULK_RUNS):
        batch = ids[i:i + BULK_RUNS]
        for run_id, key, value, timestamp, step, is_nan in session.execute(
                select(L.run_uuid, L.key, L.value, L.timestamp, L.step, L.is_nan).where(L.run_uuid.in_(batch))):
            metrics[run_id].append(Metric(key, math.nan if is_nan else value, timestamp, step))
        for run_id, key, value in session.execute(select(P.run_uuid, P.key, P.value).where(P.run_uuid.in_(batch))):
            params[run_id].append(Param(key, value))
        for run_id, key, value in session.execute(select(T.run_uuid, T.key, T.value).where(T.run_uuid.in_(batch))):
            tags[run_id].append(RunTag(key, value))
    out = []
    for run_id, name, experiment_id, user_id, status, start, end, stage, artifact_uri in rows:
        data = RunData(metrics=metrics[run_id], params=params[run_id], tags=tags[run_id])
        info = RunInfo(run_id=run_id, run_name=name or data.tags.get("mlflow.runName") or name,
                       experiment_id=str(experiment_id), user_id=user_id, status=status, start_time=start,
                       end_time=end, lifecycle_stage=stage, artifact_uri=artifact_uri)
        out.append(Run(run_info=info, run_data=data))
    return out


def find_parent(client, ref: str, name: str | None = None):
    """The parent (study) run: a run id (a trial's id gives its parent), or a study name = experiment: its latest
    run of the default folder, or of `--name` `name` (adbs_lab/results/run_pick.py)."""
    if RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except Exception:  # noqa: BLE001 - not a run id after all: try it as a study name
            run = None
        if run is not None:
            parent_id = run.data.tags.get("mlflow.parentRunId")
            if run.data.tags.get("adbs.role") == "trial" and parent_id:
                return client.get_run(parent_id)
            return run
    exp = client.get_experiment_by_name(ref)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments() if e.name != "Default")
        raise ReportError(f"no study or run {ref!r} in this store; studies here: {', '.join(names) or '(none)'}")
    parents = all_runs(client, [exp.experiment_id], "tags.`adbs.role` = 'study'")
    if not parents:
        raise ReportError(f"experiment {ref!r} has no study run (tag adbs.role=study)")
    from adbs_lab.results import run_pick

    picked, _ = run_pick.of_name(parents, name)
    if not picked:
        raise ReportError(f"study {ref!r} has no run of --name {name}; its runs' names: "
                          f"{', '.join(run_pick.names(parents))}")
    parents = picked
    finished = [p for p in parents if p.info.status == "FINISHED"]
    return (finished or parents)[-1]  # the latest finished invocation, else the latest one


# -- trial records from the store ------------------------------------------------------------
def _config_value(key: str, raw: str) -> Any:
    if raw.startswith("["):
        return raw  # lists are logged (and tabled) as JSON
    try:
        return coerce(key, raw)
    except (ConfigError, ValueError, TypeError):
        return raw




BULK_RUNS = 500
"""Runs per bulk metric-history query (SQLite allows 32766 bound parameters since 3.32)."""
HTTP_BULK = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"
"""An MLflow server's route for many runs' histories of one key, the one its UI's charts of many runs read
(MLflow's server/__init__.py and server/handlers.py: get_metric_history_bulk_handler): every stored
point, read by the server's store in one query (SqlAlchemyStore.get_metric_history_bulk, as BULK_RUNS above).
Its REST API (/api/2.0) has no such call, and get-history-bulk-interval beside it returns a sample of steps."""
HTTP_BULK_RUNS = 50
"""Runs per request to HTTP_BULK: the server takes at most 100, and 50 run ids (about 40 characters each in the
query string) keep the request line within 4 KB, gunicorn's limit (an `mlflow server --gunicorn-opts`)."""
HTTP_BULK_POINTS = 25000
"""The most points the server answers to one request (MAX_HISTORY_RESULTS in its handler); it cuts a longer answer
without a word, so the runs of an answer this long are read one at a time instead."""
THREADS = 8
"""Calls in flight where histories are read one run and key at a time (a server that lacks HTTP_BULK, a store of
another kind) and embedding samples downloaded (`embeddings`): each call is a round trip that mostly waits on the
server, 16 per trial, and one after another they were most of the 133 s studies/report.py took over HTTP at 100
trials (docs/benchmarks.md). 8 stays within the 10 connections MLflow's HTTP client keeps (MLFLOW_HTTP_POOL_MAXSIZE)."""


def histories(client, runs: list, keys: set[str]) -> dict[tuple[str, str], dict[int, float]]:
    """(run id, key) -> {step: value} of every run's history of every key it logged. A database store is read in
    bulk, one query per key and BULK_RUNS runs (`sql_histories`: the rows of MLflow's
    SqlAlchemyStore.get_metric_history_bulk, the query of its UI's chart of many runs, or that call itself where
    this MLflow lacks what sql_histories reads), where one call per run and key made studies/report.py read 15,000
    histories one at a time at 1,000 trials (docs/benchmarks.md); an MLflow server over HTTP the same way through
    its HTTP_BULK route; what neither reads, one call per run and key, THREADS at a time. The same order every way
    (timestamp, step, value): a step logged twice keeps its last value."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    bulk = getattr(store, "get_metric_history_bulk", None)
    wanted = {key: [r.info.run_id for r in runs if key in r.data.metrics] for key in sorted(keys)}
    out: dict[tuple[str, str], dict[int, float]] = {}
    if bulk is not None and sql_histories(store, wanted, out):
        return out
    if bulk is not None:
        for key, ids in wanted.items():
            for i in range(0, len(ids), BULK_RUNS):
                for m in bulk(ids[i:i + BULK_RUNS], key, max_results=2**62):
                    out.setdefault((m.run_id, key), {})[int(m.step)] = float(m.value)
        return out
    creds = getattr(store, "get_host_creds", None)
    rest = [(run_id, key) for key, ids in wanted.items() for run_id in ids]
    if creds is not None:
        rest = http_histories(creds(), wanted, out)
    out.update(histories_one_by_one(client, rest))
    return out


def sql_histories(store, wanted: dict[str, list[str]], out: dict) -> bool:
    """Reads `wanted` ({key: run ids}) from a database store into `out`, one query per key and BULK_RUNS runs: the
    rows, order and NaN of MLflow's SqlAlchemyStore.get_metric_history_bulk (its sqlalchemy_store.py: the
    key's points of the runs ordered by run, timestamp, step, value; a NaN is stored as is_nan and read as NaN, as
    its SqlMetric.to_mlflow_entity does), selected as plain rows through the store's own sessions and table model
    rather than one ORM object per point, which was 6 of the 40 s studies/report.py took at 1,000 trials
    (docs/benchmarks.md). False (nothing read) where this MLflow or store lacks the sessions or model it reads."""
    maker = getattr(store, "ManagedSessionMaker", None)
    visible = getattr(store, "_filter_entity_ids", None)  # the bulk call's hook: only a workspace store's own runs
    try:
        from sqlalchemy import select

        from mlflow.store.tracking.dbmodels.models import SqlMetric as M
        if visible is not None:
            from mlflow.entities.entity_type import EntityAssociationType
    except ImportError:
        return False
    if maker is None:
        return False
    with maker() as session:
        for key, ids in wanted.items():
            for i in range(0, len(ids), BULK_RUNS):
                batch = ids[i:i + BULK_RUNS]
                batch = visible(session, EntityAssociationType.RUN, batch) if visible is not None else batch
                rows = session.execute(select(M.run_uuid, M.step, M.value, M.is_nan)
                                       .where(M.key == key, M.run_uuid.in_(batch))
                                       .order_by(M.run_uuid, M.timestamp, M.step, M.value))
                for run_id, step, value, is_nan in rows:
                    out.setdefault((run_id, key), {})[int(step)] = math.nan if is_nan else float(value)
    return True


def http_histories(host_creds, wanted: dict[str, list[str]], out: dict) -> list[tuple[str, str]]:
    """Reads `wanted` ({key: run ids}) into `out` through an MLflow server's HTTP_BULK route, HTTP_BULK_RUNS runs
    a request; returns the (run id, key) pairs left to read one at a time: all of them where the server has no
    such route (404: an older or another server; 405: a proxy that lets only its REST API through), those of an
    answer that may have been cut. Any other failure is raised, as a single read's would be."""
    from mlflow.utils.rest_utils import http_request, verify_rest_response

    left = []
    for key, ids in wanted.items():
        for i in range(0, len(ids), HTTP_BULK_RUNS):
            batch = ids[i:i + HTTP_BULK_RUNS]
            response = http_request(host_creds, HTTP_BULK, "GET",
                                    params={"run_id": batch, "metric_key": key, "max_results": HTTP_BULK_POINTS})
            if response.status_code in (404, 405):
                return [(run_id, k) for k, run_ids in wanted.items() for run_id in run_ids]
            points = verify_rest_response(response, HTTP_BULK).json().get("metrics", [])
            if len(points) >= HTTP_BULK_POINTS:
                left += [(run_id, key) for run_id in batch]
                continue
            for m in points:
                out.setdefault((m["run_id"], key), {})[int(m["step"])] = float(m["value"])
    return left


def histories_one_by_one(client, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], dict[int, float]]:
    """{(run id, key): {step: value}} by one client.get_metric_history per pair, THREADS at once; the first
    failure is raised (the calls not started yet are cancelled)."""
    from concurrent.futures import ThreadPoolExecutor

    def read(pair: tuple[str, str]) -> dict[int, float]:
        return {int(m.step): float(m.value) for m in client.get_metric_history(*pair)}

    if len(pairs) < 2:
        return {pair: read(pair) for pair in pairs}
    with ThreadPoolExecutor(min(THREADS, len(pairs))) as pool:
        try:
            return dict(zip(pairs, pool.map(read, pairs)))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def records_from_runs(client, parent) -> list[trial_records.TrialRecord]:
    """The study's nested runs as TrialRecords, from params, tags and metric histories: one per trial, the attempt
    that stands where --resume ran a trial again (adbs_lab/records/attempts.py: standing)."""
    runs = [r for r in trial_runs(client, parent) if r.data.tags.get("adbs.role", "trial") == "trial"]

    def order(r):  # the study's order: Optuna trial number (Tune's creation order), then start time
        n = r.data.tags.get("adbs.optuna_trial", "")
        return (int(n) if n.isdigit() else math.inf, r.info.start_time)

    live = parent.info.status == "RUNNING"  # the study is still running (or its driver died without a word)
    keys = {k for r in runs for k in r.data.metrics if k.startswith(K.SESSION) or k == K.BASE_PRUNE_VALUE}
    history = histories(client, runs, keys)
    runs = sorted(runs, key=order)
    states = {r.info.run_id: _state(r, live) for r in runs}
    samples = embeddings(client, [r for r in runs if states[r.info.run_id] == K.COMPLETE])
    out = []
    for r in runs:
        tags, state = r.data.tags, states[r.info.run_id]
        n = tags.get("adbs.optuna_trial", "")
        per_session: dict[int, dict[str, float]] = {}
        for key in (k for k in r.data.metrics if k.startswith(K.SESSION)):
            name = key[len(K.SESSION):]
            for step, v in history.get((r.info.run_id, key), {}).items():
                per_session.setdefault(step, {})[K.LEGACY_NAMES.get(name, name)] = v
        base = history.get((r.info.run_id, K.BASE_PRUNE_VALUE), {})
        out.append(trial_records.TrialRecord(
            trial_id=tags.get("adbs.trial_id", r.info.run_id), state=state,
            label=attempts.run_label(tags, r.info.run_name),
            config={canonical(k): _config_value(canonical(k), v) for k, v in r.data.params.items()
                    if canonical(k) in CONFIG_COLUMNS},  # runs logged before a field was renamed
            optuna_trial=int(n) if n.isdigit() else None, mlflow_run_id=r.info.run_id,
            base_epochs_run=max(base) if base else 0,
            # a cached base session replays all its epochs at once, each with base/reused = 1 (adbs/trial.py)
            base_epochs_reused=max(base) if base and r.data.metrics.get(K.REUSED) == 1 else 0,
            started_at=r.info.start_time / 1000 if r.info.start_time else math.nan,
            finished_at=r.info.end_time / 1000 if r.info.end_time else math.nan,
            summary=K.strip(K.SUMMARY, r.data.metrics),
            sessions=[{"session": step, **per_session[step]} for step in sorted(per_session)],
            error=tags.get("adbs.error"), warning=tags.get("adbs.warning", ""),
            base_boundaries=tags.get("adbs.base_boundaries"),
            embeddings=samples.get(r.info.run_id),
            shadow=tags.get("adbs.shadow") == "true", superseded_by=tags.get(attempts.SUPERSEDED_BY),
            orphaned=attempts.ORPHANED in tags))
    return attempts.standing(out)


def _state(run, live: bool) -> str:
    """The trial's state (tag adbs.state); one the tracker has not seen end is still running only while its study
    is (`live`), else it stopped with its study."""
    state = run.data.tags.get("adbs.state", K.INTERRUPTED)
    if state == "RUNNING":
        state = K.RUNNING if live and run.info.status == "RUNNING" else K.INTERRUPTED
    return state


def embeddings(client, runs: list) -> dict[str, str | None]:
    """{run id: its embedding sample or None} of `runs` (_embedding). Samples not on this machine are downloaded
    THREADS at a time (an MLflow server's artifacts: one HTTP round trip or more each, a third of a second per
    trial one after another); the warnings of those it could not read are printed in the runs' order."""
    from concurrent.futures import ThreadPoolExecutor

    local = [_local_artifacts(r.info.artifact_uri) is not None for r in runs]
    got: dict[int, tuple[str | None, str | None]] = {i: _embedding(client, r) for i, r in enumerate(runs) if local[i]}
    remote = [i for i in range(len(runs)) if not local[i]]
    if remote:
        with ThreadPoolExecutor(min(THREADS, len(remote))) as pool:
            got.update(zip(remote, pool.map(lambda i: _embedding(client, runs[i]), remote)))
    for i in range(len(runs)):
        if got[i][1]:
            print(got[i][1], flush=True)
    return {r.info.run_id: got[i][0] for i, r in enumerate(runs)}


def _embedding(client, run) -> tuple[str | None, str | None]:
    """(the trial's embedding sample (artifacts.EMBEDDINGS_JSON) when its config kept one (keep_embeddings), the
    warning to print when it kept one that cannot be read)."""
    if str(run.data.params.get("keep_embeddings", "")).lower() != "true":
        return None, None  # one artifact listing saved per trial of every study that keeps none
    import tempfile

    local = _local_artifacts(run.info.artifact_uri)
    try:
        if local is not None:
            return (local / run_files.EMBEDDINGS_JSON).read_text(), None
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run.info.run_id, run_files.EMBEDDINGS_JSON, tmp)
            return Path(path).read_text(), None
    except Exception as e:  # noqa: BLE001 - a missing figure must not stop the tables
        return None, (f"warning: run {run.info.run_id} kept no {run_files.EMBEDDINGS_JSON} "
                      f"({str(e).splitlines()[0][:200]}); its t-SNE and similarity panels are left out")


def _local_artifacts(uri: str | None) -> Path | None:
    """The run's artifact folder when it is on this machine (the project's SQLite store keeps them beside it):
    read directly, not through download_artifacts, which starts a thread pool per call (the mlflow package's
    ArtifactRepository), once per complete trial."""
    if not uri or "://" in uri and not uri.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    path = Path(unquote(urlparse(uri).path) if uri.startswith("file://") else uri)
    return path if path.is_dir() else None


def trial_frames(client, parent) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sessions, trials) of a study's nested runs: the schema of the study's own parquet files."""
    return trial_records.frames(records_from_runs(client, parent))


def _table_layout(parent, study: str) -> tuple[str | None, list[str] | None]:
    """Baseline row and row order: the parent run's tags, else the study's search space module."""
    tags = parent.data.tags
    if "adbs.order" in tags or "adbs.baseline" in tags:
        order = json.loads(tags["adbs.order"]) if tags.get("adbs.order") else None
        baseline = tags.get("adbs.baseline") or None
        if baseline and baseline.startswith("{"):  # {row: reference row} (the hosts study)
            baseline = json.loads(baseline)
        return baseline, order
    try:
        import importlib

        mod = importlib.import_module(f"search_spaces.{study}")
    except ImportError:
        return None, None
    rows = getattr(mod, "ROWS", None)
    return getattr(mod, "BASELINE", None), (list(rows) if isinstance(rows, dict) else None)


def load_study(client, ref: str, name: str | None = None) -> Recorded:
    parent = find_parent(client, ref, name)
    name = parent.data.tags.get("adbs.study") or client.get_experiment(parent.info.experiment_id).name
    sessions, trials = trial_frames(client, parent)
    baseline, order = _table_layout(parent, name)
    from adbs_lab.results import notes as study_notes

    return Recorded(parent, name, sessions, trials, baseline, order, objectives.from_tag(parent.data.tags),
                    tuple(study_notes.from_tag(parent.data.tags)), VerdictPolicy.from_tags(parent.data.tags),
                    experiment=client.get_experiment(parent.info.experiment_id).name)


def study_table(study: Recorded, metric: str = "test_acc") -> pd.DataFrame:
    """Exactly `results.paper_table` as the study calls it."""
    if study.sessions.empty:
        return pd.DataFrame()
    front = pareto.front_labels(study.trials, study.objectives) if study.multi and len(study.trials) else None
    return tables.paper_table(study.sessions, metric=metric, baseline=study.baseline, order=study.order,
                               trials=study.trials, front=front, verdicts=study.verdicts)


# -- several studies as one table ------------------------------------------------------------
def combine(studies: list[Recorded]) -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, str]]:
    """(sessions, trials, row order, {row: reference row}) of several studies as one: each row becomes
    '<study>: <row>' ('<study> (<run id>): <row>' when a study appears twice, e.g. two runs of `ablation` on
    two presets), and each row keeps the Delta_last reference it has in its own study."""
    sessions: list[pd.DataFrame] = []
    trials: list[pd.DataFrame] = []
    order: list[str] = []
    reference: dict[str, str] = {}
    for st, prefix in zip(studies, _prefixes(studies)):
        rename = lambda lab, prefix=prefix: f"{prefix}: {lab}"  # noqa: E731
        for frame, out in ((st.sessions, sessions), (st.trials, trials)):
            if len(frame):
                out.append(frame.assign(**{trial_records.LABEL: frame[trial_records.LABEL].map(rename)}))
        labels = list(dict.fromkeys(st.sessions[trial_records.LABEL])) if len(st.sessions) else []
        if not st.order:  # no order of the study's own: by its swept values, as its own table (paper_table)
            labels = compare.sort_by_swept(st.sessions, labels, trial_records.LABEL) if labels else labels
        order += [rename(lab) for lab in dict.fromkeys((st.order or []) + labels)]
        base = st.baseline if isinstance(st.baseline, dict) else {lab: st.baseline for lab in labels} if st.baseline else {}
        reference.update({rename(lab): rename(ref) for lab, ref in base.items()})
    cat = lambda frames: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()  # noqa: E731
    return cat(sessions), cat(trials), order, reference


def combined_pairs(studies: list[Recorded]) -> list[Pair] | None:
    """The comparisons each study's own table made, its rows named as in `combine`; None when no study recorded
    its comparisons (each row against its reference, as `combine` gives them)."""
    if all(st.verdicts.pairs is None for st in studies):
        return None
    out: list[Pair] = []
    for st, prefix in zip(studies, _prefixes(studies)):
        labels = list(dict.fromkeys(st.sessions[trial_records.LABEL])) if len(st.sessions) else []
        pairs = st.verdicts.pairs if st.verdicts.pairs is not None else comparisons.family(labels, st.baseline)
        out += [(f"{prefix}: {a}", f"{prefix}: {b}") for a, b in pairs]
    return out


def _prefixes(studies: list[Recorded]) -> list[str]:
    """Each study's prefix of its rows in a combined table: its name, with its parent run when a name repeats."""
    names = [s.name for s in studies]
    return [s.name if names.count(s.name) == 1 else f"{s.name} ({s.parent.info.run_id[:8]})" for s in studies]


def combined_front(studies: list[Recorded]) -> list[str] | None:
    """The rows of a combined table (`combine`) on the Pareto front of their own study's --objectives; None when
    no study searched several objectives (the table then has no front column)."""
    if not any(s.multi for s in studies):
        return None
    return [f"{prefix}: {lab}" for s, prefix in zip(studies, _prefixes(studies)) if s.multi and len(s.trials)
            for lab in pareto.front_labels(s.trials, s.objectives)]


def write_comparison(studies: list[Recorded], table: pd.DataFrame, sessions: pd.DataFrame, trials: pd.DataFrame,
                     out: Path, *, fmt: str, uri: str, metric: str = "test_acc",
                     across: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """One table and one figure (every row's accuracy per session) for several studies, with report.md (and
    `across`, the lines of the comparisons across tasks, adbs_lab/results/across_tasks.py: lines, in it)."""
    title = " + ".join(dict.fromkeys(s.name for s in studies))
    notes = combined_notes(studies)
    files = _write_tables(out, sessions, trials, table, fmt, caption=f"{title}: {metric} (%) per session",
                          notes=notes)
    not_drawn: list[str] = []
    colors, styles = combined_styles(studies)
    curves = run_files.guarded("compare_sessions.png", lambda: run_files.session_curves(
        sessions, out / "compare_sessions.png", f"{title}: {metric} per session", metric=metric,
        order=combine(studies)[2], colors=colors, styles=styles,
        note="colour: the row's colour in its own study's figures; line style: its study"), not_drawn) \
        if len(sessions) else None
    figs = [curves] if curves else []
    meta = {"tracking URI": uri, **{f"{s.name} ({s.parent.info.run_id[:8]})":
                                    f"parent run {s.parent.info.run_name}, `{s.parent.data.tags.get('adbs.command', '?')}`"
                                    for s in studies}}
    objs, no_best = shared_objectives(studies)
    withheld = [why for why, _ in map(no_best_of, (s.parent.data.tags for s in studies)) if why]
    if withheld:  # a study that names no best of its own rows names none across studies either
        objs, no_best = None, f"(no best configuration across these studies: {withheld[0]})"
    files.append(run_files.write_study_report(out, study=title, table=table, trials=trials,
                                              best=tables.best_config(trials, objs) if objs and len(trials) else None,
                                              figures=figs, meta=meta, no_best=no_best, not_drawn=not_drawn,
                                              notes=notes, across_md="\n".join(across) or None))
    return files + figs


STUDY_STYLES = ("o-", "s--", "^:", "D-.")
"""The line style of each study's rows in `report.py A B`'s figure, in the order the studies are named."""


def combined_styles(studies: list[Recorded]) -> tuple[dict[str, str], dict[str, str]]:
    """({row: colour}, {row: line style}) of a combined table's rows (named as in `combine`): each row keeps the colour
    it has in its own study's figures (figures.study_colors), and each study gets a line style of STUDY_STYLES."""
    from adbs_lab.results import figures

    colors: dict[str, str] = {}
    styles: dict[str, str] = {}
    for i, (st, prefix) in enumerate(zip(studies, _prefixes(studies))):
        for lab, color in figures.study_colors(st.sessions, st.trials, order=st.order).items():
            colors[f"{prefix}: {lab}"] = color
            styles[f"{prefix}: {lab}"] = STUDY_STYLES[i % len(STUDY_STYLES)]
    return colors, styles


def shared_objectives(studies: list[Recorded]) -> tuple[tuple | None, str | None]:
    """(the objectives every study searched, None) — the one thing a best across them may be chosen by — or (None,
    why there is no best across them): a best by one study's objective would rank the others' rows by a metric
    they never optimised."""
    said = {s.name if [t.name for t in studies].count(s.name) == 1 else f"{s.name} ({s.parent.info.run_id[:8]})":
            objectives.texts(s.objectives) for s in studies}
    if len({tuple(v) for v in said.values()}) == 1:
        return studies[0].objectives, None
    return None, ("(no best configuration across these studies: they optimised different objectives ("
                  + "; ".join(f"{k}: {', '.join(v)}" for k, v in said.items())
                  + "), so no one metric ranks all their rows; each study's own report names its best)")


def combined_notes(studies: list[Recorded]) -> list[str]:
    """Each study's notes (Recorded.notes) prefixed with its name in a combined table (`combine`)."""
    return [f"{prefix}: {line}" for s, prefix in zip(studies, _prefixes(studies)) for line in s.notes]


# -- everything at once ----------------------------------------------------------------------
def _write_tables(out: Path, sessions: pd.DataFrame, trials: pd.DataFrame, table: pd.DataFrame, fmt: str, *,
                  caption: str, order: list[str] | None = None, notes: list[str] | tuple[str, ...] = ()
                  ) -> list[Path]:
    """sessions.parquet, trials.parquet, table.txt and table.<fmt> in `out` (made if missing)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "sessions.parquet", out / "trials.parquet"]
    for frame, file in zip((sessions, trials), files):  # as the study writes them (tables.write): every config value
        write_parquet(frame, file, CONFIG_COLUMNS)
    for f in {"text", fmt}:
        p = out / f"table.{EXT[f]}"
        p.write_text(render(table, f, caption=caption, trials=trials, order=order, notes=notes) + "\n")
        files.append(p)
    return files


def write(study: Recorded, table: pd.DataFrame, out: Path, *, fmt: str, uri: str, paper: bool,
          across: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """Tables (chosen format + text), parquet frames, figures and report.md, rebuilt from the store (with `across`,
    the lines of its comparisons across its tasks, hosts or k-shot cells: adbs_lab/results/across_tasks.py)."""
    files = _write_tables(out, study.sessions, study.trials, table, fmt,
                          caption=f"{study.name}: test accuracy (%) per session", order=study.order,
                          notes=study.notes)
    not_drawn: list[str] = []
    figs = (run_files.study_figures(study.name, study.sessions, study.trials, out, order=study.order,
                                    baseline=study.baseline, objectives=study.objectives, not_drawn=not_drawn)
            if len(study.sessions) else [])
    beside = paper_beside(table, study.dataset) if paper else None
    why, cells = no_best_of(study.parent.data.tags)  # as the study decided it (adbs_lab/results/best.py)
    best = choose_best(study.trials, study.objectives, why=why, across_conditions=cells,
                       compared=table.attrs.get("comparisons") or [])
    record = pareto_of(study)
    if record is not None:
        files.append(pareto.write_pareto(out, record))
    from adbs_lab.results import run_pick

    meta = {"MLflow experiment": study.experiment or study.name,
            "parent run": f"{study.parent.info.run_name} ({study.parent.info.run_id}; {run_pick.describe(study.parent)})",
            "tracking URI": uri, "code version": study.parent.data.tags.get("adbs.code_version", "unknown"),
            "command": f"`{study.parent.data.tags.get('adbs.command', '?')}`"}
    report = run_files.guarded(run_files.REPORT_MD, lambda: run_files.write_study_report(
        out, study=study.name, table=table, trials=study.trials, best=best, figures=figs, meta=meta,
        paper_md=render_plain(beside, "markdown") if beside is not None else None, order=study.order, pareto=record,
        not_drawn=not_drawn, notes=study.notes, across_md="\n".join(across) or None), [])
    return files + ([report] if report else []) + figs


def pareto_of(study: Recorded) -> dict[str, Any] | None:
    """pareto.json of a study of two or more objectives, from its trials in the store; None for one objective."""
    return pareto.pareto_record(study.trials, study.objectives) if study.multi else None
