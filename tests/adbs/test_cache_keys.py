"""Every cache entry and checkpoint carries its key, and is refused under another: a synthetic image file
(adbs/data/image_cache.py), a base-session cache entry (adbs/cache.py) copied or renamed to another key's name, and
a trial checkpoint resumed by another configuration (adbs/trial.py: checkpoint_key) give no other configuration's
numbers; entries written before they carried their key are computed again, said once."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from adbs.cache import BaseCache
from adbs.data import ImagePool, image_cache, synthetic
from adbs.state import BaseSession


def _pools(seed: int, version: int = 3) -> tuple[ImagePool, ImagePool]:
    """Tiny pools whose images depend on the seed (what synthetic.generate gives, in miniature)."""
    g = torch.Generator().manual_seed(seed)
    make = lambda name: ImagePool(np.arange(4) % 2, name=name,  # noqa: E731
                                  images=torch.randint(0, 256, (4, 3, 4, 4), dtype=torch.uint8, generator=g))
    return make("train"), make("test")


def test_a_synthetic_image_file_copied_under_another_seeds_name_is_not_used(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(synthetic.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(synthetic, "generate", _pools)
    synthetic.synthetic_pools.cache_clear()
    try:
        seed0 = synthetic.synthetic_pools(0, 3)
        [file0] = tmp_path.iterdir()
        file1 = tmp_path / file0.name.replace("seed0", "seed1")
        shutil.copyfile(file0, file1)  # seed 0's images under seed 1's name
        synthetic.synthetic_pools.cache_clear()
        capsys.readouterr()
        seed1 = synthetic.synthetic_pools(1, 3)
        err = capsys.readouterr().err
        assert torch.equal(seed1[0].images, _pools(1)[0].images) and not torch.equal(seed1[0].images, seed0[0].images)
        assert "holds the images of" in err and "generated again" in err, err
        synthetic.synthetic_pools.cache_clear()
        assert torch.equal(synthetic.synthetic_pools(1, 3)[0].images, _pools(1)[0].images)  # rewritten: its own now
        assert "synthetic image cache" not in capsys.readouterr().err
    finally:
        synthetic.synthetic_pools.cache_clear()


def test_a_synthetic_image_file_without_its_key_is_generated_again_said_once(tmp_path, capsys):
    paths = [image_cache.path(str(tmp_path), f"synthetic-v3-seed{s}", b"generator") for s in (0, 1)]
    for p, seed in zip(paths, (0, 1)):
        pools = _pools(seed)
        image_cache.store(p, pools, image_cache.content_digest(pools), synthetic.CACHE_ENV)
        saved = torch.load(p, weights_only=True)
        del saved["key"]  # as written before files carried their key
        torch.save(saved, p)
    capsys.readouterr()
    assert image_cache.load(paths[0]) is None and image_cache.load(paths[1]) is None
    err = capsys.readouterr().err  # said once per process: here, unless a test before it in this process said it
    assert err.count("written before files carried their key") <= 1 and "Traceback" not in err, err


def _base(v: float) -> BaseSession:
    return BaseSession(backbone_state={"w": torch.full((3,), v)}, prototypes=torch.zeros(4, 2),
                       boundaries=torch.ones(4) * v, curve=[{"epoch": 1, "val_acc": v}], best_epoch=1)


def test_a_base_cache_entry_copied_under_another_key_is_discarded(tmp_path):
    said: list[str] = []
    cache = BaseCache(tmp_path, log=said.append)
    cache.store("aaaa", _base(1.0))
    for ext in (".pt", ".json"):  # the whole entry, manifest and all, under another configuration's key
        shutil.copyfile(tmp_path / f"aaaa{ext}", tmp_path / f"bbbb{ext}")
    assert cache.load("bbbb") is None and len(said) == 1 and "is the entry of 'aaaa'" in said[0], said
    assert not (tmp_path / "bbbb.pt").exists() and cache.load("aaaa").best_epoch == 1  # its own key: loaded
    got, reused = cache.get_or_train("bbbb", lambda: _base(2.0))
    assert not reused and torch.equal(got.boundaries, torch.ones(4) * 2.0)


def test_a_base_cache_entry_without_its_key_is_trained_again_said_once(tmp_path):
    import json

    said: list[str] = []
    cache = BaseCache(tmp_path, log=said.append)
    for key in ("aaaa", "bbbb"):
        cache.store(key, _base(1.0))
        manifest = json.loads((tmp_path / f"{key}.json").read_text())
        del manifest["key"]  # as written before manifests carried their key
        (tmp_path / f"{key}.json").write_text(json.dumps(manifest))
    assert cache.load("aaaa") is None and cache.load("bbbb") is None
    assert len(said) == 1 and "written before entries carried their key" in said[0], said


@pytest.fixture(scope="module")
def keyed_states():
    """The checkpoints of one tiny trial (1 base epoch, 1 session)."""
    import copy

    from adbs.config import preset
    from adbs.trainer import Hooks
    from adbs.trial import run_trial

    cfg = preset("smoke", base_epochs=1, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4,
                 sessions=1, finetune_epochs=1, threads=1)
    out: list[dict] = []
    run_trial(cfg, hooks=Hooks(on_checkpoint=lambda s: out.append(copy.deepcopy(s))))
    return cfg, out


def test_a_checkpoint_resumed_by_another_configuration_is_refused_before_anything_runs(keyed_states):
    from adbs.trainer import Hooks
    from adbs.state import CheckpointKeyError
    from adbs.trial import checkpoint_key, run_trial

    cfg, states = keyed_states
    assert {s["key"] for s in states} == {checkpoint_key(cfg)}
    ran: list = []
    for other in (cfg.replace(seed=1), cfg.replace(alpha=0.5)):
        for state in (states[0], states[-1]):
            with pytest.raises(CheckpointKeyError, match="written by another configuration"):
                run_trial(other, resume=state, hooks=Hooks(on_base_epoch=ran.append, on_session=ran.append))
    assert ran == []


def test_a_checkpoint_without_a_key_starts_the_trial_again(keyed_states):
    from adbs.trainer import Hooks
    from adbs.trial import run_trial

    cfg, states = keyed_states
    said: list[str] = []
    epochs: list = []
    old = {k: v for k, v in states[-1].items() if k != "key"}  # a last-session state written before keys
    run_trial(cfg, resume=old, hooks=Hooks(log=said.append, on_base_epoch=epochs.append))
    assert len(epochs) == cfg.base_epochs and any("carries no configuration key" in line for line in said), said
