"""Fake datasets on disk for the tests: the community layouts (CIFAR-100's pickles, miniImageNet's split CSVs and
images, CUB-200-2011's folders and lists) with random pixels, and a CIFAR-100 copy of the embedded benchmark's images
(learnable, so numbers differ by data). Used by tests/adbs/data/test_data.py, tests/adbs/test_run.py,
tests/adbs/test_cache_key_inputs.py and others."""

from __future__ import annotations

import csv
import pickle
from pathlib import Path

import numpy as np
from PIL import Image

def write_jpg(path: Path, rng: np.random.Generator, size=(16, 20)) -> None:
    Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(path, quality=80)


def write_cifar(root: Path, train_per_class: int = 30, test_per_class: int = 4) -> Path:
    d = root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", train_per_class), ("test", test_per_class)):
        labels = rng.permutation(np.repeat(np.arange(100), n))  # interleaved, like the real files
        data = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
        with open(d / split, "wb") as fh:
            pickle.dump({"batch_label": split, "fine_labels": labels.tolist(),
                         "coarse_labels": (labels // 5).tolist(), "data": data,
                         "filenames": [f"img_{i}.png" for i in range(len(labels))]}, fh)
    return root


MINI_WNIDS = [f"n{1000000 + 7919 * c:08d}" for c in range(100)]


def write_mini(root: Path, train_per_class: int = 12, test_per_class: int = 2) -> Path:
    d = root / "miniimagenet"
    (d / "images").mkdir(parents=True)
    (d / "split").mkdir()
    rng = np.random.default_rng(1)
    for split, n, off in (("train", train_per_class, 0), ("test", test_per_class, 500)):
        with open(d / "split" / f"{split}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["filename", "label"])
            for wnid in MINI_WNIDS:
                for k in range(n):
                    name = f"{wnid}{off + k:08d}.jpg"
                    w.writerow([name, wnid])
                    write_jpg(d / "images" / name, rng)
    return root


def cub_folder(c: int) -> str:
    return f"{c + 1:03d}.Bird_{c + 1}"


def write_cub(root: Path, train_per_class: int = 8, test_per_class: int = 2) -> Path:
    d = root / "CUB_200_2011"
    (d / "images").mkdir(parents=True)
    rng = np.random.default_rng(2)
    images, labels, split = [], [], []
    iid = 0
    for c in range(200):
        (d / "images" / cub_folder(c)).mkdir()
        for k in range(train_per_class + test_per_class):
            iid += 1
            rel = f"{cub_folder(c)}/Bird_{c + 1}_{k:04d}_{iid}.jpg"
            write_jpg(d / "images" / rel, rng)
            images.append(f"{iid} {rel}")
            labels.append(f"{iid} {c + 1}")
            split.append(f"{iid} {1 if k < train_per_class else 0}")
    (d / "images.txt").write_text("\n".join(images) + "\n")
    (d / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (d / "train_test_split.txt").write_text("\n".join(split) + "\n")
    return root


def write_synthetic_cifar(root: Path, seed: int = 0, train_per_class: int = 12, test_per_class: int = 3) -> Path:
    """root/cifar-100-python/{train,test} in torchvision's pickle format, class-major: the first images of each
    class of the embedded benchmark generated with synthetic_seed `seed` (learnable, so numbers differ by data)."""
    from adbs.data.synthetic import synthetic_pools

    d = root / "cifar-100-python"
    d.mkdir(parents=True, exist_ok=True)
    for split, pool, n in zip(("train", "test"), synthetic_pools(seed, 2), (train_per_class, test_per_class)):
        labels = np.asarray(pool.labels)
        keep = np.concatenate([np.flatnonzero(labels == c)[:n] for c in range(100)])
        data = pool.images.numpy()[keep].reshape(len(keep), -1)
        with open(d / split, "wb") as fh:
            pickle.dump({"data": data, "fine_labels": labels[keep].tolist()}, fh)
    return root
