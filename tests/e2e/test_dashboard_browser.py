"""The live view (`python -m adbs_lab.stores.dashboard STUDY_FOLDER`, optuna-dashboard, read-only) in headless Chromium
(tests/helpers/browser.py): it lists the study and its trials, follows the study while it runs on and finishes (trials
told through Optuna into the same storage while the dashboard serves it), and writes nothing to the storage.

Screenshots (kept as test artifacts): <repo>/test-artifacts/optuna_dashboard.png, optuna_dashboard_grid_study.png,
optuna_dashboard_grid.png.
"""

from __future__ import annotations

import contextlib
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

from tests.helpers.browser import open_browser
from testing.procs import free_port, wait_http

pytestmark = pytest.mark.slow  # it starts a server and a browser
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
ALPHA = {"alpha": optuna.distributions.FloatDistribution(0.0, 1.0)}


@contextlib.contextmanager
def _served(folder: Path, log: Path):
    """`python -m adbs_lab.stores.dashboard FOLDER` on a free port: its base URL, until the block ends."""
    port = free_port()
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "adbs_lab.stores.dashboard", str(folder), "--port", str(port)],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/api/studies", proc, 120, "the dashboard", log)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()  # SIGTERM stops it as Ctrl-C does


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
    log = tmp_path / "dashboard.log"
    with _served(folder, log) as base:
        yield base, study, running, folder / "optuna.db", log


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


def test_a_grid_over_seeds_shows_the_searched_setting_and_the_named_objective(tmp_path, browser):
    """A grid study's Optuna storage as the lab's searcher writes it (adbs_lab/search/searcher.py: StudySearch, real Optuna, no
    Ray): the dashboard shows one trial per configuration, `alpha` as the only parameter (no `trial_seed`: seeds are
    the user attribute `seeds`) and the objective by its name, not "Objective 0"."""
    from adbs_lab.records import metrics_keys as K
    from adbs_lab.search import space as sp
    from adbs_lab.records import tune_keys
    from adbs_lab.search.searcher import StudySearch
    from adbs_lab.search.seeds.fixed import SeedList

    folder = tmp_path / "runs" / "alpha_sweep"
    folder.mkdir(parents=True)
    space = {"alpha": [0.01, 0.05]}
    search = StudySearch(sp.optuna_distributions(space), storage_url=f"sqlite:///{folder / 'optuna.db'}",
                         study_name="alpha_sweep", policy=SeedList((0, 1)),
                         sampler=optuna.samplers.GridSampler(sp.grid_points(space), seed=0))
    search.set_search_properties(None, None, {})
    for i in range(4):  # 2 alphas x 2 seeds, each Tune trial told as it ends
        config = search.suggest(f"t{i}")
        search.on_trial_complete(f"t{i}", {K.REPORT_KIND: K.KIND_SUMMARY,
                                           K.OBJECTIVE: 40.0 + 100 * config["alpha"] + config[tune_keys.SEED_KEY]})
    with _served(folder, tmp_path / "dashboard.log") as base:
        browser.goto(base)
        assert browser.wait_text("alpha_sweep"), browser.text()[:2000]
        browser.page.get_by_text("alpha_sweep").first.click()
        assert browser.wait_text("val_avg_acc"), browser.text()[:3000]  # the study's page names its objective
        browser.screenshot(ARTIFACTS / "optuna_dashboard_grid_study.png")
        assert "Objective 0" not in browser.text()
        browser.page.get_by_role("link", name="Trials (List)").click()
        assert browser.wait_text("2 Trials", "alpha", "seeds"), browser.text()[:3000]
        browser.screenshot(ARTIFACTS / "optuna_dashboard_grid.png")
        assert "trial_seed" not in browser.text(), browser.text()[:3000]
