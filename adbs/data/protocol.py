"""The FSCIL session protocol: class order, few-shot draws, validation carve-out, checks.

Class order: classes 0..base-1 form the base session; incremental session t (1-based)
introduces classes base + (t-1)*ways .. base + t*ways - 1 (the TOPIC/CEC order: CIFAR fine
labels, miniImageNet first appearance in train.csv, CUB folder number - 1).

Two ways to fix the training images of each session:

* seeded draw (index_list None, the default): every class gets its own numpy Generator
  seeded by (split_seed, class), so a class's draw does not depend on ways, sessions, the
  training seed or any other class. Base class: a permutation of its training images; the
  first round(val_fraction * n) are validation, the next base_images_per_class (all when
  None) are training. Novel class: the first `shots` of the permutation are the shots,
  the last novel_val_per_class are validation (so the validation set does not change with
  `shots`, and a larger `shots` extends a smaller one).
* index lists (index_list = folder with session_1.txt ..): session_1.txt lists the base
  training images, session_t.txt (t >= 2) the shots of incremental session t-1; ways and
  shots come from the files. Validation deviates from the official code, which trains the
  base session on every listed image and picks the best epoch by test accuracy: here
  round(val_fraction * n) of each base class's listed images are held out (drawn with
  split_seed; base_images_per_class still caps the rest), and each novel class's
  validation images are up to novel_val_per_class of its training images that no list names.
  Test data is never used for selection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import synthetic
from .errors import DataError
from .pool import ImagePool
from .registry import DatasetSpec, get_spec
from .sources import load_pools


@dataclass
class SessionSplit:
    """One session: its new classes and indices into the train / test pools (class-major order)."""

    index: int
    classes: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass
class FSCILData:
    """A dataset's pools and its sessions (sessions[0] = base, sessions[t] = incremental t)."""

    spec: DatasetSpec
    train_pool: ImagePool
    test_pool: ImagePool
    sessions: list[SessionSplit]
    ways: int
    shots: int
    split_source: str = field(default="seeded")
    """'seeded(split_seed=S)' or 'index_list(DIR)': where the training images of the sessions come from."""

    @property
    def num_sessions(self) -> int:
        """All sessions, base included (1 + incremental sessions)."""
        return len(self.sessions)

    @property
    def base_classes(self) -> int:
        return len(self.sessions[0].classes)

    def classes_seen(self, t: int) -> np.ndarray:
        """Classes of sessions 0..t (ascending)."""
        if not 0 <= t < len(self.sessions):
            raise IndexError(f"session {t} out of range 0..{len(self.sessions) - 1}")
        return np.concatenate([s.classes for s in self.sessions[: t + 1]])

    def num_classes_seen(self, t: int) -> int:
        return sum(len(s.classes) for s in self.sessions[: t + 1])

    def summary(self) -> dict[str, Any]:
        return {
            "dataset": self.spec.name,
            "split_source": self.split_source,
            "ways": self.ways,
            "shots": self.shots,
            "num_sessions": self.num_sessions,
            "base_train": len(self.sessions[0].train),
            "base_val": len(self.sessions[0].val),
            "test_images": int(sum(len(s.test) for s in self.sessions)),
        }


# --- public entry points ---------------------------------------------------------------------


def check_data(cfg: Any) -> None:
    """Every check that is cheap before compute; raises DataError. build_data runs it too.

    Root layout, labels within the classes, no file listed twice or in both splits, index-list files and
    the images they name, ways/shots/sessions against the images available, and that the few-shot images
    of file-based datasets decode. adbs/data/preflight.py: preflight_data adds the deep checks. (The host's
    options against the dataset are Config.validate's: adbs/config/checks.py.)
    """
    _prepare(cfg, need_images=False)


def build_data(cfg: Any) -> FSCILData:
    """Load (or generate) the dataset named by cfg.dataset and draw its sessions."""
    return _prepare(cfg, need_images=True)  # type: ignore[return-value]


# --- implementation ---------------------------------------------------------------------------


def _prepare(cfg: Any, need_images: bool) -> FSCILData | None:
    spec = get_spec(cfg.dataset)
    _check_values(cfg)
    if spec.name == "synthetic":
        if cfg.index_list:
            raise DataError(
                f"index_list={cfg.index_list!r} was given for dataset 'synthetic'; index lists name images of "
                "cifar100, mini_imagenet or cub200, while synthetic splits are drawn from split_seed. "
                "Unset index_list, or pick the real dataset the lists belong to"
            )
        if cfg.data_root:
            raise DataError(
                f"data_root={cfg.data_root!r} was given for dataset 'synthetic', the embedded benchmark, which reads "
                "no files: set the dataset stored there (--dataset cifar100, mini_imagenet or cub200), or drop "
                "data_root to run the embedded benchmark"
            )
        # labels are known without generating the images: checks stay instant, images come last
        train_labels, test_labels, keys = synthetic.train_labels(), synthetic.test_labels(), None
        pools = None
    else:
        pools = load_pools(spec, cfg.data_root, cfg.synthetic_seed)
        train_labels, test_labels, keys = pools[0].labels, pools[1].labels, pools[0].keys
    if cfg.index_list:
        sessions, ways, shots, source = _from_index_list(spec, cfg, train_labels, keys, test_labels)
    else:
        sessions, ways, shots = _seeded(spec, cfg, train_labels, test_labels)
        source = f"seeded(split_seed={int(cfg.split_seed)})"
    if pools is not None and not pools[0].in_memory:
        _verify_few_shot_images(pools[0], sessions)
    if not need_images:
        return None
    if spec.name == "synthetic":
        pools = synthetic.synthetic_pools(int(cfg.synthetic_seed), int(cfg.synthetic_version))
    assert pools is not None
    return FSCILData(spec, pools[0], pools[1], sessions, ways, shots, source)


def _check_values(cfg: Any) -> None:
    """Range checks duplicated from Config.validate, so build_data is safe on unvalidated configs."""
    def bad(name: str, want: str) -> DataError:
        return DataError(f"{name}={getattr(cfg, name)!r} is invalid; expected {want}; fix the config value")

    if not isinstance(cfg.shots, int) or cfg.shots < 1:
        raise bad("shots", "an int >= 1")
    if cfg.ways is not None and (not isinstance(cfg.ways, int) or cfg.ways < 1):
        raise bad("ways", "an int >= 1 or None (the dataset's standard)")
    if cfg.sessions is not None and (not isinstance(cfg.sessions, int) or cfg.sessions < 0):
        raise bad("sessions", "an int >= 0 or None (all novel classes)")
    if not 0.0 < cfg.val_fraction < 1.0:
        raise bad("val_fraction", "a number in (0, 1): validation images are required, test data is never used for selection")
    if not isinstance(cfg.novel_val_per_class, int) or cfg.novel_val_per_class < 0:
        raise bad("novel_val_per_class", "an int >= 0")
    if cfg.base_images_per_class is not None and (
        not isinstance(cfg.base_images_per_class, int) or cfg.base_images_per_class < 1
    ):
        raise bad("base_images_per_class", "an int >= 1 or None (all)")


def _class_rng(split_seed: int, c: int | np.integer, purpose: int) -> np.random.Generator:
    # One stream per (split_seed, class, purpose): independent of ways, sessions, `seed`.
    return np.random.default_rng([int(split_seed), int(c), purpose, 0xADB5])


def _by_class(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(num_classes + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(num_classes)]


def _test_by_class(test_labels: np.ndarray, spec: DatasetSpec, cfg: Any) -> list[np.ndarray]:
    """Each class's test images in file order (_by_class's stable sort keeps it), the first
    cfg.test_images_per_class of them where it caps them."""
    return [idx[:cfg.test_images_per_class] for idx in _by_class(test_labels, spec.num_classes)]


def _ways_sessions(spec: DatasetSpec, cfg: Any, ways: int) -> int:
    novel = spec.novel_classes
    if cfg.sessions is None:
        if novel % ways:
            ok = [w for w in range(1, novel + 1) if novel % w == 0]
            raise DataError(
                f"ways={ways} does not divide the {novel} novel classes of {spec.name} (sessions=None means "
                f"'use every novel class'); allowed ways: {ok}, or set sessions <= {novel // ways} explicitly"
            )
        return novel // ways
    if cfg.sessions * ways > novel:
        raise DataError(
            f"sessions={cfg.sessions} x ways={ways} = {cfg.sessions * ways} novel classes, but {spec.name} has "
            f"{novel}; expected sessions * ways <= {novel}: use at most {novel // ways} sessions with ways={ways}"
        )
    return int(cfg.sessions)


def _base_carve(spec: DatasetSpec, cfg: Any, c: int | np.integer, imgs: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    n = len(imgs)
    n_val = int(round(cfg.val_fraction * n))
    if n_val < 1 or n - n_val < 1:
        raise DataError(
            f"base class {c} of {spec.name} has {n} training images {where}; val_fraction={cfg.val_fraction} holds out "
            f"{n_val}, but at least 1 validation and 1 training image are needed: use a val_fraction with "
            f"1 <= round(val_fraction * {n}) <= {n - 1}"
        )
    perm = _class_rng(cfg.split_seed, c, 0).permutation(np.sort(imgs))
    train = perm[n_val:]
    if cfg.base_images_per_class is not None:
        train = train[: cfg.base_images_per_class]
    return np.sort(train), np.sort(perm[:n_val])


def _session(index: int, classes: np.ndarray, train: list, val: list, test_by_class: list) -> SessionSplit:
    cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)  # noqa: E731
    return SessionSplit(
        index=index,
        classes=classes.astype(np.int64),
        train=cat(train),
        val=cat(val),
        test=cat([np.sort(test_by_class[c]) for c in classes]),
    )


def _seeded(spec, cfg, train_labels, test_labels) -> tuple[list[SessionSplit], int, int]:
    ways = cfg.ways if cfg.ways is not None else spec.default_ways
    n_sessions = _ways_sessions(spec, cfg, ways)
    by_class = _by_class(train_labels, spec.num_classes)
    test_by_class = _test_by_class(test_labels, spec, cfg)
    _check_classes_present(spec, cfg, by_class, test_by_class, spec.base_classes + n_sessions * ways)
    base = np.arange(spec.base_classes)
    tr, va = zip(*(_base_carve(spec, cfg, c, by_class[c], "") for c in base))
    sessions = [_session(0, base, list(tr), list(va), test_by_class)]
    nv = cfg.novel_val_per_class
    for t in range(1, n_sessions + 1):
        classes = np.arange(spec.base_classes + (t - 1) * ways, spec.base_classes + t * ways)
        tr, va = [], []
        for c in classes:
            imgs = np.sort(by_class[c])
            if cfg.shots + nv > len(imgs):
                raise DataError(
                    f"shots={cfg.shots} is too large for novel class {c} of {spec.name}: it has {len(imgs)} training "
                    f"images and novel_val_per_class={nv} of them are held out for validation; expected "
                    f"shots + novel_val_per_class <= {len(imgs)}: use shots <= {max(len(imgs) - nv, 0)} or "
                    f"lower novel_val_per_class"
                )
            perm = _class_rng(cfg.split_seed, c, 1).permutation(imgs)
            tr.append(np.sort(perm[: cfg.shots]))
            va.append(np.sort(perm[len(perm) - nv:]) if nv else np.zeros(0, np.int64))
        sessions.append(_session(t, classes, tr, va, test_by_class))
    return sessions, ways, int(cfg.shots)


# --- index lists ---------------------------------------------------------------------------------


def _index_dir(spec: DatasetSpec, index_list: str) -> Path:
    p = Path(index_list).expanduser()
    for cand in (p, p / spec.name):
        if (cand / "session_1.txt").is_file():
            return cand
    raise DataError(
        f"index_list {str(p)!r} holds no session_1.txt (nor {spec.name}/session_1.txt); expected a folder with "
        f"session_1.txt (base training images) and session_2.txt.. (few-shot images of each incremental "
        f"session), as distributed with CEC/TOPIC: point index_list at the {spec.name} lists, or unset it to "
        f"draw splits from split_seed"
    )


def read_index_list(spec: DatasetSpec, index_list: str) -> tuple[Path, list[list[str]]]:
    """(folder, lines of session_1.txt, session_2.txt, ...) of an index-list folder; no matching yet."""
    d = _index_dir(spec, index_list)
    files = []
    t = 1
    while (d / f"session_{t}.txt").is_file():
        lines = [ln.strip() for ln in (d / f"session_{t}.txt").read_text().splitlines()]
        files.append([ln for ln in lines if ln])
        if not files[-1]:
            raise DataError(
                f"{d / f'session_{t}.txt'} is empty; expected one image per line (session_1.txt: the base "
                f"training images, session_{t}.txt: the few-shot images of incremental session {t - 1}): restore "
                f"it from the lists distributed with CEC/TOPIC, or unset index_list to draw splits from split_seed"
                if t > 1 else
                f"{d / 'session_1.txt'} is empty; expected one base training image per line: restore it from the "
                "lists distributed with CEC/TOPIC, or unset index_list to draw splits from split_seed"
            )
        t += 1
    stray = sorted(f.name for f in d.glob("session_*.txt") if f.name not in {f"session_{i}.txt" for i in range(1, t)})
    if stray:
        raise DataError(
            f"index_list {str(d)!r} has {stray} but not session_{t}.txt; expected consecutive files "
            f"session_1.txt, session_2.txt, ..: add the missing file or remove the stray ones"
        )
    return d, files


def index_list_files(spec: DatasetSpec, index_list: str) -> tuple[Path, list[Path]]:
    """(folder, its session_1.txt, session_2.txt, ...): the files an index list is read from."""
    d = _index_dir(spec, index_list)
    files, t = [], 1
    while (d / f"session_{t}.txt").is_file():
        files.append(d / f"session_{t}.txt")
        t += 1
    return d, files


def match_index_lines(
    spec: DatasetSpec, lines: list[str], train_keys: list[str] | None, n_train: int, where: str
) -> np.ndarray:
    """Train-pool indices named by the lines of one index-list file.

    cifar100: each line is an integer index into the training set. File-based datasets: each
    line is a relative path matched on its last components (as many as the pool's keys have:
    'NNN.Name/file.jpg' for CUB, 'file.jpg' for miniImageNet).
    """
    if train_keys is None:
        out = np.empty(len(lines), dtype=np.int64)
        for i, ln in enumerate(lines):
            try:
                out[i] = int(ln)
            except ValueError:
                raise DataError(
                    f"{where} line {i + 1} is {ln!r}; expected one integer index into the {spec.name} training "
                    f"set per line: this file is not a {spec.name} index list"
                ) from None
        bad = np.flatnonzero((out < 0) | (out >= n_train))
        if len(bad):
            raise DataError(
                f"{where} line {bad[0] + 1} names image {out[bad[0]]}, which does not exist: the {spec.name} training "
                f"set has {n_train} images (expected indices 0..{n_train - 1}); use the lists that belong to this dataset"
            )
        return out
    depth = train_keys[0].count("/") + 1 if train_keys else 1
    lookup = {k: i for i, k in enumerate(train_keys)}
    out = np.empty(len(lines), dtype=np.int64)
    for i, ln in enumerate(lines):
        key = "/".join(ln.replace("\\", "/").split("/")[-depth:])
        j = lookup.get(key)
        if j is None:
            raise DataError(
                f"{where} line {i + 1} names {ln!r} (matched on {key!r}), which is not an image of the {spec.name} "
                f"training split found at data_root; expected every listed image to be a training image of this "
                f"dataset copy: check data_root and that index_list holds the {spec.name} lists"
            )
        out[i] = j
    return out


def _from_index_list(spec, cfg, train_labels, train_keys, test_labels):
    d, files = read_index_list(spec, cfg.index_list)
    idx = [match_index_lines(spec, lines, train_keys, len(train_labels), str(d / f"session_{t + 1}.txt"))
           for t, lines in enumerate(files)]
    return sessions_from_index_lists(spec, cfg, idx, train_labels, test_labels, str(d))


def sessions_from_index_lists(
    spec: DatasetSpec, cfg: Any, idx: list[np.ndarray], train_labels: np.ndarray, test_labels: np.ndarray, where: str
) -> tuple[list[SessionSplit], int, int, str]:
    """Sessions from matched index lists (idx[0] = session_1.txt, ...): checks and validation carve-out."""
    name = lambda t: f"{where}/session_{t + 1}.txt"  # noqa: E731
    seen = np.concatenate(idx)
    if len(np.unique(seen)) != len(seen):
        dup = int(np.flatnonzero(np.bincount(seen) > 1)[0])
        raise DataError(
            f"image {dup} is listed more than once in the index lists at {where}; expected each image in one "
            "session only: use unmodified lists"
        )
    base = np.arange(spec.base_classes)
    got = np.unique(train_labels[idx[0]])
    if not np.array_equal(got, base):
        raise DataError(
            f"{name(0)} lists images of {len(got)} classes ({_span(got)}); expected all {spec.base_classes} base "
            f"classes 0..{spec.base_classes - 1} of {spec.name}: the lists do not match this dataset's class order"
        )
    if len(idx) < 2:
        ways, shots = (cfg.ways if cfg.ways is not None else spec.default_ways), cfg.shots
    else:
        c1, n1 = np.unique(train_labels[idx[1]], return_counts=True)
        ways, shots = len(c1), int(n1[0])
    for t in range(1, len(idx)):
        cls, cnt = np.unique(train_labels[idx[t]], return_counts=True)
        want = np.arange(spec.base_classes + (t - 1) * ways, spec.base_classes + t * ways)
        if not np.array_equal(cls, want) or not (cnt == shots).all():
            raise DataError(
                f"{name(t)} lists {len(idx[t])} images of classes {_span(cls)} with {sorted(set(cnt.tolist()))} images "
                f"each; expected {ways} classes {want[0]}..{want[-1]} with {shots} images each (the shape set by "
                f"session_2.txt): the lists are inconsistent or do not belong to {spec.name}"
            )
    if cfg.ways is not None and cfg.ways != ways:
        raise DataError(
            f"ways={cfg.ways} but the index lists at {where} fix ways={ways}; set ways=None (or {ways}), or unset "
            f"index_list to draw {cfg.ways}-way splits from split_seed"
        )
    if cfg.shots != shots:
        raise DataError(
            f"shots={cfg.shots} but the index lists at {where} fix shots={shots}; set shots={shots}, or unset "
            f"index_list to draw {cfg.shots}-shot splits from split_seed"
        )
    available = len(idx) - 1
    if cfg.sessions is not None and cfg.sessions > available:
        raise DataError(
            f"sessions={cfg.sessions} but the index lists at {where} define {available} incremental sessions "
            f"(session_2.txt..session_{available + 1}.txt); expected sessions <= {available} or None"
        )
    n_sessions = available if cfg.sessions is None else int(cfg.sessions)

    by_class = _by_class(train_labels, spec.num_classes)
    test_by_class = _test_by_class(test_labels, spec, cfg)
    _check_classes_present(spec, cfg, by_class, test_by_class, spec.base_classes + n_sessions * ways)
    base_by_class = _by_class(train_labels[idx[0]], spec.num_classes)
    tr, va = zip(*(_base_carve(spec, cfg, c, idx[0][base_by_class[c]], f"in {name(0)}") for c in base))
    sessions = [_session(0, base, list(tr), list(va), test_by_class)]
    listed = np.zeros(len(train_labels), dtype=bool)
    listed[seen] = True
    nv = cfg.novel_val_per_class
    for t in range(1, n_sessions + 1):
        classes = np.arange(spec.base_classes + (t - 1) * ways, spec.base_classes + t * ways)
        shots_t = idx[t]
        train_t, val_t = [], []
        for c in classes:
            train_t.append(np.sort(shots_t[train_labels[shots_t] == c]))
            rest = np.sort(by_class[c][~listed[by_class[c]]])
            val_t.append(np.sort(_class_rng(cfg.split_seed, c, 1).permutation(rest)[:nv]))
        sessions.append(_session(t, classes, train_t, val_t, test_by_class))
    return sessions, ways, shots, f"index_list({where})"


def _check_classes_present(spec: DatasetSpec, cfg: Any, by_class: list, test_by_class: list, n_used: int) -> None:
    """Every class the sessions use has training and test images (a partial dataset copy fails here, not as
    a nonsensical split message or as sessions whose accuracy silently covers the base classes only)."""
    where = f" at {cfg.data_root}" if getattr(cfg, "data_root", None) else ""
    for split, groups in (("training", by_class), ("test", test_by_class)):
        empty = [c for c in range(n_used) if len(groups[c]) == 0]
        if empty:
            novel = [c for c in empty if c >= spec.base_classes]
            what = ("its novel classes: sessions would be scored on the base classes only"
                    if len(novel) == len(empty) else "classes the sessions use")
            raise DataError(
                f"the {split} split of {spec.name}{where} has no images of classes {_ranges(empty)} "
                f"({len(empty)} of the {n_used} classes the sessions use; {what}); expected images of every "
                f"class 0..{spec.num_classes - 1}: point data_root at a complete copy of {spec.name}"
                + (", or lower sessions to use fewer novel classes" if len(novel) == len(empty) else "")
            )


def _ranges(classes: list[int]) -> str:
    """[20, 21, ..., 59, 61] -> '20..59, 61'."""
    parts, start = [], None
    for i, c in enumerate(classes):
        if start is None:
            start = c
        if i + 1 == len(classes) or classes[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}..{c}")
            start = None
    return ", ".join(parts)


def _span(classes: np.ndarray) -> str:
    if len(classes) == 0:
        return "none"
    return f"{classes[0]}..{classes[-1]}" if len(classes) > 6 else str(classes.tolist())


def _verify_few_shot_images(pool: ImagePool, sessions: list[SessionSplit]) -> None:
    """Decode the few-shot images of file-based datasets (a few hundred; cached by the pool)."""
    for s in sessions[1:]:
        for i in s.train:
            pool.load(int(i))
