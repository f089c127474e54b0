"""Batched augmentations for host views (adbs/data/augment.py): seeded, shaped and bounded as torchvision's."""

import torch

from adbs.data import augment
from adbs.data.registry import CIFAR_MEAN, CIFAR_STD


def test_views_are_fixed_by_the_batch_seed():
    x = torch.randn(4, 3, 32, 32)
    one = augment.color_jitter(augment.random_resized_crop(x, 32, (0.2, 1.0), augment.batch_generator(0, 1, 2)),
                               augment.batch_generator(0, 1, 2), CIFAR_MEAN, CIFAR_STD)
    two = augment.color_jitter(augment.random_resized_crop(x, 32, (0.2, 1.0), augment.batch_generator(0, 1, 2)),
                               augment.batch_generator(0, 1, 2), CIFAR_MEAN, CIFAR_STD)
    assert torch.equal(one, two)
    other = augment.random_resized_crop(x, 32, (0.2, 1.0), augment.batch_generator(0, 1, 3))
    assert not torch.equal(other, augment.random_resized_crop(x, 32, (0.2, 1.0), augment.batch_generator(0, 1, 2)))


def test_crop_boxes_fit_scale_and_the_key_constraint():
    g = torch.Generator().manual_seed(0)
    boxes = augment.crop_boxes(500, 32, 32, (0.2, 0.7), g)
    i, j, h, w = boxes.unbind(1)
    assert ((i >= 0) & (j >= 0) & (i + h <= 32) & (j + w <= 32)).all()
    area = (h * w).float() / 1024
    assert area.min() > 0.15 and area.max() < 0.75
    key = torch.tensor([[0, 0, 8, 8]]).expand(500, 4)  # a small key box in a corner

    def overlapping(boxes):
        i, j, h, w = boxes.unbind(1)
        overlap = ((torch.minimum(j + w, torch.tensor(8)) - j).clamp(min=0)
                   * (torch.minimum(i + h, torch.tensor(8)) - i).clamp(min=0))
        return (overlap.float() >= 0.1 * 0.05 * 1024).float().mean().item()

    constrained = overlapping(augment.crop_boxes(500, 32, 32, (0.05, 0.1), g, inside=key))
    free = overlapping(augment.crop_boxes(500, 32, 32, (0.05, 0.1), g))
    # 10 tries to overlap the key by 10% of the crop's area, then an unconstrained crop (SAVC's rule)
    assert constrained > free + 0.3


def test_identity_crop_jitter_bounds_and_grayscale():
    x = torch.randn(3, 3, 16, 16)
    torch.testing.assert_close(augment.resized_crop(x, torch.tensor([[0, 0, 16, 16]] * 3), 16), x)
    y = augment.color_jitter(x, torch.Generator().manual_seed(0), CIFAR_MEAN, CIFAR_STD, p=1.0)
    raw = y * torch.tensor(CIFAR_STD).view(1, 3, 1, 1) + torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    assert raw.min() >= -1e-5 and raw.max() <= 1 + 1e-5  # jittered images stay valid pixels
    gray = augment.random_grayscale(x, torch.Generator().manual_seed(0), CIFAR_MEAN, CIFAR_STD, p=1.0)
    raw = gray * torch.tensor(CIFAR_STD).view(1, 3, 1, 1) + torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    torch.testing.assert_close(raw[:, 0], raw[:, 1]) and torch.testing.assert_close(raw[:, 1], raw[:, 2])


def test_train_view_follows_the_dataset_transform():
    x = torch.randn(5, 3, 32, 32)
    v = augment.train_view(x, "random_crop(32,pad=4)+hflip", torch.Generator().manual_seed(1), CIFAR_MEAN, CIFAR_STD)
    assert v.shape == x.shape
    black = (-torch.tensor(CIFAR_MEAN) / torch.tensor(CIFAR_STD)).view(1, 3, 1, 1)
    shifted = [(v[k] == x[k]).all() or (v[k] == x[k].flip(-1)).all() for k in range(5)]
    padded = [(torch.isclose(v[k], black[0].expand(3, 32, 32))).any() for k in range(5)]
    assert all(s or p for s, p in zip(shifted, padded))
