"""The scale benchmark, quick (bench/scale.py --quick): one study of 10 and one of 100 tracking-only trials on
SQLite, measured from outside and read back; nothing may be lost and the table of measurements is printed. The
full run's figures are in docs/benchmarks.md. In the slow tier; `pytest -m scale` runs it alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.scale, pytest.mark.timeout(900)]


def test_quick_scale_run_loses_nothing_and_prints_its_table(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "bench" / "scale.py"), "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=840, cwd=REPO)
    assert r.returncode == 0 and "LOST" not in r.stdout + r.stderr, r.stdout[-4000:] + r.stderr[-3000:]
    results = {x["n"]: x for x in json.loads((tmp_path / "results.json").read_text())}
    assert sorted(results) == [10, 100]
    for n, x in results.items():
        assert x["rc"] == 0 and x["problems"] == [] and x["report_rc"] == 0, x
        assert x["dashboard_trials"] == n and x["ui_runs_listed"] == n + 1  # every trial, and the study's own run
    # the window runs from the first half-second sample with >= 10 trials ended to the first with >= 90: 80 give or
    # take the trials that end between two samples (79 was seen), so most of the study, not exactly 80
    assert results[100]["cpu_s_per_trial"] > 0 and results[100]["window_trials"] >= 70
    assert r.stdout.count("driver CPU s/trial") >= 3, r.stdout[-3000:]  # after each N, and the whole table at the end
    final = r.stdout[r.stdout.rindex("driver CPU s/trial"):]
    assert re.search(r"^\|\s+10 \|\s+sqlite \|", final, re.M) and re.search(r"^\|\s+100 \|\s+sqlite \|", final, re.M)
