"""A live view of a study's Optuna storage: optuna-dashboard, read-only (its studies, trials, states and plots,
refreshed while a study runs; nothing it serves can change the storage).

    python -m adbs_lab.stores.dashboard runs/alpha_sweep              # a study folder (its optuna.db)
    python -m adbs_lab.stores.dashboard alpha_sweep                   # the same: a study folder under <repo>/runs
    python -m adbs_lab.stores.dashboard /path/to/copy/optuna.db --port 8081
    python -m adbs_lab.stores.dashboard postgresql://user:pw@db/optuna  # a study's --optuna-storage on a server

Read-only twice over: a SQLite file is opened with SQLite's read-only mode (`?mode=ro`), a PostgreSQL database
in read-only transactions (`default_transaction_read_only`), and the dashboard's own writes (notes, feedback,
renaming or deleting a study, telling a trial) are refused before they reach the storage (HTTP 405).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sqlite3
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from adbs import exits
from adbs_lab.stores import db_server, paths
from adbs.redaction import SecretUrl, reveal
from adbs_lab.stores.sqlite_kind import OPTUNA_TABLES, StoreError, optuna_studies, sqlite_path, sqlite_problem

__all__ = ["DashboardError", "parser", "storage_url", "readonly_storage", "readonly_app", "main"]

READ_METHODS = ("GET", "HEAD", "OPTIONS")
SERVERS = ("postgresql",)  # database servers opened read-only (a session setting of theirs)
REFUSED = ("this dashboard serves the Optuna storage read-only (python -m adbs_lab.stores.dashboard): notes, feedback and "
           "changes to studies or trials are not saved; use optuna-dashboard on a copy to annotate it")


class DashboardError(ValueError):
    """The storage cannot be served; the message says what to pass instead."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m adbs_lab.stores.dashboard", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("where", type=SecretUrl,  # printed redacted, opened with its password (adbs/redaction.py)
                   help="a study folder (holding optuna.db), a study name (its folder under <repo>/runs), "
                        "an Optuna SQLite file, or a storage URL (sqlite:////abs/optuna.db, postgresql://...)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1: this machine only; 0.0.0.0 shows the study, which "
                        "has no login, to the network)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080, optuna-dashboard's)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the storage and --port, print what would be served and exit")
    return p


def storage_url(where: str, root: Path = paths.DEFAULT_STORAGE) -> str:
    """The storage URL `where` names (see --help), checked to hold Optuna's tables; DashboardError otherwise."""
    if "://" in where:
        file = sqlite_path(where)
        if file is None:
            family = where.split("://", 1)[0].split("+", 1)[0]
            if family not in SERVERS:
                raise DashboardError(f"{where.split('://', 1)[0]}:// storages are not served here; pass a study "
                                     "folder, an optuna.db file, sqlite:////abs/optuna.db or postgresql://... (a "
                                     "study folder in an object store: copy its optuna.db out and pass the copy)")
            return where
        if not file.is_absolute():
            raise DashboardError(f"{where}: use an absolute path (sqlite:////abs/path/optuna.db)")
    else:
        given = Path(where).expanduser()
        if not given.exists() and "/" not in where and (root / where).is_dir():
            given = root / where  # a study's name: its folder in the default storage
        file = given / "optuna.db" if given.is_dir() else given
    if file.exists() and not file.is_file():  # /dev/null, a socket, a pipe: exists, but holds no database
        raise DashboardError(f"{file} is not a regular file (an Optuna storage is one: a study's optuna.db); pass a "
                             "study folder, its optuna.db, or a storage URL (sqlite:////abs/optuna.db, postgresql://...)")
    if not file.is_file():
        if file.name == "optuna.db" and file.parent.is_dir():
            raise DashboardError(f"{file.parent} holds no optuna.db (a study writes it when it starts; a study run "
                                 "with --optuna-storage URL keeps its trials there: pass that URL)")
        nor = "" if "/" in where else f" (nor a study folder {root / where})"
        raise DashboardError(f"{file if '://' in where else where} does not exist{nor}; pass a study folder, its "
                             "optuna.db, or a storage URL (sqlite:////abs/optuna.db, postgresql://...)")
    problem = sqlite_problem(file, "optuna")
    if problem:
        raise DashboardError(problem.replace(" (or of a new file)", ""))
    if not _has_optuna_tables(file):
        raise DashboardError(f"{file} holds no Optuna study yet (an empty database); pass a study's optuna.db")
    return f"sqlite:///{file.resolve()}"


def _has_optuna_tables(file: Path) -> bool:
    con = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return OPTUNA_TABLES <= {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def readonly_storage(url: str):
    """Optuna's storage of `url`, unable to write: SQLite's read-only mode, or PostgreSQL's read-only transactions.
    Optuna creates its tables and version row only where they are missing, and `storage_url` checked they are not."""
    import optuna

    path = sqlite_path(url)
    if path is not None:
        # a URI filename, percent-encoded by as_uri (spaces, '?', '#' in a path stay part of it); the timeout waits
        # out the study's own writes (the writer holds the file's lock for each commit)
        uri = f"{path.resolve().as_uri()}?mode=ro"
        kwargs: dict[str, object] = {"creator": lambda: sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False)}
    else:
        # a dashboard left open for hours: its pooled connections tested before use (db_server.engine_kwargs)
        kwargs = {**db_server.engine_kwargs(reveal(url)),
                  "connect_args": {"options": "-c default_transaction_read_only=on", "connect_timeout": 10}}
    return optuna.storages.RDBStorage(reveal(url), engine_kwargs=kwargs, skip_table_creation=True)


def readonly_app(app):
    """`app` (optuna-dashboard's WSGI app) with every request that would write refused with HTTP 405 and a reason
    the dashboard shows; the reads pass through."""

    def guarded(environ, start_response):
        if environ.get("REQUEST_METHOD", "GET").upper() in READ_METHODS:
            return app(environ, start_response)
        body = json.dumps({"reason": REFUSED}).encode()
        start_response("405 Method Not Allowed", [("Content-Type", "application/json"),
                                                  ("Content-Length", str(len(body))), ("Allow", "GET, HEAD")])
        return [body]

    return guarded


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # as optuna-dashboard's own wsgiref server, threaded: the page polls while plots load
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass  # one line per request: the page polls every few seconds, which would flood the terminal


def _check(args: argparse.Namespace) -> str:
    """The storage URL to serve; DashboardError for what is wrong (port first: it costs nothing)."""
    from importlib.util import find_spec

    from adbs_lab.stores.serve import port_problem

    if find_spec("optuna_dashboard") is None:
        raise DashboardError(f"optuna-dashboard is not installed in {sys.executable}: pip install -e . in the "
                             "project (it comes with it), or pip install optuna-dashboard")
    problem = port_problem(args.host, args.port)
    if problem:
        raise DashboardError(problem)
    url = storage_url(args.where)
    if sqlite_path(url) is None:
        from adbs_lab.stores.sqlite_kind import database_problem

        problem = database_problem(url)
        if problem:
            raise DashboardError(problem)
    return url


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@exits.entry
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        url = _check(args)
        studies = sorted(optuna_studies(url))
    except (DashboardError, StoreError) as e:
        raise exits.Exit(exits.REFUSED, f"error: {e}") from None
    from adbs_lab.stores.serve import LOOPBACK
    from adbs_lab.stores.serve import url as link_of
    from adbs.redaction import redact

    link, shown = link_of(args.host, args.port), redact(url)
    if args.host not in LOOPBACK:  # a dry run says it too: it is where the choice of --host is checked
        print(f"warning: bound to {args.host}: anyone who can reach this port can read the studies (no login)",
              file=sys.stderr, flush=True)
    if args.dry_run:
        print(f"would serve {shown} read-only at {link} (studies: {', '.join(studies) or 'none yet'})")
        return exits.OK
    import optuna_dashboard

    app = readonly_app(optuna_dashboard.wsgi(readonly_storage(url)))
    server: type[_Server] = type("_Server6", (_Server,), {"address_family": socket.AF_INET6}) \
        if ":" in args.host else _Server
    try:
        httpd = make_server(args.host, args.port, app, server_class=server, handler_class=_Quiet)
    except OSError as e:  # taken between the check and now
        raise exits.Exit(exits.REFUSED, f"error: cannot listen on {args.host}:{args.port} ({e.strerror or e}); pick another "
                            "--port") from None
    print(f"Optuna dashboard (read-only): {link}  (storage {shown}; studies: {', '.join(studies) or 'none yet'})",
          flush=True)
    print("it follows the storage while studies write to it (reload the page for new studies); stop: Ctrl-C",
          flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop ends it as Ctrl-C does
    try:
        httpd.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return exits.OK


if __name__ == "__main__":
    raise SystemExit(main())
