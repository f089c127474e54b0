"""bench/verdict_simulation.py: runs small (a few hundred studies per cell) and prints every table; a bad argument
exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import verdict_simulation  # noqa: E402


def test_it_prints_errors_power_and_the_planner(capsys):
    assert verdict_simulation.main(["--studies", "200"]) == 0
    out = capsys.readouterr().out
    assert "no true difference" in out and "power" in out and "the planner" in out
    assert out.count("OBF, b=2 (default)") == 1 + len(verdict_simulation.SIGMAS)


def test_too_few_studies_is_refused():
    with pytest.raises(SystemExit) as e:
        verdict_simulation.main(["--studies", "5"])
    assert e.value.code == 2
