"""The test command's own machinery: `pytest -n 2` keeps the tests marked xdist_group on one worker.

Modules that share a costly fixture (tests/helpers/smoke_store.py's study store, tests/e2e/test_two_node_cluster.py's two
Ray clusters) are marked `xdist_group`, and pyproject.toml runs pytest with `--dist loadgroup`. If the grouping silently stops
working (pytest 9.2 with pytest-xdist 3.8 does: pytest-dev/pytest-xdist#1386), each worker builds those fixtures
itself and the whole run takes minutes longer, with every test still passing. This test is what fails then.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # it starts a pytest with two xdist workers

GROUPED = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.fixture(scope="module")
def costly():
    with open(os.environ["SETUP_LOG"], "a") as f:
        f.write(f"{os.getpid()}\\n")


@pytest.mark.parametrize("i", range(4))
def test_uses_the_fixture(costly, i):
    pass
'''


def test_a_group_runs_on_one_worker_and_builds_its_module_fixture_once(tmp_path: Path):
    # Four tests and two workers: without the grouping, xdist's load scheduling hands each worker two of them.
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    log = tmp_path / "setups.log"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), str(tmp_path / "test_grouped.py")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
                       env={**os.environ, "SETUP_LOG": str(log)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 passed" in r.stdout
    setups = log.read_text().split()
    assert len(setups) == 1, (f"the module fixture was built {len(setups)} times (by processes {setups}): "
                              "--dist loadgroup did not keep the xdist_group on one worker")


def test_the_test_command_groups():
    """`--dist loadgroup` is in pytest's options of this repository (pyproject.toml), so `pytest -n 2` groups."""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "--dist loadgroup" in config["tool"]["pytest"]["ini_options"]["addopts"]
