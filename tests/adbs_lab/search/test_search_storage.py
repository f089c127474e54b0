"""adbs_lab/search/optuna_storage.py: optuna_storage: several studies opening one new SQLite Optuna storage at once (a
lab's shared `--optuna-storage sqlite:///...`, bench/load.py) all get it: SQLAlchemy checks for Optuna's tables and
then creates them, so two processes can both find none, and the second CREATE TABLE fails with "table studies already
exists" (found by bench/load.py with 4 studies started together on an idle machine)."""

from __future__ import annotations


def test_a_lost_create_table_race_opens_the_winners_tables(tmp_path, monkeypatch):
    """The first open fails the way the loser of the race does; the next one loads the winner's tables. (The race
    itself shows only now and then: bench/load.py's four studies on one new file hit it.)"""
    import optuna
    from sqlalchemy.exc import OperationalError

    from adbs_lab.search import optuna_storage as search

    real = optuna.storages.RDBStorage
    calls = []

    class Flaky(real):
        def __init__(self, url, **kw):
            calls.append(url)
            if len(calls) == 1:
                raise OperationalError("CREATE TABLE studies", {}, Exception("table studies already exists"))
            super().__init__(url, **kw)

    monkeypatch.setattr(optuna.storages, "RDBStorage", Flaky)
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    monkeypatch.setattr(search, "_STORAGES", {})
    storage = search.optuna_storage(url)
    assert len(calls) == 2 and storage.get_all_studies() == []
