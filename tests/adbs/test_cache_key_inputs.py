"""The base-session cache key holds what the inputs are (file contents) and how they are computed (runtime):
change an input or a setting that changes numbers and the cache misses; leave it and the cache hits, with the
numbers of an uncached run. Tiny CIFAR-100 copies are written to tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from adbs import digests, runtime
from adbs.cache import BaseCache, base_key
from adbs.config import from_dict, resolve
from tests.helpers.datasets import write_synthetic_cifar


def write_lists(folder: Path, train_per_class: int = 12, shots: int = 5) -> Path:
    """session_1.txt (every base-class image) and session_2.txt (5-way 5-shot) for write_synthetic_cifar's copy."""
    folder.mkdir(parents=True, exist_ok=True)
    idx = lambda c, k: c * train_per_class + k  # noqa: E731 - class-major pickles
    (folder / "session_1.txt").write_text("\n".join(str(idx(c, k)) for c in range(60) for k in range(train_per_class)))
    (folder / "session_2.txt").write_text("\n".join(str(idx(c, k)) for c in range(60, 65) for k in range(shots)))
    return folder


def cfg(data_root, **kw):
    over = {"dataset": "cifar100", "data_root": str(data_root), "sessions": 1, **kw}
    return from_dict(resolve("smoke", None, over))


@pytest.fixture
def memo(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "memo" / "file-digests.json"
    monkeypatch.setenv(digests.MEMO_ENV, str(path))
    return path


# -- the key: inputs by content -------------------------------------------------------------------


@pytest.mark.slow
def test_replaced_dataset_at_the_same_path_changes_the_key(tmp_path, memo):
    root = write_synthetic_cifar(tmp_path / "data", seed=0)
    before = base_key(cfg(root), "cpu")
    assert base_key(cfg(root), "cpu") == before
    write_synthetic_cifar(tmp_path / "data", seed=1)  # another copy written over it: same names, same sizes
    assert base_key(cfg(root), "cpu") != before


def test_a_copy_keeping_the_mtime_still_changes_the_key(tmp_path, memo):
    """`cp -p` / `rsync -a` keep size and mtime: the memo must not hand back the old digest."""
    root = write_synthetic_cifar(tmp_path / "data", seed=0)
    other = write_synthetic_cifar(tmp_path / "other", seed=1)
    before = base_key(cfg(root), "cpu")
    for split in ("train", "test"):
        src, dst = other / "cifar-100-python" / split, root / "cifar-100-python" / split
        st = dst.stat()
        shutil.copyfile(src, dst)
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert dst.stat().st_mtime_ns == st.st_mtime_ns and dst.stat().st_size == st.st_size
    assert base_key(cfg(root), "cpu") != before


def test_same_files_elsewhere_or_with_a_trailing_slash_give_the_same_key(tmp_path, memo, monkeypatch):
    root = write_synthetic_cifar(tmp_path / "data", seed=0)
    key = base_key(cfg(root), "cpu")
    assert base_key(cfg(f"{root}/"), "cpu") == key
    assert base_key(cfg(root / "cifar-100-python"), "cpu") == key  # data_root may be the dataset folder itself
    monkeypatch.chdir(tmp_path)
    assert cfg("data/").data_root == str(root)  # relative and '/'-ended paths are normalised in the config
    assert base_key(cfg("data/"), "cpu") == key
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert base_key(cfg(moved), "cpu") == key  # the key is what the files hold, not where they are


def test_index_list_edited_in_place_changes_the_key(tmp_path, memo):
    root = write_synthetic_cifar(tmp_path / "data")
    lists = write_lists(tmp_path / "lists")
    c = cfg(root, index_list=str(lists))
    key = base_key(c, "cpu")
    assert base_key(cfg(root, index_list=f"{lists}/"), "cpu") == key
    text = (lists / "session_1.txt").read_text().splitlines()
    (lists / "session_1.txt").write_text("\n".join(text[:-1]))  # one base image less
    assert base_key(c, "cpu") != key


def test_pretrained_weights_replaced_change_the_key(tmp_path, memo):
    from adbs.backbones import create_backbone

    f = tmp_path / "w.pt"
    torch.manual_seed(0)
    torch.save(create_backbone("convnet").state_dict(), f)
    c = from_dict(resolve("smoke", None, {"pretrained": str(f)}))
    key = base_key(c, "cpu")
    assert base_key(c, "cpu") == key
    torch.manual_seed(1)
    torch.save(create_backbone("convnet").state_dict(), f)
    assert base_key(c, "cpu") != key


# -- the key: runtime settings ------------------------------------------------------------------


def test_threads_device_precision_and_torch_version_are_in_the_key(monkeypatch):
    c = from_dict(resolve("smoke", None, {}))
    one = base_key(c, "cpu")
    assert c.threads is None and base_key(c.replace(threads=1), "cpu") == one  # the rule: unset = 1 on CPU
    assert base_key(c.replace(threads=2), "cpu") != one
    assert base_key(c, "cuda") != one
    assert base_key(c.replace(amp=True), "cuda") != base_key(c, "cuda")  # AMP only matters on CUDA
    assert base_key(c.replace(amp=True), "cpu") == one
    assert base_key(c.replace(threads=2), "cuda") == base_key(c, "cuda")  # CPU threads: not GPU numbers
    cuda = base_key(c, "cuda")
    monkeypatch.setattr(runtime, "CUDA_TF32", False)  # TF32 off would change GPU numbers
    assert base_key(c, "cuda") != cuda
    monkeypatch.setattr(torch, "__version__", "0.0.1-other")
    assert base_key(c, "cpu") != one


def test_the_one_thread_rule():
    c = from_dict(resolve("smoke", None, {}))
    assert runtime.torch_threads(c, "cpu") == 1 and runtime.torch_threads(c.replace(threads=3), "cpu") == 3
    assert runtime.torch_threads(c, "cuda") is None  # torch's default: CPU threads feed the GPU there
    before = torch.get_num_threads()
    try:
        assert runtime.apply_threads(c.replace(threads=2), "cpu") == 2 == torch.get_num_threads()
        assert runtime.apply_threads(c, "cpu") == 1
    finally:
        torch.set_num_threads(before)


# -- the memo ------------------------------------------------------------------------------------


def test_digests_are_remembered_across_processes_by_file_version(tmp_path, memo, monkeypatch):
    f = tmp_path / "big.bin"
    f.write_bytes(os.urandom(1 << 20))
    calls = []
    real = digests.sha256_file
    monkeypatch.setattr(digests, "sha256_file", lambda p: calls.append(p) or real(p))
    first = digests.file_digests([f])
    assert len(calls) == 1 and memo.is_file()
    monkeypatch.setattr(digests, "_loaded_from", None)  # a new process: only the memo file is left
    # private (adbs/digests.py): the in-process memo, emptied as a new process would find it
    digests._memo.clear()
    assert digests.file_digests([f]) == first and len(calls) == 1  # not read again
    f.write_bytes(os.urandom(1 << 20))  # rewritten: hashed again
    assert digests.file_digests([f]) != first and len(calls) == 2
    monkeypatch.setenv(digests.MEMO_ENV, str(tmp_path / "a-file" / "sub" / "memo.json"))
    (tmp_path / "a-file").write_text("x")  # an unwritable memo: digests still right, remembered in-process
    assert digests.file_digests([f]) == [real(f)]


@pytest.mark.parametrize("entry", [5, 3.5, True, {"a": 1}])
def test_a_memo_entry_of_any_shape_is_hashed_again(tmp_path, memo, monkeypatch, entry):
    """A damaged or hand-edited memo entry (once a TypeError) is ignored: the file is hashed again, right."""
    import json

    f = tmp_path / "data.bin"
    f.write_bytes(b"some bytes")
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(json.dumps({str(f.resolve()): entry}))
    monkeypatch.setattr(digests, "_loaded_from", None)  # a new process: the memo file is read
    digests._memo.clear()
    assert digests.file_digests([f]) == [digests.sha256_file(f)]


def test_a_memo_whose_lock_cannot_be_had_is_given_up_after_a_bounded_wait(tmp_path, monkeypatch, capsys):
    """Under /proc no lock file can be made: filelock would retry forever. The wait is bounded, one line names
    the memo, and the digests are still right (remembered in this process)."""
    import threading

    monkeypatch.setenv(digests.MEMO_ENV, "/proc/self/adbs-file-digests.json")
    monkeypatch.setattr(digests, "_loaded_from", None)
    monkeypatch.setattr(digests, "LOCK_WAIT_S", 0.5, raising=False)
    monkeypatch.setattr(digests, "_warned", set(), raising=False)
    digests._memo.clear()
    f = tmp_path / "data.bin"
    f.write_bytes(b"other bytes")
    got: list = []
    worker = threading.Thread(target=lambda: got.append(digests.file_digests([f])), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "still waiting for the memo's lock"
    assert got == [[digests.sha256_file(f)]]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/proc/self/adbs-file-digests.json" in err[0] and "this process only" in err[0], err
    digests._memo.clear()
    monkeypatch.setattr(digests, "_loaded_from", None)


# -- the cache through real trials: a miss on change, a hit with the uncached numbers ----------------


def _numbers(result) -> list[float]:
    return [s["test_acc"] for s in result.sessions] + [s["val_acc"] for s in result.sessions]


@pytest.mark.slow
def test_cached_trials_miss_on_new_data_or_threads_and_equal_uncached_runs(tmp_path, memo):
    from adbs.trial import run_trial

    root = write_synthetic_cifar(tmp_path / "data", seed=0)
    store = BaseCache(tmp_path / "cache")
    a = run_trial(cfg(root), cache=store)
    assert a.summary["base_reused"] == 0.0
    write_synthetic_cifar(tmp_path / "data", seed=1)  # the same path, other images
    b = run_trial(cfg(root), cache=store)
    assert b.summary["base_reused"] == 0.0, "the base session of the old data was reused"
    truth = run_trial(cfg(root))  # no cache
    assert _numbers(b) == _numbers(truth) != _numbers(a)
    again = run_trial(cfg(f"{root}/"), cache=store)  # unchanged (a trailing '/' too): a hit, the same numbers
    assert again.summary["base_reused"] == 1.0 and _numbers(again) == _numbers(truth)
    two = run_trial(cfg(root, threads=2), cache=store)
    assert two.summary["base_reused"] == 0.0, "a session trained with 1 thread was reused for 2"
    assert _numbers(two) == _numbers(run_trial(cfg(root, threads=2)))


def test_hashing_is_skipped_without_the_cache(tmp_path, memo, monkeypatch):
    """--no-cache and `python -m adbs.run` never read the files for a key they do not use."""
    from adbs.trial import run_trial

    root = write_synthetic_cifar(tmp_path / "data")
    monkeypatch.setattr(digests, "sha256_file", lambda p: pytest.fail(f"hashed {p} without a cache"))
    result = run_trial(cfg(root, sessions=0, base_images_per_class=2, eval_batch_size=256))
    assert len(result.sessions) == 1
