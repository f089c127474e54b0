"""The MLflow UI, served by `python mlflow/serve.py` on a smoke study's store, in headless Chromium driven by
Playwright (Debian's chromium, launched by path: nothing is downloaded; tests/helpers/browser.py): the experiment lists its
trial runs by names that say what differs, the study's run describes the study and shows its table, the compare
view of two trials leads to the session accuracy chart (session/test_acc by session), a fresh browser reaches
a study's runs by the clicks docs/mlflow-and-reports.md gives, and the link serve.py prints opens the study's first view: the
session curves of its configurations, then its runs table with the columns that matter (tracking_store.runs_view).

Screenshots (kept as test artifacts): <repo>/test-artifacts/mlflow_runs.png, mlflow_study_run.png, mlflow_compare.png,
mlflow_clicks.png, mlflow_first_view.png, mlflow_study_view.png.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.stores import tracking_store
from tests.helpers.browser import open_browser
from testing.procs import free_port, wait_http
from tests.helpers.smoke_store import REPO, smoke_store

# one worker under pytest -n: the smoke store (tests/helpers/smoke_store.py) is built once per process, shared by
# tests/e2e/test_report_from_store.py and tests/e2e/test_mlflow_ui_browser.py
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smoke_store")]
ARTIFACTS = REPO / "test-artifacts"
CLOSE_ASSISTANT = """(() => { const x = [...document.querySelectorAll('button')]
                               .find(e => e.getAttribute('aria-label') == 'Close');
                             if (x) x.click(); })()"""  # MLflow 3's assistant side panel: a clearer screenshot


@pytest.fixture(scope="module")
def server(ray_address, tmp_path_factory):
    store = smoke_store(ray_address, tmp_path_factory)
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", store.uri,
                                 "--artifacts-destination", str(store.artifacts), "--port", str(port), "--workers", "1"],
                                stdout=fh, stderr=subprocess.STDOUT, cwd="/", start_new_session=True,
                                env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", proc, 240, "the MLflow server", log)  # ~20 s idle; minutes on 2 busy cores
        assert f"MLflow UI: {base}" in log.read_text()
        yield base, store, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def browser():
    b = open_browser()
    yield b
    b.close()


def test_experiment_lists_trials_and_compare_view_shows_session_chart(server, browser):
    base, store, _ = server
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("ablation-smoke")  # a --smoke study's experiment
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("adbs.role") == "study")
    trials = [r for r in runs if r.data.tags.get("adbs.role") == "trial"]
    assert len(trials) == 3

    # The study's experiment: the parent run, expanded, lists every trial run by its name.
    browser.goto(f"{base}/#/experiments/{exp.experiment_id}/runs")
    assert browser.wait(f"document.body.innerText.includes({json.dumps(parent.info.run_name)})"), browser.text()[:2000]
    assert browser.js("""(() => { const b = document.querySelectorAll('button[data-component-id*="runnamecellrenderer"]');
                                 b.forEach(x => x.click()); return b.length; })()""")
    names = [t.info.run_name for t in trials]
    cond = " && ".join(f"document.body.innerText.includes({json.dumps(n)})" for n in names)
    shown = browser.wait(cond)
    browser.js(CLOSE_ASSISTANT)
    time.sleep(0.5)
    browser.screenshot(ARTIFACTS / "mlflow_runs.png")
    assert shown, f"trial runs {names} not listed:\n{browser.text()[:3000]}"
    # Names that say what differs (the row and the seed), never an id.
    assert sorted(names) == ["adb seed=0", "adb+ic seed=0", "baseline seed=0"]

    # The parent run's page: its description says what the study searches, then shows the study's table.
    browser.goto(f"{base}/#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}")
    assert browser.wait_text("Description", "objective val_avg_acc (max)"), browser.text()[:3000]
    browser.page.get_by_text("Show more").first.click()
    rows = [line for line in (store.study_dir / "table.md").read_text().splitlines() if line.startswith("|")]
    first_row = rows[2].split("|")[1].strip()  # under the header and its rule (the smoke banner stands above)
    shown = browser.wait("[...document.querySelectorAll('table td')].some(td => td.innerText.trim() == "
                         f"{json.dumps(first_row)})")  # the Markdown table, rendered as a table
    browser.js(CLOSE_ASSISTANT)
    browser.screenshot(ARTIFACTS / "mlflow_study_run.png")
    assert shown, browser.text()[:3000]
    assert parent.data.params["study.searched"] == "row" and parent.data.params["study.objectives"] == "val_avg_acc:max"

    # Compare two completed trials, preferring two whose session curves differ.
    done = [t for t in trials if t.data.tags.get("adbs.state") == "COMPLETE"]
    assert len(done) >= 2
    curve = {t.info.run_id: [m.value for m in sorted(client.get_metric_history(t.info.run_id, "session/test_acc"),
                                                      key=lambda m: m.step)] for t in done}
    pair = next(((a, b) for a in done for b in done if curve[a.info.run_id] != curve[b.info.run_id]), (done[0], done[1]))
    ids = [t.info.run_id for t in pair]
    browser.goto(f"{base}/#/compare-runs?runs={json.dumps(ids)}&experiments={json.dumps([exp.experiment_id])}")
    cond = " && ".join(f"document.body.innerText.includes({json.dumps(t.info.run_name)})" for t in pair)
    assert browser.wait(f"document.body.innerText.includes('Comparing 2 Runs') && {cond}"), browser.text()[:3000]
    # the metrics table renders the rows in view only: scroll until the session/test_acc row is there
    assert browser.reveal("session/test_acc"), browser.text()[-3000:]
    browser.js(CLOSE_ASSISTANT)
    # The compare view's metric row opens the chart of that metric for both runs, x = step = session.
    assert browser.js("""(() => { const a = [...document.querySelectorAll('a')]
                                  .find(e => e.innerText.trim() == 'session/test_acc');
                                if (!a) return false; a.click(); return true; })()""")
    legend = " && ".join(f"document.body.innerText.includes({json.dumps(t.info.run_name + ' (session/test_acc)')})"
                         for t in pair)  # the chart's legend: one curve per run
    n_traces = browser.wait(f"document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length >= 2 && {legend}")
    time.sleep(1.0)  # let plotly finish drawing before the screenshot
    shot = browser.screenshot(ARTIFACTS / "mlflow_compare.png")
    assert n_traces, f"no session/test_acc chart:\n{browser.text()[:3000]}"
    where = urllib.parse.unquote(browser.js("location.hash"))
    assert where.startswith("#/metric?") and '"session/test_acc"' in where and "x_axis=step" in where, where
    assert browser.js("[...document.querySelectorAll('.js-plotly-plot .xtitle')].map(e => e.textContent).join()") == "Step"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


EXPAND = """(() => { const b = document.querySelectorAll('button[data-component-id*="runnamecellrenderer"]');
                     b.forEach(x => x.click()); return b.length; })()"""


def test_a_fresh_browser_reaches_a_study_s_runs_by_the_readme_clicks(server, browser):
    """docs/mlflow-and-reports.md, Compare trials, step 1, as a user makes it: in a fresh browser MLflow 3.17 opens an
    experiment on its GenAI overview (its workflow switch, kept per browser, starts on GenAI); Model training,
    Experiments and the study's name open the study on its runs."""
    base, store, log = server
    readme = " ".join((REPO / "docs" / "mlflow-and-reports.md").read_text().split())
    assert ("click **Model training** in the GenAI / Model training switch at the top of the sidebar, then "
            "**Experiments** and the study's name") in readme  # the clicks below, as the page gives them
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("ablation-smoke")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("adbs.role") == "study").info.run_name
    trials = [r.info.run_name for r in runs if r.data.tags.get("adbs.role") == "trial"]

    browser.goto(base)  # the URL serve.py prints: MLflow's home page, its sidebar
    assert browser.wait_text("Model training"), browser.text()[:2000]
    assert browser.js("localStorage.getItem('mlflow.workflowType_v1')") is None  # a fresh profile: GenAI
    page = browser.page
    page.get_by_role("button", name="Model training", exact=True).click()
    page.locator("nav").get_by_role("link", name="Experiments", exact=True).click()
    page.get_by_role("link", name="ablation-smoke", exact=True).click()
    assert browser.wait_text(parent), browser.text()[:3000]
    assert browser.js("location.hash").startswith(f"#/experiments/{exp.experiment_id}/runs?"), browser.js("location.hash")
    assert browser.js(EXPAND)  # the parent run's `+`, as the page's next sentence says
    shown = browser.wait_text(*trials)
    browser.js(CLOSE_ASSISTANT)
    browser.screenshot(ARTIFACTS / "mlflow_clicks.png")
    assert shown, f"trial runs {trials} not listed:\n{browser.text()[:3000]}"


SECTIONS = r"""(() => { const t = document.body.innerText.split('\n').map(s => s.trim());
                       return t.flatMap((s, i) => /^\(\d+\)$/.test(t[i + 1] || '') ? [[s, t[i + 1]]] : []); })()"""
"""The chart view's sections in page order, as [title, '(charts)'] (MLflow 3.17 draws the count as its own text)."""


def test_the_link_serve_py_prints_opens_the_session_curves_then_the_studys_columns(server, browser):
    """The link serve.py printed beside the study, in a fresh browser and without a click: first the chart view's
    section "Session curves", a chart per session metric (x = Step = session) with a line per configuration of the
    study (its mean over seeds), above the summary metrics, with the 40-odd base/* and session/* charts folded below;
    then the runs table of the same view: every trial listed, grouped by configuration (no parent to expand), with
    the objective, the seed and the paper's two test figures as columns and a Run Name column wide enough to read."""
    base, store, log = server
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("ablation-smoke")
    runs = client.search_runs([exp.experiment_id])
    trials = [r for r in runs if r.data.tags.get("adbs.role") == "trial"]
    rows = sorted(r.data.tags["adbs.label"] for r in trials)
    assert rows == ["adb", "adb+ic", "baseline"]
    # the study's view (tracking_store.runs_view), shared by key through an experiment tag, on its chart view
    link = (f"{base}/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning&viewStateShareKey=adbs"
            "&compareRunsMode=CHART")
    assert f"  ablation-smoke  {link}\n" in log.read_text(), log.read_text()[-2000:]

    browser.goto(link)
    legends = [f"{row} (session/{m})" for row in rows for m in tracking_store.CURVES[:3]]
    drawn = browser.wait_text(tracking_store.CURVES_SECTION, *legends)  # the first three charts, in the first screen
    browser.js(CLOSE_ASSISTANT)
    time.sleep(1.0)  # let plotly finish drawing
    browser.screenshot(ARTIFACTS / "mlflow_first_view.png")
    assert drawn, browser.text()[:3000]
    sections = [title for title, _ in browser.js(SECTIONS)]
    assert sections[:4] == [tracking_store.CURVES_SECTION, "summary", "session", "base"], sections
    assert browser.js(SECTIONS)[0][1] == f"({len(tracking_store.CURVES)})"
    titles = browser.js("[...document.querySelectorAll('.js-plotly-plot .xtitle')].map(e => e.textContent)")
    assert titles and set(titles) == {"Step"}, titles

    browser.fresh()  # the same view's runs table, as its toggle shows it
    browser.page.set_viewport_size({"width": 2000, "height": 1000})  # the grid draws only the columns in sight
    browser.goto(link.replace("compareRunsMode=CHART", "compareRunsMode=TABLE"))
    names = [t.info.run_name for t in trials]
    assert browser.wait_text(*names), browser.text()[:3000]  # listed without a click: grouped by configuration
    columns = "[...document.querySelectorAll('.ag-header-cell')].map(e => e.getAttribute('col-id'))"
    want = ["metrics.`summary/val_avg_acc`", "params.`seed`", "metrics.`summary/test_last_acc`",
            "metrics.`summary/test_avg_acc`", "attributes.`Description`"]
    assert browser.wait(f"(c => {json.dumps(want)}.every(w => c.includes(w)))({columns})"), browser.js(columns)
    width = browser.js("document.querySelector('.ag-header-cell[col-id=\"attributes.`Run Name`\"]')?.offsetWidth")
    browser.js(CLOSE_ASSISTANT)
    browser.screenshot(ARTIFACTS / "mlflow_study_view.png")
    assert width and width >= 240, width
