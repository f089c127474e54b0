"""Absolute locations, whatever the working directory (Ray trials run inside their trial folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT", "DEFAULT_STORAGE", "MLFLOW_DIR", "DEFAULT_TRACKING_URI", "DEFAULT_ARTIFACT_ROOT", "SMOKE",
           "DATABASES", "alias_problem", "BASE_CACHE", "STORAGE_ARTIFACTS", "LOCK_SUFFIXES", "folder_taken", "artifact_root",
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
DATABASES = ("postgresql", "postgres", "mysql", "mssql", "oracle")
"""URI schemes of a database server MLflow keeps its runs in (a driver after '+': postgresql+psycopg://)."""


def alias_problem(url: str) -> str | None:
    """What is wrong with a database URL written with a scheme alias no store accepts (postgres://: SQLAlchemy 1.4
    dropped it, and MLflow and Optuna refuse it), or None: one sentence for every check of a store's URL."""
    if str(url).split("://", 1)[0].lower().split("+", 1)[0] == "postgres":
        return "the scheme postgres:// is not accepted by MLflow or Optuna: write postgresql://"
    return None


BASE_CACHE = "base_cache"
"""The folder of a --storage that holds the base-session cache every study of that storage shares (adbs/cache.py)."""
STORAGE_ARTIFACTS = "mlflow_artifacts"
"""The folder of a --storage that holds the MLflow artifacts of its studies' runs (a database server as the store)."""
LOCK_SUFFIXES = (".lock", ".lock.json")
"""What a study's lock file and its holder file add to its folder's name, beside it in --storage
(adbs_lab/stores/study_folder.py: StudyLock)."""


def folder_taken(folder: str) -> str | None:
    """What else of a --storage a study folder named `folder` would be, or None: the storage's shared folders, or
    another study's lock files (`<name>.lock`, `<name>.lock.json`)."""
    if folder == BASE_CACHE:
        return "the base-session cache every study of the storage shares"
    if folder == STORAGE_ARTIFACTS:
        return "the MLflow artifacts of every study of the storage"
    for suffix in LOCK_SUFFIXES:
        if folder.endswith(suffix) and folder != suffix:
            return f"the {'lock' if suffix == '.lock' else 'lock-holder'} file of the study {folder[:-len(suffix)]!r}"
    return None


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
            return (Path(storage).expanduser().resolve() / STORAGE_ARTIFACTS).as_uri()
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

