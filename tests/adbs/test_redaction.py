"""Credentials in URLs have one owner, adbs/redaction.py: what a study logs, what the store checks and the MLflow
launcher print, and what studies/submit.py refuses follow the same rule."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adbs import objstore
from adbs.redaction import carries_secret, redact
from adbs_lab import tracking
from adbs_lab.driver.preflight import logged_argv

REPO = Path(__file__).resolve().parents[2]

URLS = {  # url -> what may be shown
    "s3://AKIA:hunter2@b/runs?endpoint_override=h:9000": "s3://b/runs?endpoint_override=h:9000",
    "s3://b/runs?secret_key=hunter2&region=eu": "s3://b/runs?secret_key=%2A%2A%2A&region=eu",
    "postgresql://alice:hunter2@db:5432/optuna": "postgresql://db:5432/optuna",
    "https://bob:hunter2@mlflow.example.org": "https://mlflow.example.org",
    "postgresql://alice@db/mlflow": "postgresql://db/mlflow",
    "sqlite:////abs/mlflow.db": "sqlite:////abs/mlflow.db",
    "/shared/runs": "/shared/runs",
}


@pytest.mark.parametrize("url", list(URLS))
def test_every_printer_shows_the_same(url):
    from adbs_lab.redaction import redact as light_redact

    assert redact(url) == objstore.redact(url) == tracking.redact_uri(url) == light_redact(url) == URLS[url]


def test_a_studys_logged_command_holds_no_database_or_server_password():
    """study.json and MLflow's adbs.command keep the command: every URL in it is cut, not only object stores'."""
    argv = ("studies/alpha_sweep.py", "--optuna-storage", "postgresql://alice:hunter2@db/optuna",
            "--tracking-uri=https://bob:hunter2@mlflow.example.org", "--storage", "s3://b/r?secret_key=hunter2")
    logged = " ".join(logged_argv(argv))
    assert "hunter2" not in logged and "postgresql://db/optuna" in logged and "https://mlflow.example.org" in logged


def test_a_database_error_message_loses_its_password():
    with pytest.raises(tracking.TrackingError) as e:
        tracking.tracking_problem("postgresql://alice:hunter2@127.0.0.1:1/nodb")  # nothing listens on port 1
    assert "hunter2" not in str(e.value) and "127.0.0.1:1" in str(e.value)


@pytest.mark.parametrize("text, secret", [
    ("https://bob:hunter2@mlflow.example.org", True),
    ("s3://b/runs?secret_key=hunter2", True),
    ("--storage=s3://b/runs?session_token=abc", True),
    ("postgresql://alice@db/mlflow", False),  # a user name alone: the password comes from elsewhere
    ("s3://b/runs?endpoint_override=h:9000", False),
    ("/shared/runs", False),
])
def test_what_carries_a_secret(text, secret):
    assert carries_secret(text) is secret


def test_submit_refuses_a_secret_query_value_in_the_study_arguments(monkeypatch):
    spec = importlib.util.spec_from_file_location("adbs_submit", REPO / "studies" / "submit.py")
    submit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(submit)
    monkeypatch.chdir(REPO)
    argv = ["--address", "http://head:8265", "--", "studies/alpha_sweep.py", "--storage", "/shared/runs",
            "--tracking-uri", "http://mlflow:5000", "--optuna-storage", "postgresql://db/optuna?password=hunter2"]
    with pytest.raises(submit.SubmitError, match="secret query value"):
        submit.validate(submit.parse(argv), {})


def test_the_light_commands_get_the_rule_without_torch():
    """The MLflow launcher, the store checks and studies/submit.py stay free of torch (adbs/__init__.py loads it)."""
    code = ("import sys; import adbs_lab.serve, adbs_lab.stores, adbs_lab.tracking_store; "
            "from adbs_lab.redaction import redact; assert redact('s3://k:s@b') == 's3://b'; "
            "print(sorted(m for m in ('torch', 'adbs') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_no_other_module_holds_a_credential_pattern():
    """The rule lives in adbs/redaction.py alone: no other module matches user:secret@ or secret query keys."""
    pattern = re.compile(r"://\[\^[^\]]*@|\"secret_key\"|_SECRET_QUERY")
    holders = sorted(str(p.relative_to(REPO)) for top in ("adbs", "adbs_lab", "studies", "bench", "mlflow")
                     for p in (REPO / top).rglob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert holders == ["adbs/redaction.py"], holders
