"""make_loader: seeded, re-iterable batches of (normalised float images, labels).

Two paths give the same interface:
* in-memory pools (synthetic, cifar100) with transforms made of random_crop/hflip/none:
  whole uint8 batches are augmented with tensor ops (zero padding, per-sample crop offsets,
  flip mask) from a seeded torch.Generator, so CPU training is not bottlenecked by
  per-image Python transforms. With `device` given (a CUDA trial: adbs.loops.Runtime.data_device) the
  pool's uint8 images and labels are copied to that device once and the same ops run there; the random
  draws still come from the CPU generator (the epoch's order, offsets and flips, drawn up front and copied
  once), so a device gets exactly the crops, flips and order the CPU path gives for the same seed
  (docs/gpu.md, "Data path");
* anything else (file-based pools: mini_imagenet, cub200): a torch DataLoader over
  per-sample torchvision.transforms.v2 pipelines. Each sample's randomness comes from a
  seed derived from (seed, epoch, image index) under torch.random.fork_rng, so batches are
  identical whatever num_workers is, and the global torch RNG is left untouched.

Each iteration over a loader is one epoch; the epoch counter is mixed into the seed, so
epochs differ while the whole sequence is fixed by `seed`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from .errors import DataError
from .pool import ImagePool

_PART = re.compile(r"^\s*([a-z_]+)\s*(?:\(([^)]*)\))?\s*$")
_ARITY = {"none": 0, "hflip": 0, "random_crop": 1, "random_resized_crop": 1, "resize": 1, "center_crop": 1}


def parse_transform(text: str) -> list[tuple[str, dict[str, int]]]:
    """'random_crop(32,pad=4)+hflip' -> [('random_crop', {'size': 32, 'pad': 4}), ('hflip', {})].

    Sizes are ints >= 1, random_crop's pad an int >= 0; any other part or argument is a DataError naming it."""
    grammar = ("expected parts joined by '+' from: none, hflip, random_crop(S,pad=P), random_resized_crop(S), "
               "resize(S), center_crop(S), with sizes S >= 1 and pad P >= 0")
    if not isinstance(text, str):
        raise DataError(f"bad transform {text!r}: not a string; {grammar}")
    ops = []
    for part in text.split("+"):
        m = _PART.match(part)
        if not m or m.group(1) not in _ARITY:
            raise DataError(f"bad transform {text!r} (part {part!r}); {grammar}")
        name, args = m.group(1), [a.strip() for a in (m.group(2) or "").split(",") if a.strip()]
        kw: dict[str, int] = {}
        pos = [a for a in args if "=" not in a]
        for a in args:
            if "=" in a:
                k, v = (x.strip() for x in a.split("=", 1))
                if name != "random_crop" or k != "pad":
                    raise DataError(f"bad transform {text!r} (part {part!r}): {name} takes no argument {k!r}; {grammar}")
                kw[k] = _int_arg(text, part, v, 0)
        if len(pos) != _ARITY[name]:
            raise DataError(f"transform part {part!r} takes {_ARITY[name]} size argument(s); fix the spec's transform string")
        if pos:
            kw["size"] = _int_arg(text, part, pos[0], 1)
        if name != "none":
            ops.append((name, kw))
    return ops


def _int_arg(text: str, part: str, value: str, least: int) -> int:
    try:
        out = int(value)
    except ValueError:
        out = None
    if out is None or out < least:
        raise DataError(f"bad transform {text!r} (part {part!r}): {value!r} is not an int >= {least}; fix the "
                        "spec's transform string")
    return out


def _mix(*xs: int) -> int:
    """splitmix64 over the arguments: a well-spread 63-bit seed."""
    h = 0x9E3779B97F4A7C15
    for x in xs:
        h = (h ^ (int(x) & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        h = (h ^ (h >> 31)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 29
    return h & 0x7FFFFFFFFFFFFFFF


class _Loader:
    """Re-iterable epochs of batches; len() = batches per epoch."""

    def __init__(self, data: Any, pool: ImagePool, indices: np.ndarray, train: bool, batch_size: int,
                 shuffle: bool, seed: int, num_workers: int, device: torch.device | str | None = None):
        if batch_size < 1:
            raise DataError(f"batch_size={batch_size} is invalid; expected an int >= 1")
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(idx) and (idx.min() < 0 or idx.max() >= len(pool)):
            raise DataError(
                f"indices out of range for pool {pool.name!r} of {len(pool)} images; expected indices into that "
                "pool (pass data.train_pool with split.train/val and data.test_pool with split.test)"
            )
        spec = data.spec
        self.pool, self.indices, self.train = pool, idx, train
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, int(seed)
        # Workers load whole batches in parallel; a single batch gains nothing from them but their start-up.
        self.num_workers = int(num_workers) if len(idx) > batch_size else 0
        self.epoch = 0
        self.ops = parse_transform(spec.train_transform if train else spec.test_transform)
        self.mean = torch.tensor(spec.mean, dtype=torch.float32).view(1, 3, 1, 1)
        self.std = torch.tensor(spec.std, dtype=torch.float32).view(1, 3, 1, 1)
        self.batched = pool.in_memory and all(op in ("random_crop", "hflip") for op, _ in self.ops)
        self.labels = torch.from_numpy(pool.labels)
        # where batches of the in-memory path are made (None: CPU, as before); file pools ignore it
        self.device = torch.device(device) if device is not None else None
        self._dl: DataLoader | None = None

    def __len__(self) -> int:
        return math.ceil(len(self.indices) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        epoch_seed = _mix(self.seed, self.epoch)
        self.epoch += 1
        g = torch.Generator().manual_seed(epoch_seed)
        order = self.indices
        if self.shuffle and len(order):
            order = order[torch.randperm(len(order), generator=g).numpy()]
        if self.batched:
            return self._iter_batched(order, g)
        return self._iter_samples(order, epoch_seed)

    # -- in-memory pools: whole-batch tensor augmentation ------------------------------------------
    def _iter_batched(self, order: np.ndarray, g: torch.Generator):
        if self.device is not None:
            yield from self._iter_resident(order, g)
            return
        images = self.pool.images
        assert images is not None
        for a in range(0, len(order), self.batch_size):
            j = torch.from_numpy(order[a:a + self.batch_size])
            x = images.index_select(0, j)
            for op, kw in self.ops:
                if op == "random_crop":
                    x = _batch_random_crop(x, kw["size"], kw.get("pad", 0), g)
                elif op == "hflip":
                    flip = torch.rand(len(x), generator=g) < 0.5
                    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            yield _normalise(x, self.mean, self.std), self.labels.index_select(0, j)

    def _iter_resident(self, order: np.ndarray, g: torch.Generator):
        """The same batches made on self.device from its resident copy of the pool. The epoch's draws are
        taken up front, in the order the host path takes them (per batch, per op), and moved in one copy:
        a copy per batch would make the CPU wait for the GPU's queue every batch."""
        images, labels = _resident(self.pool, self.device)
        dev = images.device
        mean, std = self.mean.to(dev), self.std.to(dev)
        # 255 as a tensor on the device: CUDA divides by a Python scalar as a multiplication by its reciprocal,
        # which rounds differently from the CPU path's true division (31% of the values of a batch differed by
        # one float32 step on an H100, docs/gpu.md); divided by a device tensor, the batches are the CPU's
        scale = torch.tensor(255.0, device=dev)
        n, h, w = len(order), images.shape[2], images.shape[3]
        sizes = [min(self.batch_size, n - a) for a in range(0, n, self.batch_size)]
        draws = [_draw(self.ops, b, h, w, g) for b in sizes]
        flat = torch.cat([torch.from_numpy(order)] + [t for d in draws for t in d])
        if dev.type == "cuda":
            flat = flat.pin_memory()
        flat = flat.to(dev, non_blocking=True)
        order_t, at = flat[:n], n
        for a, b, d in zip(range(0, n, self.batch_size), sizes, draws):
            j = order_t[a:a + b]
            x = images.index_select(0, j)
            k = 0
            for op, kw in self.ops:
                if op == "random_crop":
                    oy, ox = flat[at:at + b], flat[at + b:at + 2 * b]
                    at, k = at + 2 * b, k + 2
                    x = _crop_at(x, kw["size"], kw.get("pad", 0), oy, ox)
                elif op == "hflip":
                    flip = flat[at:at + b].bool()
                    at, k = at + b, k + 1
                    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            assert k == len(d)
            yield _normalise(x, mean, std, scale), labels.index_select(0, j)

    # -- everything else: per-sample v2 transforms in a DataLoader ------------------------------------
    def _iter_samples(self, order: np.ndarray, epoch_seed: int):
        batches = [
            [(int(i), _mix(epoch_seed, int(i))) for i in order[a:a + self.batch_size]]
            for a in range(0, len(order), self.batch_size)
        ]
        if self._dl is None:
            ds = _SampleDataset(self.pool, _build_v2(self.ops), self.mean.view(3, 1, 1), self.std.view(3, 1, 1))
            self._sampler = _BatchList()
            self._dl = DataLoader(
                ds, batch_sampler=self._sampler, num_workers=self.num_workers,
                persistent_workers=self.num_workers > 0, worker_init_fn=_worker_init,
                # a CUDA trial's batches go to the GPU: from page-locked memory that copy is asynchronous
                pin_memory=self.device is not None and self.device.type == "cuda",
                # an own generator: DataLoader would otherwise draw its base seed from the global RNG
                generator=torch.Generator().manual_seed(self.seed),
            )
        self._sampler.batches = batches
        return iter(self._dl)


class _BatchList:
    """A batch sampler whose batches the loader replaces every epoch (it runs in the main process)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int]]] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class _SampleDataset(Dataset):
    def __init__(self, pool: ImagePool, transform: Any, mean: torch.Tensor, std: torch.Tensor):
        self.pool, self.transform, self.mean, self.std = pool, transform, mean, std

    def __len__(self) -> int:
        return len(self.pool)

    def __getitem__(self, item: tuple[int, int]) -> tuple[torch.Tensor, int]:
        i, sample_seed = item
        img = self.pool.load(i)
        if self.transform is not None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(sample_seed)
                img = self.transform(img)
        x = img.float().div_(255.0).sub_(self.mean).div_(self.std)
        return x, int(self.pool.labels[i])


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)  # workers decode and transform single images; threads only contend
    info = torch.utils.data.get_worker_info()
    if info is not None:  # each persistent worker caches decoded images; share the budget
        pool = info.dataset.pool
        pool.cache_limit = max(pool.cache_limit // info.num_workers, 0)


def _build_v2(ops: list[tuple[str, dict[str, int]]]) -> Any:
    from torchvision.transforms import v2

    if not ops:
        return None
    out = []
    for op, kw in ops:
        if op == "random_crop":
            out.append(v2.RandomCrop(kw["size"], padding=kw.get("pad", 0) or None))
        elif op == "hflip":
            out.append(v2.RandomHorizontalFlip())
        elif op == "random_resized_crop":
            out.append(v2.RandomResizedCrop(kw["size"], antialias=True))
        elif op == "resize":
            out.append(v2.Resize(kw["size"], antialias=True))
        elif op == "center_crop":
            out.append(v2.CenterCrop(kw["size"]))
    return v2.Compose(out)


def _normalise(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, scale: float | torch.Tensor = 255.0) -> torch.Tensor:
    return x.float().div_(scale).sub_(mean).div_(std)


def _resident(pool: ImagePool, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The pool's uint8 images and int64 labels on `device`, copied once per pool and device (a trial's
    train, validation and prototype passes share the copy: CIFAR-100's 60,000 images are 184 MB)."""
    held = pool.__dict__.setdefault("_resident", {})
    key = str(device)
    if key not in held:
        assert pool.images is not None
        held[key] = (pool.images.to(device), torch.from_numpy(pool.labels).to(device))
    return held[key]


def _batch_random_crop(x: torch.Tensor, size: int, pad: int, g: torch.Generator) -> torch.Tensor:
    """torchvision RandomCrop(size, padding=pad) (zero fill) for a whole uint8 batch."""
    _, _, h, w = x.shape
    oy, ox = _crop_offsets(len(x), h, w, size, pad, g)
    return _crop_at(x, size, pad, oy, ox)


def _crop_offsets(b: int, h: int, w: int, size: int, pad: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    hh, ww = h + 2 * pad, w + 2 * pad
    if hh < size or ww < size:
        raise DataError(f"random_crop({size}) is larger than the padded image {hh}x{ww}; fix the transform string")
    oy = torch.randint(0, hh - size + 1, (b,), generator=g)
    ox = torch.randint(0, ww - size + 1, (b,), generator=g)
    return oy, ox


def _draw(ops: list[tuple[str, dict[str, int]]], b: int, h: int, w: int, g: torch.Generator) -> list[torch.Tensor]:
    """One batch's random draws (int64), in the order the host path takes them from `g`."""
    out: list[torch.Tensor] = []
    for op, kw in ops:
        if op == "random_crop":
            out.extend(_crop_offsets(b, h, w, kw["size"], kw.get("pad", 0), g))
            h = w = kw["size"]
        elif op == "hflip":
            out.append((torch.rand(b, generator=g) < 0.5).long())
    return out


def _crop_at(x: torch.Tensor, size: int, pad: int, oy: torch.Tensor, ox: torch.Tensor) -> torch.Tensor:
    """Crops of size x size at per-image offsets (oy, ox) of the zero-padded batch (offsets on x's device)."""
    b, c, _, _ = x.shape
    if pad:
        x = torch.nn.functional.pad(x, (pad, pad, pad, pad))
    ww = x.shape[3]
    ar = torch.arange(size, device=x.device)
    rows = (oy[:, None] + ar)[:, None, :, None].expand(b, c, size, ww)
    x = x.gather(2, rows)
    cols = (ox[:, None] + ar)[:, None, None, :].expand(b, c, size, size)
    return x.gather(3, cols)


def make_loader(data: Any, pool: ImagePool, indices: np.ndarray, *, train: bool, batch_size: int,
                shuffle: bool, seed: int, num_workers: int = 0, device: torch.device | str | None = None) -> _Loader:
    """Batches (x float32 [B,3,H,W] normalised, y int64 [B]) of pool[indices].

    train=True applies the dataset's train augmentation, else its test transform. Re-iterable:
    every `for` over it is one epoch with its own shuffle and augmentation, all fixed by `seed`.
    num_workers only matters for file-based pools (in-memory pools never start workers).
    device: where an in-memory pool's batches are made (its images are copied there once and augmented
    there; the batches are the CPU path's, bit for bit, on that device); None = CPU. File pools decode on
    the CPU whatever it is (their batches are page-locked for a CUDA device).
    """
    return _Loader(data, pool, indices, train, batch_size, shuffle, seed, num_workers, device)


normalise = _normalise
"""uint8 images to the model's input (x / scale - mean) / std, as every loader batch is made; public for
bench/epoch_breakdown.py, which times it."""
