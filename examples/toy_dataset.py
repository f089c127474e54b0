"""A dataset of your own, registered for every run and study: the example of docs/datasets.md.

    python examples/toy_dataset.py write /tmp/toy                 # 20 classes of 32x32 images as .npz files
    PYTHONPATH=examples python -m adbs.run --dataset toy_dataset:toy --data-root /tmp/toy --preset smoke
    PYTHONPATH=examples python studies/ablation.py --smoke --dataset toy_dataset:toy --data-root /tmp/toy

`--dataset MODULE:NAME` imports MODULE wherever a config is used (the study's driver and every trial's
process), and the module registers NAME. Here the files are `toy/train.npz` and `toy/test.npz`, each holding
`images` (uint8 [N, 3, 32, 32]) and `labels` (int [N], classes 0..19; 0..9 are the base classes).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from adbs.data import CIFAR_MEAN, CIFAR_STD, DatasetSpec, ImagePool, register_dataset

TOY = DatasetSpec(
    name="toy",
    num_classes=20,
    base_classes=10,  # sessions: 10 base classes, then 2 sessions of 5 ways
    default_ways=5,
    default_shots=5,
    image_size=32,
    mean=CIFAR_MEAN,
    std=CIFAR_STD,
    train_transform="random_crop(32,pad=4)+hflip",  # the grammar of adbs/data/registry.py
    test_transform="none",
    download_hint="write it with `python examples/toy_dataset.py write DATA_ROOT`",
    folder="toy",  # data_root is this folder or its parent
    files=("train.npz", "test.npz"),  # checked before compute; their content keys the base-session cache
)


def read_toy(spec: DatasetSpec, folder: Path) -> tuple[ImagePool, ImagePool]:
    """(train, test) pools from the folder that holds spec.files."""
    pools = []
    for split in ("train", "test"):
        with np.load(folder / f"{split}.npz") as f:
            pools.append(ImagePool(f["labels"].astype(np.int64), images=torch.from_numpy(f["images"].copy()),
                                   name=f"toy/{split}"))
    return pools[0], pools[1]


register_dataset(TOY, reader=read_toy)


def write(root: str | Path, train_per_class: int = 40, test_per_class: int = 10, seed: int = 0) -> Path:
    """Writes the toy dataset: a colour and a stripe direction per class, plus noise."""
    g = np.random.default_rng(seed)
    folder = Path(root) / TOY.folder
    folder.mkdir(parents=True, exist_ok=True)
    colours = g.uniform(40, 215, size=(TOY.num_classes, 3))
    yy, xx = np.mgrid[0:32, 0:32]
    for split, n in (("train", train_per_class), ("test", test_per_class)):
        labels = np.repeat(np.arange(TOY.num_classes), n)
        angle = labels[:, None, None] * np.pi / TOY.num_classes
        stripes = 40 * np.sin((xx * np.cos(angle) + yy * np.sin(angle)) / 2.0)
        img = colours[labels][:, :, None, None] + stripes[:, None] + g.normal(0, 25, size=(len(labels), 3, 32, 32))
        np.savez(folder / f"{split}.npz", images=np.clip(img, 0, 255).astype(np.uint8), labels=labels)
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "write":
        sys.exit("usage: python examples/toy_dataset.py write DATA_ROOT")
    print(f"wrote {write(sys.argv[2])}")
