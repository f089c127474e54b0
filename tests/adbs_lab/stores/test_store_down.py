"""A database that stops answering mid-study ends the study once, with one line: the MLflow store's calls raise
TrackingError (adbs_lab/stores/tracking_store.py: patient), the Optuna storage's calls ask Ray Tune to stop and raise
StoreDown (adbs_lab/search/searcher.py), which adbs_lab/driver/launch.py reports as the study's failure with --resume. The
errors here are the ones MLflow's SQL store and Optuna's RDB storage raise for a refused connection (seen with a
PostgreSQL server stopped mid-study); the calls that raise them are our own stand-ins."""

from __future__ import annotations

import signal

import optuna
import pytest
import sqlalchemy.exc
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

from adbs_lab.search import optuna_storage as search
from adbs_lab.stores import tracking_store
from adbs_lab.stores.tracking_store import patient

REFUSED = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused'


def _operational() -> sqlalchemy.exc.OperationalError:
    return sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception(REFUSED))


def test_an_mlflow_store_that_stopped_answering_is_a_tracking_error_not_a_traceback():
    class Client:
        def get_run(self, run_id):
            raise MlflowException(str(_operational()), error_code=TEMPORARILY_UNAVAILABLE)

        def get_experiment(self, exp_id):
            raise MlflowException("RESOURCE_DOES_NOT_EXIST: no experiment 7")

    with pytest.raises(tracking_store.TrackingError, match="the MLflow store stopped answering .*Connection refused"):
        patient(Client()).get_run("x")
    with pytest.raises(MlflowException, match="RESOURCE_DOES_NOT_EXIST"):  # any other error is the caller's
        patient(Client()).get_experiment("7")


def test_an_optuna_storage_that_stopped_answering_stops_the_study_once(monkeypatch):
    """The first failed call records why and asks Tune for its graceful stop (SIGUSR1); every failed call raises
    StoreDown with the same line; a storage that answers raises what it raises. Once given up on, every call raises
    StoreDown without touching the storage: the calls of Tune's stop do not each wait for it again."""
    asked: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda signum, frame: asked.append(signum))
    monkeypatch.setattr(search, "STORE_DOWN", [])

    class Searcher:
        _storage_url = "postgresql://u:secret@db.example/optuna"

        @search.stops_when_down
        def on_trial_complete(self, trial_id):
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") \
                from _operational()

        @search.stops_when_down
        def suggest(self, trial_id):
            raise KeyError(trial_id)

    try:
        with pytest.raises(KeyError):
            Searcher().suggest("t2")
        for _ in range(2):
            with pytest.raises(search.StoreDown, match=r"the Optuna storage postgresql://\*\*\*@db.example/optuna stopped "
                                                       r"answering for \d+ s \(.*Connection refused"):
                Searcher().on_trial_complete("t1")
        with pytest.raises(search.StoreDown):
            Searcher().suggest("t2")
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert asked == [signal.SIGUSR1] and len(search.STORE_DOWN) == 1 and "secret" not in search.STORE_DOWN[0]


def test_a_database_store_that_comes_back_is_waited_for_and_one_that_does_not_is_given_up_once(monkeypatch, capsys):
    """An MLflow store on a database server (postgresql://, in this process): a call that finds it not answering is
    tried again (db_server.patiently, a line per wait) and carries on once it answers; after STORE_WAIT_S it is a
    TrackingError, and every later call raises it at once (the study is stopping). An HTTP tracking server is not
    waited for here: MLflow's client retries it itself."""
    from adbs_lab.stores import db_server

    monkeypatch.setattr(db_server, "STORE_WAIT_S", 1.5)
    calls: list[str] = []

    class Client:
        def __init__(self, uri: str, fails: int):
            self.tracking_uri, self.fails = uri, fails

        def log_batch(self, run_id):
            calls.append(run_id)
            if len(calls) <= self.fails:
                raise MlflowException(str(_operational()), error_code=TEMPORARILY_UNAVAILABLE)
            return "logged"

    assert patient(Client("postgresql://u:secret@db/mlflow", fails=2)).log_batch("r1") == "logged"
    err = capsys.readouterr().err
    assert err.count(db_server.DOWN_WARNING) == 2 and "secret" not in err and calls == ["r1"] * 3
    calls.clear()
    gone = patient(Client("postgresql://u:secret@db/mlflow", fails=10**6))
    with pytest.raises(tracking_store.TrackingError, match="stopped answering for 2 s"):
        gone.log_batch("r2")
    n = len(calls)
    with pytest.raises(tracking_store.TrackingError, match="stopped answering"):
        gone.log_batch("r3")
    assert len(calls) == n and n > 1  # waited, then gave up for good
    calls.clear()
    with pytest.raises(tracking_store.TrackingError):  # over HTTP: MLflow's client has retried already
        patient(Client("http://127.0.0.1:5000", fails=1)).log_batch("r4")
    assert calls == ["r4"]
