"""Base-session reuse: keys, atomic entries, corruption, and train-once under concurrency."""

import multiprocessing as mp
import time
from pathlib import Path

import pytest
import torch

from adbs.cache import BASE_FIELDS, BaseCache, base_key
from adbs.config import FIELDS, Config
from tests.helpers.fakes import base_session


def test_base_fields_are_config_fields():
    assert set(BASE_FIELDS) <= set(FIELDS)


def test_key_ignores_incremental_only_fields():
    cfg = Config()
    k = base_key(cfg, "cpu")
    for change in [dict(ways=10), dict(shots=1), dict(sessions=2), dict(finetune_epochs=3), dict(finetune_lr=0.5),
                   dict(new_boundary_init="one"), dict(novel_val_per_class=7), dict(eval_batch_size=64), dict(num_workers=2)]:
        assert base_key(cfg.replace(**change), "cpu") == k, change


@pytest.mark.parametrize(
    "change", [dict(alpha=0.05), dict(seed=1), dict(base_epochs=3), dict(split_seed=2), dict(backbone="resnet20"),
               dict(variant="baseline"), dict(batch_size=32), dict(boundary_weight_decay=False)],
)
def test_key_changes_with_base_fields(change):
    cfg = Config()
    assert base_key(cfg.replace(**change), "cpu") != base_key(cfg, "cpu")


def test_key_alpha_irrelevant_without_ic_and_device_matters():
    a = Config(variant="adb", alpha=0.01)
    assert base_key(a, "cpu") == base_key(a.replace(alpha=0.09), "cpu")
    assert base_key(a, "cpu") != base_key(a, "cuda")


def test_store_load_round_trip(tmp_path):
    cache = BaseCache(tmp_path)
    cache.store("k", base_session(2.0))
    got = cache.load("k")
    assert torch.equal(got.backbone_state["w"], torch.full((3,), 2.0)) and got.best_epoch == 1


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "no_manifest", "garbage_manifest"])
def test_corrupt_or_half_written_entry_is_discarded(tmp_path, damage):
    said: list[str] = []
    cache = BaseCache(tmp_path, log=said.append)
    cache.store("k", base_session())
    payload, manifest = tmp_path / "k.pt", tmp_path / "k.json"
    if damage == "flip_byte":
        b = bytearray(payload.read_bytes())
        b[len(b) // 2] ^= 0xFF
        payload.write_bytes(bytes(b))
    elif damage == "truncate":
        payload.write_bytes(payload.read_bytes()[:100])
    elif damage == "no_manifest":
        manifest.unlink()
    else:
        manifest.write_text("{not json")
    assert cache.load("k") is None
    # a damaged entry is said in one line (an entry without its manifest is only incomplete: nothing to say)
    assert len(said) == (0 if damage == "no_manifest" else 1) and all("discarded" in line for line in said)
    calls = []
    base, reused = cache.get_or_train("k", lambda: calls.append(1) or base_session(3.0))
    assert not reused and calls == [1]
    assert cache.load("k").boundaries[0].item() == 3.0


def _worker(root, counter, delay, out):
    def train():
        with open(counter, "a") as fh:
            fh.write("trained\n")
        time.sleep(delay)
        return base_session(5.0)

    _, reused = BaseCache(root).get_or_train("shared", train)
    with open(out, "a") as fh:
        fh.write(f"{int(reused)}\n")


@pytest.mark.slow
def test_concurrent_trials_train_once(tmp_path):
    counter, out = tmp_path / "count.txt", tmp_path / "out.txt"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "c"), str(counter), 1.0, str(out))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert counter.read_text().count("trained") == 1
    assert sorted(Path(out).read_text().split()) == ["0", "1", "1"]


def test_features_computed_once_per_image_list_and_recomputed_when_corrupt(tmp_path):
    import numpy as np

    cache = BaseCache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return torch.arange(6.0).view(3, 2), torch.tensor([0, 1, 2])

    idx = np.array([4, 5, 6])
    f1, y1 = cache.features("k", "test-bs128", idx, compute)
    f2, y2 = cache.features("k", "test-bs128", idx, compute)
    assert calls == [1] and torch.equal(f1, f2) and torch.equal(y1, y2)
    (entry,) = tmp_path.glob("k.features-*.pt")
    cache.features("k", "test-bs128", np.array([4, 5]), compute)  # another image list: computed
    cache.features("k", "test-bs64", idx, compute)  # another batch size: computed
    assert len(calls) == 3
    with open(entry, "r+b") as fh:  # flip a byte: the checksum catches it, it is recomputed
        fh.seek(len(entry.read_bytes()) // 2)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0xFF]))
    f3, _ = cache.features("k", "test-bs128", idx, compute)
    assert len(calls) == 4 and torch.equal(f3, f1)


def test_a_base_session_trained_on_other_images_is_not_reused(tmp_path, monkeypatch):
    """The embedded benchmark has no files whose digest could enter the key: its images' own digest does
    (adbs/data/synthetic.py: pools_digest). A base session trained on other images (here: the train images
    inverted, as another generator build or a cache file that is not what its name says would give) is trained
    again, to the numbers of a run without the cache."""
    import numpy as np

    from adbs.data import ImagePool, synthetic
    from adbs.config import preset
    from adbs.trial import run_trial

    cfg = preset("smoke", base_epochs=1, sessions=1)

    def numbers(result):
        return [(r["val_acc"], r["test_acc"]) for r in result.sessions]

    store = BaseCache(tmp_path / "cache")
    synthetic.synthetic_pools.cache_clear()
    try:
        truth = run_trial(cfg)  # no cache
        tr, te = synthetic.synthetic_pools(0, 3)
        other = (ImagePool(np.array(tr.labels), images=255 - tr.images, name=tr.name), te)
        monkeypatch.delenv(synthetic.CACHE_ENV, raising=False)
        with monkeypatch.context() as m:
            m.setattr(synthetic, "generate", lambda seed, version=3: other)
            synthetic.synthetic_pools.cache_clear()
            wrong = run_trial(cfg, cache=store)
        assert wrong.summary["base_reused"] == 0.0 and numbers(wrong) != numbers(truth)
        synthetic.synthetic_pools.cache_clear()
        clean = run_trial(cfg, cache=store)
        assert clean.summary["base_reused"] == 0.0, "a base session trained on other images was reused"
        assert numbers(clean) == numbers(truth)
        again = run_trial(cfg, cache=store)
        assert again.summary["base_reused"] == 1.0 and numbers(again) == numbers(truth)
    finally:
        synthetic.synthetic_pools.cache_clear()


def test_an_entry_of_another_shape_is_discarded_not_a_traceback(tmp_path):
    """An entry whose checksum holds but whose content is not what its reader expects (written by another version
    of the code, or by hand) once ended in a TypeError (BaseSession(**state)) or a KeyError; now it is named in one
    line and computed again."""
    import numpy as np

    said: list[str] = []
    cache = BaseCache(tmp_path, log=said.append)
    cache._write("k", {"backbone": 1}, None)  # not a BaseSession's fields
    assert cache.load("k") is None and len(said) == 1 and "discarded" in said[0]
    idx = np.array([1, 2, 3])
    cache.features("k", "test", idx, lambda: (torch.zeros(3, 2), torch.zeros(3)))
    (entry,) = tmp_path.glob("k.features-*.pt")
    cache._write(entry.name[:-3], {"features": torch.zeros(2, 2), "labels": torch.zeros(2)}, None)  # 2 rows for 3
    f, _ = cache.features("k", "test", idx, lambda: (torch.ones(3, 2), torch.ones(3)))
    assert torch.equal(f, torch.ones(3, 2)) and len(said) == 2
