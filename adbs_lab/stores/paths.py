"""Absolute locations, whatever the working directory (Ray trials run inside their trial folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT", "DEFAULT_STORAGE", "MLFLOW_DIR", "DEFAULT_TRACKING_URI", "DEFAULT_ARTIFACT_ROOT", "SMOKE",
           "code_version"]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STORAGE = REPO_ROOT / "runs"
MLFLOW_DIR = REPO_ROOT / "mlflow"
DEFAULT_TRACKING_URI = f"sqlite:///{MLFLOW_DIR / 'mlflow.db'}"
DEFAULT_ARTIFACT_ROOT = MLFLOW_DIR / "artifacts"
SMOKE = "-smoke"
"""The end of a --smoke run's names: MLflow experiment `<study>-smoke`, study folder and Optuna study
`<study>-smoke[-NAME]` (adbs_lab/driver/options.py: StudyOptions.folder, experiment), so a smoke run never sits
among the study's own runs, moves its folder aside or shares its Optuna study; `studies/paper.py --smoke` logs its
run in experiment `paper-smoke`."""


def code_version() -> str:
    """git sha of the working tree (+ '-dirty' when it has changes), $ADBS_CODE_VERSION, or 'unknown'."""
    import os
    import subprocess

    if os.environ.get("ADBS_CODE_VERSION"):  # set by studies/submit.py: a Ray Job's copy has no .git
        return os.environ["ADBS_CODE_VERSION"]

    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        )
        if sha.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=5,
        )
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"

