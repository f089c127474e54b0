"""Dataset registry: a string (`Config.dataset`) picks a DatasetSpec.

Each spec carries the protocol constants of its benchmark (docs/protocols.md, "Benchmarks"):
class counts, the standard way/shot, image size, normalisation and the transforms of
the official code. Transform strings use a tiny grammar read by adbs.data.loader:
parts joined by '+', each one of none, random_crop(S,pad=P), hflip,
random_resized_crop(S), resize(S), center_crop(S).

A dataset of your own (docs/datasets.md): a module that calls
`register_dataset(DatasetSpec(name="toy", ..., folder="toy", files=("train.npz", "test.npz")), reader=read_toy)`,
selected as `dataset="my_module:toy"` (`--dataset my_module:toy`): the module is imported wherever the config is
used, so study trials in other processes and on other machines register it too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DataError

CIFAR_MEAN = (0.5071, 0.4867, 0.4408)
CIFAR_STD = (0.2675, 0.2565, 0.2761)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    num_classes: int
    base_classes: int
    default_ways: int
    default_shots: int
    image_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    train_transform: str
    test_transform: str
    download_hint: str
    folder: str = ""
    """The dataset's folder name: `data_root` is that folder or its parent (e.g. cifar-100-python)."""
    files: tuple[str, ...] = ()
    """Files (or sub-folders) the folder must hold, relative to it: checked before any compute, and their content
    is part of the base-session cache key (adbs/cache.py), so list every file the reader opens."""

    @property
    def novel_classes(self) -> int:
        return self.num_classes - self.base_classes


DATASETS: dict[str, DatasetSpec] = {}
Reader = Callable[[DatasetSpec, Path], Any]
"""reader(spec, folder) -> (train ImagePool, test ImagePool) (adbs/data/pool.py), the folder being resolved
from data_root and holding spec.files."""
READERS: dict[str, Reader] = {}
"""The reader of each file-based dataset (the built-in ones are added by adbs/data/sources.py)."""


def register_dataset(spec: DatasetSpec, reader: Reader | None = None) -> DatasetSpec:
    """Add `spec` (and its `reader`, for a dataset read from files) to the registry.

    A name registered twice raises DataError, unless it is the same spec again (a module imported twice, e.g.
    as `my_module` and by path). A reader needs spec.folder and spec.files.
    """
    if spec.name in DATASETS and DATASETS[spec.name] != spec:
        raise DataError(
            f"dataset {spec.name!r} is already registered; registered names must be unique "
            f"(existing: {', '.join(DATASETS)}); pick another name for the new spec"
        )
    check_spec(spec)
    if reader is not None and not (spec.folder and spec.files):
        raise DataError(f"dataset {spec.name!r}: a reader needs DatasetSpec.folder (the dataset's folder name) and "
                        "DatasetSpec.files (the files it must hold), e.g. folder='toy', files=('train.npz',)")
    DATASETS[spec.name] = spec
    if reader is not None:
        READERS[spec.name] = reader
    return spec


def check_spec(spec: DatasetSpec) -> None:
    """The spec's protocol constants and transforms can make sessions: a DataError naming the field otherwise."""
    from .loader import parse_transform

    def bad(field: str, want: str) -> DataError:
        return DataError(f"dataset {spec.name!r}: DatasetSpec.{field}={getattr(spec, field)!r} is invalid; expected "
                         f"{want}: fix the DatasetSpec given to register_dataset")

    for field in ("num_classes", "base_classes", "default_ways", "default_shots", "image_size"):
        value = getattr(spec, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(field, "an int >= 1")
    if spec.base_classes > spec.num_classes:
        raise bad("base_classes", f"at most num_classes={spec.num_classes} (the base classes are the first "
                                  f"base_classes of the classes 0..num_classes - 1; the rest are the novel classes)")
    for field in ("mean", "std"):
        value = getattr(spec, field)
        try:
            ok = len(value) == 3 and all(float(v) == float(v) for v in value)
        except (TypeError, ValueError):
            ok = False
        if not ok or (field == "std" and any(float(v) <= 0 for v in value)):
            raise bad(field, "three numbers, one per RGB channel" + (", each > 0" if field == "std" else ""))
    for field in ("train_transform", "test_transform"):
        try:
            parse_transform(getattr(spec, field))
        except DataError as e:
            raise DataError(f"dataset {spec.name!r}: DatasetSpec.{field}: {e}") from None


def import_dataset(name: str) -> str:
    """`module:dataset` imports the module (which registers the dataset) and returns `dataset`; a plain name
    is returned as it is. A module that cannot be imported, or that registers no such dataset, is a DataError."""
    if ":" not in name:
        return name
    module, _, dataset = name.partition(":")
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - ImportError or an error in the user's module: one line, its cause
        raise DataError(f"dataset {name!r}: cannot import module {module!r} ({type(e).__name__}: {e}); it must be "
                        "importable in every process that runs a trial (on PYTHONPATH, or installed)") from None
    if dataset not in DATASETS:
        raise DataError(f"dataset {name!r}: module {module!r} registers no dataset {dataset!r} (registered: "
                        f"{', '.join(DATASETS)}); it should call adbs.data.register_dataset(DatasetSpec(name="
                        f"{dataset!r}, ...), reader=...)")
    return dataset


def get_spec(name: str) -> DatasetSpec:
    """The spec registered as `name` (or `module:name`, importing the module); an unknown name raises DataError
    listing the valid ones."""
    name = import_dataset(name)
    if name not in DATASETS:
        raise DataError(
            f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}, or MODULE:NAME for a dataset a "
            "module registers (docs/datasets.md) (set Config.dataset / --dataset to one of them)"
        )
    return DATASETS[name]


register_dataset(DatasetSpec(
    name="synthetic",
    num_classes=100,
    base_classes=60,
    default_ways=5,
    default_shots=5,
    image_size=32,
    mean=CIFAR_MEAN,
    std=CIFAR_STD,
    train_transform="random_crop(32,pad=4)+hflip",
    test_transform="none",
    download_hint="generated in memory from Config.synthetic_seed; nothing to download",
))
register_dataset(DatasetSpec(
    name="cifar100",
    folder="cifar-100-python",
    files=("train", "test"),
    num_classes=100,
    base_classes=60,
    default_ways=5,
    default_shots=5,
    image_size=32,
    mean=CIFAR_MEAN,
    std=CIFAR_STD,
    train_transform="random_crop(32,pad=4)+hflip",
    test_transform="none",
    download_hint=(
        "on a machine with internet run `python -c \"import torchvision; "
        "torchvision.datasets.CIFAR100('DATA_ROOT', download=True)\"` and copy DATA_ROOT "
        "(it holds cifar-100-python/ with the pickles train, test, meta)"
    ),
))
register_dataset(DatasetSpec(
    name="mini_imagenet",
    folder="miniimagenet",
    files=("images", "split/train.csv", "split/test.csv"),
    num_classes=100,
    base_classes=60,
    default_ways=5,
    default_shots=5,
    image_size=84,
    mean=IMAGENET_MEAN,
    std=IMAGENET_STD,
    train_transform="random_resized_crop(84)+hflip",
    test_transform="resize(92)+center_crop(84)",
    download_hint=(
        "use the FSCIL miniImageNet copy distributed with CEC/TOPIC (miniimagenet/images/*.jpg, "
        "84x84, plus miniimagenet/split/train.csv and test.csv with columns filename,label)"
    ),
))
register_dataset(DatasetSpec(
    name="cub200",
    folder="CUB_200_2011",
    files=("images.txt", "image_class_labels.txt", "train_test_split.txt", "images"),
    num_classes=200,
    base_classes=100,
    default_ways=10,
    default_shots=5,
    image_size=224,
    mean=IMAGENET_MEAN,
    std=IMAGENET_STD,
    train_transform="random_resized_crop(224)+hflip",
    test_transform="resize(256)+center_crop(224)",
    download_hint=(
        "download CUB_200_2011.tgz from the Caltech-UCSD Birds-200-2011 page "
        "(https://www.vision.caltech.edu/datasets/cub_200_2011/) and extract it so that "
        "DATA_ROOT/CUB_200_2011/images.txt exists"
    ),
))
