"""Lint and types in the fast tier: `ruff check` over the repository and `mypy` over adbs/ and adbs_lab/, both
configured in pyproject.toml ([tool.ruff], [tool.mypy]); either finding fails the test with the checker's own report.
`.venv/bin/ruff check` and `.venv/bin/mypy` in the repository root run the same."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed; it comes with the test extra: .venv/bin/pip install -e '.[test]'")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_ruff_finds_nothing():
    r = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert r.returncode == 0, f"ruff check found (fix them, or see [tool.ruff] in pyproject.toml):\n{r.stdout}{r.stderr}"


def test_mypy_finds_nothing():
    r = _run("mypy")  # files, followed imports and overrides: [tool.mypy] in pyproject.toml
    assert r.returncode == 0, f"mypy found (fix them, or see [tool.mypy] in pyproject.toml):\n{r.stdout}{r.stderr}"
