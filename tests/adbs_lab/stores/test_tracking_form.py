"""A tracking URI judged by its form alone (adbs_lab/stores/tracking_store.py: form_problem, checked with a study's
flags before MLflow loads) is refused exactly when MLflow itself has no store for it (MLflow's own registry,
mlflow.tracking.registry: get_store_builder), a relative SQLite path besides (trials run in their own folders): a
form check that refused what MLflow reads would stop a study that works, one that let through what MLflow cannot
read would only be slower. READ and REFUSED were each checked once against MLflow's own store registry (3.x: every
READ shape got a store builder, every REFUSED one an UnsupportedModelRegistryStoreURIException); the test compares
with its public get_uri_scheme. The message never quotes a password."""

from __future__ import annotations

import pytest

from adbs_lab.stores import tracking_store

READ = [  # shapes MLflow has a store for
    "", "/abs/mlruns", "mlruns", "./mlruns", "file:///abs/mlruns", "file:mlruns", "C:\\mlruns", "c:/mlruns",
    "http://h:5000", "HTTPS://u:p@h/x", "databricks", "databricks://profile", "databricks-uc", "uc",
    "uc:http://localhost:8080", "sqlite:////abs/mlflow.db", "sqlite://", "postgresql://u:p%20w@h/db",
    "postgresql+psycopg2://u@h/db", "mysql+pymysql://u@h/db", "mssql+pyodbc://u@h/db", "SQLITE:////abs/m.db",
]
REFUSED = [  # shapes MLflow has no store for
    "htp:/x", "bogus://h/x", "s3://bucket/mlruns", "ftp://h/x", "postgres://u@h/db", "oracle://u@h/db",
    "mysqlx://u@h/db", "postgresql+a+b://u@h/db", "sqlitefoo:////abs/m.db", "mlruns:old",
]


@pytest.mark.parametrize("uri", READ)
def test_what_mlflow_reads_passes(uri):
    assert tracking_store.form_problem(uri) is None, uri


@pytest.mark.parametrize("uri", REFUSED)
def test_what_mlflow_has_no_store_for_is_refused(uri):
    assert tracking_store.form_problem(uri), uri


@pytest.mark.parametrize("uri", READ + REFUSED)
def test_the_scheme_is_the_one_mlflow_reads(uri):
    """MLflow's public get_uri_scheme (mlflow.utils.uri), which picks the store: a database engine it does not know
    raises there, and a scheme it returns is read exactly when it is one of the stores' (SCHEMES, the engines)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.uri import get_uri_scheme

    try:
        scheme = get_uri_scheme(uri)
    except MlflowException:
        scheme = None
    reads = uri in ("databricks", "databricks-uc", "uc") or (
        scheme is not None and (scheme in tracking_store.SCHEMES or scheme in tracking_store.MLFLOW_DATABASES))
    assert (tracking_store.form_problem(uri) is None) == reads, (uri, scheme)


def test_the_database_engines_are_mlflows():
    from mlflow.store.db.db_types import DATABASE_ENGINES

    assert sorted(tracking_store.MLFLOW_DATABASES) == sorted(DATABASE_ENGINES)


@pytest.mark.parametrize("uri", ["sqlite:///rel.db", "sqlite:///./runs/m.db", "sqlite:///"])
def test_a_relative_sqlite_path_is_refused(uri):
    assert "is relative" in (tracking_store.form_problem(uri) or "")


@pytest.mark.parametrize("uri", ["htp://u:s3cr%20t@h/x", "bogus://tok@h/x#token=s3cr%20t", "http://u:s3cr%20t@[::1",
                                 "mysqlx://u:s3cr%20t@h/db"])
def test_a_refusal_never_quotes_the_password(uri):
    problem = tracking_store.form_problem(uri)
    assert problem and "s3cr" not in problem, problem


@pytest.mark.parametrize("url, refused", [
    ("sqlite:////abs/optuna.db", False), ("postgresql+psycopg://u@h/db", False), ("mysql+pymysql://u@h/db", False),
    ("postgresql://u:pw@h/db", False), ("sqlite:///rel.db", True), ("sqlite:///./o.db", True), ("bogus://x", True),
    ("postgres://u:s3cr%20t@h/db", True), ("notaurl", True),
])
def test_the_optuna_storage_by_its_form(url, refused):
    """--optuna-storage as a study's flags check it (adbs_lab/driver/flags.py: optuna_form_problem): a URL SQLAlchemy
    has a dialect for, a SQLite file by its absolute path; the refusal never quotes a password."""
    from adbs_lab.driver.flags import optuna_form_problem

    problem = optuna_form_problem(url)
    assert (problem is not None) == refused, (url, problem)
    assert "s3cr" not in (problem or "")
