"""The plug-in API against small cases worked by hand and a loop-by-loop reference.

The loop reference transcribes docs/method.md's description of the released code
term by term (explicit i, j loops; a hand-rolled SGD with momentum and
dampening), so a vectorisation slip in adbs.boundary cannot hide behind itself.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import adbs


def test_boundary_logits_by_hand():
    f = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    w = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    m = torch.tensor([0.5, -2.0])
    out = adbs.boundary_logits(f, w, m, temperature=16.0)
    # cos: x1 vs w1 = 1, x1 vs w2 = 1/sqrt2; x2 vs w1 = 0, x2 vs w2 = 1/sqrt2; |m| = (0.5, 2)
    s = 1 / math.sqrt(2)
    expected = torch.tensor([[16 * 0.5 * 1, 16 * 2 * s], [0.0, 16 * 2 * s]])
    assert out.shape == (2, 2)
    torch.testing.assert_close(out, expected)
    signed = adbs.boundary_logits(f, w, m, temperature=16.0, absolute=False)
    torch.testing.assert_close(signed[:, 1], -expected[:, 1])


def test_ic_two_classes_by_hand():
    # Orthogonal rows: only (1 - m_i) * 1 survives for i != j; diagonal is exactly 0.
    w = torch.tensor([[3.0, 0.0], [0.0, 1.0]])
    m = torch.tensor([0.5, 1.5])
    # (0,1): relu(0.5*1 + 0.5*0) = 0.5 ; (1,0): relu(-0.5*1 + (-0.5)*0) = 0 ; diag: 0
    assert adbs.inter_class_constraint(m, w).item() == pytest.approx(0.5 / 4)
    assert adbs.inter_class_constraint(m, w, reduction="sum").item() == pytest.approx(0.5)


def test_ic_correlated_rows_by_hand():
    w = torch.tensor([[1.0, 0.0], [0.6, 0.8]])  # cos = 0.6
    m = torch.tensor([0.8, 1.2])
    # (0,1): relu(0.2 + 0.2*0.6) = 0.32 ; (1,0): relu(-0.2 + (-0.2)*0.6) = 0
    assert adbs.inter_class_constraint(m, w).item() == pytest.approx(0.32 / 4, abs=1e-6)


def test_ic_is_zero_at_unit_margins():
    w = torch.randn(7, 5)
    assert adbs.inter_class_constraint(torch.ones(7), w).item() == 0.0


def test_ic_rejects_unknown_reduction():
    with pytest.raises(ValueError, match="mean' or 'sum"):
        adbs.inter_class_constraint(torch.ones(2), torch.randn(2, 3), reduction="max")


def test_init_new_boundaries():
    out = adbs.init_new_boundaries(torch.tensor([1.0, 2.0, 4.5]), 4)
    torch.testing.assert_close(out, torch.full((4,), 2.5))
    with pytest.raises(ValueError):
        adbs.init_new_boundaries(torch.empty(0), 2)


def _ic_loops(m, w):
    p = F.normalize(w, dim=-1)
    n = len(m)
    total = 0.0
    for i in range(n):
        for j in range(n):
            total = total + torch.relu((1 - m[i]) * (p[i] @ p[i]) + (m[j] - 1) * (p[i] @ p[j]))
    return total / (n * n)


def _finetune_loops(features, labels, w, boundaries, n_old, alpha, lr, epochs, T=16.0, mom=0.9, damp=0.9):
    old = boundaries[:n_old].clone()
    new = boundaries[n_old:].clone()
    buf = None
    for e in range(epochs):
        new_p = new.clone().requires_grad_(True)
        m = torch.cat([old, new_p])
        view = features[e] if features.dim() == 3 else features
        cos = F.normalize(view, dim=-1) @ F.normalize(w, dim=-1).t()
        loss = F.cross_entropy(T * m * cos, labels) + alpha * _ic_loops(m, w)
        (g,) = torch.autograd.grad(loss, new_p)
        # torch.optim.SGD: first step buf = g; later buf = mom * buf + (1 - damp) * g.
        buf = g.clone() if buf is None else mom * buf + (1 - damp) * g
        new = new - lr * buf
    return torch.cat([old, new])


def test_ic_matches_loops_random():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(9, 16, generator=g)
    m = 1 + 0.3 * torch.randn(9, generator=g)
    torch.testing.assert_close(adbs.inter_class_constraint(m, w), _ic_loops(m, w), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("views", [False, True])
def test_finetune_matches_loop_reference(views):
    g = torch.Generator().manual_seed(1)
    n_old, n_new, k, d, epochs = 6, 3, 4, 12, 5
    w = torch.randn(n_old + n_new, d, generator=g)
    boundaries = torch.cat([1 + 0.2 * torch.rand(n_old, generator=g), torch.zeros(n_new)])
    boundaries[n_old:] = adbs.init_new_boundaries(boundaries[:n_old], n_new)
    labels = torch.arange(n_old, n_old + n_new).repeat_interleave(k)
    shape = (epochs, n_new * k, d) if views else (n_new * k, d)
    feats = torch.randn(*shape, generator=g)
    out = adbs.finetune_boundaries(feats, labels, w, boundaries, n_old, alpha=0.05, lr=0.1, epochs=epochs)
    ref = _finetune_loops(feats, labels, w, boundaries, n_old, alpha=0.05, lr=0.1, epochs=epochs)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(out[:n_old], boundaries[:n_old]), "old boundaries must stay frozen"
    assert not torch.equal(out[n_old:], boundaries[n_old:]), "new boundaries must move"


def test_finetune_single_step_by_hand():
    # One new class, one shot exactly on its own prototype, one orthogonal old class.
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    boundaries = torch.tensor([1.0, 1.0])
    f = torch.tensor([[0.0, 1.0]])
    y = torch.tensor([1])
    out = adbs.finetune_boundaries(f, y, w, boundaries, 1, alpha=0.0, lr=0.5, epochs=1, temperature=2.0)
    # logits = (2*1*0, 2*m*1); dCE/dm = -(1 - softmax_1) * 2 with softmax_1 = e^2/(1+e^2)
    grad = -(1 - math.exp(2) / (1 + math.exp(2))) * 2
    assert out[1].item() == pytest.approx(1.0 - 0.5 * grad, rel=1e-6)
    assert out[0].item() == 1.0


def test_finetune_zero_epochs_and_view_mismatch():
    w, m = torch.randn(3, 4), torch.ones(3)
    out = adbs.finetune_boundaries(torch.randn(2, 4), torch.tensor([2, 2]), w, m, 2, alpha=0.1, lr=0.1, epochs=0)
    assert torch.equal(out, m)
    with pytest.raises(ValueError, match="views"):
        adbs.finetune_boundaries(torch.randn(3, 2, 4), torch.tensor([2, 2]), w, m, 2, alpha=0.1, lr=0.1, epochs=2)
