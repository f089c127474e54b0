"""The device-resident data path (adbs/data/loader.py `device=`, adbs.loops.Runtime.data_device).

On a CUDA trial an in-memory pool's uint8 images live on the GPU and are cropped, flipped and normalised
there. The same code runs with device=cpu tensors, so these tests check it without a GPU: batches equal
the host path's bit for bit, every crop and flip equals the per-image op for the drawn offsets, values lie
in the normalised range, the copy is made once. The `gpu`-marked test runs it on CUDA.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from adbs.config import Config
from adbs.data import build_data, make_loader
# _mix, _resident: private helpers of adbs/data/loader.py, tested directly (the device path, bit for bit)
from adbs.data.loader import _mix, _resident
from adbs.runtime import MAX_DEFAULT_WORKERS, Runtime, default_workers

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def data():
    return build_data(Config())


def _batches(loader, epochs=2):
    return [[(x.cpu(), y.cpu()) for x, y in loader] for _ in range(epochs)]


def _same(a, b):
    assert len(a) == len(b)
    for ea, eb in zip(a, b):
        assert len(ea) == len(eb)
        for (xa, ya), (xb, yb) in zip(ea, eb):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)


@pytest.mark.parametrize("train", [True, False])
def test_device_path_equals_host_path(data, train):
    idx = data.sessions[0].train[:200]
    mk = lambda dev: make_loader(data, data.train_pool, idx, train=train, batch_size=64, shuffle=train,  # noqa: E731
                                 seed=3, device=dev)
    _same(_batches(mk(None)), _batches(mk("cpu")))


def test_device_path_crops_and_flips_are_the_per_image_ops(data):
    """Rebuild one epoch image by image from the generator's draws (same order of draws as the loader)."""
    spec, pool = data.spec, data.train_pool
    idx = data.sessions[0].train[:150]
    bs, seed = 64, 11
    assert spec.train_transform.replace(" ", "") == "random_crop(32,pad=4)+hflip"
    got = list(make_loader(data, pool, idx, train=True, batch_size=bs, shuffle=True, seed=seed, device="cpu"))
    g = torch.Generator().manual_seed(_mix(seed, 0))
    order = idx[torch.randperm(len(idx), generator=g).numpy()]
    mean = torch.tensor(spec.mean).view(3, 1, 1)
    std = torch.tensor(spec.std).view(3, 1, 1)
    lo, hi = ((0 - mean) / std).min().item(), ((1 - mean) / std).max().item()
    flips = 0
    for (x, y), a in zip(got, range(0, len(order), bs)):
        j = order[a:a + bs]
        oy = torch.randint(0, 32 + 8 - 32 + 1, (len(j),), generator=g)
        ox = torch.randint(0, 32 + 8 - 32 + 1, (len(j),), generator=g)
        flip = torch.rand(len(j), generator=g) < 0.5
        flips += int(flip.sum())
        assert x.shape == (len(j), 3, 32, 32) and x.dtype == torch.float32
        assert lo - 1e-6 <= x.min().item() and x.max().item() <= hi + 1e-6
        assert torch.equal(y, torch.from_numpy(pool.labels[j]))
        for k, i in enumerate(j):
            img = torch.nn.functional.pad(pool.images[i], (4, 4, 4, 4))
            img = img[:, oy[k]:oy[k] + 32, ox[k]:ox[k] + 32]
            if flip[k]:
                img = img.flip(-1)
            ref = (img.float() / 255.0 - mean) / std
            assert torch.equal(x[k], ref), f"image {i}: crop ({oy[k]}, {ox[k]}) flip {bool(flip[k])}"
    assert 0 < flips < len(idx)  # both branches were exercised


def test_device_path_is_deterministic_per_seed(data):
    idx = data.sessions[0].train[:130]
    mk = lambda seed: make_loader(data, data.train_pool, idx, train=True, batch_size=64, shuffle=True,  # noqa: E731
                                  seed=seed, device="cpu")
    _same(_batches(mk(5)), _batches(mk(5)))
    a, c = _batches(mk(5), 1)[0], _batches(mk(6), 1)[0]
    assert not torch.equal(a[0][0], c[0][0])


def test_pool_is_copied_once_per_device(data):
    pool = data.train_pool
    a = _resident(pool, torch.device("cpu"))
    b = _resident(pool, torch.device("cpu"))
    assert a[0] is b[0] and a[1] is b[1]
    assert a[0].dtype == torch.uint8 and torch.equal(a[1], torch.from_numpy(pool.labels))


def test_runtime_data_device_and_workers():
    assert Runtime(Config(device="cpu")).data_device is None  # CPU: the host path, as before
    assert Runtime(Config(device="cpu", data_on_device=True)).data_device == torch.device("cpu")
    assert Runtime(Config(device="cpu", num_workers=7)).num_workers == 7
    assert [default_workers(t) for t in (1, 2, 3, 4, 16, 64)] == [0, 2, 3, 4, 4, 4]
    assert MAX_DEFAULT_WORKERS == 4


def test_amp_is_off_by_default():
    assert Config().amp is False
    from adbs.config import preset

    for name in ("cifar100", "mini_imagenet", "cub200"):
        assert preset(name).amp is False


@pytest.mark.gpu
@needs_cuda
def test_cuda_batches_equal_cpu_batches(data):
    idx = data.sessions[0].train[:300]
    mk = lambda dev: make_loader(data, data.train_pool, idx, train=True, batch_size=64, shuffle=True,  # noqa: E731
                                 seed=2, device=dev)
    on_gpu = list(mk("cuda"))
    assert on_gpu[0][0].device.type == "cuda" and on_gpu[0][1].device.type == "cuda"
    _same([[(x.cpu(), y.cpu()) for x, y in on_gpu]], _batches(mk(None), 1))
    rt = Runtime(Config(device="cuda"))
    assert rt.data_device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
    assert np.isfinite(on_gpu[0][0].float().mean().item())
