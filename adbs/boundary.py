"""The ADBS plug-in API: adaptive boundaries (ADB) and the inter-class constraint (IC).

Pure tensor functions, importable from the package root, for FSCIL code bases
that want ADBS without our pipeline (the paper's "plug-and-play" claim). Each
one reproduces the authors' public implementation to float32 precision.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine(features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """cos(f(x), w_c) for every sample and class, shape (batch, classes)."""
    return F.linear(F.normalize(features, p=2, dim=-1), F.normalize(weights, p=2, dim=-1))


def boundary_logits(
    features: torch.Tensor,
    weights: torch.Tensor,
    boundaries: torch.Tensor,
    temperature: float = 16.0,
    *,
    absolute: bool = True,
) -> torch.Tensor:
    """T * |m_c| * cos(f(x), w_c), shape (batch, classes).

    `absolute=False` multiplies by the signed m, as the official incremental
    fine-tuning loop does (it agrees with |m| while m > 0).
    """
    m = boundaries.abs() if absolute else boundaries
    return temperature * m * cosine(features, weights)


def inter_class_constraint(
    boundaries: torch.Tensor, weights: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """IC loss of Proposition 1, not multiplied by alpha.

    Over all ordered pairs (i, j), diagonal included, of
        relu((1 - m_i) * (p_i . w_i) + (m_j - 1) * (p_i . w_j))
    with p = w = the L2-normalised classifier rows. The official code averages
    over the n^2 terms (`reduction="mean"`); the paper writes a sum
    (`reduction="sum"`), which scales what a given alpha means by n^2.
    Diagonal terms are exactly zero since p_i . w_i = 1.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    w = F.normalize(weights, p=2, dim=-1)
    sim = w @ w.t()  # sim[i, j] = p_i . w_j
    self_sim = sim.diagonal().unsqueeze(1)  # p_i . w_i, broadcast over j
    terms = F.relu((1.0 - boundaries).unsqueeze(1) * self_sim + (boundaries - 1.0).unsqueeze(0) * sim)
    return terms.mean() if reduction == "mean" else terms.sum()


def init_new_boundaries(old_boundaries: torch.Tensor, n_new: int) -> torch.Tensor:
    """Boundaries of n_new new classes, each the mean of all earlier boundaries (official)."""
    if old_boundaries.numel() == 0:
        raise ValueError("init_new_boundaries needs at least one earlier boundary")
    return old_boundaries.detach().mean().expand(n_new).clone()


def finetune_boundaries(
    features: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor,
    boundaries: torch.Tensor,
    n_old: int,
    *,
    alpha: float,
    lr: float,
    epochs: int,
    temperature: float = 16.0,
    momentum: float = 0.9,
    dampening: float = 0.9,
    ic_reduction: str = "mean",
    absolute: bool = False,
) -> torch.Tensor:
    """Train the boundaries of the new classes (entries n_old:) as the official incremental loop.

    Full batch: all N*K shots in one batch, one SGD step per epoch, loss
    CE(T * m * cos(f, w)) over all seen classes (signed m, as the official
    loop; `absolute=True` uses |m| as evaluation does) + alpha * IC over all
    seen classes. Backbone, classifier rows and old
    boundaries stay fixed; SGD(lr, momentum, dampening, weight_decay=0).

    features: (N, d) used every epoch, or (epochs, N, d), one augmented view
    per epoch. Returns all boundaries (old ones unchanged), detached.
    """
    if features.dim() == 3 and features.shape[0] != epochs:
        raise ValueError(f"features has {features.shape[0]} views but epochs={epochs}")
    weights = weights.detach()
    old = boundaries[:n_old].detach()
    new = torch.nn.Parameter(boundaries[n_old:].detach().clone())
    if epochs <= 0 or new.numel() == 0:
        return torch.cat([old, new.detach()])
    opt = torch.optim.SGD([new], lr=lr, momentum=momentum, dampening=dampening, weight_decay=0.0)
    for epoch in range(epochs):
        view = features[epoch] if features.dim() == 3 else features
        m = torch.cat([old, new])
        logits = boundary_logits(view, weights, m, temperature, absolute=absolute)
        loss = F.cross_entropy(logits, labels)
        if alpha:
            loss = loss + alpha * inter_class_constraint(m, weights, ic_reduction)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return torch.cat([old, new.detach()])
