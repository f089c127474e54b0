"""FSCIL metrics (method.md, "Metrics"). Accuracies are in percent, as in the paper."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F


def accuracy(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Top-1 accuracy in percent; NaN for an empty set."""
    if target.numel() == 0:
        return math.nan
    return 100.0 * (pred == target).float().mean().item()


def harmonic_mean(a: float, b: float) -> float:
    """Harmonic mean of base and novel accuracy; NaN if either is undefined."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return 0.0 if a + b == 0 else 2.0 * a * b / (a + b)


def session_accuracies(pred: torch.Tensor, target: torch.Tensor, n_base: int) -> dict[str, float]:
    """acc, base_acc, novel_acc and hmean over the given (seen-class) samples."""
    is_base = target < n_base
    base = accuracy(pred[is_base], target[is_base])
    novel = accuracy(pred[~is_base], target[~is_base])
    return {"acc": accuracy(pred, target), "base_acc": base, "novel_acc": novel, "hmean": harmonic_mean(base, novel)}


def class_separation(prototypes: torch.Tensor) -> float:
    """D_cs = (1/N^2) sum_ij (1 - cos(p_i, p_j)) (paper Table 4)."""
    p = F.normalize(prototypes.float(), dim=-1)
    return (1.0 - p @ p.t()).mean().item()


def margin_stats(margins: torch.Tensor, n_base: int) -> dict[str, float]:
    """mean/min/max of the boundaries, and the means of base and novel ones."""
    m = margins.detach().float()
    novel = m[n_base:]
    return {
        "margin_mean": m.mean().item(),
        "margin_min": m.min().item(),
        "margin_max": m.max().item(),
        "margin_base_mean": m[:n_base].mean().item(),
        "margin_novel_mean": novel.mean().item() if novel.numel() else math.nan,
    }


def trial_summary(accs: Sequence[float]) -> dict[str, float]:
    """avg_acc (the paper's "Average Acc."), last_acc and PD = acc_0 - acc_last."""
    return {
        "avg_acc": sum(accs) / len(accs),
        "last_acc": accs[-1],
        "pd": accs[0] - accs[-1],
    }
