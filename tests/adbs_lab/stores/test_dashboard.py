"""The live view's command (`python -m adbs_lab.stores.dashboard`): what it serves, that it cannot write, and its refusals.
In the browser: tests/e2e/test_dashboard_browser.py."""

from __future__ import annotations

import io
import json
import shutil
import socket
import sqlite3
from pathlib import Path

import optuna
import pytest
from testing.procs import free_port

from adbs_lab.stores import dashboard
from tests.helpers.values import SHAPES, generated

ALPHA = {"alpha": optuna.distributions.FloatDistribution(0.0, 1.0)}


@pytest.fixture(scope="module")
def optuna_db(tmp_path_factory) -> Path:
    """A study folder's optuna.db: study `s` with two complete trials."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = tmp_path_factory.mktemp("study") / "optuna.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}", direction="maximize")
    for value in (0.1, 0.2):
        study.tell(study.ask(ALPHA), value)
    return db


@pytest.fixture
def folder(tmp_path, optuna_db) -> Path:
    """A copy of the study folder under tmp_path/runs/my study (a space in its path)."""
    d = tmp_path / "runs" / "my study"
    d.mkdir(parents=True)
    shutil.copy(optuna_db, d / "optuna.db")
    return d


def test_a_folder_its_file_its_name_or_a_url_name_the_same_storage(folder, monkeypatch):
    url = f"sqlite:///{folder / 'optuna.db'}"
    assert dashboard.storage_url(str(folder)) == url
    assert dashboard.storage_url(str(folder / "optuna.db")) == url
    assert dashboard.storage_url(url) == url
    assert dashboard.storage_url("my study", root=folder.parent) == url  # a study name: its folder in the storage
    monkeypatch.chdir(folder.parent.parent)
    assert dashboard.storage_url("runs/my study") == url  # a relative folder, as the docs give it
    assert dashboard.storage_url("postgresql://u:p@db/optuna") == "postgresql://u:p@db/optuna"  # opened by main


@pytest.mark.parametrize("where,said", [
    ("{tmp}/nowhere", "does not exist; pass a study folder"),
    ("{tmp}/empty_folder", "holds no optuna.db (a study writes it when it starts"),
    ("{tmp}/mlflow.db", "is an MLflow tracking store, not an Optuna storage"),
    ("{tmp}/empty.db", "holds no Optuna study yet"),
    ("{tmp}/notes.txt", "is not a SQLite database"),
    ("sqlite:///relative/optuna.db", "use an absolute path"),
    ("s3://bucket/alpha_sweep", "copy its optuna.db out and pass the copy"),
    ("mysql://u@db/optuna", "mysql:// storages are not served here"),
])
def test_what_cannot_be_served_is_named(tmp_path, where, said, empty_mlflow_db):
    (tmp_path / "empty_folder").mkdir()
    shutil.copy(empty_mlflow_db, tmp_path / "mlflow.db")
    sqlite3.connect(tmp_path / "empty.db").close()
    (tmp_path / "notes.txt").write_text("not a database")
    with pytest.raises(dashboard.DashboardError, match=said.replace("(", r"\(")):
        dashboard.storage_url(where.format(tmp=tmp_path))


def test_the_storage_is_read_but_never_written(folder):
    db = folder / "optuna.db"
    before = db.read_bytes()
    storage = dashboard.readonly_storage(dashboard.storage_url(str(folder)))
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.value for t in study.trials] == [0.1, 0.2]
    for write in (lambda: storage.create_new_study([optuna.study.StudyDirection.MAXIMIZE], "another"), study.ask):
        with pytest.raises(Exception) as e:
            write()
        assert "readonly database" in _chain(e.value)  # SQLite: "attempt to write a readonly database"
    storage.engine.dispose()
    assert db.read_bytes() == before


def _chain(e: BaseException | None) -> str:
    """The messages of `e` and its causes (Optuna wraps the database's error in its own)."""
    out = []
    while e is not None:
        out.append(str(e))
        e = e.__cause__ or e.__context__
    return " / ".join(out)


def _call(app, method: str, path: str) -> tuple[str, bytes]:
    from wsgiref.util import setup_testing_defaults

    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(b"{}"), "CONTENT_LENGTH": "2"}
    setup_testing_defaults(env)
    status = []
    body = b"".join(app(env, lambda s, headers, exc_info=None: status.append(s)))
    return status[0], body


def test_the_dashboards_own_writes_are_refused_and_its_reads_pass(folder):
    import optuna_dashboard

    storage = dashboard.readonly_storage(dashboard.storage_url(str(folder)))
    app = dashboard.readonly_app(optuna_dashboard.wsgi(storage))
    status, body = _call(app, "GET", "/api/studies")
    assert status.startswith("200") and json.loads(body)["study_summaries"][0]["study_name"] == "s"
    for method, path in [("PUT", "/api/studies/1/note"), ("POST", "/api/studies"), ("DELETE", "/api/studies/1"),
                         ("POST", "/api/trials/1/tell")]:
        status, body = _call(app, method, path)
        assert status.startswith("405") and "read-only" in json.loads(body)["reason"], (method, path, body)
    storage.engine.dispose()


def test_a_busy_port_a_bad_port_and_a_bad_folder_exit_2_before_serving(folder, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert dashboard.main([str(folder), "--port", str(port)]) == 2
    assert "pick another --port" in capsys.readouterr().err
    assert dashboard.main([str(folder), "--port", "99999"]) == 2
    assert "--port 99999 is out of range; allowed: 1..65535" in capsys.readouterr().err
    assert dashboard.main([str(tmp_path / "nowhere"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "does not exist" in err and len(err.strip().splitlines()) == 1


def test_dry_run_says_what_it_would_serve_and_writes_nothing(folder, capsys):
    port = free_port()  # a port free now
    before = sorted(p.name for p in folder.iterdir()), (folder / "optuna.db").read_bytes()
    assert dashboard.main([str(folder), "--port", str(port), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"read-only at http://127.0.0.1:{port} (studies: s)" in out and "my study/optuna.db" in out
    assert (sorted(p.name for p in folder.iterdir()), (folder / "optuna.db").read_bytes()) == before


@pytest.mark.slow  # a PostgreSQL server of this test session (conftest.postgres)
def test_a_postgresql_storage_is_read_in_read_only_transactions(postgres):
    url = postgres.new_database("optuna_live")
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    study.tell(study.ask(ALPHA), 0.5)
    assert dashboard.storage_url(url) == url
    storage = dashboard.readonly_storage(url)
    try:
        seen = optuna.load_study(study_name="s", storage=storage)
        assert [t.value for t in seen.trials] == [0.5]
        with pytest.raises(Exception) as e:
            seen.ask()
        assert "read-only transaction" in _chain(e.value)
    finally:
        storage.engine.dispose()
    assert len(optuna.load_study(study_name="s", storage=url).trials) == 1


@pytest.mark.parametrize("where", ["/dev/null", "sqlite:////dev/null"])
def test_a_device_for_a_storage_is_named_for_what_it_is(where, capsys):
    """/dev/null exists: once "does not exist", now what it is and what to pass."""
    assert dashboard.main([where, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "/dev/null is not a regular file" in err and "does not exist" not in err and "pass a study folder" in err


@pytest.mark.parametrize("host", ["no-such-host.invalid", "203.0.113.254"])  # no name; an address of no interface here
def test_a_bad_host_is_named_as_the_host_not_the_port(folder, host, capsys):
    assert dashboard.main([str(folder), "--host", host, "--port", str(free_port()), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"--host {host} is not an address of this machine" in err and "--port" not in err, err


def test_a_dry_run_on_every_interface_warns_as_the_run_does(folder, capsys):
    assert dashboard.main([str(folder), "--host", "0.0.0.0", "--port", str(free_port()), "--dry-run"]) == 0
    assert "warning: bound to 0.0.0.0: anyone who can reach this port can read the studies" in capsys.readouterr().err


def test_a_storage_urls_password_is_never_shown(tmp_path, capsys):
    """The URL is parsed as a SecretUrl: its refusal line shows the rest of it, not the password."""
    assert dashboard.main(["postgresql://u:s3cr/et@x@127.0.0.1:1/optuna", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "s3cr" not in err and "127.0.0.1:1" in err, err


SERVED_SHAPES = [s for s in SHAPES if s in (("none", "int"), ("none", "int", "int"), ("bool", "str"), ("none", "str", "float"))]


@pytest.mark.parametrize("shape", SERVED_SHAPES, ids=["-".join(s) for s in SERVED_SHAPES])
def test_every_searched_value_is_served_as_the_study_sampled_it(shape, tmp_path):
    """A study's Optuna storage with a generated categorical (None beside ints, a bool beside a text, ...), as the
    searcher asks it (adbs_lab/search/space.py: optuna_distributions): the dashboard serves each trial's value as it
    was sampled, by its choice and its Python type, and ranks the parameters."""
    import optuna_dashboard

    values = generated(shape, SHAPES.index(shape))
    space = {"p": optuna.distributions.CategoricalDistribution(tuple(values)),
             "alpha": optuna.distributions.FloatDistribution(0.01, 0.1)}
    db = tmp_path / "optuna.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}", direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    asked = []
    for i in range(12):
        trial = study.ask(space)
        asked.append(trial.params["p"])
        study.tell(trial, float(values.index(asked[-1]) + i / 100))
    storage = dashboard.readonly_storage(dashboard.storage_url(str(db)))
    app = dashboard.readonly_app(optuna_dashboard.wsgi(storage))
    status, body = _call(app, "GET", "/api/studies/1")
    assert status.startswith("200"), body[:500]
    served = [next(p for p in t["params"] if p["name"] == "p") for t in json.loads(body)["trials"]]
    assert [(p["param_external_value"], p["param_external_pytyp"]) for p in served] == \
        [(str(v), str(type(v))) for v in asked]
    assert [values[p["param_internal_value"]] for p in served] == asked
    status, body = _call(app, "GET", "/api/studies/1/param_importances")
    assert status.startswith("200") and {i["name"] for i in json.loads(body)["param_importances"][0]} == {"p", "alpha"}
    storage.engine.dispose()
