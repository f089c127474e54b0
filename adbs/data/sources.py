"""Readers of the community layouts (docs/protocols.md, "Benchmarks"), each returning (train, test) pools.

    cifar100       DATA_ROOT/cifar-100-python/{train,test}   torchvision pickles, class = fine label
    mini_imagenet  DATA_ROOT/miniimagenet/images/*.jpg + split/{train,test}.csv (filename,label);
                   class ids in order of first appearance in train.csv
    cub200         DATA_ROOT/CUB_200_2011/ images.txt, image_class_labels.txt,
                   train_test_split.txt, images/NNN.Name/*.jpg; class id = NNN - 1

DATA_ROOT may also be the dataset folder itself (cifar-100-python/, miniimagenet/,
CUB_200_2011/). Pools are cached per process (keyed by the folder and its files' mtimes), so
check_data followed by build_data, or many trials in one worker, read a dataset once.
"""

from __future__ import annotations

import csv
import functools
import os
import pickle
from pathlib import Path

import numpy as np
import torch

from . import synthetic
from .errors import DataError
from .pool import ImagePool
from .registry import READERS, DatasetSpec, get_spec


def _layout_text(spec: DatasetSpec) -> str:
    folder, files = spec.folder, spec.files
    return f"DATA_ROOT/{folder}/ holding {', '.join(files)}"


def resolve_root(spec: DatasetSpec, data_root: str | os.PathLike | None) -> Path:
    """The dataset folder (e.g. .../cifar-100-python) from data_root = it or its parent."""
    folder, files = spec.folder, spec.files
    how = f"To get it: {spec.download_hint}."
    if not data_root:
        raise DataError(
            f"dataset {spec.name!r} needs data_root; expected {_layout_text(spec)}. "
            f"Set Config.data_root (--data-root). {how}"
        )
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise DataError(
            f"data_root {str(root)!r} for dataset {spec.name!r} does not exist or is not a folder; "
            f"expected {_layout_text(spec)} (data_root may also be the {folder}/ folder itself). {how}"
        )
    candidates = [root / folder, root]  # data_root is the folder or its parent (which may share its name)
    for cand in candidates:
        if all((cand / f).exists() for f in files):
            return cand
    best = next((c for c in candidates if c.is_dir() and any((c / f).exists() for f in files)), None)
    if best is None:
        best = candidates[0] if candidates[0].is_dir() else root
    missing = [f for f in files if not (best / f).exists()]
    if best == root and root.name != folder:
        missing = [f"{folder}/"]
    raise DataError(
        f"data_root {str(root)!r} does not hold the {spec.name} layout: {str(best)!r} lacks "
        f"{', '.join(missing)}; expected {_layout_text(spec)} (data_root may also be the {folder}/ "
        f"folder itself). {how}"
    )


def _signature(spec: DatasetSpec, root: Path) -> tuple:
    """mtimes and sizes of the layout files: a changed dataset copy is read again."""
    out = []
    for f in spec.files:
        st = (root / f).stat()
        out.append((f, st.st_mtime_ns, st.st_size))
    return tuple(out)


def load_pools(spec: DatasetSpec, data_root: str | None, synthetic_seed: int = 0,
               synthetic_version: int = 3) -> tuple[ImagePool, ImagePool]:
    """(train_pool, test_pool) of a registered dataset, cached per process."""
    if spec.name == "synthetic":
        return synthetic.synthetic_pools(int(synthetic_seed), int(synthetic_version))
    if spec.name not in READERS:
        raise DataError(f"dataset {spec.name!r} has no reader; datasets with readers: synthetic, {', '.join(READERS)} "
                        "(register_dataset(spec, reader=...): docs/datasets.md)")
    root = resolve_root(spec, data_root)
    return _cached(spec.name, str(root.resolve()), _signature(spec, root))


def dataset_files(spec: DatasetSpec, data_root: str | None) -> tuple[Path, list[Path]]:
    """(dataset folder, every file its data is read from): what decides the images and labels of the pools.

    cifar100: the train and test pickles; mini_imagenet: split/train.csv, split/test.csv and every image they
    list; cub200: images.txt, image_class_labels.txt, train_test_split.txt and every image listed (the files
    the reader opens, and the images the loader decodes). The base-session cache key holds their content
    (adbs/cache.py: base_key). Synthetic data has none: it is generated from its seed and version.
    """
    if spec.name == "synthetic":
        return Path("."), []
    root = resolve_root(spec, data_root)
    files = [root / f for f in spec.files if (root / f).is_file()]
    if spec.name != "cifar100":  # file-based pools (miniImageNet, CUB-200, a registered one): their images too
        train, test = load_pools(spec, data_root)
        files += [Path(p) for p in [*(train.paths or []), *(test.paths or [])]]
    return root, files


@functools.lru_cache(maxsize=4)
def _cached(name: str, root: str, _sig: tuple) -> tuple[ImagePool, ImagePool]:
    spec, reader = get_spec(name), READERS[name]
    try:
        pools = reader(spec, Path(root))
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - a reader of one's own may raise anything: one line naming it
        first = (str(e).splitlines() or [""])[0]
        raise DataError(
            f"the reader of dataset {name!r} ({_qualname(reader)}) failed on {root}: {type(e).__name__}: {first}; "
            "it must return (train, test) ImagePools (docs/datasets.md): fix the reader or the files it reads"
        ) from e
    train, test = pools if isinstance(pools, tuple) and len(pools) == 2 else (pools, None)
    if not (isinstance(train, ImagePool) and isinstance(test, ImagePool)):
        got = ", ".join(type(p).__name__ for p in pools) if isinstance(pools, tuple) else type(pools).__name__
        raise DataError(f"the reader of dataset {name!r} ({_qualname(reader)}) returned {got}; it must return "
                        "(train, test) ImagePools (adbs/data/pool.py)")
    check_pools(spec, Path(root), train, test)
    return train, test


def _qualname(fn: object) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def check_pools(spec: DatasetSpec, root: Path, train: ImagePool, test: ImagePool) -> None:
    """What a reader returned can give an honest test: labels within the spec's classes, no image file listed
    twice, no test image that is also a training image (by path). Content equal across the splits is counted
    by adbs/data/preflight.py, which has the files' digests."""
    for pool, split in ((train, "training"), (test, "test")):
        labels = pool.labels
        bad = labels[(labels < 0) | (labels >= spec.num_classes)]
        if len(bad):
            raise DataError(
                f"the {split} images of dataset {spec.name!r} at {root} have labels out of range: {len(bad)} images "
                f"with labels {int(bad.min())}..{int(bad.max())}, for {spec.num_classes} classes (labels "
                f"0..{spec.num_classes - 1}); expected class ids 0..num_classes - 1: fix the reader's labels or the "
                "spec's num_classes"
            )
    rel = lambda p: os.path.relpath(p, root) if os.path.isabs(p) else p  # noqa: E731
    norm = {id(pool): [os.path.normpath(p) for p in pool.paths] if pool.paths is not None else []
            for pool in (train, test)}
    for pool, split in ((train, "training"), (test, "test")):
        twice = _repeated(norm[id(pool)])
        if twice:
            raise DataError(
                f"dataset {spec.name!r} at {root} lists {len(twice)} {split} image files more than once "
                f"(e.g. {', '.join(rel(p) for p in twice[:3])}); expected each image once: one image would count "
                "twice and another may be missing. Fix the dataset's index files (or its reader)"
            )
    both = sorted(set(norm[id(train)]) & set(norm[id(test)]))
    if both:
        raise DataError(
            f"dataset {spec.name!r} at {root} lists {len(both)} files as both training and test images (e.g. "
            f"{', '.join(rel(p) for p in both[:3])}); a test image must not be a training image, or the test is "
            "not held out: fix the dataset's split files (or its reader)"
        )


def _repeated(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in items:
        if x in seen and x not in out:
            out.append(x)
        seen.add(x)
    return out


# --- CIFAR100 ----------------------------------------------------------------------------


def _read_cifar(spec: DatasetSpec, root: Path) -> tuple[ImagePool, ImagePool]:
    pools = []
    for split in ("train", "test"):
        path = root / split
        fix = (
            f"expected the torchvision CIFAR-100 python pickle (a dict with 'data' uint8 [N, 3072] and "
            f"'fine_labels'); replace the file: {spec.download_hint}"
        )
        try:
            with open(path, "rb") as fh:
                d = pickle.load(fh, encoding="latin1")
        except Exception as e:
            raise DataError(f"cannot read CIFAR-100 pickle {path} ({type(e).__name__}: {e}); {fix}") from None
        if not isinstance(d, dict):
            raise DataError(f"CIFAR-100 pickle {path} holds a {type(d).__name__}, not a dict; {fix}")
        d = {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}
        if "data" not in d or "fine_labels" not in d:
            raise DataError(f"CIFAR-100 pickle {path} lacks 'data' or 'fine_labels' (keys: {sorted(d)}); {fix}")
        data = np.asarray(d["data"])
        labels = np.asarray(d["fine_labels"], dtype=np.int64)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
            raise DataError(
                f"CIFAR-100 pickle {path}: 'data' is {data.dtype} {data.shape} with {len(labels)} labels; {fix}"
            )
        if len(labels) and (labels.min() < 0 or labels.max() >= spec.num_classes):
            raise DataError(f"CIFAR-100 pickle {path}: fine labels outside 0..{spec.num_classes - 1}; {fix}")
        images = torch.from_numpy(np.ascontiguousarray(data)).view(-1, 3, 32, 32)
        pools.append(ImagePool(labels, images=images, name=f"cifar100/{split}"))
    return pools[0], pools[1]


# --- miniImageNet ------------------------------------------------------------------------


def _read_csv(path: Path, spec: DatasetSpec) -> list[tuple[str, str]]:
    fix = "expected a csv with header 'filename,label' and one row per image (the FSCIL miniImageNet split files)"
    try:
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {path} ({type(e).__name__}: {e}); {fix}") from None
    if not rows or [c.strip() for c in rows[0][:2]] != ["filename", "label"]:
        raise DataError(f"{path} has header {rows[0] if rows else 'nothing'}; {fix}")
    out = []
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise DataError(f"{path} line {i} is {row!r}; {fix}")
        out.append((row[0].strip(), row[1].strip()))
    if not out:
        raise DataError(f"{path} lists no images; {fix}")
    return out


def _read_mini(spec: DatasetSpec, root: Path) -> tuple[ImagePool, ImagePool]:
    train_rows = _read_csv(root / "split/train.csv", spec)
    test_rows = _read_csv(root / "split/test.csv", spec)
    class_of: dict[str, int] = {}
    for _, label in train_rows:  # class ids in order of first appearance (CEC's MiniImageNet)
        class_of.setdefault(label, len(class_of))
    if len(class_of) != spec.num_classes:
        raise DataError(
            f"{root / 'split/train.csv'} names {len(class_of)} classes; expected {spec.num_classes} "
            f"(the FSCIL miniImageNet split): check that data_root points at the right copy"
        )
    present = {e.name for e in os.scandir(root / "images")}
    _check_mini_rows(root, train_rows, test_rows)
    pools = []
    for split, rows in (("train", train_rows), ("test", test_rows)):
        unknown = sorted({lab for _, lab in rows if lab not in class_of})
        if unknown:
            raise DataError(
                f"{root / 'split' / (split + '.csv')} uses labels not in train.csv: {unknown[:5]}; "
                "expected test.csv to use the same 100 class labels as train.csv"
            )
        missing = [f for f, _ in rows if f not in present]
        if missing:
            raise DataError(
                f"{len(missing)} images listed in split/{split}.csv are missing from {root / 'images'} "
                f"(e.g. {missing[:3]}); expected every listed file in miniimagenet/images/. "
                f"Re-extract the dataset ({spec.download_hint})"
            )
        names = [f for f, _ in rows]
        labels = np.array([class_of[lab] for _, lab in rows], dtype=np.int64)
        pools.append(ImagePool(
            labels, paths=[str(root / "images" / f) for f in names], keys=names, name=f"mini_imagenet/{split}"
        ))
    return pools[0], pools[1]


def _check_mini_rows(root: Path, train_rows: list[tuple[str, str]], test_rows: list[tuple[str, str]]) -> None:
    """Each file once in the split files: a file listed twice counts twice, a test file that is also a training
    file is no test."""
    for split, rows in (("train", train_rows), ("test", test_rows)):
        twice = _repeated([f for f, _ in rows])
        if twice:
            raise DataError(
                f"{root / 'split' / (split + '.csv')} lists {len(twice)} files more than once (e.g. {twice[:3]}); "
                "expected each image once (the FSCIL miniImageNet split files): restore the file from the "
                "dataset's copy"
            )
    both = sorted({f for f, _ in train_rows} & {f for f, _ in test_rows})
    if both:
        raise DataError(
            f"{root / 'split/test.csv'} lists {len(both)} files that {root / 'split/train.csv'} lists too (e.g. "
            f"{both[:3]}); a test image must not be a training image, or the test is not held out: restore the "
            "split files from the dataset's copy"
        )


# --- CUB200 ------------------------------------------------------------------------------


def _read_table(path: Path, ncols: int, what: str) -> dict[int, list[str]]:
    fix = f"expected lines '<image_id> {what}' as in the official CUB_200_2011 release"
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {path} ({type(e).__name__}: {e}); {fix}") from None
    out: dict[int, list[str]] = {}
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != ncols + 1 or not parts[0].isdigit():
            raise DataError(f"{path} line {i} is {line!r}; {fix}")
        iid = int(parts[0])
        if iid in out:  # the last line would win: one image twice, another gone
            first = next(j for j, ln in enumerate(lines, start=1) if ln.split()[:1] and ln.split()[0].isdigit()
                         and int(ln.split()[0]) == iid)
            raise DataError(f"{path} lists image id {iid} twice (lines {first} and {i}); {fix}, each id once: "
                            "restore the file from the dataset's copy")
        out[iid] = parts[1:]
    if not out:
        raise DataError(f"{path} is empty; {fix}")
    return out


def _read_cub(spec: DatasetSpec, root: Path) -> tuple[ImagePool, ImagePool]:
    images = _read_table(root / "images.txt", 1, "<NNN.Class_Name/file.jpg>")
    labels = _read_table(root / "image_class_labels.txt", 1, "<class_id 1..200>")
    split = _read_table(root / "train_test_split.txt", 1, "<1 = train, 0 = test>")
    if not (images.keys() == labels.keys() == split.keys()):
        raise DataError(
            f"{root}: images.txt, image_class_labels.txt and train_test_split.txt list different image "
            "ids; expected the same ids in all three (the official CUB_200_2011 release)"
        )
    present: set[str] = set()
    for d in os.scandir(root / "images"):
        if d.is_dir():
            present.update(f"{d.name}/{e.name}" for e in os.scandir(d.path))
    _check_cub_paths(root, images, split)
    out: dict[str, tuple[list[str], list[int]]] = {"train": ([], []), "test": ([], [])}
    missing = []
    for iid in sorted(images):
        rel = images[iid][0]
        folder = rel.split("/")[0]
        num = folder.split(".")[0]
        if "/" not in rel or not num.isdigit():
            raise DataError(
                f"{root / 'images.txt'}: image {iid} path {rel!r} is not 'NNN.Class_Name/file.jpg'; "
                "expected the official CUB_200_2011 naming (class id = NNN - 1)"
            )
        c = int(num) - 1
        if not 0 <= c < spec.num_classes or int(labels[iid][0]) - 1 != c:
            raise DataError(
                f"{root}: image {iid} ({rel}) is in folder {folder} but image_class_labels.txt gives class "
                f"{labels[iid][0]}; expected folder number = class id in 1..{spec.num_classes}"
            )
        if rel not in present:
            missing.append(rel)
        flag = split[iid][0]
        if flag not in ("0", "1"):
            raise DataError(f"{root / 'train_test_split.txt'}: image {iid} has flag {flag!r}; expected 1 (train) or 0 (test)")
        keys, labs = out["train" if flag == "1" else "test"]
        keys.append(rel)
        labs.append(c)
    if missing:
        raise DataError(
            f"{len(missing)} images listed in {root / 'images.txt'} are missing under {root / 'images'} "
            f"(e.g. {missing[:3]}); expected every listed file. Re-extract the dataset ({spec.download_hint})"
        )
    pools = []
    for s in ("train", "test"):
        keys, labs = out[s]
        pools.append(ImagePool(
            np.array(labs, dtype=np.int64), paths=[str(root / "images" / k) for k in keys], keys=keys,
            name=f"cub200/{s}",
        ))
    return pools[0], pools[1]


def _check_cub_paths(root: Path, images: dict[int, list[str]], split: dict[int, list[str]]) -> None:
    """Each image file under one id: two ids naming one file count it twice (or make a training image a test
    image)."""
    ids: dict[str, list[int]] = {}
    for iid in sorted(images):
        ids.setdefault(images[iid][0], []).append(iid)
    twice = {rel: v for rel, v in ids.items() if len(v) > 1}
    if not twice:
        return
    rel, v = next(iter(twice.items()))
    kinds = sorted({"train" if split[i][0] == "1" else "test" for i in v})
    what = ("a test id names a training image: the test is not held out" if kinds == ["test", "train"]
            else "the image would count twice")
    raise DataError(
        f"{root / 'images.txt'} names {len(twice)} image files under more than one id (e.g. {rel} under ids "
        f"{', '.join(map(str, v))}, {' and '.join(kinds)} in train_test_split.txt); {what}. Expected each file "
        "under one id (the official CUB_200_2011 release): restore images.txt from the dataset's copy"
    )


READERS.update({
    "cifar100": _read_cifar,
    "mini_imagenet": _read_mini,
    "cub200": _read_cub,
})
