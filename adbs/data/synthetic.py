"""The embedded `synthetic` benchmark: CIFAR-shaped images built from shared generative factors.

What it is: 100 classes x (500 train + 100 test) RGB 32x32 uint8 images, generated in memory
from `Config.synthetic_seed` in a few seconds (no download, no files), identical bytes for the
same seed. Every class is a composition of 3-4 *factors* taken from one shared bank
(coloured oriented gratings, strokes, blobs, rings, crosses, corners, checkers, wedges), each
at a class-specific position and colour. Every image jitters that composition (position
shifts, colour and opacity jitter, sometimes one factor dropped) and adds clutter (random
other factors of the bank at random places) and pixel noise. Novel classes (60..99) reuse
the same bank in new combinations, so features learned on the base classes transfer to the
novel ones, which is the property FSCIL methods rely on.

What it is not: a substitute for CIFAR100 / miniImageNet / CUB200. It is a sanity and
regression benchmark for CPU runs (does the pipeline learn, do boundaries move, do
ablations order sensibly); absolute accuracies are not comparable with the paper's.

Difficulty knobs are the module constants below (calibrated by the lead with the real
training loop; target: a small ConvNet trained ~10 epochs on 100 images/class of the 60
base classes reaches roughly 60-85% base test accuracy). `python -m adbs.data.synthetic`
prints the generation time and, with --probe, a quick ConvNet accuracy probe.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import torch

from .pool import ImagePool

NUM_CLASSES = 100
TRAIN_PER_CLASS = 500
TEST_PER_CLASS = 100
IMAGE_SIZE = 32

# --- difficulty knobs -----------------------------------------------------------------------
N_FACTORS = 30
"""Size of the shared factor bank."""
FACTOR_SIZE = 11
"""Side (pixels) of one factor's patch."""
FACTORS_PER_CLASS = (3, 4)
"""A class combines this many distinct factors (drawn uniformly from the range)."""
POSITION_GRID = 4
"""Class factor positions lie on a POSITION_GRID x POSITION_GRID grid of top-left corners."""
POSITION_JITTER = 3
"""Per-image shift of every class factor, uniform in [-J, J] pixels on each axis."""
N_COLOURS = 8
"""Palette size; every class factor gets one palette colour (so colour alone is ambiguous)."""
COLOUR_JITTER = 0.20
"""Per-image multiplicative colour jitter (std, per channel) of every factor."""
OPACITY_RANGE = (0.5, 1.0)
"""Per-image opacity of every class factor, uniform in this range."""
DROP_PROB = 0.3
"""Probability that an image drops one (random) of its class's factors."""
CLUTTER_FACTORS = 2
"""Random non-class factors pasted at random places under the class factors."""
CLUTTER_OPACITY = (0.3, 0.8)
"""Opacity range of clutter factors."""
BACKGROUND_RANGE = (40.0, 160.0)
"""Range of the per-image background colour (0-255 scale), with a random linear gradient."""
NOISE_STD = 20.0
"""Std of i.i.d. Gaussian pixel noise (0-255 scale)."""

_CHUNK = 500  # images per vectorised chunk (small enough to stay in cache)
_NOISE_BANK = 4096  # noise images the pixel noise is drawn from


def _factor_bank(rng: np.random.Generator) -> np.ndarray:
    """N_FACTORS soft masks in [0, 1], [F, P, P], of eight shape families."""
    p = FACTOR_SIZE
    c = np.linspace(-1.0, 1.0, p)
    yy, xx = np.meshgrid(c, c, indexing="ij")
    rr = np.sqrt(xx**2 + yy**2)
    soft = 2.0 / p  # edge softness: about one pixel

    def band(d: np.ndarray, w: float) -> np.ndarray:  # 1 inside |d| < w, soft edge
        return np.clip((w - np.abs(d)) / soft + 0.5, 0.0, 1.0)

    masks = []
    for f in range(N_FACTORS):
        th = rng.uniform(0, math.pi)
        u = xx * math.cos(th) + yy * math.sin(th)  # along
        v = -xx * math.sin(th) + yy * math.cos(th)  # across
        kind = f % 8
        if kind == 0:  # grating in a disk
            freq = rng.uniform(1.2, 2.2)
            m = (0.5 + 0.5 * np.sin(2 * math.pi * freq * u + rng.uniform(0, 2 * math.pi))) * band(rr, 0.95)
        elif kind == 1:  # stroke
            m = band(v, rng.uniform(0.15, 0.3)) * band(u, rng.uniform(0.6, 0.95))
        elif kind == 2:  # elongated blob
            a, b = rng.uniform(0.5, 0.9), rng.uniform(0.2, 0.45)
            m = np.exp(-0.5 * ((u / a) ** 2 + (v / b) ** 2) * 3.0)
        elif kind == 3:  # ring
            m = band(rr - rng.uniform(0.5, 0.75), rng.uniform(0.12, 0.22))
        elif kind == 4:  # cross
            w = rng.uniform(0.12, 0.25)
            m = np.maximum(band(v, w) * band(u, 0.9), band(u, w) * band(v, 0.9))
        elif kind == 5:  # corner (L)
            w = rng.uniform(0.15, 0.25)
            m = np.maximum(band(v + 0.6, w) * (u > -0.7) * (u < 0.9), band(u + 0.6, w) * (v > -0.7) * (v < 0.9))
        elif kind == 6:  # checker in a square
            k = rng.uniform(2.0, 3.5)
            m = (np.sin(k * math.pi * u) * np.sin(k * math.pi * v) > 0) * band(np.maximum(np.abs(u), np.abs(v)), 0.8)
        else:  # wedge / triangle
            m = ((v > -0.7) & (v < 0.8) & (np.abs(u) < (0.8 - v) * rng.uniform(0.4, 0.7))).astype(float)
        masks.append(np.clip(m, 0.0, 1.0))
    return np.stack(masks).astype(np.float32)


def _palette() -> np.ndarray:
    """N_COLOURS saturated colours evenly spread in hue, 0-255, [K, 3]."""
    hues = np.arange(N_COLOURS) / N_COLOURS
    out = []
    for h in hues:  # HSV -> RGB with s = 0.85, v = 1
        k = (np.array([5.0, 3.0, 1.0]) + h * 6.0) % 6.0
        rgb = 1.0 - 0.85 * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)
        out.append(rgb * 235.0 + 20.0)
    return np.array(out, dtype=np.float32)


class _Classes:
    """Per-class composition: factor ids, top-left positions and colours of each slot."""

    def __init__(self, rng: np.random.Generator):
        kmax = FACTORS_PER_CLASS[1]
        span = IMAGE_SIZE - FACTOR_SIZE
        grid = np.round(np.linspace(0, span, POSITION_GRID)).astype(np.int64)
        pal = _palette()
        self.n_slots = np.zeros(NUM_CLASSES, dtype=np.int64)
        self.factor = np.zeros((NUM_CLASSES, kmax), dtype=np.int64)
        self.pos = np.zeros((NUM_CLASSES, kmax, 2), dtype=np.int64)
        self.colour = np.zeros((NUM_CLASSES, kmax, 3), dtype=np.float32)
        seen = set()
        for c in range(NUM_CLASSES):
            while True:  # distinct classes: no two share the same (factor, cell, colour) set
                k = int(rng.integers(FACTORS_PER_CLASS[0], kmax + 1))
                fs = rng.choice(N_FACTORS, size=k, replace=False)
                cells = rng.choice(POSITION_GRID * POSITION_GRID, size=k, replace=False)
                cols = rng.integers(0, N_COLOURS, size=k)
                sig = frozenset(zip(fs.tolist(), cells.tolist(), cols.tolist()))
                if sig not in seen:
                    seen.add(sig)
                    break
            self.n_slots[c] = k
            self.factor[c, :k] = fs
            self.pos[c, :k, 0] = grid[cells // POSITION_GRID]
            self.pos[c, :k, 1] = grid[cells % POSITION_GRID]
            self.colour[c, :k] = pal[cols]


class _MaskTable:
    """Every factor pre-placed at every top-left position any slot can use: [F * L * L, S * S] float16.

    Pasting a factor at (y, x) is then one row lookup (index_select), which keeps generation
    memory-bound and fast instead of gathering pixels one by one.
    """

    def __init__(self, bank: np.ndarray):
        s, p = IMAGE_SIZE, FACTOR_SIZE
        self.lo = min(-(p // 2), -POSITION_JITTER)
        hi = max(s - p // 2 - 1, s - p + POSITION_JITTER)
        self.side = hi - self.lo + 1
        t = torch.zeros((N_FACTORS, self.side, self.side, s, s), dtype=torch.float16)
        pat = torch.from_numpy(bank).to(torch.float16)
        for iy in range(self.side):
            y = iy + self.lo
            y0, y1 = max(y, 0), min(y + p, s)
            for ix in range(self.side):
                x = ix + self.lo
                x0, x1 = max(x, 0), min(x + p, s)
                t[:, iy, ix, y0:y1, x0:x1] = pat[:, y0 - y:y1 - y, x0 - x:x1 - x]
        self.table = t.reshape(N_FACTORS * self.side * self.side, s * s)

    def rows(self, f: np.ndarray, y: np.ndarray, x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy((f * self.side + (y - self.lo)) * self.side + (x - self.lo))


def _render(
    labels: np.ndarray, classes: _Classes, masks: _MaskTable, noise: torch.Tensor, rng: np.random.Generator
) -> torch.Tensor:
    """Images of `labels` (one chunk) as uint8 [N, 3, 32, 32].

    Layers, bottom to top: background (colour + linear gradient), CLUTTER_FACTORS clutter
    factors, the class factors. Alpha compositing ("over") is done on one-channel weights:
    w_k = alpha_k * prod_{j above k} (1 - alpha_j); the RGB image is then one batched matmul
    of the layer colours with these weights.
    """
    n, s = len(labels), IMAGE_SIZE
    pal = _palette()
    kmax = classes.factor.shape[1]
    n_layers = CLUTTER_FACTORS + kmax
    w = torch.empty((n, n_layers + 3, s * s))  # factor weights, then background T, T*y, T*x
    col = np.empty((n, n_layers + 3, 3), dtype=np.float32)

    k = classes.n_slots[labels]
    own = np.where(np.arange(kmax) < k[:, None], classes.factor[labels], -1)
    for layer in range(CLUTTER_FACTORS):  # random factors that are not the image's class factors
        f = rng.integers(0, N_FACTORS, size=n)
        clash = (own == f[:, None]).any(1)
        f = np.where(clash, (f + 1 + rng.integers(0, N_FACTORS - 1, size=n)) % N_FACTORS, f)
        y = rng.integers(-(FACTOR_SIZE // 2), s - FACTOR_SIZE // 2, size=n)
        x = rng.integers(-(FACTOR_SIZE // 2), s - FACTOR_SIZE // 2, size=n)
        w[:, layer] = masks.table.index_select(0, masks.rows(f, y, x))
        w[:, layer] *= torch.from_numpy(rng.uniform(*CLUTTER_OPACITY, size=(n, 1)).astype(np.float32))
        col[:, layer] = pal[rng.integers(0, N_COLOURS, size=n)]

    drop = np.where(rng.random(n) < DROP_PROB, (rng.random(n) * k).astype(np.int64), -1)
    for slot in range(kmax):  # class factors, jittered; with DROP_PROB one of them is left out
        layer = CLUTTER_FACTORS + slot
        present = (slot < k) & (slot != drop)
        jit = rng.integers(-POSITION_JITTER, POSITION_JITTER + 1, size=(n, 2))
        y = classes.pos[labels, slot, 0] + jit[:, 0]
        x = classes.pos[labels, slot, 1] + jit[:, 1]
        w[:, layer] = masks.table.index_select(0, masks.rows(classes.factor[labels, slot], y, x))
        alpha = rng.uniform(*OPACITY_RANGE, size=(n, 1)).astype(np.float32) * present[:, None]
        w[:, layer] *= torch.from_numpy(alpha)
        col[:, layer] = classes.colour[labels, slot]
    col[:, :n_layers] *= 1.0 + COLOUR_JITTER * rng.standard_normal((n, n_layers, 3)).astype(np.float32)

    # "over" compositing, top layer first: w_k <- alpha_k * T, T <- T - w_k
    t = w[:, n_layers]
    t.fill_(1.0)
    for layer in reversed(range(n_layers)):
        w[:, layer] *= t
        t -= w[:, layer]
    lin = torch.linspace(-1.0, 1.0, s)
    torch.mul(t.view(n, s, s), lin.view(1, s, 1), out=w[:, n_layers + 1].view(n, s, s))
    torch.mul(t.view(n, s, s), lin.view(1, 1, s), out=w[:, n_layers + 2].view(n, s, s))
    lo, hi = BACKGROUND_RANGE
    col[:, n_layers] = rng.uniform(lo, hi, size=(n, 3))
    col[:, n_layers + 1:] = rng.uniform(-1.0, 1.0, size=(n, 2, 1)) * (hi - lo) / 4

    img = torch.bmm(torch.from_numpy(col).transpose(1, 2), w)  # [n, 3, s*s]
    img += noise.index_select(0, torch.from_numpy(rng.integers(0, len(noise), size=n))).view(n, 3, s * s)
    return img.clamp_(0.0, 255.0).round_().to(torch.uint8).view(n, 3, s, s)


def generate(seed: int) -> tuple[ImagePool, ImagePool]:
    """Generate the (train, test) pools for `seed`; uncached, use `synthetic_pools` instead.

    Runs single-threaded: the per-chunk ops are small, and on a shared 2-core machine torch's
    intra-op threads made generation several times slower, not faster. Output bytes do not
    depend on the thread count.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _generate(seed)
    finally:
        torch.set_num_threads(threads)


def _generate(seed: int) -> tuple[ImagePool, ImagePool]:
    root = np.random.SeedSequence([int(seed), 0x5EED])
    rng_bank, rng_cls, rng_noise, rng_train, rng_test = (np.random.default_rng(s) for s in root.spawn(5))
    masks = _MaskTable(_factor_bank(rng_bank))
    classes = _Classes(rng_cls)
    s = IMAGE_SIZE
    # i.i.d. pixel noise drawn from a bank of noise images (cheaper than fresh noise per pixel)
    gen = torch.Generator().manual_seed(int(rng_noise.integers(0, 2**62)))
    noise = torch.randn((_NOISE_BANK, 3 * s * s), generator=gen).mul_(NOISE_STD)

    pools = []
    for split, per_class, rng in (("train", TRAIN_PER_CLASS, rng_train), ("test", TEST_PER_CLASS, rng_test)):
        labels = np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), per_class)
        images = torch.empty((len(labels), 3, s, s), dtype=torch.uint8)
        for a in range(0, len(labels), _CHUNK):
            images[a:a + _CHUNK] = _render(labels[a:a + _CHUNK], classes, masks, noise, rng)
        pools.append(ImagePool(labels, images=images, name=f"synthetic(seed={seed})/{split}"))
    return pools[0], pools[1]


@functools.lru_cache(maxsize=2)
def synthetic_pools(seed: int) -> tuple[ImagePool, ImagePool]:
    """(train, test) pools for `seed`, generated once per process (repeated trials reuse them)."""
    return generate(seed)


def train_labels() -> np.ndarray:
    """Labels of the train pool without generating it (class-major order)."""
    return np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), TRAIN_PER_CLASS)


def test_labels() -> np.ndarray:
    return np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), TEST_PER_CLASS)


def _probe(seed: int, epochs: int, per_class: int, threads: int | None) -> None:
    """Train a small ConvNet on the base classes and print base test accuracy (difficulty check)."""
    from torch import nn

    if threads:
        torch.set_num_threads(threads)
    tr, te = synthetic_pools(seed)
    idx = np.concatenate([np.flatnonzero(tr.labels == c)[:per_class] for c in range(60)])
    tidx = np.flatnonzero(te.labels < 60)
    mean = torch.tensor([0.5071, 0.4867, 0.4408]).view(1, 3, 1, 1)
    std = torch.tensor([0.2675, 0.2565, 0.2761]).view(1, 3, 1, 1)
    norm = lambda x: (x.float() / 255 - mean) / std  # noqa: E731
    torch.manual_seed(0)
    layers, ch = [], 3
    for _ in range(4):
        layers += [nn.Conv2d(ch, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)]
        ch = 64
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 60))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=epochs * math.ceil(len(idx) / 64))
    x_all, y_all = tr.images[idx], torch.from_numpy(tr.labels[idx])
    for ep in range(epochs):
        net.train()
        perm = torch.randperm(len(idx))
        for b in range(0, len(idx), 64):
            j = perm[b:b + 64]
            x = x_all[j]
            flip = torch.rand(len(j)) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            loss = nn.functional.cross_entropy(net(norm(x)), y_all[j])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        net.eval()
        with torch.no_grad():
            pred = torch.cat([net(norm(te.images[tidx[b:b + 1000]])).argmax(1) for b in range(0, len(tidx), 1000)])
        acc = (pred.numpy() == te.labels[tidx]).mean() * 100
        print(f"epoch {ep + 1}: loss {loss.item():.3f} base test acc {acc:.1f}%", flush=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--probe", action="store_true", help="train a small ConvNet and print base test accuracy")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    generate(a.seed)
    print(f"generated 60000 images in {time.perf_counter() - t0:.2f}s (torch threads: {torch.get_num_threads()})")
    if a.probe:
        _probe(a.seed, a.epochs, a.per_class, a.threads)
