"""Base-session reuse: train a base session once, reuse it in every trial that needs it.

A base session is identified by everything that determines it (`base_key`):
the data that the base session sees, the backbone, the base-session variant
flags, alpha, optimiser settings, epochs, seed, device kind and a version of
the training code. Fields that only act on incremental sessions (ways, shots,
sessions, fine-tuning epochs/lr, new-boundary init, ...) are not part of it,
so e.g. every cell of a k-shot grid shares one base session.

Entries are written atomically (temporary file + rename) with a SHA-256 of
the payload in a manifest; an entry whose payload does not match its manifest
(corrupt or half-written) is discarded and retrained, never loaded. A file
lock makes concurrent trials with the same key train it exactly once: the
first takes the lock and trains, the others wait and then load.

Beside each base session, `features` stores the frozen backbone's features of
an image list (the test set, validation images), so trials sharing a base
session also skip re-running the backbone over them.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from adbs.config import Config

# Bump when a change to adbs.train alters what a base session produces.
BASE_CODE_VERSION = "2"  # 2: channels_last on CPU too (float rounding differs)

# Fields that determine the base session (method.md: base training, prototype replacement).
# Everything else acts only on incremental sessions or on speed, not on numbers.
BASE_FIELDS = (
    "dataset", "data_root", "index_list", "split_seed", "val_fraction", "base_images_per_class", "synthetic_seed",
    "backbone", "pretrained", "temperature", "abs_margin", "ic_reduction", "margin_weight_decay",
    "base_epochs", "base_lr", "schedule", "gamma", "batch_size", "momentum", "weight_decay", "seed",
)  # fmt: skip


def base_key(cfg: Config, device_kind: str) -> str:
    """Stable hash of everything that determines the base session of `cfg`."""
    fields: dict[str, Any] = {k: getattr(cfg, k) for k in BASE_FIELDS}
    fields["milestones"] = list(cfg.milestones) if cfg.schedule == "milestones" else None
    fields["learn_margins"] = cfg.learn_margins
    fields["alpha"] = cfg.effective_alpha
    fields["ic_reduction"] = cfg.ic_reduction if cfg.effective_alpha else None
    fields["device_kind"] = device_kind  # CPU and GPU (AMP) numbers differ
    fields["amp"] = cfg.amp if device_kind == "cuda" else False
    fields["code_version"] = BASE_CODE_VERSION
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class BaseCache:
    """A folder of trained base sessions, safe for concurrent processes on one filesystem."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _paths(self, key: str) -> tuple[Path, Path, Path]:
        return self.root / f"{key}.pt", self.root / f"{key}.json", self.root / f"{key}.lock"

    def load(self, key: str):
        """The stored base session, or None when absent or failing its checksum (then it is deleted)."""
        from adbs.train import BaseSession

        state = self._read(key)
        return None if state is None else BaseSession(**state)

    def store(self, key: str, base, meta: dict[str, Any] | None = None) -> None:
        from adbs.train import _base_state

        self._write(key, _base_state(base), meta)

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
        hit = self._read(fkey)
        if hit is not None:
            return hit["features"], hit["labels"]
        f, y = compute()
        # Concurrent trials may both compute it; each write is atomic, so a reader sees one whole entry.
        self._write(fkey, {"features": f.detach().cpu(), "labels": y.detach().cpu()}, {"base_key": key, "n": len(y)})
        return f, y

    def _read(self, key: str) -> dict[str, Any] | None:
        payload, manifest, _ = self._paths(key)
        if not (payload.exists() and manifest.exists()):
            return None
        try:
            meta = json.loads(manifest.read_text())
            blob = payload.read_bytes()
            if hashlib.sha256(blob).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch")
            return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
        except Exception:  # corrupt, truncated or from an incompatible version: recompute
            for p in (payload, manifest):
                p.unlink(missing_ok=True)
            return None

    def _write(self, key: str, state: dict[str, Any], meta: dict[str, Any] | None) -> None:
        payload, manifest, _ = self._paths(key)
        buf = io.BytesIO()
        torch.save(state, buf)
        blob = buf.getvalue()
        _atomic_write(payload, blob)
        # The manifest is written last: an entry without it is incomplete and ignored.
        info = {"sha256": hashlib.sha256(blob).hexdigest(), "created": time.time(), **(meta or {})}
        _atomic_write(manifest, json.dumps(info, indent=1, default=str).encode())

    @contextmanager
    def _locked(self, key: str):
        _, _, lock = self._paths(key)
        with open(lock, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def get_or_train(self, key: str, train: Callable[[], Any], meta: dict[str, Any] | None = None):
        """(base session, reused?) — trains under the key's lock when absent, so it trains once."""
        hit = self.load(key)
        if hit is not None:
            return hit, True
        with self._locked(key):
            hit = self.load(key)  # another process may have trained it while we waited
            if hit is not None:
                return hit, True
            base = train()
            self.store(key, base, meta)
            return base, False


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
