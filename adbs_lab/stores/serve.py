"""Serve the project's MLflow tracking store: the UI, and an HTTP endpoint studies can log through.

    python -m adbs_lab.stores.serve                        # http://127.0.0.1:5000 on <repo>/mlflow/mlflow.db
    python mlflow/serve.py --port 5001              # the same, as a script
    python -m adbs_lab.stores.serve --host 0.0.0.0 --allowed-hosts 'gpu-box:5000' \\
        --backend-store-uri postgresql://user:pw@db/mlflow --artifacts-destination s3://bucket/mlflow

Studies then log over HTTP: `python studies/alpha_sweep.py --tracking-uri http://127.0.0.1:5000`
(one writer process: the server; what a shared or cluster setup needs). Arguments after `--` go
to `mlflow server` unchanged (e.g. `-- --workers 2`); one with credentials in it is refused.
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from adbs.exits import OK, REFUSED, Exit, entry
from adbs_lab.stores import db_server, paths
from adbs.redaction import SecretUrl, carries_secret, redact, redact_url, reveal

__all__ = ["LOOPBACK", "GRACE_S", "RUNS_QUERY", "STORE_ENV", "POOL_RECYCLE_ENV", "parser", "url", "command", "server_env",
           "port_problem", "experiments", "with_view", "runs_page", "artifacts",
           "print_studies", "main"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
STORE_ENV = "MLFLOW_BACKEND_STORE_URI"
"""The server's store by environment (mlflow server reads it): the default of --backend-store-uri too."""
GRACE_S = 15.0
"""Seconds the server may take to stop before its processes are killed."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m adbs_lab.stores.serve", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1: this machine only; 0.0.0.0 exposes the UI, "
                        "which has no login, to the network)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    p.add_argument("--backend-store-uri", type=SecretUrl,
                   default=SecretUrl(os.environ.get(STORE_ENV) or paths.DEFAULT_TRACKING_URI),
                   help=f"where runs live (default ${STORE_ENV}, else the project's store "
                        "sqlite:///<repo>/mlflow/mlflow.db; e.g. postgresql://user@host/db for a shared server, its "
                        "password in ~/.pgpass or PGPASSWORD; a password in the URL is never printed, and reaches "
                        f"the server as ${STORE_ENV}, not on its command line)")
    p.add_argument("--artifacts-destination", default=None,
                   help="where logged files live (default: where a study puts them for that store, "
                        "adbs_lab/stores/paths.py: artifact_root: <repo>/mlflow/artifacts for the project's store and "
                        "a database server, the folder beside a SQLite file; e.g. s3://bucket/path, its credentials in "
                        "the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; a URL with "
                        "credentials is refused)")
    p.add_argument("--allowed-hosts", default=None,
                   help="Host headers the server accepts (MLflow 3 DNS-rebinding protection; default "
                        "localhost + private IPs); needed when users reach it by a public name")
    p.add_argument("--workers", type=int, default=2,
                   help="server worker processes (default 2: enough for a few users; MLflow's own default is 4)")
    p.add_argument("--dry-run", action="store_true",
                   help="check --port (in range, free) and --workers, print the mlflow server command (quoted for a "
                        "shell) and exit; nothing is created")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="after --: passed to `mlflow server`")
    return p


def url(host: str, port: int) -> str:
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}"


def server_env(args: argparse.Namespace) -> dict[str, str]:
    """What the server gets by environment: a store URL that carries a secret (`command` leaves it out, as any
    user could read it in the process list; `mlflow server` reads $MLFLOW_BACKEND_STORE_URI)."""
    real = reveal(args.backend_store_uri)
    env = {STORE_ENV: real} if carries_secret(real) else {}
    if db_server.is_server(real) and POOL_RECYCLE_ENV not in os.environ:
        # MLflow's SQL store already tests a pooled connection before use (pool_pre_ping); this also replaces one
        # older than db_server.POOL_RECYCLE_S, which a firewall or proxy may have dropped without a word
        env[POOL_RECYCLE_ENV] = str(db_server.POOL_RECYCLE_S)
    return env


POOL_RECYCLE_ENV = "MLFLOW_SQLALCHEMYSTORE_POOL_RECYCLE"


def command(args: argparse.Namespace) -> list[str]:
    """The `mlflow server` command line: nothing secret in it (see server_env; an --artifacts-destination with
    credentials is refused: ValueError, which `main` says as its exit-2 line)."""
    problem = _artifacts_problem(args) or _passed_on_problem(args)
    if problem:
        raise ValueError(problem)
    exe = Path(sys.executable).with_name("mlflow")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "mlflow"]
    store = [] if STORE_ENV in server_env(args) else ["--backend-store-uri", reveal(args.backend_store_uri)]
    cmd = [*base, "server", *store,
           "--artifacts-destination", _local_or_uri(artifacts(args)),
           "--host", args.host, "--port", str(args.port), "--workers", str(args.workers)]
    if args.allowed_hosts:
        cmd += ["--allowed-hosts", args.allowed_hosts]
    return cmd + _passed_on(args)


def artifacts(args: argparse.Namespace) -> str:
    """--artifacts-destination, else where a study of this store puts its artifacts (and prints in its command to
    open the UI): adbs_lab/stores/paths.py: artifact_root, its one owner."""
    if args.artifacts_destination is not None:
        return args.artifacts_destination
    root = paths.artifact_root(reveal(args.backend_store_uri)) or paths.DEFAULT_ARTIFACT_ROOT.as_uri()
    return url2pathname(urlsplit(root).path)


def _local_or_uri(dest: str) -> str:
    """A plain path becomes an absolute one (the server's cwd must not matter); URIs pass through."""
    return dest if "://" in dest else str(Path(dest).expanduser().resolve())


def _artifacts_problem(args: argparse.Namespace) -> str | None:
    """An --artifacts-destination with credentials in it: refused, as the server's command line is visible to every
    user of the machine (`ps`), and MLflow reads an object store's credentials from the environment only (its
    s3:// and gs:// artifact stores take the whole KEY:SECRET@bucket for the bucket's name: MLflow's
    utils/data_utils.py: parse_s3_uri)."""
    dest = artifacts(args)
    if not carries_secret(dest):
        return None
    return (f"--artifacts-destination {redact_url(dest)}: the URL carries credentials, which the server's command "
            "line would show to every user of this machine (ps) and which MLflow does not read from a URL; pass "
            "the URL without them and give them in the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_PROFILE) for s3://, GOOGLE_APPLICATION_CREDENTIALS for gs://, AZURE_STORAGE_CONNECTION_STRING "
            "for wasbs://")


def _passed_on(args: argparse.Namespace) -> list[str]:
    """The arguments after `--`, which go to `mlflow server` as they are."""
    extra = list(args.extra)
    return extra[1:] if extra[:1] == ["--"] else extra


def _passed_on_problem(args: argparse.Namespace) -> str | None:
    """An argument after `--` with credentials in it (a URL of `mlflow server`'s own flags, or one inside another's
    value): refused as --artifacts-destination's are, since it would go on the server's command line (`ps`) and the
    dry run's printed command."""
    shown = [redact(a) for a in _passed_on(args) if carries_secret(a)]
    if not shown:
        return None
    return (f"the arguments after -- carry credentials ({' '.join(shown)}), which the server's command line would show "
            "to every user of this machine (ps); give the store as --backend-store-uri (it reaches the server as "
            f"${STORE_ENV}, never on its command line) and an object store's credentials in the environment: "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for s3://, GOOGLE_APPLICATION_CREDENTIALS "
            "for gs://")


def _check_numbers(args: argparse.Namespace) -> str | None:
    """--port and --workers within what the OS and the server take (socket.bind raised OverflowError past 65535)."""
    if not 1 <= args.port <= 65535:
        return f"--port {args.port} is out of range; allowed: 1..65535 (a TCP port); e.g. --port 5000"
    if args.workers < 1:
        return f"--workers {args.workers} is out of range; allowed: >= 1 (server worker processes); e.g. --workers 2"
    return None


def _check_port(args: argparse.Namespace) -> str | None:
    return port_problem(args.host, args.port)


def port_problem(host: str, port: int) -> str | None:
    """Whether a server could listen on host:port now (binds and lets go: nothing is written); also for
    adbs_lab/stores/dashboard.py."""
    if not 1 <= port <= 65535:
        return f"--port {port} is out of range; allowed: 1..65535 (a TCP port); e.g. --port 5000"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a just-stopped server's port is free
        try:
            s.bind((host, port))
        except (OSError, OverflowError) as e:
            why = getattr(e, "strerror", None) or e
            if isinstance(e, socket.gaierror) or getattr(e, "errno", None) == errno.EADDRNOTAVAIL:
                return (f"--host {host} is not an address of this machine ({why}); allowed: 127.0.0.1 (this machine "
                        "only), 0.0.0.0 (every interface) or one of this machine's addresses or host names")
            return f"cannot listen on {host}:{port} ({why}); pick another --port"
    return None


def _check(args: argparse.Namespace) -> str | None:
    from adbs_lab.stores.sqlite_kind import sqlite_problem

    uri = args.backend_store_uri
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if not db.is_absolute():
            return f"--backend-store-uri {uri}: use an absolute path (sqlite:////abs/path/mlflow.db)"
        if db.is_dir():
            return f"--backend-store-uri {uri}: {db} is a folder; name the database file, e.g. {db / 'mlflow.db'}"
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return (f"--backend-store-uri {uri}: cannot create the folder {db.parent} ({e.strerror}: a file is "
                    "in the way, or it is not writable); pass a path in a writable folder")
        problem = sqlite_problem(db, "mlflow")  # before MLflow adds its tables to another program's database
        if problem:
            return f"--backend-store-uri {uri}: {problem}"
    elif "://" not in uri:
        return f"--backend-store-uri {uri!r} is not a URI; e.g. sqlite:////abs/mlflow.db or postgresql://..."
    else:
        problem = _reachable(uri)
        if problem:
            return problem
    if "://" not in args.artifacts_destination:
        dest = Path(_local_or_uri(args.artifacts_destination))
        try:
            dest.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return (f"--artifacts-destination {args.artifacts_destination}: cannot create it ({e.strerror}); pass a "
                    "writable folder")
    return None


def _reachable(uri: str) -> str | None:
    """A server's store (postgresql://, mysql://, ...) opened once, failing fast: a bad scheme, host or
    password is one line here, not a traceback from the server after its URL was printed."""
    from adbs_lab.stores.sqlite_kind import database_problem

    shown = redact(uri)
    if uri.split("://", 1)[0].split("+", 1)[0] in ("postgresql", "postgres", "mysql", "mssql"):
        problem = database_problem(uri)  # the missing driver, a refused connection, bad credentials: named
        if problem:
            return f"--backend-store-uri {shown}: {problem}"
    env = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="10")
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(reveal(uri)).search_experiments(max_results=1)
    except Exception as e:  # noqa: BLE001 - any failure means the server could not use it either
        first = (redact(str(e)).strip().splitlines() or [type(e).__name__])[0][:300]  # redacted, then cut
        return (f"--backend-store-uri {shown}: cannot open it ({first}); e.g. sqlite:////abs/mlflow.db or "
                "postgresql://...")
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return None


# MLflow 3.17's UI opens an experiment in the view of a per-browser setting (the sidebar's GenAI / Model training
# switch, GenAI in a fresh browser), not by the experiment's mlflow.experimentKind tag; a link that carries this
# query opens the runs whatever the browser's setting (docs/mlflow-and-reports.md, "Compare trials").
RUNS_QUERY = "?workflowType=machine_learning"
LISTED = 20
"""At most this many studies' links are printed at start (the newest)."""


def runs_page(link: str, experiment_id: str, view: bool = False) -> str:
    """The experiment's runs page; with `view`, in the study's view (tracking_store.runs_view), on its chart view:
    the session curves of the study's trials."""
    from adbs_lab.stores.tracking_store import VIEW_KEY

    shown = f"&viewStateShareKey={VIEW_KEY}&compareRunsMode=CHART" if view else ""
    return f"{link}/#/experiments/{experiment_id}/runs{RUNS_QUERY}{shown}"


_ACTIVE = ("SELECT experiment_id, name FROM experiments WHERE lifecycle_stage = 'active' AND name != 'Default' "
           "ORDER BY experiment_id DESC")


def _read(uri: str, query: str, args: dict[str, str] | None = None) -> list[tuple]:
    """The rows of a read-only query on the store, read without writing (MLflow's own store class would create its
    tables first); [] when the store is new or cannot be read (the server says why)."""
    try:
        if uri.startswith("sqlite:///"):
            import sqlite3

            db = Path(uri[len("sqlite:///"):])
            if not db.is_file() or db.stat().st_size == 0:
                return []
            con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
            try:
                return list(con.execute(query, args or {}))
            finally:
                con.close()
        import sqlalchemy

        from adbs_lab.stores.sqlite_kind import _engine

        engine = _engine(uri)
        try:
            with engine.connect() as con:
                return [tuple(r) for r in con.execute(sqlalchemy.text(query), args or {})]
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 - no table yet, another schema: the links are a convenience
        return []


def experiments(uri: str) -> list[tuple[str, str]]:
    """(experiment id, name) of the store's active experiments, newest first; [] when the store is new or cannot be
    read."""
    return [(str(i), n) for i, n in _read(uri, _ACTIVE)]


def with_view(uri: str) -> set[str]:
    """The ids of the experiments that carry the study's runs-table view (tracking_store.VIEW_TAG)."""
    from adbs_lab.stores.tracking_store import VIEW_TAG

    return {str(i) for (i,) in _read(uri, "SELECT experiment_id FROM experiment_tags WHERE key = :key",
                                     {"key": VIEW_TAG})}


def print_studies(uri: str, link: str) -> None:
    found = experiments(uri)
    if not found:
        return
    print("studies, each on its runs page (in the UI: click Model training at the top of the sidebar once, then "
          "Experiments and a study):", flush=True)
    width = max(len(name) for _, name in found[:LISTED])
    viewed = with_view(uri)
    for exp_id, name in found[:LISTED]:
        print(f"  {name:<{width}}  {runs_page(link, exp_id, exp_id in viewed)}", flush=True)
    if len(found) > LISTED:
        print(f"  ... and {len(found) - LISTED} older: {link}/#/experiments", flush=True)


@entry
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.artifacts_destination = artifacts(args)
    # the dry run checks what it can without writing (the artifacts URL, the numbers, the port); a run also the
    # stores
    problem = (_artifacts_problem(args) or _passed_on_problem(args) or _check_numbers(args) or _check_port(args)
               or (None if args.dry_run else _check(args)))
    cmd = [] if problem else command(args)
    if problem is None and args.dry_run:
        shown = [f"{k}={redact_url(v)}" for k, v in server_env(args).items()]  # each value one URL: its secrets ***
        print(shlex.join([*shown, *cmd]))  # quoted: a path with spaces pastes back as one argument
        return OK
    if problem:
        raise Exit(REFUSED, f"error: {problem}")
    env = {**os.environ, **server_env(args)}
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no usage telemetry unless the user turns it on
    # MLflow 3 also starts job consumers (GenAI judges/scorers; 7 processes) that this project never
    # uses; off unless the user turns them on.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    link = url(args.host, args.port)
    print(f"MLflow UI: {link}  (store {args.backend_store_uri}, artifacts {redact(args.artifacts_destination)})",
          flush=True)
    print(f"log a study through it: --tracking-uri {link}; report: python studies/report.py STUDY "
          f"--tracking-uri {link}; stop: Ctrl-C", flush=True)
    print_studies(args.backend_store_uri, link)
    if args.host not in LOOPBACK:
        print(f"warning: bound to {args.host}: anyone who can reach this port can read and write runs "
              "(MLflow has no login by default)", file=sys.stderr, flush=True)
    # The server (mlflow CLI, uvicorn workers, huey job consumers) gets its own process group, so
    # a signal to us stops all of it exactly once, and nothing outlives us.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    stopping: list[float] = []

    def stop(signum, frame):  # noqa: ARG001
        if not stopping:
            stopping.append(time.monotonic())
            _signal_group(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while proc.poll() is None:
            if stopping and time.monotonic() - stopping[0] > GRACE_S:
                _signal_group(proc.pid, signal.SIGKILL)
            time.sleep(0.2)
        return OK if stopping else proc.returncode  # stopped by us: done; else the server's own code
    finally:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            time.sleep(1)
        _signal_group(proc.pid, signal.SIGKILL)  # stragglers of the group (job consumers)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
