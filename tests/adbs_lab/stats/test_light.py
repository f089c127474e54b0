"""adbs_lab/stats/ loads numpy and scipy only: importing every module of it, in a fresh interpreter, loads none of
pandas, torch, ray, optuna, mlflow or the method library adbs (the import-linter contract in pyproject.toml checks
the imports as written; this checks what actually loads, imports of imports included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("pandas", "torch", "ray", "optuna", "mlflow", "adbs")


def test_importing_the_stats_package_loads_no_framework():
    code = ("import json, sys\n"
            "from adbs_lab.stats import aggregate, confseq, continuation, corners, forecast, intervals, looks, planner, "
            "policy, premise, sequential, simulate, verdicts, workflow\n"
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
