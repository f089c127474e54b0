"""Absolute locations, whatever the working directory (Ray trials run inside their trial folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT", "DEFAULT_STORAGE", "MLFLOW_DIR", "DEFAULT_TRACKING_URI", "DEFAULT_ARTIFACT_ROOT", "SMOKE",
           "DATABASES", "artifact_root", "code_version"]

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
DATABASES = ("postgresql", "postgres", "mysql", "mssql", "oracle")
"""URI schemes of a database server MLflow keeps its runs in (a driver after '+': postgresql+psycopg://)."""


def artifact_root(uri: str, storage: str | None = None) -> str | None:
    """Where an experiment made in tracking store `uri` keeps its artifacts, for the study that makes it and the
    MLflow server that serves the store (adbs_lab/stores/serve.py's default): beside a SQLite store
    (`<db dir>/artifacts`); for a database server, under the study's --storage (`<storage>/mlflow_artifacts`; the
    project's mlflow/artifacts when --storage is an object store or not given); None for a tracking server, which
    decides its own (its --artifacts-destination). Never None for a database: MLflow would put them in ./mlruns of
    whatever folder the command runs in."""
    if uri == DEFAULT_TRACKING_URI:
        return DEFAULT_ARTIFACT_ROOT.as_uri()
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "artifacts").resolve().as_uri()
    if uri.split("://", 1)[0].split("+", 1)[0] in DATABASES:
        if storage and "://" not in storage:  # a folder (an object-store URL is not one MLflow's file store writes)
            return (Path(storage).expanduser().resolve() / "mlflow_artifacts").as_uri()
        return DEFAULT_ARTIFACT_ROOT.as_uri()
    return None


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

