"""A real PostgreSQL server (conftest.postgres, testing/postgres.py) as a lab shares it: the backend of an `mlflow server`
a study logs to, and the study's --optuna-storage; and the checks before a run, which name what is wrong with a
database URL (a missing driver, no server, refused credentials, a missing database) and create nothing.

Skips with the reason where PostgreSQL (apt-get install postgresql) or psycopg (the [postgres] extra) is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from testing.procs import free_port, stop, wait_listening
from tests.helpers.scripts import in_process

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
PY = sys.executable
SWEEP = str(REPO / "studies" / "alpha_sweep.py")
pytestmark = pytest.mark.slow  # starts a database server


def _tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as con:
        return [r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]


def _bad_urls(pg) -> list[tuple[str, str]]:
    return [(pg.url(password="wrong"), "refused the credentials of user 'adbs' (password authentication failed)"),
            (pg.url(port=1), "no database server answers at 127.0.0.1:1 (connection refused)"),
            (pg.url("nodb"), "database 'nodb' does not exist on 127.0.0.1"),
            (pg.url().replace("postgresql://", "postgres://"), "write postgresql://")]


def test_a_study_dry_run_names_what_is_wrong_with_a_database_url(postgres, tmp_path, capsys):
    """--optuna-storage and --tracking-uri postgresql://...: each cause in one line, exit 2, password not shown;
    a good URL passes the dry run and the database gets no tables."""
    good_optuna, good_mlflow = postgres.new_database("optuna"), postgres.new_database("mlflow")
    base = [PY, SWEEP, "--smoke", "--dry-run", "--storage", str(tmp_path / "runs"), "--gpus-per-trial", "0"]
    for bad, said in _bad_urls(postgres):
        r = in_process(capsys, [*base, "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--optuna-storage", bad])
        assert r.returncode == 2 and said in r.stderr and "--optuna-storage" in r.stderr, (bad, r.stderr)
        assert "adbs-test-pw" not in r.stderr and "wrong" not in r.stderr.replace("what is wrong", "")
        r = in_process(capsys, [*base, "--tracking-uri", bad, "--optuna-storage", good_optuna])
        assert r.returncode == 2 and said in r.stderr and "tracking URI" in r.stderr, (bad, r.stderr)
    r = in_process(capsys, [*base, "--tracking-uri", good_mlflow, "--optuna-storage", good_optuna])
    assert r.returncode == 0, r.stderr
    assert _tables(good_optuna) == [] and _tables(good_mlflow) == []


def test_a_missing_driver_is_named_with_its_install_command(postgres, tmp_path):
    """Without psycopg (blocked in this Python), a study's dry run says which driver to install and how."""
    argv = [SWEEP, "--smoke", "--dry-run", "--storage", str(tmp_path), "--gpus-per-trial", "0",
            "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--optuna-storage", postgres.url()]
    code = (f"import sys, runpy; sys.modules['psycopg'] = None; sys.argv = {argv!r}; "
            f"runpy.run_path({SWEEP!r}, run_name='__main__')")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "the Python driver for postgresql:// (psycopg) is not installed" in r.stderr
    assert "pip install -e '.[postgres]'" in r.stderr


def test_serve_refuses_a_database_it_cannot_open(postgres, tmp_path, capsys):
    from adbs_lab.stores import serve

    for bad, said in _bad_urls(postgres):
        assert serve.main(["--backend-store-uri", bad, "--artifacts-destination", str(tmp_path / "a")]) == 2
        err = capsys.readouterr().err
        assert said in err and "adbs-test-pw" not in err, err


def test_a_study_logs_through_an_mlflow_server_on_postgres_and_keeps_its_optuna_study_there(
        postgres, ray_address, tmp_path):
    """The cluster user's setup on one machine: `python mlflow/serve.py --backend-store-uri postgresql://...`, a study
    with --tracking-uri http://... and --optuna-storage postgresql://...; then the runs are on the server and the
    Optuna trials in the database, one each per Tune trial."""
    import optuna
    from mlflow.tracking import MlflowClient

    mlflow_db, optuna_db = postgres.new_database("mlflow"), postgres.new_database("optuna")
    port = free_port()
    server = subprocess.Popen([PY, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", mlflow_db,
                               "--artifacts-destination", str(tmp_path / "artifacts"), "--port", str(port),
                               "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_listening(port, server)
        uri = f"http://127.0.0.1:{port}"
        r = subprocess.run([PY, SWEEP, "--smoke", "--seeds", "0", "--storage", str(tmp_path / "runs"), "--tracking-uri",
                            uri, "--optuna-storage", optuna_db, "--address", ray_address, "--gpus-per-trial", "0"],
                           capture_output=True, text=True, timeout=600, cwd=REPO)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("alpha_sweep-smoke")
        runs = client.search_runs([exp.experiment_id], "tags.`adbs.role` = 'trial'")
        assert len(runs) == 2 and {x.info.status for x in runs} == {"FINISHED"}
        assert all(len(x.data.params) > 20 and any(k.startswith("base/") for k in x.data.metrics) for x in runs)
        trials = optuna.load_study(study_name="alpha_sweep-smoke", storage=optuna_db).trials
        assert sorted(t.state.name for t in trials) == ["COMPLETE", "COMPLETE"]
        assert sorted(x.data.tags["adbs.optuna_trial"] for x in runs) == sorted(str(t.number) for t in trials)
        assert "experiments" in _tables(mlflow_db)
    finally:
        stop(server)


RACE = """
import sys, time
sys.path.insert(0, {repo!r})
from adbs_lab.search.optuna_storage import optuna_storage
import optuna
while time.time() < {at}:
    time.sleep(0.001)
optuna_storage({url!r})
print("opened")
"""


def test_studies_opening_one_new_optuna_database_at_once_all_get_it(postgres):
    """Several studies started together on an empty PostgreSQL Optuna storage: each creates Optuna's tables; the
    ones that lose the race load them instead of failing (adbs_lab/search/optuna_storage.py: _first_open)."""
    import time

    url = postgres.new_database("optuna_race")
    at = time.time() + 25  # every process has imported Optuna by then, and they all open at once
    procs = [subprocess.Popen([PY, "-c", RACE.format(repo=str(REPO), at=at, url=url)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, "\n".join(err[-1500:] for _, err in outs)
    assert all(out.strip() == "opened" for out, _ in outs)
