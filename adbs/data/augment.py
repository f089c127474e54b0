"""Batched image augmentations on device tensors, for host methods that make their own views.

The loader (adbs/data/loader.py) applies a dataset's train transform; hosts that need other views
(SAVC's global and small crops, ALICE's two views) take test-transformed, normalised batches and call
these instead, so no host adds to the loader's transform grammar. Every function draws its randomness
from a CPU `torch.Generator` (made per batch by `batch_generator`), so views are fixed by the seed and a
resumed trial draws the same ones; the images may live on any device.

Each mirrors the torchvision transform the official codes use, batched: the crop boxes and jitter
factors are drawn per image as torchvision draws them; resizing is bilinear by `grid_sample` (torchvision
resizes PIL images with antialiasing when shrinking), and the four colour jitters run in the fixed order
brightness, contrast, saturation, hue (torchvision shuffles their order per image).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .loader import _mix


def batch_generator(seed: int, epoch: int, batch: int) -> torch.Generator:
    """The generator of one training batch's augmentations: fixed by (seed, epoch, batch)."""
    return torch.Generator().manual_seed(_mix(seed, 0xA5, epoch, batch))


def _uniform(n: int, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)


def _to01(x: torch.Tensor, mean, std) -> torch.Tensor:
    m = torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return x * s + m


def _from01(x: torch.Tensor, mean, std) -> torch.Tensor:
    m = torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - m) / s


def hflip(x: torch.Tensor, g: torch.Generator, p: float = 0.5) -> torch.Tensor:
    """RandomHorizontalFlip(p) per image."""
    flip = (torch.rand(len(x), generator=g) < p).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def random_crop(x: torch.Tensor, size: int, pad: int, g: torch.Generator, mean, std) -> torch.Tensor:
    """RandomCrop(size, padding=pad) per image; the padding is black, as torchvision pads the raw image."""
    b, c, h, w = x.shape
    if pad:
        black = _from01(torch.zeros(1, c, 1, 1, dtype=x.dtype, device=x.device), mean, std)
        padded = black.expand(b, c, h + 2 * pad, w + 2 * pad).clone()
        padded[:, :, pad:pad + h, pad:pad + w] = x
        x = padded
    oy = torch.randint(0, x.shape[2] - size + 1, (b,), generator=g).tolist()
    ox = torch.randint(0, x.shape[3] - size + 1, (b,), generator=g).tolist()
    return torch.stack([x[i, :, oy[i]:oy[i] + size, ox[i]:ox[i] + size] for i in range(b)])


def crop_boxes(n: int, height: int, width: int, scale: tuple[float, ...], g: torch.Generator, *,
               ratio: tuple[float, float] = (3 / 4, 4 / 3), inside: torch.Tensor | None = None,
               attempts: int = 10) -> torch.Tensor:
    """RandomResizedCrop boxes (i, j, h, w) per image, as torchvision's get_params draws them.

    Up to `attempts` tries of (area, log-ratio) per image, else the central crop. `inside` (n, 4) boxes
    constrain each crop to put at least 10% of its area inside its box, else it falls back to an
    unconstrained crop: SAVC's small crops conditioned on the key crop (zysong0113/SAVC
    augmentations/constrained_cropping.py: get_params_conditioned).
    """
    area = height * width
    target = _uniform(n * attempts, scale[0], scale[1], g).view(n, attempts) * area
    log_r = _uniform(n * attempts, math.log(ratio[0]), math.log(ratio[1]), g).view(n, attempts)
    r = torch.exp(log_r)
    w = torch.round(torch.sqrt(target * r)).long()
    h = torch.round(torch.sqrt(target / r)).long()
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    i = (torch.rand(n, attempts, generator=g, dtype=torch.float64) * (height - h + 1).clamp(min=1)).long()
    j = (torch.rand(n, attempts, generator=g, dtype=torch.float64) * (width - w + 1).clamp(min=1)).long()
    if inside is not None:
        ki, kj, kh, kw = (inside[:, k:k + 1] for k in range(4))
        dx = (torch.minimum(j + w, kj + kw) - torch.maximum(j, kj)).clamp(min=0)
        dy = (torch.minimum(i + h, ki + kh) - torch.maximum(i, ki)).clamp(min=0)
        ok &= (dx * dy).double() >= 0.1 * target
    first = torch.where(ok.any(1), ok.double().argmax(1), torch.full((n,), -1))
    # central crop when no try fits (the whole image for aspect ratios within `ratio`)
    in_ratio = width / height
    if in_ratio < ratio[0]:
        cw, ch = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        cw, ch = int(round(height * ratio[1])), height
    else:
        cw, ch = width, height
    central = torch.tensor([(height - ch) // 2, (width - cw) // 2, ch, cw])
    picked = torch.stack([i, j, h, w], -1)[torch.arange(n), first.clamp(min=0)]
    boxes = torch.where((first >= 0)[:, None], picked, central)
    if inside is not None and not bool((first >= 0).all()):
        free = crop_boxes(n, height, width, scale, g, ratio=ratio, attempts=attempts)
        boxes = torch.where((first >= 0)[:, None], boxes, free)
    return boxes


def resized_crop(x: torch.Tensor, boxes: torch.Tensor, size: int) -> torch.Tensor:
    """Crop each image to its box (i, j, h, w) and resize it to size x size, bilinearly."""
    b, _, height, width = x.shape
    bx = boxes.to(torch.float64)
    i, j, h, w = bx.unbind(1)
    theta = torch.zeros(b, 2, 3, dtype=torch.float64)
    theta[:, 0, 0] = w / width
    theta[:, 0, 2] = (2 * j + w) / width - 1
    theta[:, 1, 1] = h / height
    theta[:, 1, 2] = (2 * i + h) / height - 1
    grid = F.affine_grid(theta.to(x.dtype).to(x.device), [b, x.shape[1], size, size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def random_resized_crop(x: torch.Tensor, size: int, scale: tuple[float, ...], g: torch.Generator) -> torch.Tensor:
    """RandomResizedCrop(size, scale) per image."""
    return resized_crop(x, crop_boxes(len(x), x.shape[2], x.shape[3], scale, g), size)


def _gray(x01: torch.Tensor) -> torch.Tensor:
    return (0.299 * x01[:, 0] + 0.587 * x01[:, 1] + 0.114 * x01[:, 2]).unsqueeze(1)


def _rgb_to_hsv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r, gr, b = x.unbind(1)
    maxc, _ = x.max(1)
    minc, _ = x.min(1)
    delta = maxc - minc
    s = delta / torch.where(maxc == 0, torch.ones_like(maxc), maxc)
    d = torch.where(delta == 0, torch.ones_like(delta), delta)
    rc, gc, bc = (maxc - r) / d, (maxc - gr) / d, (maxc - b) / d
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == gr, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.where(delta == 0, torch.zeros_like(h), (h / 6.0) % 1.0)
    return h, s, maxc


def _hsv_to_rgb(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = (i.long() % 6).unsqueeze(0)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    pick = lambda *c: torch.stack(c).gather(0, i).squeeze(0)  # noqa: E731
    return torch.stack([pick(v, q, p, p, t, v), pick(t, v, v, q, p, p), pick(p, p, t, v, v, q)], 1)


def color_jitter(x: torch.Tensor, g: torch.Generator, mean, std, *, brightness: float = 0.4, contrast: float = 0.4,
                 saturation: float = 0.4, hue: float = 0.1, p: float = 0.8) -> torch.Tensor:
    """RandomApply([ColorJitter(brightness, contrast, saturation, hue)], p) per image, on normalised images."""
    n = len(x)
    apply = (torch.rand(n, generator=g) < p).to(x.device).view(n, 1, 1, 1)
    bf, cf, sf = (_uniform(n, 1 - a, 1 + a, g).to(x.dtype).to(x.device).view(n, 1, 1, 1)
                  for a in (brightness, contrast, saturation))
    hf = _uniform(n, -hue, hue, g).to(x.dtype).to(x.device).view(n, 1, 1)
    y = _to01(x, mean, std).clamp(0, 1)
    y = (y * bf).clamp(0, 1)
    y = ((y - _gray(y).mean((2, 3), keepdim=True)) * cf + _gray(y).mean((2, 3), keepdim=True)).clamp(0, 1)
    y = ((y - _gray(y)) * sf + _gray(y)).clamp(0, 1)
    if hue:
        hh, ss, vv = _rgb_to_hsv(y)
        y = _hsv_to_rgb((hh + hf) % 1.0, ss, vv)
    return torch.where(apply, _from01(y, mean, std), x)


def random_grayscale(x: torch.Tensor, g: torch.Generator, mean, std, p: float = 0.2) -> torch.Tensor:
    """RandomGrayscale(p) per image (three equal channels), on normalised images."""
    pick = (torch.rand(len(x), generator=g) < p).to(x.device).view(-1, 1, 1, 1)
    gray = _from01(_gray(_to01(x, mean, std)).expand(-1, 3, -1, -1), mean, std)
    return torch.where(pick, gray, x)


BATCHED = ("random_crop", "hflip", "random_resized_crop")
"""The transform parts train_view can apply to a batch."""


def unbatched_parts(transform: str) -> list[str]:
    """The parts of `transform` that train_view cannot apply (a host that makes its views with it checks its
    dataset's train transform before any compute: Host.check_dataset)."""
    from .loader import parse_transform

    return [op for op, _ in parse_transform(transform) if op not in BATCHED]


def train_view(x: torch.Tensor, transform: str, g: torch.Generator, mean, std) -> torch.Tensor:
    """A dataset's train transform (DatasetSpec.train_transform, the loader's grammar) on a batch.

    For hosts that augment test-transformed batches themselves: random_crop(S,pad=P) and hflip as the
    loader applies them, random_resized_crop(S) at torchvision's default scale (0.08, 1).
    """
    from .loader import parse_transform

    for op, kw in parse_transform(transform):
        if op == "random_crop":
            x = random_crop(x, kw["size"], kw.get("pad", 0), g, mean, std)
        elif op == "hflip":
            x = hflip(x, g)
        elif op == "random_resized_crop":
            x = random_resized_crop(x, kw["size"], (0.08, 1.0), g)
        else:
            raise ValueError(f"train transform part {op!r} has no batched version (adbs/data/augment.py)")
    return x
