"""One ablation smoke study into a temporary MLflow store, shared by the report and browser tests.

Run once per pytest session (a smoke study takes ~1-4 min on 2 busy cores), exactly as a user
types it, in a subprocess on the session's Ray instance.
"""

from __future__ import annotations

import re

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_CACHE: dict[str, "SmokeStore"] = {}


@dataclass
class SmokeStore:
    root: Path
    uri: str
    artifacts: Path
    storage: Path
    stdout: str

    @property
    def study_dir(self) -> Path:
        return self.storage / "ablation-smoke"  # a --smoke run's folder (adbs_lab/stores/paths.py: SMOKE)


def smoke_store(ray_address: str, tmp_path_factory) -> SmokeStore:
    if "ablation" in _CACHE:
        return _CACHE["ablation"]
    root = tmp_path_factory.mktemp("smoke_store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cmd = [sys.executable, str(REPO / "studies" / "ablation.py"), "--smoke", "--storage", str(root / "runs"),
           "--tracking-uri", uri, "--address", ray_address, "--gpus-per-trial", "0"]
    work = root / "work"  # a folder of its own as the working directory, not the repository's
    work.mkdir()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    _CACHE["ablation"] = SmokeStore(root, uri, root / "artifacts", root / "runs", r.stdout)
    return _CACHE["ablation"]


def printed_table(stdout: str) -> str:
    """The table the study printed: the lines after its 'test accuracy (%) per session' header (the verdicts' lines
    open it), up to its best configuration's line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "test accuracy (%) per session" in line) + 1
    out = []
    for line in lines[start:]:  # the verdicts' lines, a blank line, the table: up to the best configuration's line
        if line.startswith("best configuration") or re.match(r"\S+: \d+ trials \(", line):
            break
        out.append(line)
    return "\n".join(out).rstrip("\n")
