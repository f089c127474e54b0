"""Dataset registry: a string (`Config.dataset`) picks a DatasetSpec.

Each spec carries the protocol constants of its benchmark (docs/protocols.md, "Benchmarks"):
class counts, the standard way/shot, image size, normalisation and the transforms of
the official code. Transform strings use a tiny grammar read by adbs.data.loader:
parts joined by '+', each one of none, random_crop(S,pad=P), hflip,
random_resized_crop(S), resize(S), center_crop(S).
"""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def novel_classes(self) -> int:
        return self.num_classes - self.base_classes


DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add `spec` to DATASETS; a name registered twice raises DataError."""
    if spec.name in DATASETS:
        raise DataError(
            f"dataset {spec.name!r} is already registered; registered names must be unique "
            f"(existing: {', '.join(DATASETS)}); pick another name for the new spec"
        )
    DATASETS[spec.name] = spec
    return spec


def get_spec(name: str) -> DatasetSpec:
    """The spec registered as `name`; an unknown name raises DataError listing the valid ones."""
    if name not in DATASETS:
        raise DataError(
            f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)} "
            "(set Config.dataset / --dataset to one of them)"
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
