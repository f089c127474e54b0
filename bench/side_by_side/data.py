"""The embedded benchmark written for both codes: CIFAR-100 python pickles and CEC-style index lists.

Both codes read the same files: ours through --data-root/--index-list, the released code from the lists
copied into its copy (copy_lists) and the pickles under its -dataroot.
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from . import ALL_SESSIONS, BASE_CLASSES, NUM_CLASSES, SHOTS, WAYS


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _first_per_class(labels: np.ndarray, k: int) -> np.ndarray:
    return np.concatenate([np.flatnonzero(labels == c)[:k] for c in range(NUM_CLASSES)])


def write_benchmark(root: Path, *, version: int = 2, synthetic_seed: int = 0, train_per_class: int = 150,
                    test_per_class: int = 100, split_seed: int = 0) -> dict[str, Any]:
    """Write the embedded benchmark as root/cifar-100-python/{train,test,meta} and root/lists/session_{1..9}.txt.

    Images: the first train_per_class (test_per_class) images of every class of
    adbs.data.synthetic.synthetic_pools(synthetic_seed, version), class-major, uint8 rows of 3072 values
    (torchvision's CIFAR-100 pickle: 'data', 'fine_labels'). Lists: session_1.txt = every base-class
    training image; session_{t+1}.txt = the shots of incremental session t as this project's seeded
    protocol draws them from these pickles (adbs/data/protocol.py, split_seed).
    """
    d = root / "cifar-100-python"
    kept = _write_pickles(d, version=version, synthetic_seed=synthetic_seed, train_per_class=train_per_class,
                          test_per_class=test_per_class)
    lists = _write_lists(root, kept["train"], split_seed)
    return {
        "synthetic_version": int(version), "synthetic_seed": int(synthetic_seed), "split_seed": int(split_seed),
        "train_per_class": int(train_per_class), "test_per_class": int(test_per_class),
        "train_images": int(len(kept["train"])), "test_images": int(len(kept["test"])),
        "data_root": str(root), "index_list": str(lists),
        "sha256": {f: _sha256(d / f) for f in ("train", "test", "meta")},
    }


def _write_pickles(d: Path, *, version: int, synthetic_seed: int, train_per_class: int, test_per_class: int
                   ) -> dict[str, np.ndarray]:
    """d/{train,test,meta} in torchvision's CIFAR-100 layout; returns the labels kept per split."""
    from adbs.data.synthetic import synthetic_pools

    train, test = synthetic_pools(int(synthetic_seed), int(version))
    d.mkdir(parents=True, exist_ok=True)
    kept = {}
    for split, pool, k in (("train", train, train_per_class), ("test", test, test_per_class)):
        labels = np.asarray(pool.labels)
        keep = _first_per_class(labels, k)
        data = pool.images.numpy()[keep].reshape(len(keep), -1)
        assert data.dtype == np.uint8 and data.shape[1] == 3 * 32 * 32
        with open(d / split, "wb") as fh:
            pickle.dump({"data": data, "fine_labels": labels[keep].tolist()}, fh)
        kept[split] = labels[keep]
    with open(d / "meta", "wb") as fh:
        pickle.dump({"fine_label_names": [f"class{c:02d}" for c in range(NUM_CLASSES)]}, fh)
    return kept


def _write_lists(root: Path, train_labels: np.ndarray, split_seed: int) -> Path:
    """root/lists/session_{1..9}.txt: every base image, then each incremental session's shots."""
    from adbs.data import build_data
    from adbs.config import from_dict

    # The shots: the project's seeded draw on the written pool. Only the novel sessions' `train` is used;
    # novel_val_per_class=0 and val_fraction=0.5 only keep the draw's checks satisfiable at tiny sizes
    # (a novel class's shots are the first `shots` of its permutation whatever the validation sizes).
    cfg = from_dict({"dataset": "cifar100", "data_root": str(root), "split_seed": split_seed, "shots": SHOTS,
                     "ways": WAYS, "novel_val_per_class": 0, "val_fraction": 0.5, "base_images_per_class": None})
    sessions = build_data(cfg).sessions
    lists = root / "lists"
    lists.mkdir(exist_ok=True)
    files = {1: np.flatnonzero(train_labels < BASE_CLASSES)}
    for t in range(1, ALL_SESSIONS + 1):
        files[t + 1] = sessions[t].train
    for t, idx in files.items():
        (lists / f"session_{t}.txt").write_text("".join(f"{int(i)}\n" for i in idx))
    return lists


def copy_lists(data: dict[str, Any], copy: Path) -> None:
    """Copy the written index lists to where the released CIFAR loader reads them: data/index_list/cifar100/."""
    lists = copy / "data" / "index_list" / "cifar100"
    lists.mkdir(parents=True)
    for f in sorted(Path(data["index_list"]).iterdir()):
        shutil.copy(f, lists / f.name)
