"""The live view (`python -m adbs_lab.dashboard STUDY_FOLDER`, optuna-dashboard, read-only) in headless Chromium
(tests/_browser.py): it lists the study and its trials, follows the study while it runs on and finishes (trials
told through Optuna into the same storage while the dashboard serves it), and writes nothing to the storage.

Screenshot (kept as a test artifact): <repo>/test-artifacts/optuna_dashboard.png.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import optuna
import pytest

from _browser import open_browser
from _procs import free_port, wait_http

pytestmark = pytest.mark.slow  # it starts a server and a browser
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
ALPHA = {"alpha": optuna.distributions.FloatDistribution(0.0, 1.0)}


@pytest.fixture
def live(tmp_path):
    """A study folder whose study has run two trials and runs a third, served by the dashboard."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder = tmp_path / "runs" / "live_study"
    folder.mkdir(parents=True)
    study = optuna.create_study(study_name="live_study", storage=f"sqlite:///{folder / 'optuna.db'}",
                                direction="maximize")
    for value in (0.1, 0.2):
        study.tell(study.ask(ALPHA), value)
    running = study.ask(ALPHA)
    port = free_port()
    log = tmp_path / "dashboard.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "adbs_lab.dashboard", str(folder), "--port", str(port)],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/api/studies", proc, 120, "the dashboard", log)
        yield base, study, running, folder / "optuna.db", log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()  # SIGTERM stops it as Ctrl-C does


@pytest.fixture
def browser():
    b = open_browser()
    yield b
    b.close()


def _states(text: str) -> dict[int, str]:
    """Trial number -> state, as the trials list shows them ("Trial 2" above "Running")."""
    return {int(n): s for n, s in re.findall(r"^Trial (\d+)\n(Running|Complete|Pruned|Fail|Waiting)$", text, re.M)}


def test_the_dashboard_lists_a_study_and_follows_it_until_it_finishes_read_only(live, browser):
    base, study, running, db, log = live
    assert f"Optuna dashboard (read-only): {base}" in log.read_text() and "studies: live_study" in log.read_text()

    browser.goto(base)
    assert browser.wait_text("live_study"), browser.text()[:2000]
    browser.page.get_by_text("live_study").first.click()
    browser.page.get_by_role("link", name="Trials (List)").click()
    assert browser.wait_text("3 Trials"), browser.text()[:2000]
    assert _states(browser.text()) == {0: "Complete", 1: "Complete", 2: "Running"}, browser.text()[:2000]

    # While it is served, the study runs on and finishes: its running trial ends, two more run through optimize.
    study.tell(running, 0.3)
    study.optimize(lambda t: t.suggest_float("alpha", 0.0, 1.0), n_trials=2)
    stored = db.read_bytes()
    browser.page.reload()
    assert browser.wait_text("5 Trials"), browser.text()[:2000]
    assert _states(browser.text()) == dict.fromkeys(range(5), "Complete"), browser.text()[:2000]
    browser.screenshot(ARTIFACTS / "optuna_dashboard.png")

    # Read-only: a note the page would save is refused with the reason, and the storage is as the study left it.
    study_id = json.load(urllib.request.urlopen(base + "/api/studies"))["study_summaries"][0]["study_id"]
    put = urllib.request.Request(f"{base}/api/studies/{study_id}/note", data=b'{"version": 1, "body": "x"}',
                                 method="PUT", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(put)
    assert refused.value.code == 405 and "read-only" in json.load(refused.value)["reason"]
    assert db.read_bytes() == stored
