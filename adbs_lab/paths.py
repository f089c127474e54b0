"""Absolute locations, whatever the working directory (Ray trials run inside their trial folder)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT", "DEFAULT_STORAGE", "MLFLOW_DIR", "DEFAULT_TRACKING_URI", "DEFAULT_ARTIFACT_ROOT",
           "folder_problem", "code_version", "out_dir_problem"]

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STORAGE = REPO_ROOT / "runs"
MLFLOW_DIR = REPO_ROOT / "mlflow"
DEFAULT_TRACKING_URI = f"sqlite:///{MLFLOW_DIR / 'mlflow.db'}"
DEFAULT_ARTIFACT_ROOT = MLFLOW_DIR / "artifacts"


def folder_problem(folder: Path, flag: str, create: bool = True) -> str | None:
    """What is wrong when `folder` cannot be written, `flag` naming it, else None. `create`: make it (with its
    parents) first; otherwise nothing is written (a preflight, a dry run): a folder that does not exist yet is
    judged by the nearest one that does, in which it would be created."""
    import os

    if not create:
        return _creatable_problem(folder, flag)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"{flag}: cannot create it ({e}); pass a writable folder"
    if not os.access(folder, os.W_OK):
        return f"{flag} is not writable; pass a writable folder"
    return None


def _creatable_problem(folder: Path, flag: str) -> str | None:
    import os

    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return f"{flag}: no part of the path exists; pass a writable folder"
    if not existing.is_dir():
        return (f"{flag}: {existing} is a file, not a folder" + (f", so {folder} cannot be created" if existing != folder
                                                                 else "") + "; pass a writable folder")
    # A probe folder made and removed at once: os.access says yes to root even where nothing can be made (/proc,
    # a read-only mount), and the probe leaves nothing behind.
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".adbs-write-check-", dir=existing))
    except OSError as e:
        what = "is not writable" if existing == folder else f"cannot be created in {existing}"
        return f"{flag} {what} ({e.strerror or e}); pass a writable folder"
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


def out_dir_problem(path: str | Path, flag: str = "--out") -> str | None:
    """Why folder `path` cannot receive output files (it is a file, lies under a file, is not writable), or None.

    Checked before any work, so a long computation never ends in a traceback at the write."""
    import os

    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        return f"{flag} {p} is a file; pass a folder (the files are written into it)"
    up = p
    while not up.exists() and up != up.parent:
        up = up.parent
    if not up.is_dir():
        return f"{flag} {p}: {up} is a file, so no folder can be made there; pass another folder"
    if not os.access(up, os.W_OK | os.X_OK):
        return f"{flag} {p}: {up} is not writable; pass a writable folder"
    return None
