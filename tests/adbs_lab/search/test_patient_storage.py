"""The Optuna storage on a PostgreSQL server of this test's own (testing/postgres.py): a connection the server closed
while idle (idle_session_timeout) is replaced, not failed, and a call made while the server restarts waits for it
(adbs_lab/search/optuna_storage.py: PatientStorage, adbs_lab/stores/db_server.py). Optuna's storage as it comes loses the
idle connection (optuna/optuna#5600: it tests connections before use only on MySQL), which this test shows too."""

from __future__ import annotations

import threading
import time

import optuna
import pytest

from adbs_lab.search import optuna_storage as searcher
from adbs_lab.stores import db_server
from testing.postgres import PASSWORD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def pg():
    from testing.postgres import PgServer, missing

    why = missing()
    if why:
        pytest.skip(why)
    server = PgServer({"idle_session_timeout": "1s"}).start()
    yield server
    server.stop()


def test_a_connection_closed_while_idle_is_replaced_and_a_restart_is_waited_for(pg, monkeypatch, capsys):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = pg.new_database("o")
    plain = optuna.storages.RDBStorage(url)
    optuna.create_study(storage=plain, study_name="plain")
    time.sleep(2.5)  # the server closes the pooled connection after 1 s idle
    with pytest.raises(optuna.exceptions.StorageInternalError):
        plain.get_all_studies()

    ours = searcher.optuna_storage(url)
    searcher.create_study(url, "ours")
    time.sleep(2.5)
    assert {s.study_name for s in ours.get_all_studies()} == {"plain", "ours"}

    monkeypatch.setattr(db_server, "STORE_WAIT_S", 60.0)
    pg.halt()
    back = threading.Timer(3.0, pg.resume)
    back.start()
    t0 = time.time()
    try:
        study = optuna.load_study(study_name="ours", storage=ours)
        study.tell(study.ask(), 1.0)  # a trial created and finished while the server comes back
    finally:
        back.join()
    assert time.time() - t0 >= 2.5
    assert [t.state.name for t in study.trials] == ["COMPLETE"]  # once, not twice
    err = capsys.readouterr().err
    assert db_server.DOWN_WARNING in err and PASSWORD not in err  # the password redacted in the wait's line
