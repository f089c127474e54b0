"""The embedded `synthetic` benchmark: CIFAR-shaped images built from shared generative factors.

What it is: 100 classes x (500 train + 100 test) RGB 32x32 uint8 images, generated in memory
from `Config.synthetic_seed` in a few seconds (no download, no files), identical bytes for the
same seed and version. Every class is a composition of 3-4 *factors* taken from one shared bank
(coloured oriented gratings, strokes, blobs, rings, crosses, corners, checkers, wedges), each
at a class-specific position and colour. Every image jitters that composition (position
shifts, colour and opacity jitter, sometimes one factor dropped) and adds clutter (random
other factors of the bank at random places) and pixel noise. Novel classes (60..99) reuse
the same bank in new combinations, so features learned on the base classes transfer to the
novel ones, which is the property FSCIL methods rely on.

Three versions (`Config.synthetic_version`), each a `Recipe` below:

* 1: every class an independent random composition. A ConvNet learns it fast and a
  prototype classifier forgets little: the fixed-boundary baseline of the CPU preset ends at
  ~64% with PD ~15 and ~46% novel accuracy, where real CIFAR-100 runs end near 50% with PD
  ~28 and novel accuracy in the 10s-30s (docs/boundary-dynamics.md). Kept so that tables
  made on it can be regenerated.
* 2: CIFAR-100's structure. Classes come in superclasses of five (as CIFAR-100's
  20 superclasses); the classes of a superclass share a core of factors (same shapes, places
  and colours) and differ by their own factors; class ids are assigned to superclasses at
  random, so most novel classes have base-class siblings, as CIFAR-100's novel classes
  (fine labels 60-99, alphabetical) do. A novel prototype from a few shots then lands near
  its base siblings: base images drift to it and novel images to them, the forgetting and
  the weak novel accuracy of real FSCIL. Calibrated on the fixed-boundary baseline only
  (bench/calibrate_benchmark.py prints the figures and the targets). With a ReLU feature layer its
  class prototypes sit at a mean cosine of ~0.6 (D_cs 0.34-0.40, against 0.88 for the paper's
  baseline on CIFAR-100), so what ADBS does on it says more about that geometry than about ADBS.
* 3 (default): version 2 with more pixel noise (std 30), calibrated with the CPU preset's signed
  feature layer (adbs/backbones.py: convnet_signed) on both the accuracy shape of version 2 and the
  class geometry of real CIFAR-100: the fixed-boundary baseline's D_cs in 0.85-0.92, the paper's
  0.8846 (bench/calibrate_benchmark.py; bench/geometry.py for the factors behind it).

What it is not: a substitute for CIFAR100 / miniImageNet / CUB200. Absolute accuracies are not
comparable with the paper's. `python -m adbs.data.synthetic` prints the generation time and,
with --probe, a quick ConvNet accuracy probe.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import image_cache
from .pool import ImagePool

NUM_CLASSES = 100
TRAIN_PER_CLASS = 500
TEST_PER_CLASS = 100
IMAGE_SIZE = 32
BASE_CLASSES = 60  # the registry's split (adbs/data/registry.py); novel classes are 60..99


@dataclass(frozen=True)
class Recipe:
    """The difficulty knobs of one benchmark version."""

    n_factors: int = 30
    """Size of the shared factor bank."""
    factor_size: int = 11
    """Side (pixels) of one factor's patch."""
    factors_per_class: tuple[int, int] = (3, 4)
    """Version 1: a class combines this many distinct factors (drawn uniformly from the range)."""
    superclasses: int = 0
    """Classes are grouped in this many superclasses sharing a core of factors (0 = no grouping)."""
    core_factors: int = 2
    """Factors shared by every class of a superclass (same shape, grid cell and colour)."""
    own_factors: tuple[int, int] = (1, 2)
    """Factors of a class's own on top of its superclass core (drawn uniformly from the range)."""
    twin_prob: float = 0.0
    """Probability that a novel class is the twin of a base class of its superclass: the same factors,
    places and colours, except that one of the sibling's own factors has another shape."""
    position_grid: int = 4
    """Class factor positions lie on a grid x grid lattice of top-left corners."""
    position_jitter: int = 3
    """Per-image shift of every class factor, uniform in [-J, J] pixels on each axis."""
    n_colours: int = 8
    """Palette size; every class factor gets one palette colour (so colour alone is ambiguous)."""
    colour_jitter: float = 0.20
    """Per-image multiplicative colour jitter (std, per channel) of every factor."""
    opacity_range: tuple[float, float] = (0.5, 1.0)
    """Per-image opacity of every class factor, uniform in this range."""
    drop_prob: float = 0.3
    """Probability that an image drops one (random) of its class's factors."""
    clutter_factors: int = 2
    """Random non-class factors pasted at random places under the class factors."""
    clutter_opacity: tuple[float, float] = (0.3, 0.8)
    """Opacity range of clutter factors."""
    background_range: tuple[float, float] = (40.0, 160.0)
    """Range of the per-image background colour (0-255 scale), with a random linear gradient."""
    noise_std: float = 20.0
    """Std of i.i.d. Gaussian pixel noise (0-255 scale)."""

    @property
    def max_slots(self) -> int:
        return self.core_factors + self.own_factors[1] if self.superclasses else self.factors_per_class[1]


RECIPES: dict[int, Recipe] = {
    1: Recipe(),
    # Calibrated on the fixed-boundary baseline of the CPU preset (bench/calibrate_benchmark.py).
    2: Recipe(superclasses=20, core_factors=2, own_factors=(2, 2), twin_prob=1.0),
    # Version 2 with noise 30: with the signed feature layer, v2's baseline sat at the edges of the targets
    # (session 0 ~80, D_cs ~0.85); more noise puts it inside them (docs/boundary-dynamics.md, "Benchmark v3").
    3: Recipe(superclasses=20, core_factors=2, own_factors=(2, 2), twin_prob=1.0, noise_std=30.0),
}
VERSIONS = tuple(RECIPES)

_CHUNK = 500  # images per vectorised chunk (small enough to stay in cache)
_NOISE_BANK = 4096  # noise images the pixel noise is drawn from


def _factor_bank(rng: np.random.Generator, r: Recipe) -> np.ndarray:
    """r.n_factors soft masks in [0, 1], [F, P, P], of eight shape families."""
    p = r.factor_size
    c = np.linspace(-1.0, 1.0, p)
    yy, xx = np.meshgrid(c, c, indexing="ij")
    rr = np.sqrt(xx**2 + yy**2)
    soft = 2.0 / p  # edge softness: about one pixel

    def band(d: np.ndarray, w: float) -> np.ndarray:  # 1 inside |d| < w, soft edge
        return np.clip((w - np.abs(d)) / soft + 0.5, 0.0, 1.0)

    masks = []
    for f in range(r.n_factors):
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


def _palette(r: Recipe) -> np.ndarray:
    """r.n_colours saturated colours evenly spread in hue, 0-255, [K, 3]."""
    hues = np.arange(r.n_colours) / r.n_colours
    out = []
    for h in hues:  # HSV -> RGB with s = 0.85, v = 1
        k = (np.array([5.0, 3.0, 1.0]) + h * 6.0) % 6.0
        rgb = 1.0 - 0.85 * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)
        out.append(rgb * 235.0 + 20.0)
    return np.array(out, dtype=np.float32)


class _Classes:
    """Per-class composition: factor ids, top-left positions and colours of each slot.

    `superclass[c]` is the superclass of class c (-1 without grouping); a superclass's core
    factors fill the first `core_factors` slots of each of its classes.
    """

    def __init__(self, rng: np.random.Generator, r: Recipe = RECIPES[1]):
        self.r = r
        kmax = r.max_slots
        span = IMAGE_SIZE - r.factor_size
        self.grid = np.round(np.linspace(0, span, r.position_grid)).astype(np.int64)
        self.pal = _palette(r)
        self.n_slots = np.zeros(NUM_CLASSES, dtype=np.int64)
        self.factor = np.zeros((NUM_CLASSES, kmax), dtype=np.int64)
        self.pos = np.zeros((NUM_CLASSES, kmax, 2), dtype=np.int64)
        self.colour = np.zeros((NUM_CLASSES, kmax, 3), dtype=np.float32)
        self.superclass = np.full(NUM_CLASSES, -1, dtype=np.int64)
        if r.superclasses:
            self._grouped(rng)
        else:
            self._independent(rng)

    def _set(self, c: int, fs, cells, cols) -> None:
        g = self.r.position_grid
        k = len(fs)
        self.n_slots[c] = k
        self.factor[c, :k] = fs
        self.pos[c, :k, 0] = self.grid[np.asarray(cells) // g]
        self.pos[c, :k, 1] = self.grid[np.asarray(cells) % g]
        self.colour[c, :k] = self.pal[np.asarray(cols)]

    def _independent(self, rng: np.random.Generator) -> None:
        r, seen = self.r, set()
        for c in range(NUM_CLASSES):
            while True:  # distinct classes: no two share the same (factor, cell, colour) set
                k = int(rng.integers(r.factors_per_class[0], r.factors_per_class[1] + 1))
                fs = rng.choice(r.n_factors, size=k, replace=False)
                cells = rng.choice(r.position_grid**2, size=k, replace=False)
                cols = rng.integers(0, r.n_colours, size=k)
                sig = frozenset(zip(fs.tolist(), cells.tolist(), cols.tolist()))
                if sig not in seen:
                    seen.add(sig)
                    break
            self._set(c, fs, cells, cols)

    def _grouped(self, rng: np.random.Generator) -> None:
        r = self.r
        if NUM_CLASSES % r.superclasses:
            raise ValueError(f"superclasses={r.superclasses} must divide {NUM_CLASSES} classes")
        # Random membership: class ids of a superclass are spread over base and novel ids.
        self.superclass[rng.permutation(NUM_CLASSES)] = np.arange(NUM_CLASSES) % r.superclasses
        cores = set()
        for s in range(r.superclasses):
            while True:  # distinct cores
                core_f = rng.choice(r.n_factors, size=r.core_factors, replace=False)
                core_cells = rng.choice(r.position_grid**2, size=r.core_factors, replace=False)
                core_cols = rng.integers(0, r.n_colours, size=r.core_factors)
                sig = frozenset(zip(core_f.tolist(), core_cells.tolist(), core_cols.tolist()))
                if sig not in cores or not r.core_factors:  # without a core, superclasses differ by members only
                    cores.add(sig)
                    break
            members = np.flatnonzero(self.superclass == s)  # ascending: base ids before novel ids
            base_members = members[members < BASE_CLASSES]
            seen: set = set()  # no two classes of a superclass alike
            for c in members:
                twin = c >= BASE_CLASSES and len(base_members) and r.twin_prob and rng.random() < r.twin_prob
                while True:
                    if twin:
                        self._twin(int(c), int(rng.choice(base_members)), rng)
                    else:  # own factors: not the core's shapes or cells
                        k = int(rng.integers(r.own_factors[0], r.own_factors[1] + 1))
                        fs = rng.choice(np.setdiff1d(np.arange(r.n_factors), core_f), size=k, replace=False)
                        cells = rng.choice(np.setdiff1d(np.arange(r.position_grid**2), core_cells), size=k,
                                           replace=False)
                        cols = rng.integers(0, r.n_colours, size=k)
                        self._set(int(c), np.concatenate([core_f, fs]), np.concatenate([core_cells, cells]),
                                  np.concatenate([core_cols, cols]))
                    if self.signature(int(c)) not in seen:
                        seen.add(self.signature(int(c)))
                        break

    def signature(self, c: int) -> frozenset:
        """Class c's set of (factor, top-left position, colour): equal signatures, equal classes."""
        k = int(self.n_slots[c])
        return frozenset(zip(self.factor[c, :k].tolist(), map(tuple, self.pos[c, :k].tolist()),
                             map(tuple, self.colour[c, :k].tolist())))

    def _twin(self, c: int, b: int, rng: np.random.Generator) -> None:
        """Class c := base class b with the shape of one of b's own factors replaced (same place, colour)."""
        r, k = self.r, int(self.n_slots[b])
        self.n_slots[c] = k
        self.factor[c], self.pos[c], self.colour[c] = self.factor[b], self.pos[b], self.colour[b]
        j = int(rng.integers(r.core_factors, k))
        self.factor[c, j] = int(rng.choice(np.setdiff1d(np.arange(r.n_factors), self.factor[b, :k])))


class _MaskTable:
    """Every factor pre-placed at every top-left position any slot can use: [F * L * L, S * S] float16.

    Pasting a factor at (y, x) is then one row lookup (index_select), which keeps generation
    memory-bound and fast instead of gathering pixels one by one.
    """

    def __init__(self, bank: np.ndarray, r: Recipe):
        s, p = IMAGE_SIZE, r.factor_size
        self.lo = min(-(p // 2), -r.position_jitter)
        hi = max(s - p // 2 - 1, s - p + r.position_jitter)
        self.side = hi - self.lo + 1
        t = torch.zeros((r.n_factors, self.side, self.side, s, s), dtype=torch.float16)
        pat = torch.from_numpy(bank).to(torch.float16)
        for iy in range(self.side):
            y = iy + self.lo
            y0, y1 = max(y, 0), min(y + p, s)
            for ix in range(self.side):
                x = ix + self.lo
                x0, x1 = max(x, 0), min(x + p, s)
                t[:, iy, ix, y0:y1, x0:x1] = pat[:, y0 - y:y1 - y, x0 - x:x1 - x]
        self.table = t.reshape(r.n_factors * self.side * self.side, s * s)

    def rows(self, f: np.ndarray, y: np.ndarray, x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy((f * self.side + (y - self.lo)) * self.side + (x - self.lo))


def _render(
    labels: np.ndarray, classes: _Classes, masks: _MaskTable, noise: torch.Tensor, rng: np.random.Generator
) -> torch.Tensor:
    """Images of `labels` (one chunk) as uint8 [N, 3, 32, 32].

    Layers, bottom to top: background (colour + linear gradient), clutter factors, the class
    factors. Alpha compositing ("over") is done on one-channel weights:
    w_k = alpha_k * prod_{j above k} (1 - alpha_j); the RGB image is then the sum of the
    layer colours times these weights (_weighted_sum).
    """
    r = classes.r
    n, s, p = len(labels), IMAGE_SIZE, r.factor_size
    pal = classes.pal
    kmax = classes.factor.shape[1]
    n_layers = r.clutter_factors + kmax
    w = torch.empty((n, n_layers + 3, s * s))  # factor weights, then background T, T*y, T*x
    col = np.empty((n, n_layers + 3, 3), dtype=np.float32)

    k = classes.n_slots[labels]
    own = np.where(np.arange(kmax) < k[:, None], classes.factor[labels], -1)
    for layer in range(r.clutter_factors):  # random factors that are not the image's class factors
        f = rng.integers(0, r.n_factors, size=n)
        clash = (own == f[:, None]).any(1)
        f = np.where(clash, (f + 1 + rng.integers(0, r.n_factors - 1, size=n)) % r.n_factors, f)
        y = rng.integers(-(p // 2), s - p // 2, size=n)
        x = rng.integers(-(p // 2), s - p // 2, size=n)
        w[:, layer] = masks.table.index_select(0, masks.rows(f, y, x))
        w[:, layer] *= torch.from_numpy(rng.uniform(*r.clutter_opacity, size=(n, 1)).astype(np.float32))
        col[:, layer] = pal[rng.integers(0, r.n_colours, size=n)]

    drop = np.where(rng.random(n) < r.drop_prob, (rng.random(n) * k).astype(np.int64), -1)
    for slot in range(kmax):  # class factors, jittered; with drop_prob one of them is left out
        layer = r.clutter_factors + slot
        present = (slot < k) & (slot != drop)
        jit = rng.integers(-r.position_jitter, r.position_jitter + 1, size=(n, 2))
        y = classes.pos[labels, slot, 0] + jit[:, 0]
        x = classes.pos[labels, slot, 1] + jit[:, 1]
        w[:, layer] = masks.table.index_select(0, masks.rows(classes.factor[labels, slot], y, x))
        alpha = rng.uniform(*r.opacity_range, size=(n, 1)).astype(np.float32) * present[:, None]
        w[:, layer] *= torch.from_numpy(alpha)
        col[:, layer] = classes.colour[labels, slot]
    col[:, :n_layers] *= 1.0 + r.colour_jitter * rng.standard_normal((n, n_layers, 3)).astype(np.float32)

    # "over" compositing, top layer first: w_k <- alpha_k * T, T <- T - w_k
    t = w[:, n_layers]
    t.fill_(1.0)
    for layer in reversed(range(n_layers)):
        w[:, layer] *= t
        t -= w[:, layer]
    lin = torch.linspace(-1.0, 1.0, s)
    torch.mul(t.view(n, s, s), lin.view(1, s, 1), out=w[:, n_layers + 1].view(n, s, s))
    torch.mul(t.view(n, s, s), lin.view(1, 1, s), out=w[:, n_layers + 2].view(n, s, s))
    lo, hi = r.background_range
    col[:, n_layers] = rng.uniform(lo, hi, size=(n, 3))
    col[:, n_layers + 1:] = rng.uniform(-1.0, 1.0, size=(n, 2, 1)) * (hi - lo) / 4

    img = _weighted_sum(torch.from_numpy(col), w)  # [n, 3, s*s]
    img += noise.index_select(0, torch.from_numpy(rng.integers(0, len(noise), size=n))).view(n, 3, s * s)
    return img.clamp_(0.0, 255.0).round_().to(torch.uint8).view(n, 3, s, s)


def _weighted_sum(col: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_k col[:, k, :, None] * w[:, k, None, :] ([n, K, 3] and [n, K, P] -> [n, 3, P]), added in order of k.

    Not torch.bmm: MKL picks its kernel by CPU, the kernels sum in different orders, and the rounded
    pixels then differ in a few bytes: the same seed gave different images on different machines (on
    an AVX-512 Xeon, MKL_CBWR=AVX512 and MKL_CBWR=COMPATIBLE gave two). One multiply and one add per
    layer, each rounded once in float32, give the same bytes whichever kernels the CPU has; they are
    the bytes of MKL's plain kernel, which the pinned versions were made with (tests/adbs/data/test_data.py)."""
    img = col[:, 0, :, None] * w[:, 0, None, :]
    for k in range(1, col.shape[1]):
        img += col[:, k, :, None] * w[:, k, None, :]
    return img


def recipe(version: int) -> Recipe:
    if version not in RECIPES:
        raise ValueError(f"unknown synthetic benchmark version {version!r}; valid versions: "
                         f"{', '.join(map(str, RECIPES))}")
    return RECIPES[version]


def generate(seed: int, version: int = 3) -> tuple[ImagePool, ImagePool]:
    """Generate the (train, test) pools for `seed` and `version`; uncached, use `synthetic_pools` instead.

    Runs single-threaded: the per-chunk ops are small, and on a shared 2-core machine torch's
    intra-op threads made generation several times slower, not faster. Output bytes do not
    depend on the thread count.
    """
    return generate_recipe(seed, recipe(version), f"v{version}")


def generate_recipe(seed: int, r: Recipe, label: str) -> tuple[ImagePool, ImagePool]:
    """(train, test) pools of any recipe (e.g. one knob of a version changed: bench/geometry.py); `label`
    names the pools. The same seed and recipe give the same bytes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _generate(seed, label, r)
    finally:
        torch.set_num_threads(threads)


def classes(seed: int, version: int = 3) -> _Classes:
    """The class compositions of (seed, version), without rendering any image."""
    root = np.random.SeedSequence([int(seed), 0x5EED])
    rng_cls = np.random.default_rng(root.spawn(5)[1])
    return _Classes(rng_cls, recipe(version))


def _generate(seed: int, label: str, r: Recipe) -> tuple[ImagePool, ImagePool]:
    root = np.random.SeedSequence([int(seed), 0x5EED])
    rng_bank, rng_cls, rng_noise, rng_train, rng_test = (np.random.default_rng(s) for s in root.spawn(5))
    masks = _MaskTable(_factor_bank(rng_bank, r), r)
    cls = _Classes(rng_cls, r)
    s = IMAGE_SIZE
    # i.i.d. pixel noise drawn from a bank of noise images (cheaper than fresh noise per pixel)
    gen = torch.Generator().manual_seed(int(rng_noise.integers(0, 2**62)))
    noise = torch.randn((_NOISE_BANK, 3 * s * s), generator=gen).mul_(r.noise_std)

    pools = []
    for split, per_class, rng in (("train", TRAIN_PER_CLASS, rng_train), ("test", TEST_PER_CLASS, rng_test)):
        labels = np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), per_class)
        images = torch.empty((len(labels), 3, s, s), dtype=torch.uint8)
        for a in range(0, len(labels), _CHUNK):
            images[a:a + _CHUNK] = _render(labels[a:a + _CHUNK], cls, masks, noise, rng)
        pools.append(ImagePool(labels, images=images, name=f"synthetic(seed={seed}, {label})/{split}"))
    return pools[0], pools[1]


CACHE_ENV = "ADBS_SYNTHETIC_CACHE"
"""A folder to keep generated pools in, so that each process after the first loads them (tests set it: their studies
start hundreds of processes). Unset by default: the pools are then generated once per process."""

_DIGESTS: dict[tuple[int, int], str] = {}  # (seed, version) -> content_digest of the pools synthetic_pools returned


def pools_digest(seed: int, version: int = 3) -> str:
    """The content digest of the images `synthetic_pools(seed, version)` gives this process: part of the
    base-session key (adbs/cache.py: input_digests), so a base session trained on other images is never reused."""
    synthetic_pools(int(seed), int(version))  # once per process (lru_cache); it records the digest
    return _DIGESTS[(int(seed), int(version))]


@functools.lru_cache(maxsize=2)
def synthetic_pools(seed: int, version: int = 3) -> tuple[ImagePool, ImagePool]:
    """(train, test) pools for `seed` and `version`, generated once per process (repeated trials reuse them), or
    loaded from $ADBS_SYNTHETIC_CACHE where it names a folder: the file's name holds a digest of this module and of
    the numpy and torch versions, so a pool is only reused where it would be generated the same, and the file holds
    a SHA-256 of its images, checked on every load: a damaged file is generated again (one line says so), never
    used. A folder that cannot be written (read-only, or a path naming a file) leaves the images in memory
    (adbs/data/image_cache.py)."""
    folder = os.environ.get(CACHE_ENV)
    path = image_cache.path(folder, f"synthetic-v{version}-seed{seed}", Path(__file__).read_bytes()) if folder else None
    hit = image_cache.load(path) if path else None
    if hit is not None:
        pools, digest = hit
    else:
        pools = generate(seed, version)
        digest = image_cache.content_digest(pools)
        if path:
            image_cache.store(path, pools, digest, CACHE_ENV)
    _DIGESTS[(int(seed), int(version))] = digest
    return pools


def train_labels() -> np.ndarray:
    """Labels of the train pool without generating it (class-major order)."""
    return np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), TRAIN_PER_CLASS)


def test_labels() -> np.ndarray:
    return np.repeat(np.arange(NUM_CLASSES, dtype=np.int64), TEST_PER_CLASS)


def _probe(seed: int, version: int, epochs: int, per_class: int, threads: int | None) -> None:
    """Train a small ConvNet on the base classes and print base test accuracy (difficulty check)."""
    from torch import nn

    if threads:
        torch.set_num_threads(threads)
    tr, te = synthetic_pools(seed, version)
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
    assert tr.images is not None and te.images is not None  # synthetic pools hold their images in memory
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
    ap.add_argument("--version", type=int, default=3, choices=VERSIONS)
    ap.add_argument("--probe", action="store_true", help="train a small ConvNet and print base test accuracy")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    generate(a.seed, a.version)
    print(f"generated 60000 images (v{a.version}) in {time.perf_counter() - t0:.2f}s "
          f"(torch threads: {torch.get_num_threads()})")
    if a.probe:
        _probe(a.seed, a.version, a.epochs, a.per_class, a.threads)
