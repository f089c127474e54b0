"""Where a study keeps its files: a folder, or a prefix in an object store.

A study's files come from two writers:
- the trials (on any node) write results and checkpoints through Ray Tune (`<study>/tune/`), and
  base sessions through adbs.cache (`<storage>/base_cache/`); both speak pyarrow.fs, so a URL
  works as it is;
- the driver writes optuna.db (SQLite), mlflow_runs.json (trial -> MLflow run), study.json (what the
  study is) and, at the end, the tables, figures and report. SQLite cannot live in an object
  store, so with a URL these are written to a local staging folder (`local`) and uploaded.

Nothing may be lost when the driver dies (a preempted head node, a stopped Ray Job): the Optuna
database and mlflow_runs.json are snapshotted into Tune's experiment state each time Tune saves
it (StudySearch.save, see `snapshot_into`), so the snapshot Tune uploads always matches the
trial list it uploads with it, and `--resume` on any machine continues from that pair.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from adbs import objstore as st
from adbs.redaction import redact
from adbs.writable import link_problem, write_no_follow
from adbs_lab.stores import paths

if TYPE_CHECKING:
    from filelock import BaseFileLock

SNAPSHOT_DIR = "study_files"
"""Folder inside Tune's experiment folder holding the driver's files, uploaded with Tune's state."""
SNAPSHOT_FILES = ("optuna.db", "mlflow_runs.json")  # tracking.RUNS_FILE


BUSY_ADVICE = "wait for it to end, or pass --name NAME to run another study beside it"
"""What the refusal of a second copy of a running study tells the user to do (StudyLock); a study whose runs hold
more than one folder (studies/ablation_path.py) says its own."""

_REBOUND: dict[str, dict[str, str]] = {}


def rebind(folder: str, **paths: str) -> None:
    """This driver's machine-local paths for study `folder` (optuna_url, study_dir).

    On --resume, Tune unpickles the searcher, the stopper and the tracker with the paths of the
    driver that started the study; for an object store those named a staging folder that may be
    gone (another machine, a new temporary folder). Their __setstate__ asks `rebound` instead.
    A registry, because nothing else reaches them: Tuner.restore takes no searcher, stopper or callbacks
    (ray/tune/tuner.py), and what Tune hands them later (Searcher.set_search_properties: the param space,
    Callback.setup: sample counts) carries no paths of the study.
    """
    _REBOUND[folder] = dict(paths)


def rebound(folder: str, name: str, value):
    """The path `name` of study `folder` as bound in this process, else `value` (unchanged)."""
    got = _REBOUND.get(folder, {}).get(name)
    # a str as bound (a SecretUrl stays one: str() of it is the redacted URL); a Path as a Path
    return value if got is None else got if value is None or isinstance(value, str) else type(value)(got)


def snapshot_into(directory: str, files: dict[str, str]) -> None:
    """Copy the driver's files into `directory`/study_files, each atomically; SQLite through its
    backup API, so a snapshot taken while Optuna writes is still a consistent database."""
    out = Path(directory) / SNAPSHOT_DIR
    out.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        if not os.path.exists(src):
            continue
        tmp = out / f".{name}.tmp"
        if name.endswith(".db"):
            tmp.unlink(missing_ok=True)
            s, d = sqlite3.connect(src), sqlite3.connect(tmp)
            try:
                s.backup(d)
            finally:
                d.close()
                s.close()
        else:
            shutil.copyfile(src, tmp)
        os.replace(tmp, out / name)


IMAGES = "images"
"""The folder of a local storage's base-session cache that holds the generated images (`images_location`)."""


class StudyFolder:
    """The study's folder `<storage>/<folder>`: a path, or a prefix under an object-store URL.

    Both are read and written through pyarrow.fs (`fs`, `path`); what differs is kept, and only that: with a
    URL the driver's files are staged in a local folder (`local`, SQLite cannot live in an object store) and
    uploaded (`push`), an object store has no rename (`move_aside` copies), and no locks (`StudyLock`).
    """

    def __init__(self, storage: str, folder: str):
        self.storage, self.folder = storage, folder
        self.remote = st.is_url(storage)
        self.url: str | None  # the folder's URL; None for a local folder
        if self.remote:
            self.url = st.join(storage, folder)
            self.fs, self.path = st.open_fs(self.url)
            self.path = self.path.rstrip("/")
            self.local = Path(tempfile.mkdtemp(prefix=f"adbs-{folder}-"))
        else:
            import pyarrow.fs as pafs

            self.url = None
            self.local = Path(storage).expanduser().resolve() / folder
            self.fs, self.path = pafs.LocalFileSystem(), str(self.local)

    def _remote_url(self) -> str:
        """The folder's URL, for the code paths taken only when `remote` (the URL is set exactly then)."""
        if self.url is None:
            raise ValueError(f"{self.local} is a local folder: it has no URL")
        return self.url

    def __str__(self) -> str:
        return redact(self._remote_url()) if self.remote else str(self.local)

    def display(self, name: str) -> str:
        """Where file `name` of the study ends up (printable: no credentials)."""
        return redact(st.join(self._remote_url(), name)) if self.remote else str(self.local / name)

    def _beside(self, name: str) -> str:
        """Where `<storage>/<name>` is (printable), e.g. the folder an earlier study was moved aside to."""
        return redact(st.join(self.storage, name)) if self.remote else str(self.local.parent / name)

    @property
    def cache_location(self) -> str:
        """The base-session cache beside the study folders, shared by every study in `storage`."""
        return (st.join(self.storage, paths.BASE_CACHE) if self.remote
                else str(self.local.parent / paths.BASE_CACHE))

    @property
    def images_location(self) -> str:
        """Where the trial processes keep the embedded benchmark's generated images (adbs/data/synthetic.py:
        CACHE_ENV), so each process after the first loads them instead of generating them again: a folder of the
        base-session cache for a local storage; for an object store, a folder of this machine's temporary directory
        (the cache reads local files; each node makes its own)."""
        if self.remote:
            return os.path.join(tempfile.gettempdir(), f"adbs-images-{os.getuid()}")
        return str(Path(self.cache_location) / IMAGES)

    def cache_problem(self) -> str | None:
        """The refusal when the base-session cache of a local storage is a symbolic link: every study of the
        storage writes its entries in it, so, like the study's folder (`StudyLock`), it is never written through a
        link someone put there (adbs/writable.py: link_problem)."""
        return None if self.remote else link_problem(self.cache_location, "the storage's base-session cache folder")

    def tune_location(self) -> tuple[str, object | None]:
        """(storage_path, storage_filesystem) for Tune's RunConfig: experiments go to `<folder>/tune`."""
        return (self.path, self.fs) if self.remote else (str(self.local), None)

    def tune_experiment(self) -> str:
        """The Tune experiment path (for Tuner.can_restore / Tuner.restore with `tune_location()[1]`)."""
        return f"{self.path}/tune"

    # -- reading and moving ------------------------------------------------------------------

    def read_text(self, name: str) -> str | None:
        try:
            with self.fs.open_input_stream(f"{self.path}/{name}") as f:
                return f.read().decode()
        except FileNotFoundError:
            return None

    def in_use(self) -> bool:
        """Whether the folder holds anything (an earlier study of the same name)."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self.path, allow_not_found=True, recursive=False)
        return bool(self.fs.get_file_info(sel))

    def aside_stamp(self) -> str:
        """The suffix `move_aside` gives the earlier results now: `<folder>.<stamp>`."""
        return time.strftime("%Y%m%d-%H%M%S")

    def aside(self, stamp: str) -> str:
        """Where `move_aside(stamp)` puts the earlier results (printable)."""
        return self._beside(f"{self.folder}.{stamp}")

    def move_aside(self, stamp: str | None = None) -> str:
        """Move earlier results to `<folder>.<timestamp>` (never overwritten); returns where they went."""
        import pyarrow.fs as pafs

        stamp = stamp or self.aside_stamp()
        dest = f"{self.path}.{stamp}"
        if self.remote:  # object stores have no rename: copy every object, then delete the originals
            pafs.copy_files(self.path, dest, source_filesystem=self.fs, destination_filesystem=self.fs)
            self.fs.delete_dir(self.path)
        else:
            self.fs.move(self.path, dest)
        return self.aside(stamp)

    def running(self, advice: str = BUSY_ADVICE) -> str | None:
        """Who runs this study right now (StudyLock's refusal message, ending in `advice`), or None; probes the lock
        without taking it and writes nothing (the preflight, --dry-run)."""
        return StudyLock.held_by(self, advice)

    def lock(self, command: str, advice: str = BUSY_ADVICE) -> "StudyLock":
        """Hold `<storage>/<folder>.lock` while this driver runs the study; StudyBusy names the holder if taken (and
        says `advice`: what to do instead)."""
        return StudyLock(self, command, advice)

    def prepare(self) -> None:
        """Create the local folder (the staging folder for a URL) and, for a URL, check it is writable."""
        self.local.mkdir(parents=True, exist_ok=True)
        if self.remote:
            st.check_writable(self._remote_url())

    # -- object store: staging <-> store -----------------------------------------------------

    def pull_for_resume(self) -> list[str]:
        """Download study.json and the last snapshot of optuna.db/mlflow_runs.json into the staging folder."""
        got: list[str] = []
        if not self.remote:
            return got
        wanted = {"study.json": f"{self.path}/study.json",
                  **{n: f"{self.path}/tune/{SNAPSHOT_DIR}/{n}" for n in SNAPSHOT_FILES}}
        for name, src in wanted.items():
            try:
                with self.fs.open_input_stream(src) as f:
                    (self.local / name).write_bytes(f.read())
                got.append(name)
            except FileNotFoundError:
                pass
        return got

    def push(self, files: list[Path] | None = None) -> None:
        """Upload the staging folder's files (or `files` from it) to the study's prefix; no-op for a folder."""
        if not self.remote:
            return
        files = sorted(p for p in self.local.iterdir() if p.is_file()) if files is None else files
        for p in files:
            src = Path(p)
            if src.suffix == ".db":  # a consistent copy, even while Optuna holds the database open
                snapshot_into(str(self.local / ".upload"), {src.name: str(src)})
                src = self.local / ".upload" / SNAPSHOT_DIR / src.name
            with open(src, "rb") as fh, self.fs.open_output_stream(f"{self.path}/{Path(p).name}") as out:
                shutil.copyfileobj(fh, out, 1 << 20)
        shutil.rmtree(self.local / ".upload", ignore_errors=True)

    def cleanup(self) -> None:
        """Remove the staging folder once everything is uploaded."""
        if self.remote:
            shutil.rmtree(self.local, ignore_errors=True)


class StudyBusy(RuntimeError):
    """The study's folder cannot be taken: another driver is running this study, or its lock files are links
    (`_link_message`); the message says which."""


def _busy_message(where: StudyFolder, held: dict, advice: str = BUSY_ADVICE) -> str:
    return (f"study {where.folder!r} is already running in {where.storage} (PID {held.get('pid', '?')} "
            f"on {held.get('host', '?')}, started {held.get('started', '?')}: {held.get('command', '?')}); "
            f"{advice}")


class StudyLock:
    """One driver per study folder: two copies of a study must never move each other's live files aside.

    A folder: a file lock (filelock, an flock underneath) on `<storage>/<folder>.lock`, released by the kernel
    when the driver dies, so a crashed study never blocks its own --resume; who holds it is written beside it
    (`<folder>.lock.json`), for the refusal message. An object store has no locks: a lease object
    `<folder>.lock` (who holds it) whose timestamp the driver renews every RENEW_S; a lease older than TTL_S
    belongs to a dead driver and is taken over, as is at once a lease whose driver ran on this machine and is gone.
    """

    RENEW_S, TTL_S = 15.0, 60.0

    def __init__(self, where: StudyFolder, command: str, advice: str = BUSY_ADVICE):
        self.where, self.advice = where, advice
        self.info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "command": command, "renewed": time.time()}
        self._holder = f"{where.path}.lock" if where.remote else f"{where.path}.lock.json"
        self._filelock: BaseFileLock | None = None  # held only for a local folder
        self._stop = threading.Event()
        if where.remote:
            self._take_lease()
        else:
            self._take_filelock()

    def _message(self, held: dict) -> str:
        return _busy_message(self.where, held, self.advice)

    @classmethod
    def held_by(cls, where: StudyFolder, advice: str = BUSY_ADVICE) -> str | None:
        """The refusal message when another driver holds `where`'s lock, else None; takes nothing, writes nothing.
        A folder: the lock file, if there is one, is tried with a non-blocking flock on a read-only handle (the lock
        filelock takes is the same flock) and let go at once."""
        probe = object.__new__(cls)
        probe.where = where
        probe._holder = f"{where.path}.lock" if where.remote else f"{where.path}.lock.json"
        if where.remote:
            held = probe._read_holder()
            alive = held and time.time() - float(held.get("renewed", 0)) < cls.TTL_S and not cls._dead_here(held)
            return _busy_message(where, held, advice) if alive and held.get("pid") != os.getpid() else None
        import fcntl

        linked = probe._link_message()
        if linked:
            return linked
        try:
            fd = os.open(f"{where.path}.lock", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:  # no lock file: nobody ever ran it here (or it cannot be read: the run will say so)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _busy_message(where, probe._read_holder(), advice)
        finally:
            os.close(fd)  # closing the handle lets go of a lock taken through it
        return None

    def _read_holder(self) -> dict:
        try:
            with self.where.fs.open_input_stream(self._holder) as f:
                held = json.loads(f.read().decode() or "{}")
        except (FileNotFoundError, ValueError):  # none yet, or being written
            return {}
        return held if isinstance(held, dict) else {}  # damaged: as none (a live holder rewrites it, renewing)

    def _write_holder(self) -> None:
        self.info["renewed"] = time.time()
        if not self.where.remote:  # a shared folder: never through a link someone put there (adbs/writable.py)
            write_no_follow(self._holder, json.dumps(self.info).encode())
            return
        with self.where.fs.open_output_stream(self._holder) as out:
            out.write(json.dumps(self.info).encode())

    def _link_message(self) -> str | None:
        """The refusal when the study's folder, its lock file or its holder file is a symbolic link (a local
        folder): every file of the study is written inside that folder, so a link there would take them all."""
        return (link_problem(self.where.path, "the study's folder")
                or link_problem(f"{self.where.path}.lock", "the study's lock file")
                or link_problem(self._holder, "the study's lock-holder file"))

    def _take_filelock(self) -> None:
        from filelock import FileLock, Timeout

        self.where.local.parent.mkdir(parents=True, exist_ok=True)
        linked = self._link_message()
        if linked:
            raise StudyBusy(linked)
        lock = FileLock(f"{self.where.path}.lock", timeout=0, thread_local=False)  # released by any thread
        try:
            lock.acquire()  # filelock opens the lock file with O_NOFOLLOW: a link made since the check is ELOOP
        except Timeout:
            raise StudyBusy(self._message(self._read_holder())) from None
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise StudyBusy(self._link_message() or f"the study's lock file {self.where.path}.lock is a symbolic "
                            "link; remove it and run again") from None
        self._write_holder()
        self._filelock = lock

    def _take_lease(self) -> None:
        held = self._read_holder()
        if held and time.time() - float(held.get("renewed", 0)) < self.TTL_S and held.get("pid") != os.getpid() \
                and not self._dead_here(held):
            raise StudyBusy(self._message(held))
        self._write_holder()
        threading.Thread(target=self._renew, daemon=True, name="study-lease").start()

    @staticmethod
    def _dead_here(held: dict) -> bool:
        """Whether the lease's driver ran on this machine and is gone (killed: its lease was never deleted),
        so its own --resume need not wait for the lease to expire."""
        if held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
            return False
        try:
            os.kill(held["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False

    def _renew(self) -> None:
        while not self._stop.wait(self.RENEW_S):
            try:
                self._write_holder()
            except Exception:  # noqa: BLE001 - a missed renewal only shortens the lease
                pass

    def release(self) -> None:
        self._stop.set()
        if self._filelock is not None:
            # the lock file and its .json stay (empty of meaning once unlocked): another driver may hold it now
            self._filelock.release()
            self._filelock = None
        elif self.where.remote:
            try:
                self.where.fs.delete_file(self._holder)
            except Exception:  # noqa: BLE001 - an expired lease is taken over anyway
                pass
