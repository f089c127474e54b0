"""The load check, short (bench/load.py): two studies at once on one tracking store and one Optuna storage, with
report.py and the MLflow UI reading meanwhile (on SQLite, one grid and one sampled driver SIGKILLed mid-study and
resumed); nothing may be lost (runs, params, metric points, Optuna trials) or run twice. The full run's figures are in the
docs/stores.md ("Several studies on one store")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_studies_at_once_lose_nothing_and_a_killed_driver_resumes(backend, tmp_path):
    if backend == "postgres":
        from testing.postgres import missing

        why = missing()
        if why:
            pytest.skip(why)
    # The kill-and-resume path is the same code on either backend; CI time is tight, so it runs on SQLite only
    # (bench/load.py --kill runs it on both; its figures are in docs/stores.md).
    kill = ["--kill"] if backend == "sqlite" else []
    r = subprocess.run([sys.executable, str(REPO / "bench" / "load.py"), "--studies", "2", "--trials", "4",
                        "--tracking-only", *kill, "--backends", backend, "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=840, cwd=REPO)
    assert r.returncode == 0 and "nothing lost" in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]
    if kill:
        assert r.stdout.count("yes") == 2  # both drivers were killed and resumed
