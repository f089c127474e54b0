"""Tests of adbs.data: registry, layouts (tiny fake copies), protocol, index lists, synthetic, loaders.

Fast and offline: fake datasets are written to tmp folders; the real index lists in
../shared/reference/fscil_index_lists are used when present (skipped otherwise).
"""

from __future__ import annotations

import dataclasses

import csv
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from adbs.config import Config
from adbs.data import (
    DATASETS,
    DataError,
    DatasetSpec,
    FSCILData,
    ImagePool,
    SessionSplit,
    build_data,
    check_data,
    make_loader,
)
from adbs.data import protocol, registry, synthetic
# _batch_random_crop, synthetic._Classes: private helpers of adbs/data/, tested directly (a crop per image, the
# classes a seed draws)
from adbs.data.loader import _batch_random_crop, parse_transform
from adbs.data.protocol import match_index_lines, read_index_list, sessions_from_index_lists
from tests.helpers.datasets import MINI_WNIDS, write_cifar, write_cub, write_jpg, write_mini

INDEX_LISTS = Path(__file__).resolve().parents[3].parent / "shared/reference/fscil_index_lists"
needs_lists = pytest.mark.skipif(
    not INDEX_LISTS.is_dir(),
    reason=f"real FSCIL index lists not found at {INDEX_LISTS} (they live in the project's shared/ folder)",
)

@pytest.fixture(scope="session")
def fake_roots(tmp_path_factory) -> dict[str, Path]:
    return {
        "cifar100": write_cifar(tmp_path_factory.mktemp("cifar")),
        "mini_imagenet": write_mini(tmp_path_factory.mktemp("mini")),
        "cub200": write_cub(tmp_path_factory.mktemp("cub")),
    }


def cfg_for(name: str, roots: dict[str, Path] | None = None, **kw) -> Config:
    """A config that fits the fake copies (few images per class)."""
    base = {"dataset": name}
    if name != "synthetic":
        base.update(data_root=str(roots[name]), novel_val_per_class=2, base_images_per_class=None, val_fraction=0.1)
    base.update(kw)
    return Config(**base)


# --- invariants of a built dataset ------------------------------------------------------------------


def check_invariants(data: FSCILData, ways: int, shots: int) -> None:
    spec = data.spec
    assert isinstance(spec, DatasetSpec) and all(isinstance(s, SessionSplit) for s in data.sessions)
    tl, el = data.train_pool.labels, data.test_pool.labels
    assert data.ways == ways and data.shots == shots
    base = data.sessions[0]
    np.testing.assert_array_equal(base.classes, np.arange(spec.base_classes))
    all_train = np.concatenate([s.train for s in data.sessions])
    all_val = np.concatenate([s.val for s in data.sessions])
    assert len(np.unique(all_train)) == len(all_train), "train images repeat across sessions"
    assert len(np.unique(all_val)) == len(all_val)
    assert not np.intersect1d(all_train, all_val).size, "validation overlaps training images"
    seen: set[int] = set()
    for t, s in enumerate(data.sessions):
        assert s.index == t
        assert not seen & set(s.classes.tolist()), "sessions share classes"
        seen |= set(s.classes.tolist())
        if t > 0:
            np.testing.assert_array_equal(
                s.classes, np.arange(spec.base_classes + (t - 1) * ways, spec.base_classes + t * ways))
            assert len(s.train) == ways * shots
            assert (np.bincount(tl[s.train], minlength=spec.num_classes)[s.classes] == shots).all()
        assert set(tl[s.train].tolist()) == set(s.classes.tolist())
        assert set(tl[s.val].tolist()) <= set(s.classes.tolist())
        assert set(el[s.test].tolist()) == set(s.classes.tolist())
        # every test image of the session's classes, nothing else
        assert len(s.test) == np.isin(el, s.classes).sum()
    np.testing.assert_array_equal(data.classes_seen(len(data.sessions) - 1), np.sort(list(seen)))


# --- registry -----------------------------------------------------------------------------------------


def test_registry_entries():
    assert set(DATASETS) == {"synthetic", "cifar100", "mini_imagenet", "cub200"}
    assert DATASETS["cub200"].num_classes == 200 and DATASETS["cub200"].default_ways == 10
    assert DATASETS["mini_imagenet"].image_size == 84 and DATASETS["cub200"].image_size == 224
    for spec in DATASETS.values():
        assert parse_transform(spec.train_transform) and parse_transform(spec.test_transform) is not None
        assert spec.download_hint


def test_registry_duplicate_and_unknown():
    import dataclasses

    with pytest.raises(DataError, match="already registered"):  # another spec under a taken name
        registry.register_dataset(dataclasses.replace(DATASETS["cifar100"], num_classes=10))
    assert registry.register_dataset(DATASETS["cifar100"]) is DATASETS["cifar100"]  # the same spec again: a no-op
    with pytest.raises(DataError, match="valid datasets: synthetic, cifar100, mini_imagenet, cub200"):
        registry.get_spec("cifar10")
    with pytest.raises(DataError, match="valid datasets"):
        build_data(Config(dataset="imagenet"))


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_registry_entry_builds(name, fake_roots):
    cfg = cfg_for(name, fake_roots)
    check_data(cfg)
    data = build_data(cfg)
    spec = DATASETS[name]
    check_invariants(data, spec.default_ways, 5)
    assert data.num_sessions == 1 + spec.novel_classes // spec.default_ways
    x, y = next(iter(make_loader(data, data.train_pool, data.sessions[1].train, train=True,
                                 batch_size=8, shuffle=True, seed=0)))
    assert x.shape == (8, 3, spec.image_size, spec.image_size) and x.dtype == torch.float32
    assert y.dtype == torch.int64
    x, _ = next(iter(make_loader(data, data.test_pool, data.sessions[0].test, train=False,
                                 batch_size=4, shuffle=False, seed=0)))
    assert x.shape == (4, 3, spec.image_size, spec.image_size)


def test_root_may_be_the_dataset_folder(fake_roots):
    for name, folder in (("cifar100", "cifar-100-python"), ("mini_imagenet", "miniimagenet"),
                         ("cub200", "CUB_200_2011")):
        cfg = cfg_for(name, fake_roots, data_root=str(fake_roots[name] / folder))
        assert len(build_data(cfg).train_pool) > 0


def test_layout_class_order(fake_roots):
    mini = build_data(cfg_for("mini_imagenet", fake_roots))
    # class id = order of first appearance in train.csv
    i = mini.train_pool.labels.tolist().index(37)
    assert Path(mini.train_pool.paths[i]).name.startswith(MINI_WNIDS[37])
    cub = build_data(cfg_for("cub200", fake_roots))
    for i in (0, 500, len(cub.train_pool) - 1):  # class id = folder number - 1
        folder = Path(cub.train_pool.paths[i]).parent.name
        assert int(folder.split(".")[0]) - 1 == cub.train_pool.labels[i]


# --- protocol on the synthetic benchmark ------------------------------------------------------------


def test_synthetic_default_protocol():
    data = build_data(Config())
    check_invariants(data, 5, 5)
    assert data.num_sessions == 9
    base = data.sessions[0]
    counts = np.bincount(data.train_pool.labels[base.train], minlength=100)[:60]
    assert (counts == Config().base_images_per_class).all()  # base_images_per_class cap
    n_val = round(Config().val_fraction * 500)
    assert (np.bincount(data.train_pool.labels[base.val], minlength=100)[:60] == n_val).all()
    assert all(len(s.val) == 5 * 20 for s in data.sessions[1:])


@pytest.mark.parametrize("ways,shots", [(10, 1), (5, 20), (10, 5)])
def test_ways_shots_variants(ways, shots):
    data = build_data(Config(ways=ways, shots=shots))
    check_invariants(data, ways, shots)
    assert data.num_sessions == 1 + 40 // ways


def test_sessions_subset():
    data = build_data(Config(sessions=3))
    assert data.num_sessions == 4 and data.num_classes_seen(3) == 75


def test_split_seed_controls_the_draw():
    a, b = build_data(Config(split_seed=3)), build_data(Config(split_seed=3))
    c = build_data(Config(split_seed=4))
    d = build_data(Config(split_seed=3, seed=123))  # training seed
    for x in (b, d):
        for s, t in zip(a.sessions, x.sessions):
            for f in ("classes", "train", "val", "test"):
                np.testing.assert_array_equal(getattr(s, f), getattr(t, f))
    assert not np.array_equal(a.sessions[1].train, c.sessions[1].train)
    assert not np.array_equal(a.sessions[0].val, c.sessions[0].val)


def test_larger_shots_extend_smaller_and_keep_val():
    a, b = build_data(Config(shots=5)), build_data(Config(shots=10))
    assert set(a.sessions[1].train) <= set(b.sessions[1].train)
    np.testing.assert_array_equal(a.sessions[1].val, b.sessions[1].val)


def test_check_data_is_cheap_for_synthetic():
    misses = synthetic.synthetic_pools.cache_info().misses
    t0 = time.perf_counter()
    check_data(Config(synthetic_seed=77))
    assert time.perf_counter() - t0 < 1.0
    assert synthetic.synthetic_pools.cache_info().misses == misses  # nothing generated


# --- error messages ----------------------------------------------------------------------------------


def test_error_ways_not_dividing():
    with pytest.raises(DataError,
                       match=r"ways=7 does not divide the 40 novel classes.*allowed ways: \[1, 2, 4, 5, 8, 10, 20, 40\]"):
        check_data(Config(ways=7))
    check_data(Config(ways=7, sessions=5))  # explicit sessions: fine


def test_error_too_many_sessions():
    with pytest.raises(DataError, match="use at most 8 sessions with ways=5"):
        check_data(Config(sessions=9))


def test_error_shots_too_large():
    with pytest.raises(DataError, match=r"shots=490 is too large.*shots \+ novel_val_per_class <= 500.*shots <= 480"):
        check_data(Config(shots=490))


def test_error_bad_values():
    with pytest.raises(DataError, match="val_fraction"):
        check_data(Config(val_fraction=0.0))
    with pytest.raises(DataError, match="index lists name images of"):
        check_data(Config(index_list="/nowhere"))


def test_error_missing_root(tmp_path):
    with pytest.raises(DataError, match=r"does not exist.*cifar-100-python.*CIFAR100\('DATA_ROOT', download=True\)"):
        check_data(Config(dataset="cifar100", data_root=str(tmp_path / "nope")))
    with pytest.raises(DataError, match="needs data_root"):
        check_data(Config(dataset="cub200"))


def test_error_malformed_root(tmp_path):
    d = tmp_path / "miniimagenet"
    (d / "images").mkdir(parents=True)
    (d / "split").mkdir()
    (d / "split" / "train.csv").write_text("filename,label\n")
    with pytest.raises(DataError,
                       match=r"lacks split/test\.csv; expected DATA_ROOT/miniimagenet/ holding images, split/train.csv"):
        check_data(Config(dataset="mini_imagenet", data_root=str(tmp_path)))
    with pytest.raises(DataError, match=r"lacks .*images\.txt.*CUB_200_2011"):
        check_data(Config(dataset="cub200", data_root=str(tmp_path)))


def test_error_bad_csv(tmp_path):
    root = write_mini(tmp_path, train_per_class=1, test_per_class=1)
    (root / "miniimagenet/split/test.csv").write_text("name;class\nx.jpg;n0\n")
    with pytest.raises(DataError, match="expected a csv with header 'filename,label'"):
        check_data(Config(dataset="mini_imagenet", data_root=str(root)))


def test_error_corrupt_pickle(tmp_path):
    d = tmp_path / "cifar-100-python"
    d.mkdir()
    (d / "train").write_bytes(b"\x80\x04not a pickle at all")
    (d / "test").write_bytes(b"")
    with pytest.raises(DataError,
                       match=r"cannot read CIFAR-100 pickle .*train.*expected the torchvision CIFAR-100 python pickle"):
        check_data(Config(dataset="cifar100", data_root=str(tmp_path)))


def test_error_corrupt_jpg(tmp_path):
    root = write_mini(tmp_path, train_per_class=8, test_per_class=1)
    victim = root / "miniimagenet/images" / f"{MINI_WNIDS[60]}00000003.jpg"  # class 60 = session 1
    for k in range(8):
        (root / "miniimagenet/images" / f"{MINI_WNIDS[60]}{k:08d}.jpg").write_bytes(b"\xff\xd8garbage")
    with pytest.raises(DataError, match=r"cannot be decoded.*corrupt or truncated"):
        check_data(cfg_for("mini_imagenet", {"mini_imagenet": root}))
    # decoding in a loader names the file too
    victim.write_bytes(b"")
    good = write_mini(tmp_path / "other", train_per_class=8, test_per_class=1)
    data = build_data(cfg_for("mini_imagenet", {"mini_imagenet": good}))
    i = [Path(p).name for p in data.train_pool.paths].index(f"{MINI_WNIDS[0]}00000002.jpg")
    Path(data.train_pool.paths[i]).write_bytes(b"junk")
    with pytest.raises(DataError, match=f"{MINI_WNIDS[0]}00000002.jpg cannot be decoded"):
        list(make_loader(data, data.train_pool, np.array([i]), train=False, batch_size=1, shuffle=False, seed=0))


# --- index lists ------------------------------------------------------------------------------------------


@needs_lists
def test_real_index_lists_parse():
    expect = {"cifar100": (9, 30000, 25), "mini_imagenet": (9, 30000, 25), "cub200": (11, 3000, 50)}
    for name, (n_files, n_base, n_shot) in expect.items():
        d, files = read_index_list(DATASETS[name], str(INDEX_LISTS))  # finds INDEX_LISTS/<name>/
        assert d == INDEX_LISTS / name
        assert len(files) == n_files, name
        assert len(files[0]) == n_base, name
        assert all(len(f) == n_shot for f in files[1:]), name
    cifar = [int(x) for f in read_index_list(DATASETS["cifar100"], str(INDEX_LISTS / "cifar100"))[1] for x in f]
    assert len(set(cifar)) == len(cifar) and 0 <= min(cifar) and max(cifar) < 50000


def _cifar_labels_from_lists(files: list[list[str]]) -> np.ndarray:
    """A CIFAR-100 training-label array consistent with the lists (60 x 500 base, 5 shots per class, rest fill)."""
    labels = np.full(50000, -1, dtype=np.int64)
    base = np.sort(np.array(files[0], dtype=np.int64))
    labels[base] = np.arange(len(base)) // 500
    for t, f in enumerate(files[1:]):
        labels[np.array(f, dtype=np.int64)] = 60 + 5 * t + np.arange(len(f)) // 5
    rest = np.flatnonzero(labels < 0)
    labels[rest] = 60 + np.arange(len(rest)) // 495
    assert (np.bincount(labels) == 500).all()
    return labels


@needs_lists
def test_index_list_cifar100_end_to_end(monkeypatch):
    _, files = read_index_list(DATASETS["cifar100"], str(INDEX_LISTS / "cifar100"))
    labels = _cifar_labels_from_lists(files)
    train = ImagePool(labels, images=torch.zeros(1, 3, 32, 32, dtype=torch.uint8).expand(50000, -1, -1, -1),
                      name="fake cifar train")
    test_labels = np.repeat(np.arange(100), 100)
    test = ImagePool(test_labels, images=torch.zeros(1, 3, 32, 32, dtype=torch.uint8).expand(10000, -1, -1, -1))
    monkeypatch.setattr(protocol, "load_pools", lambda spec, root, seed: (train, test))
    cfg = Config(dataset="cifar100", data_root="/unused", index_list=str(INDEX_LISTS / "cifar100"), val_fraction=0.1,
                 base_images_per_class=None)
    data = build_data(cfg)
    check_invariants(data, 5, 5)
    assert data.split_source.startswith("index_list(") and data.num_sessions == 9
    base = data.sessions[0]
    assert len(base.train) + len(base.val) == 30000 and len(base.val) == 60 * 50
    np.testing.assert_array_equal(np.sort(np.concatenate([base.train, base.val])), np.sort(np.array(files[0], dtype=np.int64)))
    for t in range(1, 9):
        np.testing.assert_array_equal(np.sort(data.sessions[t].train), np.sort(np.array(files[t], dtype=np.int64)))
        assert len(data.sessions[t].val) == 5 * 20
    # the lists fix ways/shots/sessions: asking otherwise is an error that says so
    with pytest.raises(DataError, match="fix shots=5; set shots=5, or unset index_list"):
        build_data(cfg.replace(shots=10))
    with pytest.raises(DataError, match="fix ways=5"):
        build_data(cfg.replace(ways=10))
    with pytest.raises(DataError, match="define 8 incremental sessions"):
        build_data(cfg.replace(sessions=9))
    assert build_data(cfg.replace(sessions=2)).num_sessions == 3


@needs_lists
def test_index_list_cifar100_out_of_range():
    with pytest.raises(DataError, match=r"line 2 names image 50000, which does not exist.*indices 0\.\.49999"):
        match_index_lines(DATASETS["cifar100"], ["3", "50000"], None, 50000, "session_2.txt")


def _read_real_csv(path: Path) -> tuple[list[str], list[str]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    return [r[0] for r in rows], [r[1] for r in rows]


@needs_lists
def test_index_list_mini_imagenet_real_csvs():
    spec = DATASETS["mini_imagenet"]
    names, wnids = _read_real_csv(INDEX_LISTS / "mini_imagenet/train.csv")
    order = list(dict.fromkeys(wnids))
    class_of = {w: i for i, w in enumerate(order)}
    labels = np.array([class_of[w] for w in wnids], dtype=np.int64)
    test_names, test_wnids = _read_real_csv(INDEX_LISTS / "mini_imagenet/test.csv")
    test_labels = np.array([order.index(w) for w in dict.fromkeys(test_wnids)], dtype=np.int64)
    assert (test_labels == np.arange(100)).all()  # test.csv uses the same class order
    d, files = read_index_list(spec, str(INDEX_LISTS))
    idx = [match_index_lines(spec, f, names, len(names), f"session_{t + 1}.txt") for t, f in enumerate(files)]
    for t, f in enumerate(files):  # matched on the file name
        assert [names[i] for i in idx[t][:3]] == [ln.split("/")[-1] for ln in f[:3]]
    cfg = Config(dataset="mini_imagenet", data_root="/unused", index_list=str(d), base_images_per_class=None)
    sessions, ways, shots, _ = sessions_from_index_lists(spec, cfg, idx, labels, np.repeat(np.arange(100), 100), str(d))
    assert (ways, shots, len(sessions)) == (5, 5, 9)
    assert len(sessions[0].train) + len(sessions[0].val) == 30000
    assert all(len(s.train) == 25 and len(s.val) == 100 for s in sessions[1:])


@needs_lists
def test_index_list_cub200_real_lists():
    spec = DATASETS["cub200"]
    d, files = read_index_list(spec, str(INDEX_LISTS / "cub200"))
    listed = ["/".join(ln.split("/")[-2:]) for f in files for ln in f]
    # fake training split: the listed images plus 20 unlisted images per novel class (validation pool)
    extra = [f"{c + 1:03d}.X/extra_{c}_{k}.jpg" for c in range(100, 200) for k in range(20)]
    keys = listed + extra
    labels = np.array([int(k.split(".")[0]) - 1 for k in keys], dtype=np.int64)
    idx = [match_index_lines(spec, f, keys, len(keys), f"session_{t + 1}.txt") for t, f in enumerate(files)]
    assert keys[idx[0][0]] == files[0][0].split("CUB_200_2011/images/")[1]  # last two components
    cfg = Config(dataset="cub200", data_root="/unused", index_list=str(d), base_images_per_class=None, val_fraction=0.1)
    sessions, ways, shots, _ = sessions_from_index_lists(spec, cfg, idx, labels, np.repeat(np.arange(200), 3), str(d))
    assert (ways, shots, len(sessions)) == (10, 5, 11)
    assert len(sessions[0].train) == 2700 and len(sessions[0].val) == 300  # 3 of 30 per base class held out
    listed_set = set(np.concatenate(idx).tolist())
    for s in sessions[1:]:
        assert len(s.train) == 50 and len(s.val) == 10 * 20
        assert not set(s.val.tolist()) & listed_set


def _write_lists(d: Path, sessions: list[list[str]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for t, lines in enumerate(sessions, start=1):
        (d / f"session_{t}.txt").write_text("\n".join(lines) + "\n")
    return d


def test_index_list_cub_fake_end_to_end(fake_roots, tmp_path):
    data = build_data(cfg_for("cub200", fake_roots))
    pool = data.train_pool
    rel = lambda i: "CUB_200_2011/images/" + pool.keys[i]  # noqa: E731
    s1 = [rel(i) for i in np.flatnonzero(pool.labels < 100)]
    novel = [[rel(i) for c in range(100 + 10 * t, 110 + 10 * t) for i in np.flatnonzero(pool.labels == c)[:5]]
             for t in range(10)]
    d = _write_lists(tmp_path / "lists" / "cub200", [s1] + novel)
    cfg = cfg_for("cub200", fake_roots, index_list=str(tmp_path / "lists"))
    built = build_data(cfg)
    check_invariants(built, 10, 5)
    assert [pool.keys[i] for i in built.sessions[1].train] == sorted(
        [ln.split("images/")[1] for ln in novel[0]], key=lambda k: pool.keys.index(k))
    bad = list(novel[1])
    bad[3] = "CUB_200_2011/images/111.Bird_111/not_there.jpg"
    _write_lists(d, [s1, novel[0], bad] + novel[2:])
    with pytest.raises(DataError, match=r"session_3\.txt line 4 names .*not_there.jpg"
                                        r".*matched on '111\.Bird_111/not_there\.jpg'.*not an image"):
        check_data(cfg)
    (d / "session_3.txt").unlink()
    with pytest.raises(DataError, match="expected consecutive files"):
        check_data(cfg)
    with pytest.raises(DataError, match="holds no session_1.txt"):
        check_data(cfg_for("cub200", fake_roots, index_list=str(tmp_path)))


def test_index_list_mini_fake_with_prefix(fake_roots, tmp_path):
    data = build_data(cfg_for("mini_imagenet", fake_roots))
    pool = data.train_pool
    rel = lambda i: f"MINI-ImageNet/train/{MINI_WNIDS[pool.labels[i]]}/{pool.keys[i]}"  # noqa: E731
    s1 = [rel(i) for i in np.flatnonzero(pool.labels < 60)]
    novel = [[rel(i) for c in range(60 + 5 * t, 65 + 5 * t) for i in np.flatnonzero(pool.labels == c)[:5]]
             for t in range(8)]
    _write_lists(tmp_path / "l", [s1] + novel)
    built = build_data(cfg_for("mini_imagenet", fake_roots, index_list=str(tmp_path / "l")))
    check_invariants(built, 5, 5)
    assert built.num_sessions == 9


# --- synthetic benchmark ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_synthetic_deterministic_and_structured():
    t0 = time.perf_counter()
    tr, te = synthetic.generate(0)
    print(f"\nsynthetic generation: {time.perf_counter() - t0:.2f}s for 60000 images")
    tr2, te2 = synthetic.synthetic_pools(0)
    assert torch.equal(tr.images, tr2.images) and torch.equal(te.images, te2.images)
    assert tr.images.shape == (50000, 3, 32, 32) and te.images.shape == (10000, 3, 32, 32)
    assert tr.images.dtype == torch.uint8
    np.testing.assert_array_equal(tr.labels, synthetic.train_labels())
    np.testing.assert_array_equal(te.labels, synthetic.test_labels())
    x = tr.images[::97].float()
    assert (x.flatten(1).std(1) > 10).all()  # no constant images
    means = torch.stack([tr.images[c * 500:(c + 1) * 500].float().mean(0) for c in range(100)]).flatten(1)
    dist = torch.cdist(means, means) + torch.eye(100) * 1e9
    assert dist.min() > 50  # every class mean differs from every other
    assert not torch.equal(tr.images[0], tr.images[1])


@pytest.mark.slow
def test_synthetic_pools_kept_in_the_cache_folder_load_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv(synthetic.CACHE_ENV, str(tmp_path / "cache"))
    synthetic.synthetic_pools.cache_clear()
    generate = synthetic.generate
    try:
        tr, te = synthetic.synthetic_pools(1, 3)  # generated, and written
        files = list((tmp_path / "cache").iterdir())
        assert len(files) == 1 and files[0].name.startswith("synthetic-v3-seed1-") and files[0].suffix == ".pt"

        def not_again(*a):
            raise AssertionError("generated again instead of loaded")

        monkeypatch.setattr(synthetic, "generate", not_again)
        synthetic.synthetic_pools.cache_clear()
        tr2, te2 = synthetic.synthetic_pools(1, 3)  # loaded
        assert torch.equal(tr.images, tr2.images) and torch.equal(te.images, te2.images)
        np.testing.assert_array_equal(tr.labels, tr2.labels)
        assert (tr2.name, te2.name) == (tr.name, te.name)
        files[0].write_bytes(b"cut short by a killed process")
        monkeypatch.setattr(synthetic, "generate", generate)
        synthetic.synthetic_pools.cache_clear()
        tr3, _ = synthetic.synthetic_pools(1, 3)  # unreadable: generated again, and written again
        assert torch.equal(tr.images, tr3.images) and files[0].stat().st_size > 10**8
    finally:
        synthetic.synthetic_pools.cache_clear()


def test_synthetic_other_seed_differs():
    a = synthetic._Classes(np.random.default_rng(0))
    b = synthetic._Classes(np.random.default_rng(1))
    assert not np.array_equal(a.factor, b.factor)
    assert not np.array_equal(synthetic.classes(0).factor, synthetic.classes(1).factor)


@pytest.mark.slow
def test_synthetic_version_1_is_byte_identical_to_the_original_benchmark():
    """Tables made on the original benchmark stay reproducible: version 1's bytes never change."""
    import hashlib

    tr, te = synthetic.generate(0, version=1)
    assert hashlib.sha256(tr.images.numpy().tobytes()).hexdigest() == (
        "76e830e1a19f96948945b4fc7544434a45b8da665bb6e703a27012b3e4182771")
    assert hashlib.sha256(te.images.numpy().tobytes()).hexdigest() == (
        "74e60461b43812f4a3d7b0f540786eb6dce1993653669d98a41969f9a6a715f3")
    tr2, _ = synthetic.synthetic_pools(0, 2)
    assert not torch.equal(tr.images, tr2.images)


@pytest.mark.slow
def test_synthetic_versions_2_and_3_are_pinned_and_3_is_2_with_more_noise():
    """v2's bytes never change (its tables stay reproducible); v3 has v2's classes and a new pixel noise."""
    import hashlib

    tr2, te2 = synthetic.synthetic_pools(0, 2)
    assert hashlib.sha256(tr2.images.numpy().tobytes()).hexdigest() == (
        "6f0b49ffa2bfbaf93acde95cee5b1fd3d3948ac22b4f24093aa36dd6f819f5d3")
    assert hashlib.sha256(te2.images.numpy().tobytes()).hexdigest() == (
        "0a859f234202d23a7898e2ac5b5bacb9c24174225fddae3039973dd04d45cb59")
    tr3, te3 = synthetic.synthetic_pools(0, 3)
    assert hashlib.sha256(tr3.images.numpy().tobytes()).hexdigest() == (
        "37c467fe1a8d95f2388fa5b97472c2765a35d5cfdaca748111bfcaf7231b6bcd")
    assert hashlib.sha256(te3.images.numpy().tobytes()).hexdigest() == (
        "5138b9fc3528dfe0d7424cb8eb868a37059bf2fcd19c683854b08dcfe1ce83f2")
    c2, c3 = synthetic.classes(0, 2), synthetic.classes(0, 3)
    assert np.array_equal(c2.factor, c3.factor) and np.array_equal(c2.pos, c3.pos)
    assert synthetic.RECIPES[3] == dataclasses.replace(synthetic.RECIPES[2], noise_std=30.0)
    # same draws, new noise: the images differ by noise-sized amounts (std of two clipped noises ~10)
    diff = (tr3.images.float() - tr2.images.float()).std().item()
    assert 5 < diff < 20


def test_synthetic_version_2_superclasses_and_novel_twins():
    """v2: superclasses of five sharing a core; every novel class is a base sibling with one own factor reshaped."""
    r = synthetic.RECIPES[2]
    for seed in (0, 1, 2):
        c = synthetic.classes(seed, 2)
        assert len({c.signature(i) for i in range(100)}) == 100  # no two classes alike
        assert np.bincount(c.superclass).tolist() == [5] * r.superclasses
        base_ids = np.arange(synthetic.BASE_CLASSES)
        assert len(np.unique(c.superclass[base_ids])) > r.superclasses // 2  # membership spread over base ids
        for s in range(r.superclasses):
            members = np.flatnonzero(c.superclass == s)
            cores = {tuple(c.factor[m, :r.core_factors]) for m in members}
            assert len(cores) == 1  # one shared core per superclass
        for n in range(synthetic.BASE_CLASSES, 100):
            sibs = [b for b in np.flatnonzero(c.superclass == c.superclass[n]) if b < synthetic.BASE_CLASSES]
            if not sibs:
                continue
            # a twin: same places and colours as one base sibling, exactly one factor shape different
            twin_of = [b for b in sibs if np.array_equal(c.pos[b], c.pos[n]) and np.array_equal(c.colour[b], c.colour[n])
                       and int((c.factor[b] != c.factor[n]).sum()) == 1]
            assert twin_of, f"seed {seed}: novel class {n} is no twin of its base siblings {sibs}"


def test_synthetic_version_is_a_checked_config_field():
    from adbs.cache import base_key
    from adbs.config import ConfigError

    with pytest.raises(ConfigError, match="synthetic_version.*valid choices: 1, 2, 3"):
        Config(synthetic_version=4).validate()
    assert Config().synthetic_version == 3 and Config().backbone == "convnet_signed"  # the default benchmark
    assert base_key(Config(synthetic_version=1), "cpu") != base_key(Config(synthetic_version=2), "cpu")
    assert base_key(Config(synthetic_version=2), "cpu") != base_key(Config(synthetic_version=3), "cpu")
    assert "v1" in build_data(Config(synthetic_version=1)).train_pool.name


# --- loaders -------------------------------------------------------------------------------------------------


def _epoch(loader):
    xs, ys = zip(*list(loader))
    return torch.cat(xs), torch.cat(ys)


def test_loader_determinism_and_epochs():
    data = build_data(Config())
    idx = data.sessions[0].train[:300]
    mk = lambda seed: make_loader(data, data.train_pool, idx, train=True, batch_size=64, shuffle=True, seed=seed)  # noqa: E731
    a, b, c = mk(0), mk(0), mk(1)
    assert len(a) == 5
    a1, a2 = _epoch(a), _epoch(a)
    b1, b2 = _epoch(b), _epoch(b)
    assert torch.equal(a1[0], b1[0]) and torch.equal(a2[0], b2[0]) and torch.equal(a1[1], b1[1])
    assert not torch.equal(a1[0], a2[0])  # epochs differ
    assert not torch.equal(a1[1], _epoch(c)[1])  # other seed, other order
    assert sorted(a1[1].tolist()) == sorted(data.train_pool.labels[idx].tolist())


def test_loader_normalisation_and_test_transform():
    data = build_data(Config())
    idx = data.sessions[1].test[:10]
    x, y = _epoch(make_loader(data, data.test_pool, idx, train=False, batch_size=4, shuffle=False, seed=0))
    assert x.shape == (10, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    mean = torch.tensor(data.spec.mean).view(1, 3, 1, 1)
    std = torch.tensor(data.spec.std).view(1, 3, 1, 1)
    torch.testing.assert_close(x * std + mean, data.test_pool.images[idx].float() / 255)
    np.testing.assert_array_equal(y.numpy(), data.test_pool.labels[idx])


def test_batched_random_crop_matches_padded_windows():
    img = torch.arange(2 * 3 * 32 * 32, dtype=torch.int64).remainder(251).to(torch.uint8).view(2, 3, 32, 32)
    x = img.repeat(8, 1, 1, 1)
    out = _batch_random_crop(x, 32, 4, torch.Generator().manual_seed(0))
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    offsets = set()
    for b in range(len(x)):
        hits = [(i, j) for i in range(9) for j in range(9) if torch.equal(out[b], padded[b, :, i:i + 32, j:j + 32])]
        assert hits
        offsets.add(hits[0])
    assert len(offsets) > 1


def test_path_loader_deterministic_across_workers(fake_roots):
    data = build_data(cfg_for("mini_imagenet", fake_roots))
    idx = data.sessions[1].train
    mk = lambda w: make_loader(data, data.train_pool, idx, train=True, batch_size=8, shuffle=True, seed=5, num_workers=w)  # noqa: E731
    l0 = mk(0)
    x0, y0 = _epoch(l0)
    x0b, _ = _epoch(l0)
    x1, y1 = _epoch(mk(1))
    assert x0.shape == (25, 3, 84, 84)
    assert torch.equal(x0, x1) and torch.equal(y0, y1)
    assert not torch.equal(x0, x0b)
    state = torch.get_rng_state()
    _epoch(mk(0))
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is left alone


# --- the deep check of a run's preflight (adbs/data/preflight.py) and honest test data ------------------------------


@pytest.fixture
def memo(tmp_path, monkeypatch):
    """A digest memo (and the remembered checks beside it) in tmp_path; no check passed in this process before."""
    from adbs.data import preflight

    monkeypatch.setenv("ADBS_DIGEST_MEMO", str(tmp_path / "memo" / "file-digests.json"))
    preflight.forget()
    yield tmp_path / "memo"
    preflight.forget()


def _mini_name(c: int, k: int, test: bool = False) -> str:
    return f"{MINI_WNIDS[c]}{(500 if test else 0) + k:08d}.jpg"


def test_preflight_finds_a_corrupt_test_image_before_training(tmp_path, memo):
    """A corrupt test image of a miniImageNet copy: the cheap check does not read test images; the preflight
    decodes every listed image and names it (before, it surfaced after the base session had trained)."""
    from adbs.data import preflight_data

    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    cfg = cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1, val_fraction=0.34)
    (root / "miniimagenet/images" / _mini_name(70, 0, test=True)).write_bytes(b"\xff\xd8\xff\xe0 truncated")
    check_data(cfg)  # cheap: test images are not decoded there
    with pytest.raises(DataError, match=rf"1 of the 100 test images of mini_imagenet .* cannot be read: image file "
                                        rf".*{_mini_name(70, 0, test=True)} cannot be decoded"):
        preflight_data(cfg)


def test_preflight_is_remembered_by_content_and_a_changed_image_is_checked_again(tmp_path, memo, monkeypatch):
    from adbs.data import preflight, preflight_data

    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    cfg = cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1, val_fraction=0.34)
    decoded = []
    real = preflight.decode_image
    monkeypatch.setattr(preflight, "decode_image", lambda p: decoded.append(p) or real(p))
    assert preflight_data(cfg) == []
    assert len(decoded) == 400  # 300 training and 100 test images, each once
    assert len(list(memo.glob("data-checks/*.json"))) == 1
    decoded.clear()
    preflight.forget()  # as a new process: only the memo on disk remembers
    assert preflight_data(cfg) == [] and decoded == []
    assert preflight_data(cfg.replace(seed=3, shots=2)) == [] and decoded == []  # same data, another config
    # one image rewritten with other content: the content key changes, every image is decoded again
    write_jpg(root / "miniimagenet/images" / _mini_name(5, 1), np.random.default_rng(9))
    preflight.forget()
    preflight_data(cfg)
    assert len(decoded) == 400


def test_preflight_on_the_embedded_benchmark_decodes_and_generates_nothing(monkeypatch, memo):
    from adbs.data import preflight, preflight_data

    def never(*a, **k):
        raise AssertionError("the embedded benchmark's check generated or decoded images")

    monkeypatch.setattr(synthetic, "synthetic_pools", never)
    monkeypatch.setattr(preflight, "decode_image", never)
    t0 = time.perf_counter()
    assert preflight_data(Config()) == []
    assert time.perf_counter() - t0 < 1.0
    assert not memo.exists()  # nothing to remember, nothing written


def test_mini_csv_listing_a_file_twice_is_refused(tmp_path):
    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    csv_path = root / "miniimagenet/split/train.csv"
    rows = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join(rows + [rows[5]]) + "\n")  # one file listed again
    with pytest.raises(DataError, match=rf"split/train.csv lists 1 files more than once .*{rows[5].split(',')[0]}"):
        check_data(cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1))


def test_mini_test_csv_listing_training_files_is_refused(tmp_path):
    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    test_csv = root / "miniimagenet/split/test.csv"
    rows = test_csv.read_text().splitlines()
    rows[1] = f"{_mini_name(0, 2)},{MINI_WNIDS[0]}"  # class 0's test image is one of its training images
    test_csv.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError, match=rf"split/test.csv lists 1 files that .*split/train.csv lists too .*"
                                        rf"{_mini_name(0, 2)}.*not held out"):
        check_data(cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1))


def test_cub_images_txt_with_one_id_twice_is_refused(tmp_path):
    root = write_cub(tmp_path / "c", train_per_class=3, test_per_class=1)
    images = root / "CUB_200_2011/images.txt"
    lines = images.read_text().splitlines()
    lines.append(f"7 {lines[20].split()[1]}")  # id 7 again, naming another image: the last would win
    images.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"images.txt lists image id 7 twice \(lines 7 and 801\)"):
        check_data(cfg_for("cub200", {"cub200": root}, novel_val_per_class=1, shots=1))


def test_cub_test_id_naming_a_training_image_is_refused(tmp_path):
    root = write_cub(tmp_path / "c", train_per_class=3, test_per_class=1)
    images = root / "CUB_200_2011/images.txt"
    lines = images.read_text().splitlines()
    # id 4 is class 0's test image (train_test_split.txt: 0); make it name id 1's file, a training image
    lines[3] = f"4 {lines[0].split()[1]}"
    images.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"names 1 image files under more than one id \(e.g. {lines[0].split()[1]} "
                                        r"under ids 1, 4, test and train .*a test id names a training image"):
        check_data(cfg_for("cub200", {"cub200": root}, novel_val_per_class=1, shots=1))


def test_test_images_equal_to_training_images_are_counted_in_a_warning(tmp_path, memo):
    from adbs.data import preflight_data

    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    images = root / "miniimagenet/images"
    for c in (3, 4):  # two test images are byte copies of training images (other file names)
        (images / _mini_name(c, 0, test=True)).write_bytes((images / _mini_name(c, 1)).read_bytes())
    cfg = cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1, val_fraction=0.34)
    warnings = preflight_data(cfg)
    assert len(warnings) == 1 and warnings[0].startswith("2 of the 100 test images of mini_imagenet have the same "
                                                         "content as a training image"), warnings
    assert preflight_data(cfg) == warnings  # remembered with the check


@pytest.mark.parametrize("text,fragment", [
    ("random_crop(32,padd=4)", "random_crop takes no argument 'padd'"),
    ("resize(0)", "'0' is not an int >= 1"),
    ("random_crop(32,pad=x)", "'x' is not an int >= 0"),
])
def test_transform_arguments_are_checked(text, fragment):
    with pytest.raises(DataError, match=re.escape(fragment)):
        parse_transform(text)


def test_a_damaged_remembered_check_is_checked_again(tmp_path, memo, monkeypatch):
    from adbs.data import preflight, preflight_data

    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    cfg = cfg_for("mini_imagenet", {"mini_imagenet": root}, novel_val_per_class=1, shots=1, val_fraction=0.34)
    preflight_data(cfg)
    (entry,) = memo.glob("data-checks/*.json")
    decoded = []
    real = preflight.decode_image
    monkeypatch.setattr(preflight, "decode_image", lambda p: decoded.append(p) or real(p))
    for damage in ("{not json", '{"key": "another", "warnings": []}', '{"key": "%s", "warnings": 3}' % entry.stem, "[]"):
        entry.write_text(damage)
        preflight.forget()
        decoded.clear()
        assert preflight_data(cfg) == [] and len(decoded) == 400, damage
    preflight.forget()
    decoded.clear()
    assert preflight_data(cfg) == [] and decoded == []  # the last check rewrote the entry


# --- the image cache ($ADBS_SYNTHETIC_CACHE) is verified -----------------------------------------------------


def _session_numbers(result) -> list:
    return [(r["session"], r["val_acc"], r["test_acc"], r["test_base_acc"]) for r in result.sessions]


def test_synthetic_cache_damaged_in_place_is_generated_again_and_gives_the_clean_numbers(tmp_path, monkeypatch,
                                                                                       capsys):
    """2 MB overwritten in the middle of the cache file (same size): one line says so, the images are generated
    again, and the run's numbers are the clean run's (the damaged bytes once gave other numbers in silence)."""
    from adbs.config import preset
    from adbs.trial import run_trial

    monkeypatch.setenv(synthetic.CACHE_ENV, str(tmp_path / "syn"))
    synthetic.synthetic_pools.cache_clear()
    cfg = preset("smoke", base_epochs=1, sessions=1)
    try:
        clean = run_trial(cfg)  # generates the images and writes the cache file
        [file] = (tmp_path / "syn").iterdir()
        size = file.stat().st_size
        with open(file, "r+b") as f:
            f.seek(size // 2)
            f.write(np.random.default_rng(0).integers(0, 256, 2 * 2**20, dtype=np.uint8).tobytes())
        assert file.stat().st_size == size
        synthetic.synthetic_pools.cache_clear()
        capsys.readouterr()
        again = run_trial(cfg)
        err = capsys.readouterr().err
        assert _session_numbers(again) == _session_numbers(clean)
        lines = [line for line in err.splitlines() if "synthetic image cache" in line]
        assert len(lines) == 1 and "is damaged" in lines[0] and "generated again" in lines[0], err
        synthetic.synthetic_pools.cache_clear()
        synthetic.synthetic_pools(0, 3)  # written again whole: loads in silence
        assert "synthetic image cache" not in capsys.readouterr().err
    finally:
        synthetic.synthetic_pools.cache_clear()


@pytest.mark.parametrize("where", ["a file", "a read-only folder"])
def test_an_unusable_synthetic_cache_location_keeps_the_images_in_memory(tmp_path, monkeypatch, capsys, where):
    """A path naming a file (NotADirectoryError once came from the clean-up) or a folder nothing can be written in
    (/proc: torch.save raises RuntimeError, not OSError): one line, and the images all the same."""
    small = (ImagePool(np.arange(4), images=torch.zeros(4, 3, 2, 2, dtype=torch.uint8), name="tiny/train"),
             ImagePool(np.arange(4), images=torch.ones(4, 3, 2, 2, dtype=torch.uint8), name="tiny/test"))
    monkeypatch.setattr(synthetic, "generate", lambda seed, version=3: small)  # the caching logic, not the images
    if where == "a file":
        (tmp_path / "not-a-folder").write_text("x")
        folder = str(tmp_path / "not-a-folder")
    else:
        folder = "/proc"
    monkeypatch.setenv(synthetic.CACHE_ENV, folder)
    synthetic.synthetic_pools.cache_clear()
    try:
        capsys.readouterr()
        tr, te = synthetic.synthetic_pools(5, 3)
        err = capsys.readouterr().err.strip().splitlines()
        assert torch.equal(tr.images, small[0].images) and torch.equal(te.images, small[1].images)
        assert len(err) == 1 and f"cannot write to {synthetic.CACHE_ENV}={folder}" in err[0], err
        assert "memory" in err[0] and "Traceback" not in err[0]
    finally:
        synthetic.synthetic_pools.cache_clear()
