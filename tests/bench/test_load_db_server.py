"""A database server that closes idle sessions, restarts, or goes away while a study runs through the driver
(bench/load.py on a PostgreSQL server of each test's own, testing/postgres.py: the Optuna storage and the MLflow
server's store both on it; tracking-only trials, bench/load_study.py). The study carries on and loses nothing (runs,
params, metric points, Optuna trials, no grid point twice: bench/load_check.py counts); where the server stays away,
the study waits its bounded time, exits 1 with the --resume command, and the resumed study loses and doubles nothing.
What the platform sets and why: docs/clusters.md ("A database server that goes away")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def _postgres():
    from testing.postgres import missing

    why = missing()
    if why:
        pytest.skip(why)


def _load(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """One grid study of 5 tracking-only trials on a temporary PostgreSQL server of its own."""
    r = subprocess.run([sys.executable, str(REPO / "bench" / "load.py"), "--backends", "postgres", "--studies", "1",
                        "--trials", "5", "--tracking-only", "--out", str(tmp_path), *flags],
                       capture_output=True, text=True, timeout=540, cwd=REPO, env={**os.environ, **(env or {})})
    assert r.returncode == 0 and "nothing lost" in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]
    return r


def test_sessions_closed_when_idle_and_a_restart_mid_study_lose_nothing(tmp_path):
    """idle_session_timeout=1s: every pooled connection idle for a second is closed by the server (what a lab's
    server or proxy does after an hour); Optuna's storage and MLflow's server test a connection before use. And
    pg_ctl restart -m fast once a third of the trials ended: every session ended, the server back a moment later;
    the study's calls in between wait for it (Optuna's storage: db_server.patiently; MLflow's client: its retries).
    One study checks both: each costs a Ray start, a server and a study (two minutes of CI apart)."""
    r = _load(tmp_path, "--pg-set", "idle_session_timeout=1s", "--outage", "restart")
    assert "load-s0: its database server restarted" in r.stdout


# The bounds shortened: the Optuna storage waited 5 s (ADBS_STORE_WAIT_S), MLflow's client retries once
AWAY_ENV = {"ADBS_STORE_WAIT_S": "5", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


@pytest.mark.outage  # four minutes each on 2 cores: on demand, `pytest -m outage` (README: the tests)
@pytest.mark.parametrize("store, said", [("optuna", "the Optuna storage postgresql://***@127.0.0.1"),
                                         ("mlflow", "the MLflow store stopped answering")])
def test_a_server_that_stays_away_stops_the_study_with_resume_and_loses_nothing(tmp_path, store, said):
    """Only this store's server stops and stays away (the other store's is a second server that stays up): the study
    waits its bound, exits 1 with the --resume command and says which store; started again, the resumed study
    completes the grid with nothing lost and no grid point twice."""
    r = _load(tmp_path, "--outage", "away", "--outage-of", store, env=AWAY_ENV)
    assert "load-s0: its database server away: exit 1, --resume" in r.stdout
    away = re.search(r"stayed away (\d+) s", r.stdout)
    assert away and int(away.group(1)) < 120, r.stdout[-2000:]  # the bound, and Tune's stop, on a loaded machine
    log = (tmp_path / "postgres" / "s0.log").read_text()
    failed = next((line for line in log.splitlines() if line.startswith("load error: failed after it started")), "")
    assert said in failed and "stopped answering" in failed, log[-3000:]
