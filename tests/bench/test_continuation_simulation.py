"""bench/continuation_simulation.py: runs small (a few hundred studies per cell) and prints every table; a bad
argument exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import continuation_simulation  # noqa: E402


def test_it_prints_the_routes_the_workflows_the_power_and_the_forecast(capsys):
    assert continuation_simulation.main(["--studies", "400"]) == 0
    out = capsys.readouterr().out
    for part in ("half-width / s", "confidence sequence, 100", "routes, 400 studies", "the advised workflow",
                 "before continuations", "power of the design as built", "the smallest cap", "forecast from 3 seeds"):
        assert part in out, part
    assert out.count("(a) confidence sequence") == 4 and out.count("no difference") >= 10


def test_too_few_studies_is_refused():
    with pytest.raises(SystemExit) as e:
        continuation_simulation.main(["--studies", "5"])
    assert e.value.code == 2
