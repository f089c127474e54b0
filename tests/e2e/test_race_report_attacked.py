"""studies/report.py on a raced sampled study (--seeds auto --num-samples): the report rebuilt from the tracking store
says what the study itself said about its table: the race's verdicts, and that the leader's test figures are
post-selection (every seed it ran chose it). A report without them shows optimistic test figures unlabelled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_report_of_a_raced_study_keeps_its_verdicts_and_post_selection_label(study_cmd, storage, tracking_uri,
                                                                              tmp_path):
    cmd = study_cmd("alpha_sweep", "--smoke", "--num-samples", "3", "--seeds", "auto", "--max-seeds", "3",
                    "--race-top", "2", "--pruner", "none", "--max-concurrent", "2", "--cpus-per-trial", "0.5")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    study_table = (storage / "alpha_sweep" / "table.txt").read_text()
    assert "(race leader)" in study_table and "post-selection: the test figures of " in study_table
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "alpha_sweep", "--tracking-uri",
                          tracking_uri, "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    for name in ("table.txt", "report.md"):
        text = (out / name).read_text()
        assert "post-selection" in text, f"report.py's {name} shows the race leader's test figures unlabelled:\n{text}"
        assert "(race leader)" in text, f"report.py's {name} drops the race's verdicts:\n{text}"
    assert "post-selection" in rep.stdout
