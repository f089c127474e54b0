"""A tracking URI judged by its form alone (adbs_lab/stores/tracking_store.py: form_problem, checked with a study's
flags before MLflow loads) is refused exactly when MLflow itself has no store for it (MLflow's own registry,
mlflow.tracking.registry: get_store_builder), a relative SQLite path besides (trials run in their own folders): a
form check that refused what MLflow reads would stop a study that works, one that let through what MLflow cannot
read would only be slower. The message never quotes a password."""

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


def _mlflow_reads(uri: str) -> bool:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    try:
        _tracking_store_registry.get_store_builder(uri)
    except MlflowException:
        return False
    return True


@pytest.mark.parametrize("uri", READ + REFUSED)
def test_the_form_check_refuses_what_mlflow_has_no_store_for(uri):
    assert (tracking_store.form_problem(uri) is None) == _mlflow_reads(uri), (uri, tracking_store.form_problem(uri))


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
