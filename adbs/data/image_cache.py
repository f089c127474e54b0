"""Generated image pools kept in a folder between processes (adbs/data/synthetic.py: $ADBS_SYNTHETIC_CACHE), verified.

Each file holds the pools, a SHA-256 of what they hold (names, labels, image bytes) and its key (the name `path` gives
it), both checked on every load: a file damaged in place (same size: torch.load alone takes it) or cut short, and a
file copied or renamed to another key's name (another seed's or version's images under this one's name, which its own
digest cannot tell), are named in one line and the pools are generated again, never used. A file written before files
carried their key is generated again too (said once per process). A folder that cannot be written (read-only:
torch.save raises RuntimeError, not OSError; a path naming a file) is named in one line too, and the pools stay in the
process's memory.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import torch

from .pool import ImagePool


def content_digest(pools: tuple[ImagePool, ImagePool]) -> str:
    """SHA-256 of what the (train, test) pools hold: names, labels and image bytes (~0.1 s for 60000 images)."""
    h = hashlib.sha256()
    for p in pools:
        assert p.images is not None, "only in-memory pools are cached"
        h.update(p.name.encode() + b"\0")
        h.update(np.ascontiguousarray(p.labels, dtype=np.int64).tobytes())
        h.update(p.images.contiguous().numpy().data)
    return h.hexdigest()


def path(folder: str, stem: str, generator: bytes) -> Path:
    """Where pools named `stem` are kept in `folder`: the name holds a digest of `generator` (the source that makes
    them) and of numpy's and torch's versions, so a file is only reused where it would be generated the same."""
    digest = hashlib.sha256(generator + f"{np.__version__} {torch.__version__}".encode())
    return Path(folder).expanduser() / f"{stem}-{digest.hexdigest()[:16]}.pt"


def load(path: Path) -> tuple[tuple[ImagePool, ImagePool], str] | None:
    """((train, test), digest) from `path` when it holds them whole; None (and a line where it was damaged)."""
    try:
        saved = torch.load(path, weights_only=True)
    except (FileNotFoundError, NotADirectoryError):  # not written yet, or the folder is a file (store says so)
        return None
    except Exception as e:  # half-written by a killed process, or unreadable
        _note(f"{path} is unreadable ({type(e).__name__}); the images are generated again")
        return None
    if not _keyed(path, saved):
        return None
    try:
        train, test = (ImagePool(d["labels"].numpy(), images=d["images"], name=d["name"]) for d in saved["pools"])
        pools = (train, test)
        digest = content_digest(pools)
        if digest != saved["sha256"]:
            raise ValueError("its images do not match the digest it was written with")
    except Exception as e:  # damaged in place (same size), or not a file this module wrote
        _note(f"{path} is damaged ({str(e)[:100] or type(e).__name__}); the images are generated again")
        return None
    return pools, digest


def store(path: Path, pools: tuple[ImagePool, ImagePool], digest: str, env: str) -> None:
    """Write the pools and their digest atomically; an unusable folder is named in one line, never an error."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        saved = {"key": path.stem, "sha256": digest,
                 "pools": [{"labels": torch.from_numpy(p.labels), "images": p.images, "name": p.name} for p in pools]}
        torch.save(saved, tmp)
        os.replace(tmp, path)  # atomic: a reader sees no file or a whole one
    except Exception as e:  # read-only or full (torch raises RuntimeError, not OSError), or a path naming a file
        _note(f"cannot write to {env}={path.parent} ({type(e).__name__}: {str(e)[:100]}); the images stay "
              "in this process's memory (each process generates them); set it to a writable folder, or unset it")
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


_said_unkeyed = False


def _keyed(path: Path, saved: object) -> bool:
    """Whether the file at `path` says it is the entry of the key its name gives; a line when not."""
    global _said_unkeyed
    got = saved.get("key") if isinstance(saved, dict) else None
    if got == path.stem:
        return True
    if got is None:
        if not _said_unkeyed:
            _said_unkeyed = True
            _note(f"{path} was written before files carried their key (so was any other such file in "
                  f"{path.parent}); the images are generated again and the file rewritten")
        return False
    _note(f"{path} holds the images of {str(got)[:100]!r}, not of {path.stem!r} (copied or renamed?); the images are "
          "generated again")
    return False


def _note(line: str) -> None:
    print(f"synthetic image cache: {line}", file=sys.stderr, flush=True)
