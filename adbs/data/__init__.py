"""FSCIL data: datasets (registry), the session protocol, splits and loaders.

INTERFACE CONTRACT (used by adbs.loops and adbs.hosts; keep these names and fields):

    DATASETS: dict[str, DatasetSpec]          registry: synthetic, cifar100, mini_imagenet, cub200
    build_data(cfg: Config) -> FSCILData      loads/generates the dataset and draws the sessions;
                                              raises DataError (a ValueError) with a clear message
    check_data(cfg: Config) -> None           the same checks, cheap, before any compute (layout, labels,
                                              files listed twice or in both splits, the protocol)
    preflight_data(cfg: Config) -> list[str]  THE data check of a run's preflight (adbs.run, its --dry-run,
                                              a study for each configuration it plans): check_data, then
                                              every image decoded, each transform tried, every image's size
                                              against the crops; remembered by content digest, so a second
                                              run on the same data only stats its files. Raises DataError;
                                              returns warning lines to print (e.g. test images whose
                                              content equals a training image). cfg: a validated Config
                                              (Config.validate checks the host's options against the
                                              dataset: adbs/config/checks.py)
    make_loader(data, pool, indices, *, train, batch_size, shuffle, seed, num_workers=0)
        -> iterable of (x: float32 [B,3,H,W] normalised, y: int64 [B]); deterministic given seed
        (train=True applies the dataset's train augmentation, else the test transform).

    FSCILData(spec, train_pool, test_pool, sessions, ways, shots); num_sessions (base included);
        classes_seen(t). sessions[0] is the base session, sessions[t] incremental session t.
    SessionSplit(index, classes, train, val, test): train/val index data.train_pool, test
        indexes data.test_pool; val never overlaps any session's train images.
    ImagePool: labels (np.int64 [N]) and images (uint8 [N,3,H,W] in memory) or paths (lazy);
        len(pool), pool.load(i) -> uint8 [3,H,W].

Modules: registry (specs), sources (layout readers), synthetic (embedded benchmark),
protocol (sessions, checks), preflight (the deep check), loader (batches), pool, errors.
"""

from .errors import DataError
from .loader import make_loader
from .pool import ImagePool
from .preflight import preflight_data
from .protocol import FSCILData, SessionSplit, build_data, check_data
from .registry import (CIFAR_MEAN, CIFAR_STD, DATASETS, IMAGENET_MEAN, IMAGENET_STD, READERS, DatasetSpec, get_spec,
                       import_dataset, register_dataset)

__all__ = [
    "CIFAR_MEAN",
    "CIFAR_STD",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "DATASETS",
    "DataError",
    "DatasetSpec",
    "FSCILData",
    "ImagePool",
    "SessionSplit",
    "build_data",
    "check_data",
    "get_spec",
    "import_dataset",
    "READERS",
    "make_loader",
    "preflight_data",
    "register_dataset",
]
