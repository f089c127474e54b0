"""Content digests (SHA-256) of input files, computed once per file version and remembered across runs.

The base-session cache key holds what a trial's input files contain, not where they are (adbs/cache.py:
base_key): a dataset copy replaced at the same path, or an index list edited in place, gives another key.
Hashing the CIFAR-100 pickles (~180 MB) on every trial would cost seconds, so a file's digest is remembered
by its version: (device, inode, size, mtime, ctime). A rewrite, a replacement by another file (new inode),
`cp -p`/`rsync -a` keeping the old mtime (ctime still changes) all give a new version and a fresh hash;
an unchanged file is only stat'ed.

The memo is one JSON file, {absolute path: [dev, inode, size, mtime_ns, ctime_ns, sha256]}:
$ADBS_DIGEST_MEMO if set (empty = keep it in this process only), else
${XDG_CACHE_HOME:-~/.cache}/adbs/file-digests.json. Deleting it is safe (files are hashed again). Several
processes may update it at once: each update re-reads it under a file lock and replaces it atomically.
An unwritable memo is not an error: digests are then remembered in this process only (one line says so). Its
lock is waited for LOCK_WAIT_S at most (a path where no lock can be taken, e.g. under /proc, would otherwise wait
forever), and an entry of the wrong shape (a damaged or hand-edited memo) is ignored: the file is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

MEMO_ENV = "ADBS_DIGEST_MEMO"
_CHUNK = 4 * 2**20

_memo: dict[str, list] = {}  # this process's view (loaded once, updated as files are hashed)
_loaded_from: str | None = None
_warned: set[str] = set()  # memo paths already named as unusable (once per process)

_read_only = False  # `read_only`: the memo file is read, never written

LOCK_WAIT_S = 10.0
"""Seconds to wait for the memo's lock; writers hold it for milliseconds, so a longer wait means it cannot be had."""


def memo_path() -> Path | None:
    """Where digests are remembered across processes (None: this process only)."""
    env = os.environ.get(MEMO_ENV)
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "adbs" / "file-digests.json"


def _version(st: os.stat_result) -> list:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _read(path: Path) -> dict[str, list]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _load() -> None:
    global _loaded_from
    where = memo_path()
    key = str(where)
    if _loaded_from != key:
        _memo.clear()
        if where is not None:
            _memo.update(_read(where))
        _loaded_from = key


@contextmanager
def read_only() -> Iterator[None]:
    """Within the block the memo file is read but not written: digests computed there are remembered in this
    process only (a dry run leaves every cache as it found it)."""
    global _read_only
    before, _read_only = _read_only, True
    try:
        yield
    finally:
        _read_only = before


def _save(new: dict[str, list]) -> None:
    """Merge `new` into the memo file (under its lock, atomically); failures leave the in-process memo."""
    where = memo_path()
    if where is None or not new or _read_only:
        return
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(where.with_name(where.name + ".lock"), timeout=LOCK_WAIT_S):
            merged = _read(where)
            merged.update(new)
            tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(merged, separators=(",", ":")))
            os.replace(tmp, where)
    except OSError as e:  # a read-only home, a full disk, a lock never granted (filelock.Timeout is an OSError)
        if str(where) not in _warned:
            _warned.add(str(where))
            print(f"file digests: cannot update the memo {where} ({type(e).__name__}: {str(e)[:120]}); digests are "
                  f"remembered in this process only (set {MEMO_ENV} to a writable file, or to '' to keep them "
                  "in memory)", file=sys.stderr, flush=True)


def _well_formed(entry: object) -> bool:
    """A memo entry as _save writes it: five stat integers and a hex SHA-256 (anything else is hashed again)."""
    return (isinstance(entry, list) and len(entry) == 6 and all(type(v) is int for v in entry[:5])
            and isinstance(entry[5], str) and len(entry[5]) == 64)


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 of one file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_digests(paths: Iterable[str | os.PathLike]) -> list[str]:
    """SHA-256 of each file, from the memo when the file's version is the one remembered."""
    _load()
    out, new = [], {}
    for p in paths:
        full = os.path.abspath(os.fspath(p))
        version = _version(os.stat(full))
        hit = _memo.get(full)
        if hit is not None and _well_formed(hit) and hit[:-1] == version:
            out.append(hit[-1])
            continue
        digest = sha256_file(full)
        after = _version(os.stat(full))
        if after == version:  # not written while we read it: remember it
            new[full] = [*version, digest]
        out.append(digest)
    if new:
        _memo.update(new)
        _save(new)
    return out


def tree_digest(root: str | os.PathLike, files: Iterable[str | os.PathLike]) -> str:
    """One SHA-256 over `files` (their content and their names relative to `root`), order-independent.

    Names count because they decide the data (a file's place in the class order, an index-list line);
    the folder they are in does not, so a dataset copy moved elsewhere keeps its digest.
    """
    root = os.path.abspath(os.fspath(root))
    files = sorted(os.path.abspath(os.fspath(f)) for f in files)
    h = hashlib.sha256()
    for name, digest in zip(files, file_digests(files)):
        h.update(f"{os.path.relpath(name, root)}\0{digest}\n".encode())
    return h.hexdigest()
