"""Headless Chromium driven by Playwright for the UI tests (tests/e2e/test_mlflow_ui_browser.py,
tests/e2e/test_dashboard_browser.py): Debian's chromium, launched by path, so nothing is downloaded. Each `Browser`
is a fresh profile (a new Playwright context: no cookies, no local storage), as a user's first visit."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

WAIT_S = 120  # a cold React app on 2 busy cores


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """A Playwright page with the few verbs the tests need: go, evaluate, wait for a condition, screenshot."""

    def __init__(self, exe: str, width: int = 1500, height: int = 1000) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        self.page = self._browser.new_page(viewport={"width": width, "height": height})

    def fresh(self) -> None:
        """A new profile for the page (nothing the last one stored), as another user's first visit."""
        self.page.context.close()
        self.page = self._browser.new_page(viewport=self.page.viewport_size)

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

    def wait_text(self, *texts: str, timeout: float = WAIT_S):
        """Whether the page shows every one of `texts` within `timeout` seconds."""
        return self.wait(" && ".join(f"document.body.innerText.includes({json.dumps(t)})" for t in texts), timeout)

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


def open_browser() -> Browser:
    """A fresh browser, or the test skips with what to install."""
    exe = chromium()
    if exe is None:
        pytest.skip("Chromium not found: install it with `apt-get install chromium` (Debian; .ci/run does this)")
    pytest.importorskip("playwright", reason="needs playwright: pip install -e '.[test]'")
    return Browser(exe)
