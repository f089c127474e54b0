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
