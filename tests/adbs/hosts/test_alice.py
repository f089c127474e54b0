"""ALICE (adbs/hosts/alice.py): the CosFace head with ADBS, class augmentation labels, head size, by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from adbs.config import from_dict
from adbs.data import build_data
from adbs.hosts import get_host
from adbs.hosts.interface import Head
from adbs.hosts.alice import cosface_loss, mix_classes, pair_label


def _official_cosface(wf: torch.Tensor, labels: torch.Tensor, s: float, m: float) -> torch.Tensor:
    """alice/loss/criterion.py's loop form, written out: -mean(num - log(e^num + sum_{j != y} e^{s cos_j}))."""
    out = []
    for i, y in enumerate(labels.tolist()):
        num = s * (wf[i, y] - m)
        others = torch.cat([wf[i, :y], wf[i, y + 1:]])
        out.append(num - torch.log(torch.exp(num) + torch.exp(s * others).sum()))
    return -torch.stack(out).mean()


def test_cosface_by_hand():
    cos = torch.tensor([[0.5, 0.2, -0.1]])
    loss = cosface_loss(30.0 * cos, torch.tensor([0]), 30.0 * 0.4)
    by_hand = -(3.0 - math.log(math.exp(3.0) + math.exp(6.0) + math.exp(-3.0)))  # s(cos_y - M) = 3
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    assert loss.item() != pytest.approx(F.cross_entropy(30.0 * cos, torch.tensor([0])).item(), rel=1e-2)  # not CE


def test_cosface_matches_the_official_formula_and_takes_the_boundaries():
    g = torch.Generator().manual_seed(0)
    f, w = torch.randn(5, 8, generator=g), torch.randn(7, 8, generator=g)
    y = torch.tensor([0, 3, 6, 2, 3])
    cos = F.normalize(f, dim=1) @ F.normalize(w, dim=1).t()
    head = Head(w, torch.ones(7), scale=30.0)
    ours = cosface_loss(head.logits(f), y, 30.0 * 0.4)
    torch.testing.assert_close(ours, _official_cosface(cos, y, 30.0, 0.4))
    # ADBS: s * (|m_c| cos t_c - M [c = y])
    m = torch.tensor([1.5, -0.5, 1.0, 0.8, 2.0, 1.0, 0.3])
    adb = cosface_loss(Head(w, m, scale=30.0).logits(f), y, 30.0 * 0.4)
    target = 30.0 * (m.abs() * cos - 0.4 * F.one_hot(y, 7))
    torch.testing.assert_close(adb, F.cross_entropy(target, y))


def test_pair_labels_are_new_classes_by_hand():
    a = torch.tensor([0, 0, 0, 1, 1, 2, 3])
    b = torch.tensor([1, 2, 3, 2, 3, 3, 0])
    assert pair_label(a, b, n=4, first=4).tolist() == [4, 5, 6, 7, 8, 9, 6]  # order-free, after the 4 real classes


def test_mix_classes_labels_mixes_and_skips_same_class_pairs():
    x = torch.arange(6, dtype=torch.float32).view(6, 1, 1, 1).expand(6, 3, 2, 2).clone()
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    (v1, v2), labels = mix_classes([x, x + 100], y, n_classes=3, times=2, beta=20.0, g=torch.Generator().manual_seed(3))
    assert torch.equal(labels[:6], y) and (labels[6:] >= 3).all() and (labels[6:] < 3 + 3).all()
    assert len(labels) > 6
    torch.testing.assert_close(v2[6:] - 100, v1[6:])  # the same partners and weights in both views
    # image i holds the value i: a mix of classes {a, b} lies between their images with weights in [0.4, 0.6]
    for value, label in zip(v1[6:, 0, 0, 0].tolist(), labels[6:].tolist()):
        a, b = {3: (0, 1), 4: (0, 2), 5: (1, 2)}[label]
        lams = [(value - j) / (i - j) for i in (2 * a, 2 * a + 1) for j in (2 * b, 2 * b + 1)]
        assert any(0.4 - 1e-5 <= lam <= 0.6 + 1e-5 or 0.4 - 1e-5 <= 1 - lam <= 0.6 + 1e-5 for lam in lams), (value, label)
    (w,), none = mix_classes([x], y, n_classes=3, times=0, beta=20.0, g=torch.Generator())
    assert torch.equal(w, x) and torch.equal(none, y)


def test_head_rows_and_base_step_average_over_views():
    cfg = from_dict({"host": "alice", "base_images_per_class": 4, "threads": 1})
    data = build_data(cfg)
    from adbs.backbones import create_backbone
    from adbs.runtime import Runtime

    rt = Runtime(cfg)
    host = get_host("alice")(cfg, data, rt)
    assert host.head_rows == 100 + 60 * 59 // 2 + 8 * 10  # real + base pairs + reserved (model_factory.py)
    assert get_host("alice")(cfg.replace(host_options='{"mix_times": 0}'), data, rt).head_rows == 100
    torch.manual_seed(0)
    model = host.build(rt.module(create_backbone(cfg.backbone)))
    head = Head(model.head, torch.ones(len(model.head)), host.scale)
    step = host.base_step(model, head, torch.randn(8, 3, 32, 32), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]),
                          torch.Generator().manual_seed(0))
    assert step.scores.shape == (8, 60) and torch.isfinite(step.loss)


@pytest.mark.parametrize("pair_boundaries", [False, True])
def test_boundaries_of_pair_rows_enter_only_when_asked(pair_boundaries):
    cfg = from_dict({"host": "alice", "base_images_per_class": 4, "threads": 1, "alice.views": 1,
                     "alice.pair_boundaries": pair_boundaries})
    data = build_data(cfg)
    from adbs.backbones import create_backbone
    from adbs.runtime import Runtime

    rt = Runtime(cfg)
    host = get_host("alice")(cfg, data, rt)
    assert host.ic_rows == (None if pair_boundaries else 60)
    torch.manual_seed(0)
    model = host.build(rt.module(create_backbone(cfg.backbone))).eval()
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    losses = []
    for pair_m in (0.5, 3.0):  # m of the real rows 0.5; of the pair and reserved rows 0.5 or 3
        m = torch.full((len(model.head),), pair_m)
        m[:60] = 0.5
        losses.append(host.base_step(model, Head(model.head, m, host.scale), x, y, torch.Generator().manual_seed(0)).loss)
    assert (losses[0].item() != pytest.approx(losses[1].item())) == pair_boundaries
