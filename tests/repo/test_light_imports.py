"""What a light command loads (docs/architecture.md, "Layers"): the preflight never Ray Tune, the MLflow launcher's
and the report's --help neither Ray Tune nor torch, and adbs's light modules (adbs/__init__.py loads its names on
first use) no torch. Each case runs in a fresh interpreter; the time it took is printed (`-s`), never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCHED = ("ray.tune", "torch", "mlflow", "optuna", "pandas")

# argv of a script, or code to exec; what must not be in sys.modules at the end
CASES = {
    "preflight": ("code", "import adbs_lab.driver.preflight", ("ray.tune",)),
    "adbs light modules": ("code", "import adbs.redaction, adbs.writable, adbs.cells", ("torch",)),
    "mlflow/serve.py --help": ("script", "mlflow/serve.py", ("ray.tune", "torch")),
    # adbs_lab/records/trial_records.py: config_columns() imports adbs/config/ (torch) when first called, not here
    "studies/report.py --help": ("script", "studies/report.py", ("ray.tune", "torch")),
    "stores": ("code", "import adbs_lab.stores.serve, adbs_lab.stores.tracking_store, adbs_lab.stores.sqlite_kind",
               ("ray.tune", "torch")),
}

PROBE = """
import atexit, json, sys, time
t0 = time.perf_counter()
atexit.register(lambda: sys.__stderr__.write("LOADED " + json.dumps({"modules": [m for m in %r if m in sys.modules],
                                                                   "s": round(time.perf_counter() - t0, 2)}) + "\\n"))
"""


@pytest.mark.parametrize("case", list(CASES))
def test_a_light_command_loads_no_heavy_framework(case):
    kind, what, forbidden = CASES[case]
    body = (f"{what}" if kind == "code"
            else f"import runpy; sys.argv = [{what!r}, '--help']; runpy.run_path({what!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", PROBE % (WATCHED,) + body], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("LOADED ")), None)
    assert line is not None, r.stdout[-2000:] + r.stderr[-2000:]
    loaded = json.loads(line[len("LOADED "):])
    print(f"{case}: {loaded['s']} s, loaded {loaded['modules'] or 'none'} of {', '.join(WATCHED)}")
    assert not set(forbidden) & set(loaded["modules"]), (case, loaded)
