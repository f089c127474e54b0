"""The MLflow tracking store: which one (`tracking_uri`), whether it can be used (`tracking_problem` reads only, for the
preflight; `check_tracking_uri` also creates a new SQLite store's schema, in one process), a client that waits out a
locked SQLite store (`_Patient`), and the command that opens the UI on it. adbs_lab/driver/tracker.py logs the study's
runs through it.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from adbs import env
from adbs_lab.stores import paths
from adbs_lab.stores import db_server
from adbs_lab.stores.db_server import is_server, locked, patiently, store_down
from adbs import light
from adbs.redaction import SecretUrl, carries_secret, redact, reveal

if TYPE_CHECKING:
    import mlflow.tracking as mlflow_tracking
else:
    mlflow_tracking = light.lazy("mlflow.tracking")  # MLflow loads where a client is made, not with the URL helpers

LOCKED_WAIT_S = env.seconds("ADBS_MLFLOW_LOCKED_WAIT_S")
"""How long a write waits for a locked MLflow store (SQLite: another process holds it) before the study stops."""


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message says how to fix it. Its text is redacted (adbs/redaction.py):
    a message quotes the errors of MLflow and database drivers, which quote the real URL, password and all."""

    def __init__(self, message: str):
        super().__init__(redact(message))


# The experiment's kind, "model training" in MLflow's words, for the MLflow clients and UI versions that read it.
# MLflow 3.17's UI does not: it opens every experiment in the view of its per-browser GenAI / Model training switch
# (adbs_lab/stores/serve.py prints runs-page links that set it; docs/mlflow-and-reports.md, "Compare trials").
EXPERIMENT_KIND, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"


class _Patient:
    """An MlflowClient whose calls wait out a locked SQLite store (retry with backoff) instead of failing.

    Another process writing the same store (a second study, the UI, a backup) locks a SQLite file for a
    while; a study must not die of that. A locked call is retried after 0.5 s, 1 s, 2 s, ... (at most 10 s
    apart); after LOCKED_WAIT_S it raises TrackingError, and the study stops as interrupted with the
    --resume command. A database server as the store that stopped answering is waited for the same way, for
    db_server.STORE_WAIT_S, then a TrackingError (and every later call raises it at once: the study is stopping).
    Any other error is raised at once.
    """

    def __init__(self, client) -> None:
        self._client = client
        # A database server as the store (in this process: postgresql://...) is waited for while it does not answer
        # (db_server.patiently). A tracking server over HTTP is not: MLflow's client retries it itself
        # (MLFLOW_HTTP_REQUEST_MAX_RETRIES), and a second wait around that one would double the bound.
        uri = str(getattr(client, "tracking_uri", "") or "")
        self._waits = f"the MLflow store {redact(uri)}" if is_server(uri) else None
        self._gave_up: str | None = None

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self._gave_up:  # the study is stopping: its closing calls do not each wait for the store again
                raise TrackingError(self._gave_up)
            locked_waits = Retrying(retry=retry_if_exception(locked), stop=stop_after_delay(LOCKED_WAIT_S),
                                  wait=wait_exponential(multiplier=0.5, max=10.0),
                                  retry_error_callback=_still_locked, before_sleep=_waiting)
            try:
                if self._waits:
                    return patiently(lambda: locked_waits(attr, *args, **kwargs), what=self._waits)
                return locked_waits(attr, *args, **kwargs)
            except Exception as e:
                if isinstance(e, TrackingError) or not store_down(e):
                    raise
                waited = f" for {db_server.STORE_WAIT_S:.0f} s" if self._waits else ""
                self._gave_up = (f"the MLflow store stopped answering{waited} ({_first_line(e)}); start it "
                                 "again")
                raise TrackingError(self._gave_up) from None

        return call


def patient(client):
    """`client` (an MlflowClient) as the study uses it: a locked SQLite store waited out, a store that stopped
    answering a TrackingError (`_Patient`)."""
    return _Patient(client)


def _waiting(state: RetryCallState) -> None:
    """One line per wait, so a study that stalls on a locked store says why (bench/load.py counts these lines)."""
    import sys

    action = state.next_action
    assert action is not None, "tenacity decides the next action before it calls before_sleep"
    print(f"warning: {LOCKED_WARNING} (try {state.attempt_number}; waiting {action.sleep:.1f} s)",
          file=sys.stderr, flush=True)


LOCKED_WARNING = "the MLflow store is locked by another process"


def _still_locked(state: RetryCallState):
    outcome = state.outcome
    assert outcome is not None, "tenacity gives up only after an attempt, so there is an outcome"
    e = outcome.exception()
    raise TrackingError(f"the MLflow store stayed locked for {LOCKED_WAIT_S:.0f} s "
                        f"({str(e).strip().splitlines()[0][:200]})") from None


def tracking_uri(flag: str | None) -> SecretUrl:
    """--tracking-uri, else MLFLOW_TRACKING_URI, else the project's SQLite store (absolute path); a URL that prints
    redacted (adbs/redaction.py: SecretUrl)."""
    return SecretUrl(flag or os.environ.get("MLFLOW_TRACKING_URI") or paths.DEFAULT_TRACKING_URI)


def client(uri: str):
    """An MlflowClient of `uri`, given the real URL of a SecretUrl."""
    return mlflow_tracking.MlflowClient(reveal(uri))


PROBE_S = 20.0
"""The most the check of a tracking server (`tracking_problem`) waits for its answer, whatever holds it up: MLflow's
retries are off and each request gives up after 10 s (`_fail_fast_http`), but neither bounds a name server that does
not answer (the system resolver's timeouts, tried per server and search domain, add up to minutes) or a server that
trickles its answer."""


@contextmanager
def _fail_fast_http():
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "10"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SCHEMES = ("", "file", "http", "https", "databricks", "databricks-uc", "uc")
"""The tracking-store schemes MLflow reads besides its databases' (MLflow's module
mlflow.tracking._tracking_service.utils: _register_tracking_stores); a plugin's come from its "mlflow.tracking_store"
entry points."""
MLFLOW_DATABASES = ("postgresql", "mysql", "sqlite", "mssql")
"""The database engines MLflow's SQLAlchemy store reads (MLflow's mlflow.store.db.db_types: DATABASE_ENGINES), a driver
after one '+' (mlflow.utils.uri: extract_db_type_from_uri)."""


def form_problem(uri: str) -> str | None:
    """What is wrong with tracking URI `uri` by its form alone, which needs neither the store nor MLflow (checked with
    a study's flags, adbs_lab/driver/flags.py, and by `tracking_problem`): a relative SQLite path, or a scheme no
    tracking store of MLflow's (or of an installed plugin) reads, judged as MLflow picks the store
    (MLflow's mlflow.tracking.registry: get_store_builder; mlflow.utils.uri: get_uri_scheme). None when MLflow reads it."""
    from urllib.parse import urlsplit

    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_absolute():
        return f"tracking URI {redact_uri(uri)!r} is relative: use an absolute path (trials run in their own folders)"
    if uri in ("databricks", "databricks-uc", "uc"):
        return None
    try:
        scheme = urlsplit(uri).scheme.lower()
    except ValueError as e:  # e.g. an unclosed '[' of an IPv6 host
        return f"tracking URI {redact_uri(uri)!r} is not a URL MLflow can read ({e})"
    usable = ("an absolute SQLite file (sqlite:////ABS/PATH/mlflow.db), a tracking server (http://HOST:PORT), a "
              "database server (postgresql://USER@HOST/DB) or a folder")
    alias = paths.alias_problem(uri)
    if alias:
        return f"tracking URI {redact_uri(uri)!r}: {alias}"
    if any(scheme.startswith(db) for db in MLFLOW_DATABASES):
        engine = scheme.split("+")
        if len(engine) > 2 or engine[0] not in MLFLOW_DATABASES:
            return (f"tracking URI {redact_uri(uri)!r}: {scheme!r} is not a database MLflow reads (one of "
                    f"{', '.join(MLFLOW_DATABASES)}, a driver after '+'); use {usable}")
        return None
    if scheme in SCHEMES or (len(scheme) == 1 and scheme.isalpha()):  # a Windows drive letter is a folder's
        return None
    from importlib.metadata import entry_points

    if scheme in {e.name for e in entry_points(group="mlflow.tracking_store")}:
        return None
    return f"tracking URI {redact_uri(uri)!r}: MLflow has no tracking store of scheme {scheme!r}; use {usable}"


def tracking_problem(uri: str) -> None:
    """The checks of `check_tracking_uri` that write nothing (the preflight and --dry-run, adbs_lab/driver/preflight.py):
    a SQLite store that does not exist yet is judged by the folder it would be created in, and an existing one by
    its tables; a database server is connected to, never given tables; a tracking server answers a search."""
    from adbs.writable import folder_problem
    from adbs_lab.stores.sqlite_kind import sqlite_problem

    hint = _hint(uri)
    form = form_problem(uri)
    if form:
        raise TrackingError(form)
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        problem = folder_problem(db.parent, f"the folder of tracking store {uri!r}", create=False)
        if problem:
            raise TrackingError(f"{problem}; {hint}")
        problem = sqlite_problem(db, "mlflow")  # MLflow would add its tables to e.g. an Optuna database
        if problem:
            raise TrackingError(f"tracking URI {uri!r}: {problem}")
        if not db.is_file() or db.stat().st_size == 0:
            return  # created by check_tracking_uri when the study starts
    elif uri.split("://", 1)[0].split("+", 1)[0] in paths.DATABASES:
        _connect(uri, hint)  # MLflow's client would create its tables in an empty database
        return
    _answers(uri, hint)


def _answers(uri: str, hint: str) -> None:
    """A search of one experiment answered, else TrackingError; from a server over the network (http, https,
    databricks) within PROBE_S, in a thread of its own, left behind when it does not answer (the command is ending)."""
    import threading

    failed: list[BaseException] = []

    def search() -> None:
        try:
            client(uri).search_experiments(max_results=1)
        except Exception as e:  # noqa: BLE001 - any failure means the store is unusable
            failed.append(e)

    probe = threading.Thread(target=search, daemon=True, name="tracking-probe")
    remote = uri.split("://", 1)[0].lower() in ("http", "https", "databricks")
    with _fail_fast_http():  # MLflow reads them as a request starts
        probe.start()
        probe.join(PROBE_S if remote else None)
    if probe.is_alive():
        raise TrackingError(f"tracking URI {redact_uri(uri)!r} did not answer within {PROBE_S:.0f} s (a server or a "
                            f"name server that does not answer); {hint}")
    if failed:
        raise TrackingError(f"tracking URI {redact_uri(uri)!r} is unreachable ({_first_line(failed[0])}); {hint}")


def _connect(uri: str, hint: str) -> None:
    from adbs_lab.stores.sqlite_kind import database_problem

    problem = database_problem(uri)  # the missing driver, a refused connection, bad credentials: named
    if problem:
        raise TrackingError(f"tracking URI {redact_uri(uri)!r}: {problem}; {hint}")


def _first_line(e: BaseException) -> str:
    text = redact(str(e)).strip()  # redacted before it is cut: a URL cut before its '@' would show its password
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def redact_uri(uri: str) -> str:
    """`uri` without its credentials (printed and logged): adbs/redaction.py: redact."""
    return redact(uri)


def _hint(uri: str) -> str:
    return (f"pass --tracking-uri sqlite:///ABS/PATH/mlflow.db, start the server behind {redact_uri(uri)}, "
            "or unset MLFLOW_TRACKING_URI to use the project's store")


def check_tracking_uri(uri: str) -> None:
    """`tracking_problem`, then open the store once before any trial starts: a new SQLite store gets its folder and
    schema here, in one process (trials never open it: SQLite takes one writer, mlflow#6490)."""
    tracking_problem(uri)
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if db.is_file() and db.stat().st_size > 0:
            return  # an MLflow store already, searched by tracking_problem
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TrackingError(f"cannot create the folder of tracking store {uri!r}: {e}; {_hint(uri)}") from None
    elif "://" in uri and uri.split("://", 1)[0] in ("http", "https", "databricks"):
        return  # a tracking server: tracking_problem's search reached it
    try:
        with _fail_fast_http():
            client(uri).search_experiments(max_results=1)
    except Exception as e:  # noqa: BLE001 - any failure means the store is unusable
        raise TrackingError(f"tracking URI {redact_uri(uri)!r} is unreachable ({_first_line(e)}); {_hint(uri)}") from None


def ui_command(uri: str, storage: str | None = None) -> str:
    """The one command that opens the MLflow UI on this store (the project's serve script), as printed: a password
    in the URL shows as *** (adbs/redaction.py), and a note says where to give it; the artifacts where a study of
    --storage `storage` put them (adbs_lab/stores/paths.py: artifact_root)."""
    import shlex
    import sys

    if uri.startswith("sqlite:") or uri.startswith("postgresql") or uri.startswith("mysql"):
        from urllib.parse import urlsplit
        from urllib.request import url2pathname

        cmd = [sys.executable, str(paths.REPO_ROOT / "mlflow" / "serve.py")]
        if uri != paths.DEFAULT_TRACKING_URI:
            cmd += ["--backend-store-uri", redact_uri(uri)]
            root = paths.artifact_root(uri, storage)
            if root and root.startswith("file://"):  # a path, not the URI's %-escapes ('my%20runs')
                cmd += ["--artifacts-destination", url2pathname(urlsplit(root).path)]
        note = ("  (*** stands for the password, left out here: type it in, or set $MLFLOW_BACKEND_STORE_URI to the URL "
                "instead of passing --backend-store-uri, or keep it in ~/.pgpass)") if carries_secret(reveal(uri)) else ""
        return shlex.join(cmd) + note
    return f"open {redact_uri(uri)} in a browser"


RUNS_FILE = "mlflow_runs.json"
NOTE = "mlflow.note.content"
"""The run tag the MLflow UI shows as the run's description (Markdown), and as the runs table's Description column."""
NOTE_MAX = 8000
"""A note is a tag value: at most 8000 characters (MLflow's MAX_TAG_VAL_LENGTH, in its utils/validation.py)."""
VIEW_KEY = "adbs"
"""The name of the view every study's experiment carries (`runs_view`); a link to the runs page opens it with
`&viewStateShareKey=adbs` (adbs_lab/stores/serve.py: runs_page)."""
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
"""The experiment tag MLflow's UI reads a shared view from (its "Share" button writes the same: the key given as the
page's `viewStateShareKey`)."""
RUN_NAME_COLUMN, DESCRIPTION_COLUMN = "attributes.`Run Name`", "attributes.`Description`"


CURVES = ("test_acc", "test_base_acc", "test_novel_acc", "val_acc")
"""The session curves of a study's first view (`runs_view`): one chart each, x = session (the metric's step)."""
CURVES_SECTION = "Session curves"
TEST_COLUMNS = ("summary/test_last_acc", "summary/test_avg_acc")
"""The paper's two figures of a trial (last-session and average test accuracy), columns of the view's runs table."""


def runs_view(params: Sequence[str], metrics: Sequence[str], parent_run_id: str | None = None) -> str:
    """The study's view of its experiment, as MLflow's UI stores a shared one (JSON of the UI's own view state, MLflow
    3.17: the shared keys `selectedColumns` ... `chartsSearchFilter` and the search facets of its experiment page):
    the trials of invocation `parent_run_id`, grouped by configuration (tag adbs.label; MLflow would show them
    collapsed under their parent, and a shared view cannot say which runs are expanded), and

    - in the chart view (the link's `compareRunsMode=CHART`: adbs_lab/stores/serve.py, runs_page) first a section
      CURVES_SECTION, a line chart per metric of CURVES over sessions (x = step = session), a line per configuration
      (its mean over seeds), then the summary/* charts, and the other session/* and base/* charts folded below;
    - in the table view the objectives, the searched parameters, the seed and TEST_COLUMNS as columns (each group
      row the configuration's means, its trials under it), a Run Name column wide enough for `alpha=0.05 seed=2`,
      then the Description."""
    tests = [m for m in TEST_COLUMNS if m not in metrics]
    cols = ([f"metrics.`{m}`" for m in metrics] + [f"params.`{k}`" for k in params if k != "seed"]
            + ["params.`seed`", *(f"metrics.`{m}`" for m in tests), DESCRIPTION_COLUMN])
    widths = {RUN_NAME_COLUMN: 260, DESCRIPTION_COLUMN: 320, **{f"metrics.`{m}`": 180 for m in [*metrics, *tests]}}
    charts = [{"uuid": f"adbs-{m}", "type": "LINE", "metricSectionId": "adbs-curves", "deleted": False,
               "isGenerated": False, "metricKey": f"session/{m}",
               "selectedMetricKeys": [f"session/{m}"], "xAxisKey": "step", "useGlobalXaxisKey": False,
               "selectedXAxisMetricKey": "", "xAxisScaleType": "linear", "scaleType": "linear", "lineSmoothness": 0,
               "useGlobalLineSmoothing": False, "yAxisKey": "metric", "yAxisExpressions": [], "ignoreOutliers": False,
               "runsCountToCompare": 100, "range": {}} for m in CURVES]
    sections = [{"uuid": f"adbs-{key}", "name": name, "display": shown, "isReordered": True}
                for key, name, shown in (("curves", CURVES_SECTION, True), ("summary", "summary", True),
                                         ("session", "session", False), ("base", "base", False))]
    view: dict[str, Any] = {"selectedColumns": cols, "columnOrder": [RUN_NAME_COLUMN, *cols], "columnWidths": widths,
                            "compareRunCharts": charts, "compareRunSections": sections, "isAccordionReordered": True,
                            "runsHiddenMode": "SHOW_ALL", "hideEmptyCharts": True, "useGroupedValuesInCharts": True,
                            "groupBy": {"aggregateFunction": "average",
                                        "groupByKeys": [{"mode": "tag", "groupByData": "adbs.label"}]}}
    if parent_run_id:
        view["searchFilter"] = f"tags.`mlflow.parentRunId` = '{parent_run_id}'"
    return json.dumps(view)


TABLE_MD = "table.md"
TABLE_CAPTION = "Test accuracy (%) per session, mean ± 95% CI over seeds (configurations chosen on validation data):"


def load_runs(study_dir: Path) -> dict[str, Any]:
    """The study's map of its parent and trial MLflow runs; a damaged file is named (TrackingError), never guessed
    at: without it a resumed study would log every trial again as a new run."""
    f = study_dir / RUNS_FILE
    if not f.exists():
        return {"parent": None, "trials": {}, "ended": {}}
    try:
        runs = json.loads(f.read_text())
        if not isinstance(runs, dict) or not isinstance(runs.get("trials", {}), dict):
            raise ValueError(f"a {type(runs).__name__} without the trials' mapping")
    except (OSError, ValueError) as e:
        raise TrackingError(f"{f} is damaged ({type(e).__name__}: {str(e)[:120]}); it maps the study's trials to "
                            "their MLflow runs: restore it from a copy, or start the study again without --resume "
                            "(earlier results are moved aside)") from None
    runs.setdefault("trials", {})
    return runs


def note_with_table(description: str, table_md: str) -> str:
    """The parent run's description with the study's table after its first paragraph (the part the MLflow UI shows
    before "Show more"), within the length of a tag value: a longer table is cut after its last whole line, saying
    where the whole one is."""
    head, _, rest = description.partition("\n\n")
    note = "\n\n".join(x for x in (head, TABLE_CAPTION, table_md.strip(), rest) if x)
    if len(note) <= NOTE_MAX:
        return note
    cut = "\n\n(the table goes on in table.md, under this run's Artifacts)"
    return note[:note.rfind("\n", 0, NOTE_MAX - len(cut))] + cut
