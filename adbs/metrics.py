"""FSCIL metrics (docs/metrics.md). Accuracies are in percent, as in the paper."""

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


def boundary_stats(boundaries: torch.Tensor, n_base: int) -> dict[str, float]:
    """Statistics of the boundaries m of all seen classes (the first n_base are the base classes).

    Signed mean/min/max (overall, base, novel), the number of negative m, and min/mean/max of |m| for
    base and novel classes: the logits use |m| (docs/method.md), so a class whose m crossed zero is
    still scaled by |m|, while the released fine-tuning loop multiplies by the signed m
    (docs/boundary-dynamics.md). Novel statistics are NaN while there are no novel classes.
    """
    m = boundaries.detach().float()
    out = {
        "boundary_mean": m.mean().item(),
        "boundary_min": m.min().item(),
        "boundary_max": m.max().item(),
        "boundary_negative": float((m < 0).sum().item()),
    }
    for scope, part in (("base", m[:n_base]), ("novel", m[n_base:])):
        a = part.abs()
        empty = part.numel() == 0
        out[f"boundary_{scope}_mean"] = math.nan if empty else part.mean().item()
        out[f"boundary_{scope}_abs_min"] = math.nan if empty else a.min().item()
        out[f"boundary_{scope}_abs_mean"] = math.nan if empty else a.mean().item()
        out[f"boundary_{scope}_abs_max"] = math.nan if empty else a.max().item()
    return out


def prediction_stats(pred: torch.Tensor, n_base: int, n_seen: int) -> dict[str, float]:
    """Where predictions go: the share (%) predicted as a novel class, and how many seen classes get none.

    A method whose novel classes are never predicted, or that leaves some class with no prediction at
    all, is in the collapsed regime docs/boundary-dynamics.md describes, whatever its accuracy says.
    """
    if pred.numel() == 0:
        return {"pred_novel_share": math.nan, "unpredicted_classes": math.nan}
    counts = torch.bincount(pred.flatten(), minlength=n_seen)[:n_seen]
    return {
        "pred_novel_share": 100.0 * (pred >= n_base).float().mean().item() if n_seen > n_base else math.nan,
        "unpredicted_classes": float((counts == 0).sum().item()),
    }


def collapse_warnings(sessions: Sequence[dict[str, float]], split: str = "test") -> list[str]:
    """Warnings about a trial's session rows: novel classes never right, or seen classes never predicted.

    Rows are the per-session dicts of a trial (`{split}_novel_acc`, `{split}_unpredicted_classes`,
    `n_classes`, `session`). Empty when nothing is wrong.
    """
    out = []
    novel = [r[f"{split}_novel_acc"] for r in sessions if int(r["session"]) > 0]
    if novel and all(v == 0.0 for v in novel):
        out.append(f"novel accuracy 0.00 in every incremental session ({len(novel)})")
    def unpredicted(r: dict[str, float]) -> int:
        v = r.get(f"{split}_unpredicted_classes", 0.0)
        return int(v) if math.isfinite(v) else 0

    worst = max(sessions, key=unpredicted, default=None)
    n = 0 if worst is None else unpredicted(worst)
    if n:
        out.append(f"{n} of {int(worst['n_classes'])} seen classes never predicted (session {int(worst['session'])})")
    return out


def trial_summary(accs: Sequence[float]) -> dict[str, float]:
    """avg_acc (the paper's "Average Acc."), last_acc and PD = acc_0 - acc_last."""
    return {
        "avg_acc": sum(accs) / len(accs),
        "last_acc": accs[-1],
        "pd": accs[0] - accs[-1],
    }
