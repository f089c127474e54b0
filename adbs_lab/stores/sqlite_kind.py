"""What a SQLite file holds, checked before MLflow or Optuna opens it (both create their tables in any SQLite
file they are pointed at, so an Optuna database given as the MLflow store, or the reverse, would get the other
tool's tables added). Standard library only (and adbs/redaction.py, which is): the MLflow server script imports it
before anything else."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from adbs.redaction import redact, redact_url, reveal, user_of
from adbs_lab.stores import paths

__all__ = ["MLFLOW_TABLES", "OPTUNA_TABLES", "WHAT", "sqlite_path", "sqlite_problem", "StoreError",
           "optuna_studies", "database_problem", "database_error"]

MLFLOW_TABLES = {"experiments", "runs", "metrics", "params"}
OPTUNA_TABLES = {"studies", "trials", "version_info"}
WHAT = {"mlflow": "an MLflow tracking store", "optuna": "an Optuna storage"}


def sqlite_path(uri: str) -> Path | None:
    """The file of a sqlite:/// URI (None for other URIs)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def sqlite_problem(path: str | Path, want: str) -> str | None:
    """Why SQLite file `path` cannot be used as `want` ('mlflow' or 'optuna'), or None (also when it is absent
    or empty: the tool creates it)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            return f"{path} is not a SQLite database; pass the path of {WHAT[want]} (or of a new file)"
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.Error as e:
        return f"{path} is not a SQLite database ({e}); pass the path of {WHAT[want]} (or of a new file)"
    if not tables or (MLFLOW_TABLES if want == "mlflow" else OPTUNA_TABLES) <= tables:
        return None
    if OPTUNA_TABLES <= tables:
        held = "an Optuna database"
    elif MLFLOW_TABLES <= tables:
        held = "an MLflow tracking store"
    else:
        held = f"a database of another program (tables {', '.join(sorted(tables)[:6])})"
    return f"{path} is {held}, not {WHAT[want]}; pass the path of {WHAT[want]} (or of a new file)"


class StoreError(RuntimeError):
    """A store cannot be read; the message says why."""


def optuna_studies(url: str) -> set[str]:
    """The names of the studies an Optuna storage holds, read without writing: Optuna's own storage class creates
    its tables (and a SQLite file) when opened, which a preflight must not do. A SQLite file that does not exist,
    or a database without Optuna's tables, holds none. StoreError when the database cannot be reached."""
    path = sqlite_path(url)
    if path is not None:
        if not path.is_file() or path.stat().st_size == 0:
            return set()
        try:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "studies" not in tables:
                    return set()
                return {r[0] for r in con.execute("SELECT study_name FROM studies")}
            finally:
                con.close()
        except sqlite3.Error as e:
            raise StoreError(f"{path} cannot be read ({redact(str(e))})") from None
    import sqlalchemy

    try:
        engine = _engine(url)
        try:
            with engine.connect() as con:
                if "studies" not in sqlalchemy.inspect(con).get_table_names():
                    return set()
                return {r[0] for r in con.execute(sqlalchemy.text("SELECT study_name FROM studies"))}
        finally:
            engine.dispose()
    except Exception as e:  # noqa: BLE001 - a missing driver, a refused connection, bad credentials
        raise StoreError(redact(database_error(url, e))) from None


DRIVERS = {"postgresql": ("psycopg", "pip install -e '.[postgres]' (psycopg)"),
           "mysql": ("mysqlclient", "pip install mysqlclient")}
CONNECT_TIMEOUT_S = 10


def _engine(url: str):
    """A SQLAlchemy engine that gives up on an unreachable host after CONNECT_TIMEOUT_S, not the OS's minutes."""
    import sqlalchemy

    alias = paths.alias_problem(url)
    if alias:
        raise ValueError(alias)
    family = url.split("://", 1)[0].split("+", 1)[0]
    args = {"connect_timeout": CONNECT_TIMEOUT_S} if family in ("postgresql", "mysql") else {}
    return sqlalchemy.create_engine(reveal(url), connect_args=args)  # a SecretUrl: the URL it hides


def database_problem(url: str) -> str | None:
    """Why the database server of `url` (postgresql://, mysql://, ...) cannot be used, or None: connects once and
    creates nothing (MLflow and Optuna would create their tables on first use). The message names the cause a user
    can fix: the missing Python driver, a server that does not answer, refused credentials, a missing database."""
    try:
        engine = _engine(url)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()
    except Exception as e:  # noqa: BLE001 - each cause is named by database_error
        return database_error(url, e)
    return None


def database_error(url: str, e: BaseException) -> str:
    """One line for a failed connection to `url`, without its password."""
    from urllib.parse import urlsplit

    family = url.split("://", 1)[0].split("+", 1)[0]
    text = " ".join(str(e).split()) or type(e).__name__
    try:  # the redacted URL: a password with '/' or '@' splits no host, port or database wrongly there
        parts = urlsplit(redact_url(reveal(url)))
        where = f"{parts.hostname or 'localhost'}:{parts.port or ''}".rstrip(":")
        user, db = user_of(url), parts.path.lstrip("/")
    except ValueError:
        where, user, db = "the server", None, ""
    low = text.lower()
    if isinstance(e, ModuleNotFoundError) or "no module named" in low:
        module = getattr(e, "name", None) or text.rsplit(" ", 1)[-1].strip("'\"")
        default, install = DRIVERS.get(family, (module, f"pip install {module}"))
        if module != default:  # a driver named in the URL (postgresql+psycopg2://)
            install = f"pip install {module}, or write {family}:// ({default}: {install})"
        return f"the Python driver for {family}:// ({module}) is not installed in {_python()}: {install}"
    if "postgres://" in low and family == "postgres":
        return text
    if "password authentication failed" in low or "access denied" in low or "no password supplied" in low:
        return (f"{where} refused the credentials of user {user!r} (password authentication failed): check the user "
                "and password in the URL")
    if "does not exist" in low and "database" in low or "unknown database" in low:
        return (f"database {db!r} does not exist on {where}: create it (e.g. createdb {db}) or name an existing one "
                "in the URL")
    for cause in ("connection refused", "timeout expired", "could not translate host name", "name or service not known",
                  "can't connect"):
        if cause in low:
            return f"no database server answers at {where} ({cause}): start it, or check the host and port in the URL"
    return f"the database cannot be reached ({redact(text)[:300]})"


def _python() -> str:
    import sys

    return sys.executable
