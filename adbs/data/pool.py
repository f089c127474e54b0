"""ImagePool: every image of one original split (train or test) of a dataset."""

from __future__ import annotations

import threading

import numpy as np
import torch

from .errors import DataError

# Decoded images of file-based pools are kept in memory up to this many bytes per pool
# (first come, first kept), so few-shot sets and small datasets are decoded once per process.
DECODE_CACHE_BYTES = 512 * 2**20


class ImagePool:
    """Labels plus images, either held in memory or read lazily from files.

    labels: np.int64 [N] class ids (the benchmark's class order).
    images: torch.uint8 [N, 3, H, W] (in-memory pools: synthetic, cifar100), or None.
    paths:  list[str] of image files decoded to RGB on `load` (mini_imagenet, cub200), or None.
    keys:   list[str] names that index-list lines are matched against (file-based pools), or None.
    Pools are shared between FSCILData objects of one process (they are cached): treat them
    as read-only.
    """

    def __init__(
        self,
        labels: np.ndarray,
        *,
        images: torch.Tensor | None = None,
        paths: list[str] | None = None,
        keys: list[str] | None = None,
        name: str = "",
    ):
        labels = np.asarray(labels, dtype=np.int64)
        if (images is None) == (paths is None):
            raise ValueError("ImagePool needs exactly one of images= or paths=")
        n = len(labels)
        if images is not None:
            if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[1] != 3:
                raise ValueError(f"images must be uint8 [N,3,H,W], got {images.dtype} {tuple(images.shape)}")
            if images.shape[0] != n:
                raise ValueError(f"{images.shape[0]} images but {n} labels")
        if paths is not None and len(paths) != n:
            raise ValueError(f"{len(paths)} paths but {n} labels")
        if keys is not None and len(keys) != n:
            raise ValueError(f"{len(keys)} keys but {n} labels")
        self.labels = labels
        self.images = images
        self.paths = paths
        self.keys = keys
        self.name = name
        self.cache_limit = DECODE_CACHE_BYTES
        """Bytes of decoded images this pool keeps (loader workers get a share each)."""
        self._cache: dict[int, torch.Tensor] = {}
        self._cache_bytes = 0
        self._lock = threading.Lock()

    @property
    def in_memory(self) -> bool:
        return self.images is not None

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        kind = f"in memory {tuple(self.images.shape)}" if self.images is not None else "files"
        return f"ImagePool({self.name!r}, {len(self)} images, {kind})"

    def load(self, i: int) -> torch.Tensor:
        """Image i as a uint8 [3, H, W] tensor (RGB). A file that cannot be decoded raises DataError."""
        i = int(i)
        if self.images is not None:
            return self.images[i]
        cached = self._cache.get(i)
        if cached is not None:
            return cached
        img = decode_image(self.paths[i])  # type: ignore[index]
        nbytes = img.numel()
        with self._lock:
            if self._cache_bytes + nbytes <= self.cache_limit:
                self._cache[i] = img
                self._cache_bytes += nbytes
        return img

    def __getstate__(self) -> dict:
        # DataLoader workers get the pool without the decode cache or the lock.
        state = self.__dict__.copy()
        state["_cache"] = {}
        state["_cache_bytes"] = 0
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def decode_image(path: str) -> torch.Tensor:
    """Decode one image file to a uint8 [3, H, W] RGB tensor; failures raise DataError naming the file."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            arr = np.asarray(im.convert("RGB"), dtype=np.uint8)
    except FileNotFoundError:
        raise DataError(
            f"image file {path} does not exist; the dataset's index files name it, so the copy is "
            "incomplete: re-extract the dataset so that every listed image is present"
        ) from None
    except Exception as e:  # PIL raises many types (UnidentifiedImageError, OSError, SyntaxError...)
        raise DataError(
            f"image file {path} cannot be decoded ({type(e).__name__}: {e}); expected a readable "
            "JPEG/PNG image: the file is corrupt or truncated, replace it from a fresh copy of the dataset"
        ) from None
    return torch.from_numpy(arr.copy()).permute(2, 0, 1).contiguous()
