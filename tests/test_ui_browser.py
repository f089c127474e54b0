"""The MLflow UI, served by `python mlflow/serve.py` on a smoke study's store, in headless Chromium driven by
Playwright (Debian's chromium, launched by path: nothing is downloaded): the experiment lists its trial runs,
and the compare view of two trials leads to the session accuracy chart (session/test_acc by session).

Screenshots (kept as test artifacts): <repo>/test-artifacts/mlflow_runs.png, mlflow_compare.png.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from _smoke_store import REPO, smoke_store

# one worker under pytest -n: the smoke store (tests/_smoke_store.py) is built once per process, shared by
# tests/test_report.py and tests/test_ui_browser.py
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smoke_store")]
ARTIFACTS = REPO / "test-artifacts"
WAIT_S = 120  # a cold React app on 2 busy cores
CLOSE_ASSISTANT = """(() => { const x = [...document.querySelectorAll('button')].find(e => e.getAttribute('aria-label') == 'Close');
                             if (x) x.click(); })()"""  # MLflow 3's assistant side panel: a clearer screenshot


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """A Playwright page with the few verbs the test needs: go, evaluate, wait for a condition, screenshot."""

    def __init__(self, exe: str, width: int = 1500, height: int = 1000) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        self.page = self._browser.new_page(viewport={"width": width, "height": height})

    def js(self, expr: str):
        return self.page.evaluate(expr)

    def goto(self, url: str) -> None:
        self.page.goto(url)

    def wait(self, expr: str, timeout: float = WAIT_S):
        """The condition's value once truthy, or None after `timeout` seconds."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            return self.page.wait_for_function(expr, timeout=timeout * 1000, polling=500).json_value()
        except PlaywrightTimeout:
            return None

    def reveal(self, text: str, steps: int = 40) -> bool:
        """Scroll the page and its scrollable panes down until `text` is rendered (lazy tables)."""
        for _ in range(steps):
            if self.js(f"document.body.innerText.includes({json.dumps(text)})"):
                return True
            self.js("""(() => { window.scrollBy(0, window.innerHeight / 2);
                              document.querySelectorAll('*').forEach(e => { if (e.scrollHeight > e.clientHeight + 5)
                                  e.scrollTop += e.clientHeight / 2; }); })()""")
            time.sleep(0.3)
        return False

    def text(self) -> str:
        return self.page.inner_text("body")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path

    def close(self) -> None:
        try:
            self._browser.close()
        finally:
            self._pw.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(ray_address, tmp_path_factory):
    store = smoke_store(ray_address, tmp_path_factory)
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", store.uri,
                                 "--artifacts-destination", str(store.artifacts), "--port", str(port), "--workers", "1"],
                                stdout=fh, stderr=subprocess.STDOUT, cwd="/", start_new_session=True,
                                env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240  # ~20 s idle; minutes on 2 cores shared with training
        while True:
            try:
                if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.time() < deadline, f"server did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        assert f"MLflow UI: {base}" in log.read_text()
        yield base, store
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def browser():
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium not found: install it with `apt-get install chromium` (Debian; .ci/run does this)")
    pytest.importorskip("playwright", reason="needs playwright: pip install -e '.[test]'")
    b = Browser(exe)
    yield b
    b.close()


def test_experiment_lists_trials_and_compare_view_shows_session_chart(server, browser):
    base, store = server
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("ablation")
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
    assert browser.js("""(() => { const a = [...document.querySelectorAll('a')].find(e => e.innerText.trim() == 'session/test_acc');
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
