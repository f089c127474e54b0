"""What a SQLite file holds, checked before MLflow or Optuna opens it (both create their tables in any SQLite
file they are pointed at, so an Optuna database given as the MLflow store, or the reverse, would get the other
tool's tables added). Standard library only: the MLflow server script imports it before anything else."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["MLFLOW_TABLES", "OPTUNA_TABLES", "WHAT", "sqlite_path", "sqlite_problem", "StoreError",
           "optuna_studies"]

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
            raise StoreError(f"{path} cannot be read ({e})") from None
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url)
        try:
            with engine.connect() as con:
                if "studies" not in sqlalchemy.inspect(con).get_table_names():
                    return set()
                return {r[0] for r in con.execute(sqlalchemy.text("SELECT study_name FROM studies"))}
        finally:
            engine.dispose()
    except Exception as e:  # noqa: BLE001 - a missing driver, a refused connection, bad credentials
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise StoreError(f"the database cannot be reached ({first})") from None
