"""Base-session reuse: train a base session once, reuse it in every trial that needs it.

A base session is identified by everything that determines it (`base_key`):
every Config field declared Base[...] in adbs/config/schema.py (the data that the base
session sees, the backbone, the host method and its base options, the variant
flags, alpha, optimiser settings, epochs, seed, ...), the content of its input
files (dataset, index lists, pretrained weights: SHA-256, adbs/digests.py), the
runtime settings that change numbers (adbs/runtime.py: device kind, torch
version, CPU threads, TF32/AMP/the fast step on CUDA) and a version of the training code. Fields declared
NotBase[...] act only on incremental sessions (ways, shots, sessions, fine-tuning epochs/lr,
new-boundary init, ...) or on speed, so e.g. every cell of a k-shot grid shares
one base session.

Entries are written atomically (temporary file + rename) with a SHA-256 of
the payload and the entry's key in a manifest; an entry whose payload does not match its manifest
(corrupt or half-written), or whose manifest names another key (copied or renamed from another
configuration's entry), is discarded and retrained, never loaded; so is an entry written before
manifests carried their key (said once per cache). A file
lock makes concurrent trials with the same key train it exactly once: the
first takes the lock and trains, the others wait and then load.

The cache lives in a folder (a shared filesystem on a cluster: a `filelock` lock, flock underneath) or under
an object-store URL (s3://bucket/prefix/base_cache); both are read and written through pyarrow.fs. In an
object store an object PUT is atomic, so entries are written the same way, and the lock is
a lease object the trainer renews while it trains. Object stores have no
create-if-absent in pyarrow, so the lease is best effort: two trials that
start within a second may both train the same entry. That costs time, never
correctness: training is deterministic and each of the two identical writes is
atomic. A lease whose trainer died expires (LEASE_S) and the next waiter trains;
the same trial restarted by Ray Tune takes its own lease over at once (`holder`).

Beside each base session, `features` stores the frozen backbone's features of
an image list (the test set, validation images), so trials sharing a base
session also skip re-running the backbone over them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

from adbs import digests, env, objstore, runtime
from adbs.config import Config, options_of, shapes_base
from adbs.state import base_state, read_base_state

# Bump when a change to adbs/loops.py or a host alters what a base session produces, or when the entry's saved form
# changes (adbs/state.py: FORMAT), so that entries of the old form are simply not looked up.
# 4: entries carry adbs/state.py's FORMAT 2; 3: host methods (adbs/hosts/); 2: channels_last on CPU too (float
# rounding differs)
BASE_CODE_VERSION = "4"


def base_fields() -> tuple[str, ...]:
    """The Config fields declared Base[...]: everything that determines a base session (adbs/config/schema.py)."""
    return tuple(name for name, base in shapes_base(Config).items() if base)


BASE_FIELDS = base_fields()


def base_key(cfg: Config, device_kind: str) -> str:
    """Stable hash of everything that determines the base session of `cfg`.

    The fields are those Config declares Base[...]; a few enter in the form that decides the numbers, so
    configs that train the same base session share it: the variant as "are boundaries learned", alpha and
    the IC reduction only when IC is on, milestones only under the milestones schedule, and of the host's
    options those its Options declares Base[...]. The input files enter by content, not by path
    (`input_digests`), and the runtime settings that change numbers enter as adbs/runtime.py: settings gives
    them (device kind, torch version; CPU threads; TF32, AMP, the fast step and the GPU model on CUDA).
    """
    fields: dict[str, Any] = {k: getattr(cfg, k) for k in base_fields()}
    # device, AMP and the fast step: in the runtime settings below, which take AMP and the fast step on CUDA only (on
    # CPU neither changes a number: AMP is GPU only, the fast step's CPU part reads the same figures in one transfer)
    del fields["variant"], fields["device"], fields["amp"], fields["fast_step"]
    fields["learn_boundaries"] = cfg.learn_boundaries
    fields["alpha"] = cfg.effective_alpha
    fields["ic_reduction"] = cfg.ic_reduction if cfg.effective_alpha else None
    fields["milestones"] = list(cfg.milestones) if cfg.schedule == "milestones" else None
    fields.update(input_digests(cfg))  # data_root, index_list, pretrained: what the files hold
    fields["runtime"] = runtime.settings(cfg, device_kind)
    options = options_of(cfg)
    fields["host_options"] = {k: getattr(options, k) for k, base in shapes_base(type(options)).items() if base}
    fields["code_version"] = BASE_CODE_VERSION
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def input_digests(cfg: Config) -> dict[str, str | None]:
    """SHA-256 of what `cfg`'s input files hold: the dataset's files, the index lists, the pretrained weights.

    The embedded benchmark has no files: its images' own digest enters (adbs/data/synthetic.py: pools_digest), so a
    base session trained on other images (another generator build, a cache file that is not what it claims) is not
    reused.

    The dataset's files are those adbs/data/sources.py: dataset_files names (e.g. the CIFAR-100 train and test
    pickles); digests are remembered per file version (adbs/digests.py), so an unchanged file is not read
    again. Paths themselves do not enter: the same files under another path (or with a trailing '/') give the
    same key, changed files under the same path another.
    """
    from adbs.data import get_spec
    from adbs.data.protocol import index_list_files
    from adbs.data.sources import dataset_files

    spec = get_spec(cfg.dataset)
    out: dict[str, str | None] = {"data_root": None, "index_list": None, "pretrained": None}
    if spec.name == "synthetic":  # no files: the images this process has (loaded from $ADBS_SYNTHETIC_CACHE or made)
        from adbs.data.synthetic import pools_digest

        out["data_root"] = "synthetic:" + pools_digest(cfg.synthetic_seed, cfg.synthetic_version)
    elif cfg.data_root:
        root, files = dataset_files(spec, cfg.data_root)
        out["data_root"] = digests.tree_digest(root, files)
    if cfg.index_list:
        folder, files = index_list_files(spec, cfg.index_list)
        out["index_list"] = digests.tree_digest(folder, files)
    if cfg.pretrained:
        out["pretrained"] = digests.file_digests([os.path.expanduser(cfg.pretrained)])[0]
    return out


class BaseCache:
    """Trained base sessions in a folder or under an object-store URL, safe for concurrent processes."""

    def __init__(self, root: str | os.PathLike, holder: str | None = None,
                 log: Callable[[str], None] | None = None):
        """`holder`: who trains (e.g. the Tune trial id). On an object store, a lease left by a holder of
        the same name (the same trial, restarted after its worker died) is taken over at once instead of
        waiting for it to expire; a filesystem lock dies with its process anyway. `log` gets one line when
        an entry is discarded (default: standard error)."""
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.root = str(root) if objstore.is_url(str(root)) else Path(root)
        self.files = _Files(str(root), holder)
        self.said_unkeyed = False
        """Whether an entry written before entries carried their key was named (once per cache)."""

    def load(self, key: str):
        """The stored base session, or None when absent or failing its checksum (then it is deleted)."""
        state = self._read(key, read_base_state)  # another format (adbs/state.py: FORMAT): discarded, trained again
        return None if state is None else read_base_state(state)

    def holds(self, key: str) -> bool:
        """Whether the cache holds an entry of `key` (its manifest names it), its payload unread and unchecked: what
        a study's time estimate counts before its trials start (adbs_lab/driver/base_sessions.py), where reading
        every payload would cost seconds a trial pays anyway; `load` checks it."""
        manifest = self.files.read(f"{key}.json")
        try:
            return manifest is not None and json.loads(manifest).get("key") == key
        except (ValueError, AttributeError):  # damaged, or not an object: `load` discards it, the trial trains
            return False

    def store(self, key: str, base, meta: dict[str, Any] | None = None) -> None:
        self._write(key, base_state(base), meta)

    def features(self, key: str, name: str, indices, compute: Callable[[], tuple[torch.Tensor, torch.Tensor]]):
        """(features, labels) of the images `indices` under base session `key`'s frozen backbone.

        Stored once per (base session, image list), so every trial on the same base session (e.g. all
        cells of a k-shot grid, whose test sets are the same) skips re-running the backbone over them.
        `name` must hold whatever else changes the numbers (the pool, the eval batch size): an entry
        is only reused for exactly the same computation, so results equal the uncached path's.
        """
        import numpy as np

        digest = hashlib.sha256(np.ascontiguousarray(np.asarray(indices, dtype=np.int64)).tobytes()).hexdigest()[:16]
        fkey = f"{key}.features-{name}-{digest}"
        hit = self._read(fkey, _features_of(len(indices)))
        if hit is not None:
            return hit["features"], hit["labels"]
        f, y = compute()
        # Concurrent trials may both compute it; each write is atomic, so a reader sees one whole entry.
        self._write(fkey, {"features": f.detach().cpu(), "labels": y.detach().cpu()}, {"base_key": key, "n": len(y)})
        return f, y

    def _read(self, key: str, check: Callable[[dict[str, Any]], Any] = lambda d: None) -> dict[str, Any] | None:
        """The entry's payload when its SHA-256 matches and `check` takes it (the shape its reader expects)."""
        manifest, payload = self.files.read(f"{key}.json"), self.files.read(f"{key}.pt")
        if manifest is None or payload is None:
            return None
        try:
            meta = json.loads(manifest)
            if not self._keyed(key, meta):
                self._discard(key)
                return None
            if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch")
            state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)
            if not isinstance(state, dict):
                raise ValueError(f"a {type(state).__name__}, not an entry")
            check(state)
            return state
        except Exception as e:  # corrupt, truncated or from an incompatible version (another shape): recompute
            self._discard(key)
            self.log(f"base-session cache: entry {key} in {self.root} is unreadable ({type(e).__name__}: "
                     f"{str(e)[:120]}); discarded, it is computed again")
            return None

    def _keyed(self, key: str, meta: Any) -> bool:
        """Whether manifest `meta` says its entry is `key`'s; a line when not (a copy, or written before keys)."""
        got = meta.get("key") if isinstance(meta, dict) else None
        if got == key:
            return True
        if got is None:
            if not self.said_unkeyed:
                self.said_unkeyed = True
                self.log(f"base-session cache: entry {key} in {self.root} was written before entries carried their "
                         "key (so may others there, which are not named again); discarded, it is computed again")
        else:
            self.log(f"base-session cache: entry {key} in {self.root} is the entry of {str(got)[:80]!r} (copied or "
                     "renamed?); discarded, it is computed again")
        return False

    def _discard(self, key: str) -> None:
        for name in (f"{key}.pt", f"{key}.json"):
            self.files.delete(name)

    def _write(self, key: str, state: dict[str, Any], meta: dict[str, Any] | None) -> None:
        buf = io.BytesIO()
        torch.save(state, buf)
        blob = buf.getvalue()
        self.files.write(f"{key}.pt", blob)
        # The manifest is written last: an entry without it is incomplete and ignored.
        info = {**(meta or {}), "key": key, "sha256": hashlib.sha256(blob).hexdigest(), "created": time.time()}
        self.files.write(f"{key}.json", json.dumps(info, indent=1, default=str).encode())

    def get_or_train(self, key: str, train: Callable[[], Any], meta: dict[str, Any] | None = None):
        """(base session, reused?) — trains under the key's lock when absent, so it trains once."""
        hit = self.load(key)
        if hit is not None:
            return hit, True
        with self.files.lock(key):
            hit = self.load(key)  # another process may have trained it while we waited
            if hit is not None:
                return hit, True
            base = train()
            self.store(key, base, meta)
            return base, False


def _features_of(n: int) -> Callable[[dict[str, Any]], None]:
    """The check of a features entry: features and labels of the n images it is read for."""
    def check(entry: dict[str, Any]) -> None:
        if not len(entry["features"]) == len(entry["labels"]) == n:
            raise ValueError(f"{len(entry['features'])} features and {len(entry['labels'])} labels for {n} images")
    return check


LEASE_S = env.seconds("ADBS_CACHE_LEASE_S")
"""Seconds a trainer's lease on an object-store cache key lasts without renewal (renewed every LEASE_S/4)."""


class _Files:
    """The cache's files under a folder or an object-store URL, both through pyarrow.fs.

    What differs is kept, and only that: where a store has no atomic PUT (a folder, HDFS, ABFS) an entry is
    written under a temporary name and renamed; the train-once lock is a file lock (filelock, an flock
    underneath: NFS v4, Lustre) in a folder, and a renewed lease object in an object store, which has no locks.
    """

    def __init__(self, root: str, holder: str | None = None):
        self.holder = holder
        self.local = not objstore.is_url(root)
        if self.local:
            import pyarrow.fs as pafs

            self.fs, self.prefix = pafs.LocalFileSystem(), os.path.abspath(root)
            self.fs.create_dir(self.prefix, recursive=True)
        else:
            self.fs, self.prefix = objstore.open_fs(root)
        self.prefix = self.prefix.rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def read(self, name: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(self._path(name)) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        # S3 and GCS make an object visible whole when its upload completes; a folder and other stores
        # (HDFS, ABFS) get a temporary name and a rename.
        if self.fs.type_name in ("s3", "gcs"):
            with self.fs.open_output_stream(self._path(name)) as f:
                f.write(data)
            return
        tmp = self._path(f".{name}.{uuid.uuid4().hex}.tmp")
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        if self.local:  # on disk before the rename makes it the entry (pyarrow.fs has no fsync)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.fs.move(tmp, self._path(name))

    def delete(self, name: str) -> None:
        try:
            self.fs.delete_file(self._path(name))
        except FileNotFoundError:
            pass

    def lock(self, key: str):
        """Held by one process at a time: who trains entry `key` (the others wait, then load it)."""
        return FileLock(self._path(f"{key}.lock")) if self.local else self._lease(key)

    def _read_lease(self, name: str) -> dict[str, Any] | None:
        raw = self.read(name)
        try:
            held = None if raw is None else json.loads(raw)
        except ValueError:
            return None
        return held if isinstance(held, dict) else None  # a damaged lease: as none (it would expire anyway)

    def _lease_doc(self, me: str) -> bytes:
        return json.dumps({"owner": me, "holder": self.holder, "expires": time.time() + LEASE_S}).encode()

    @contextmanager
    def _lease(self, key: str):
        name, me = f"{key}.lease", f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        while True:
            held = self._read_lease(name)
            mine = held is not None and self.holder is not None and held.get("holder") == self.holder
            if held is None or mine or held.get("expires", 0) < time.time():
                self.write(name, self._lease_doc(me))
                time.sleep(1.0)  # let a concurrent claimant's write land; the last write wins
                held = self._read_lease(name)
                if held is not None and held.get("owner") == me:
                    break
            time.sleep(2.0)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(LEASE_S / 4):
                self.write(name, self._lease_doc(me))

        renewer = threading.Thread(target=renew, name=f"adbs-cache-lease-{key}", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            if (self._read_lease(name) or {}).get("owner") == me:
                self.delete(name)
