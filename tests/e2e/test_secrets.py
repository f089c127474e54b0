"""No secret in clear: a study run with a database password that holds whitespace and the URL's delimiters
(`s3cr et/#x?y@z`: raw in the tracking store's URL but for its '@', which SQLAlchemy would end the password at; a
secret query value, ?password=..., in the Optuna storage's) and the MLflow server started on such a store leave it
in none of the places a user, another user of the machine or a later reader sees: the study's output (its last
line, the UI command), report.md, study.json, every file and pickle of the study folder (Ray Tune's searcher and
callback state included), MLflow's tags and params, the dashboard's lines, and the command lines of the server's
processes (`ps`).

Skips with the reason where PostgreSQL (apt-get install postgresql) or psycopg (the [postgres] extra) is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from testing.procs import free_port, stop, wait_listening

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
PASSWORD = "s3cr et/#x?y@z"
MARK = "s3cr"  # in the password raw and %-encoded alike
pytestmark = pytest.mark.slow  # starts a database server and a study


def _user_with_password(postgres, user: str = "labuser") -> tuple[str, str]:
    """A database role with PASSWORD and two databases of its own; their URLs: the password in the first's user
    information (raw, '@' %-encoded), in the second's query (?password=, %-encoded)."""
    import psycopg

    con = psycopg.connect(postgres.url(), autocommit=True)
    try:
        with con.cursor() as cur:
            cur.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{PASSWORD}'")
            for db in ("mlflow_s", "optuna_s"):
                cur.execute(f'CREATE DATABASE "{db}" OWNER {user}')
    finally:
        con.close()
    return (postgres.url("mlflow_s", user=user, password=PASSWORD.replace("@", "%40")),
            f"postgresql://{user}@127.0.0.1:{postgres.port}/optuna_s?password={quote(PASSWORD, safe='')}")


def _files_holding(root: Path, mark: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not p.is_symlink() and mark.encode() in p.read_bytes())


def _argv_below(pid: int) -> list[str]:
    """The command lines of every process started by `pid`, at any depth (the mlflow server, its uvicorn workers),
    as `ps` shows them to every user of the machine."""
    rows = [line.split(None, 2) for line in subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True,
                                                            text=True).stdout.splitlines()]
    below, found = {str(pid)}, True
    while found:
        new = {r[0] for r in rows if r[1] in below and r[0] not in below}
        below |= new
        found = bool(new)
    return [r[2] for r in rows if r[0] in below - {str(pid)} and len(r) == 3]


def test_a_password_with_spaces_and_delimiters_shows_nowhere(postgres, ray_address, tmp_path):
    from mlflow.tracking import MlflowClient

    mlflow_db, optuna_db = _user_with_password(postgres)
    assert MARK in mlflow_db
    storage = tmp_path / "runs"
    r = subprocess.run([PY, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--seeds", "0", "--num-samples", "1",
                        "--set", "sessions=1", "--storage", str(storage), "--tracking-uri", mlflow_db,
                        "--optuna-storage", optuna_db, "--address", ray_address, "--gpus-per-trial", "0"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)  # MLflow's ./mlruns: in tmp_path
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert MARK not in r.stdout + r.stderr and "open the MLflow UI" in r.stdout
    assert (storage / "alpha_sweep-smoke" / "report.md").is_file() and _files_holding(storage, MARK) == []
    client = MlflowClient(mlflow_db)
    exp = client.get_experiment_by_name("alpha_sweep-smoke")
    runs = client.search_runs([exp.experiment_id])
    assert runs and all(MARK not in f"{x.data.tags} {x.data.params}" for x in runs)
    shown = {x.data.tags.get("adbs.optuna_storage") for x in runs}
    assert f"postgresql://labuser@127.0.0.1:{postgres.port}/optuna_s?password=***" in shown, shown  # the rest kept

    dash = subprocess.run([PY, "-m", "adbs_lab.stores.dashboard", optuna_db, "--dry-run", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert dash.returncode == 0 and "alpha_sweep" in dash.stdout and MARK not in dash.stdout + dash.stderr, dash

    port = free_port()
    server = subprocess.Popen([PY, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", mlflow_db,
                               "--artifacts-destination", str(tmp_path / "artifacts"), "--port", str(port),
                               "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        wait_listening(port, server)
        assert MlflowClient(f"http://127.0.0.1:{port}").get_experiment_by_name("alpha_sweep-smoke") is not None
        argv = _argv_below(server.pid)  # serve.py's own holds it: the test typed it there
        assert any("mlflow" in a for a in argv) and not [a for a in argv if MARK in a], argv
    finally:
        stop(server)
    assert MARK not in server.stdout.read()
