"""Whether a path can be written, checked before any work: the one check behind `python -m adbs.run --out`, a
study's --storage and SQLite stores (adbs_lab/driver/preflight.py, adbs_lab/stores/tracking_store.py: tracking_problem) and
the tools' --out folders (studies/report.py, bench/gpu.py), all through `folder_problem`; and how a file in a
storage others write to is written without following a link (`link_problem`, `write_no_follow`: a study's lock
files, adbs_lab/stores/study_folder.py).

A path that does not exist yet is judged by the nearest folder that does, in which it would be created, and nothing
is written (a dry run and a preflight write nothing): that folder is probed by making and removing an empty folder in
it, because os.access says yes to root even where nothing can be made (/proc, a read-only mount).
Standard library only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def nearest_existing(path: str | os.PathLike) -> Path | None:
    """`path` itself or its nearest parent that exists; None when no part of it does."""
    p = Path(path)
    return next((q for q in (p, *p.parents) if q.exists()), None)


def folder_problem(folder: str | os.PathLike, flag: str, create: bool = True) -> str | None:
    """What is wrong when `folder` cannot be written, `flag` naming it, else None. `create`: make it (with its
    parents) first; otherwise nothing is written (a preflight, a dry run): a folder that does not exist yet is
    judged by the nearest one that does, in which it would be created."""
    folder = Path(folder)
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
    existing = nearest_existing(folder)
    if existing is None:
        return f"{flag}: no part of the path exists; pass a writable folder"
    if not existing.is_dir():
        return (f"{flag}: {existing} is a file, not a folder" + (f", so {folder} cannot be created" if existing != folder
                                                                 else "") + "; pass a writable folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".adbs-write-check-", dir=existing))
    except OSError as e:
        what = "is not writable" if existing == folder else f"cannot be created in {existing}"
        return f"{flag} {what} ({e.strerror or e}); pass a writable folder"
    return None


def out_dir_problem(path: str | os.PathLike, flag: str = "--out") -> str | None:
    """Why folder `path` cannot receive output files (it is a file, lies under a file, cannot be written), or None."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        return f"{flag} {p} is a file; pass a folder (the files are written into it)"
    return folder_problem(p, f"{flag} {p}", create=False)


def out_file_problem(path: str | os.PathLike, flag: str = "--out") -> str | None:
    """Why file `path` cannot be written (it is a folder, its folder cannot be made or written), or None."""
    p = Path(path).expanduser()
    if p.is_dir():
        return f"{flag} {p} is a folder; pass the path of a file to write, e.g. {p / 'run.json'}"
    return folder_problem(p.parent, f"the folder of {flag} {p}", create=False)


def link_problem(path: str | os.PathLike, what: str) -> str | None:
    """Why `path` must not be written, being a symbolic link, or None: files written in a storage that others can
    write to (a shared folder) are never written through a link, or anyone who can make one there could make every
    run overwrite the link's target with the run's rights."""
    p = Path(path)
    if not p.is_symlink():
        return None
    return (f"{what} {p} is a symbolic link (to {os.readlink(p)}); files are never written through links in a "
            f"storage: remove it (rm {p}) if you made it, else ask who did, or pass another --storage")


def write_no_follow(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Write `path` whole without following a link: a new file opened with O_CREAT|O_EXCL|O_NOFOLLOW beside it,
    then renamed over it (a rename replaces a link itself, never its target; a reader sees the old or the new
    content, never half)."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
