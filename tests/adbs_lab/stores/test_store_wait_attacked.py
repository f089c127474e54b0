"""Attacks on the database-server wait (adbs_lab/stores/db_server.py): the secret of a URL quoted in a driver's error
never shows in the wait's warning line, and ADBS_STORE_WAIT_S with a bad value is refused by a message, not a
traceback at import, nor an unbounded wait."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adbs_lab.stores import db_server
from tests.helpers.scripts import in_process

SECRET = "PASSWORD"
URL = f"postgresql://user:{SECRET}@host/db"


@pytest.mark.parametrize("pad", [140, 151, 153, 155])
def test_the_wait_line_never_shows_a_password_cut_by_its_length_limit(monkeypatch, capsys, pad):
    """_waiting cuts the error's first line at 200 characters BEFORE redacting it: a URL that straddles the cut loses
    its '@', so the redaction no longer sees user information and the password prints in clear."""
    monkeypatch.setattr(db_server, "STORE_WAIT_S", 0.3)
    text = "x" * pad + f" connection refused to {URL}"

    def call():
        raise ConnectionError(text)

    with pytest.raises(ConnectionError):
        db_server.patiently(call, what="the Optuna storage")
    err = capsys.readouterr().err
    assert db_server.DOWN_WARNING in err
    assert SECRET not in err and "PASSW" not in err, err


@pytest.mark.parametrize("value", ["abc", "nan"])
def test_a_bad_store_wait_is_refused_in_words_not_a_traceback_or_an_endless_wait(value):
    env = {**os.environ, "ADBS_STORE_WAIT_S": value}
    r = subprocess.run([sys.executable, "-c", "import adbs_lab.stores.db_server as d; print(d.STORE_WAIT_S)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    # either refused in words naming the variable, or a finite non-negative wait
    if r.returncode == 0:
        got = float(r.stdout.strip())
        assert 0 <= got < float("inf"), f"ADBS_STORE_WAIT_S={value} gives a wait of {got} s"
    else:
        assert "ADBS_STORE_WAIT_S" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "inf"])
def test_a_study_with_a_bad_store_wait_is_refused_before_it_starts(value, tmp_path):
    """The preflight (and so --dry-run) refuses the run in one line naming the variable, exit 2, nothing written."""
    env = {**os.environ, "ADBS_STORE_WAIT_S": value}
    repo = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, str(repo / "studies" / "ablation.py"), "--smoke", "--dry-run", "--storage",
                        str(tmp_path / "runs")], env=env, capture_output=True, text=True, timeout=300, cwd=repo)
    assert r.returncode == 2 and "ADBS_STORE_WAIT_S=" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


BAD_WAITS = [("ADBS_STORE_WAIT_S", "1e12"), ("ADBS_STORE_WAIT_S", "86401"), ("ADBS_MLFLOW_LOCKED_WAIT_S", "abc"),
             ("ADBS_MLFLOW_LOCKED_WAIT_S", "1e12"), ("ADBS_TUNE_START_WAIT_S", "nan"), ("ADBS_CACHE_LEASE_S", "0")]


@pytest.mark.parametrize("name, value", BAD_WAITS)
def test_a_wait_out_of_its_bounds_is_refused_before_a_study_starts(capsys, monkeypatch, tmp_path, name, value):
    """ADBS_STORE_WAIT_S=1e12 was accepted (a wait of 30,000 years for a database server), and the other durations
    read from the environment were not checked at all (adbs/env.py bounds each: a wait a day at most): the dry run
    refuses them as the run does, in one line naming the variable and its range, exit 2, nothing written."""
    monkeypatch.setenv(name, value)
    repo = Path(__file__).resolve().parents[3]
    r = in_process(capsys, [sys.executable, str(repo / "studies" / "ablation.py"), "--smoke", "--dry-run", "--storage",
                            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    assert r.returncode == 2 and f"{name}={value!r}: not a number of seconds from " in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not (tmp_path / "runs").exists()


def test_the_bounds_themselves_are_accepted(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ADBS_STORE_WAIT_S", "86400")
    monkeypatch.setenv("ADBS_CACHE_LEASE_S", "1")
    repo = Path(__file__).resolve().parents[3]
    r = in_process(capsys, [sys.executable, str(repo / "studies" / "ablation.py"), "--smoke", "--dry-run", "--storage",
                            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
    assert r.returncode == 0, r.stderr[-2000:]


def test_bad_waits_never_break_an_import():
    """ADBS_MLFLOW_LOCKED_WAIT_S=abc ended every import of adbs_lab/stores/tracking_store.py in a ValueError
    traceback; each module now gets its default, and the study's checks refuse the value in words."""
    env = {**os.environ, "ADBS_STORE_WAIT_S": "nan", "ADBS_MLFLOW_LOCKED_WAIT_S": "abc", "ADBS_TUNE_START_WAIT_S": "1e12",
           "ADBS_CACHE_LEASE_S": "-5"}
    code = ("import adbs.cache as c, adbs_lab.search.tune_staging as t, adbs_lab.stores.db_server as d, "
            "adbs_lab.stores.tracking_store as s; print(c.LEASE_S, t.WAIT_S, d.STORE_WAIT_S, s.LOCKED_WAIT_S)")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [float(x) for x in r.stdout.split()] == [60.0, 120.0, 300.0, 300.0]
