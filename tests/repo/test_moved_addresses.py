"""The old `python -m` addresses of modules that moved (adbs_lab/moved.py) name the new one and exit 2, instead of
Python's "No module named ..."; the address they name runs; importing an old one names the new one too."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from adbs.exits import OK, REFUSED
from adbs_lab.moved import MOVED

REPO = Path(__file__).resolve().parents[2]


def _m(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_address_names_the_new_one(old, new):
    r = _m(old, "--port", "5001")
    assert r.returncode == REFUSED, r.stdout + r.stderr
    assert "No module named" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == (f"error: python -m {old} moved to python -m {new}; run: python -m {new} --port 5001")
    assert _m(new, "--help").returncode == OK  # what it names is there
    with pytest.raises(ImportError, match=f"{old} moved to {new}"):
        importlib.import_module(old)


SECRET = "Qj5ecret"
ARGS = [("adbs_lab.serve", ["--backend-store-uri", f"postgresql://alice:{SECRET}@db/mlflow"]),
        ("adbs_lab.dashboard", [f"s3://bucket/runs?secret_key={SECRET}"]),
        ("adbs_lab.local_cluster", ["start", f"--address=https://{SECRET}@head:8265"]),
        ("adbs_lab.serve", ["--", "--default-artifact-root", f"s3://KEY:{SECRET}@bucket/a b"])]


@pytest.mark.parametrize("old, args", ARGS, ids=[f"{o}-{a[-1][:12]}" for o, a in ARGS])
def test_an_old_address_repeats_the_command_with_its_credentials_as_stars(old, args):
    """The line repeated the arguments as they were typed: a URL's password in clear on stderr (a log, a cron mail).
    It repeats them through the one rule (adbs/redaction.py), as a study's --resume line does."""
    r = _m(old, *args)
    assert r.returncode == REFUSED, r.stdout + r.stderr
    assert SECRET not in r.stderr and "***" in r.stderr and f"python -m {MOVED[old]} " in r.stderr, r.stderr
