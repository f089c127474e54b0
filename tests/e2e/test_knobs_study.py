"""studies/knobs.py --smoke end to end: a TPE search over ADBS's knobs whose report leads with which knobs matter
(on the smoke preset: too few complete configurations, said instead of a ranking) and the trade-off figure; the
trials carry the base/novel summaries; report.py redraws the same from the store alone."""

import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_knobs_smoke(study_cmd, storage, tracking_uri, tmp_path):
    r = subprocess.run(study_cmd("knobs", "--smoke"), capture_output=True, text=True, timeout=600, cwd="/")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "which knobs matter" in r.stdout and "complete configurations" in r.stdout
    folder = storage / "knobs-smoke"
    report = (folder / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Which parameters matter", "## Base vs novel accuracy"], sections
    assert (folder / "tradeoff.png").stat().st_size > 5000
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("knobs-smoke")
    trials = [t for t in client.search_runs([exp.experiment_id]) if t.data.tags.get("adbs.state") == "COMPLETE"]
    assert trials and all("summary/val_last_novel_acc" in t.data.metrics for t in trials)
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "knobs", "--smoke", "--tracking-uri", tracking_uri,
                          "--out", str(out)], capture_output=True, text=True, timeout=300, cwd="/")
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert (out / "importance.md").read_text() == (folder / "importance.md").read_text()
    assert "a --smoke run" in rep.stdout
