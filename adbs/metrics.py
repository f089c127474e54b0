"""FSCIL metrics (docs/metrics.md). Accuracies are in percent, as in the paper."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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


def prototype_geometry(prototypes: torch.Tensor, n_base: int) -> dict[str, float]:
    """How close the novel classes sit to the base classes, from the classifier rows (class prototypes).

    `novel_nearest_base_cos`: mean over novel classes of the cosine of its prototype to the nearest base
    prototype; `base_mean_cos`: mean cosine over pairs of distinct base prototypes. With nearly orthogonal
    prototypes (the paper's D_cs of 0.88 on CIFAR-100, a mean cosine near 0.1) a novel class whose |m|
    starts below the base classes' can still win on its own images; with prototypes that are near twins
    of base ones, small differences in |m| decide (docs/boundary-dynamics.md). NaN without novel classes.
    """
    p = F.normalize(prototypes.float(), dim=-1)
    cos = p @ p.t()
    base = cos[:n_base, :n_base]
    off = ~torch.eye(n_base, dtype=torch.bool, device=cos.device)
    out = {"base_mean_cos": base[off].mean().item() if n_base > 1 else math.nan}
    out["novel_nearest_base_cos"] = (cos[n_base:, :n_base].max(1).values.mean().item()
                                     if len(p) > n_base and n_base else math.nan)
    return out


def novel_image_geometry(features: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor,
                         n_base: int) -> dict[str, float]:
    """For the test images of novel classes: cosine to their own prototype against the best base prototype.

    `novel_own_cos` and `novel_best_base_cos` are means over those images; `novel_own_wins` is the share (%)
    whose own prototype is closer than every base prototype (what a fixed boundary m = 1 needs to predict
    them right against the base classes). NaN without novel images.
    """
    keep = labels >= n_base
    if not keep.any() or not n_base:
        return {"novel_own_cos": math.nan, "novel_best_base_cos": math.nan, "novel_own_wins": math.nan}
    f = F.normalize(features[keep].float(), dim=-1)
    p = F.normalize(prototypes.float(), dim=-1)
    own = (f * p[labels[keep]]).sum(-1)
    best_base = (f @ p[:n_base].t()).max(1).values
    return {"novel_own_cos": own.mean().item(), "novel_best_base_cos": best_base.mean().item(),
            "novel_own_wins": 100.0 * (own > best_base).float().mean().item()}


def embedding_sample(features: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor, n_base: int, *,
                     base_classes: int = 6, novel_classes: int = 4, per_class: int = 50,
                     dims: int = 50) -> dict[str, Any]:
    """What the paper's feature figures are drawn from, small enough to keep with every trial.

    The paper shows a t-SNE of the feature embeddings of 6 base and 4 novel classes (fixed boundary against
    ADBS) and heatmaps of the cosine similarity between class prototypes. This keeps, for the last session:
    the first `per_class` test images of `base_classes` base and `novel_classes` novel classes, spaced evenly
    over each range so every trial of a study shows the same classes; their L2-normalised features reduced
    to `dims` principal components (t-SNE is usually run on a PCA reduction; cosine structure survives it up
    to the discarded variance); and the cosine similarity of every pair of seen-class prototypes.
    Values are plain lists (JSON-ready); `features` rows follow `labels`.
    """
    n_seen = len(prototypes)

    def spaced(lo: int, hi: int, k: int) -> list[int]:
        return sorted({lo + (i * (hi - lo)) // k for i in range(k)}) if hi > lo and k > 0 else []

    classes = spaced(0, n_base, min(base_classes, n_base)) + spaced(n_base, n_seen, min(novel_classes, n_seen - n_base))
    keep = torch.cat([torch.nonzero(labels == c).flatten()[:per_class] for c in classes]) if classes else \
        torch.zeros(0, dtype=torch.long)
    f = F.normalize(features[keep].float(), dim=-1)
    if len(f) > 1:
        centred = f - f.mean(0, keepdim=True)
        # SVD of the sample itself: deterministic on the CPU, unlike a randomised PCA
        _, _, vh = torch.linalg.svd(centred.double(), full_matrices=False)
        f = (centred.double() @ vh[:min(dims, vh.shape[0])].t()).float()
    p = F.normalize(prototypes.float(), dim=-1)
    return {"classes": classes, "n_base": n_base, "n_seen": n_seen, "labels": labels[keep].tolist(),
            "features": [[round(v, 5) for v in row] for row in f.tolist()],
            "similarity": [[round(v, 4) for v in row] for row in (p @ p.t()).tolist()]}


def boundary_stats(boundaries: torch.Tensor, n_base: int) -> dict[str, float]:
    """Statistics of the boundaries m of all seen classes (the first n_base are the base classes).

    Signed mean/min/max (overall, base, novel), the number of negative m, and min/mean/max of |m| for
    base and novel classes: the logits use |m| (docs/method.md), so a class whose m crossed zero is
    still scaled by |m|, while the released fine-tuning loop multiplies by the signed m
    (docs/boundary-dynamics.md). Novel statistics are NaN while there are no novel classes.
    """
    return {k: v if isinstance(v, float) else float(v.item()) for k, v in boundary_stat_tensors(boundaries, n_base).items()}


def boundary_stat_tensors(boundaries: torch.Tensor, n_base: int) -> dict[str, torch.Tensor | float]:
    """`boundary_stats` before any is read back: 0-d tensors on the boundaries' device (NaN floats for an empty
    scope), so a caller can bring them to the host with its other figures in one transfer (adbs/trainer.py: read)."""
    m = boundaries.detach().float()
    out: dict[str, torch.Tensor | float] = {
        "boundary_mean": m.mean(),
        "boundary_min": m.min(),
        "boundary_max": m.max(),
        "boundary_negative": (m < 0).sum(),
    }
    for scope, part in (("base", m[:n_base]), ("novel", m[n_base:])):
        a = part.abs()
        empty = part.numel() == 0
        out[f"boundary_{scope}_mean"] = math.nan if empty else part.mean()
        out[f"boundary_{scope}_abs_min"] = math.nan if empty else a.min()
        out[f"boundary_{scope}_abs_mean"] = math.nan if empty else a.mean()
        out[f"boundary_{scope}_abs_max"] = math.nan if empty else a.max()
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
    if worst is not None and n:
        out.append(f"{n} of {int(worst['n_classes'])} seen classes never predicted (session {int(worst['session'])})")
    return out


def trial_summary(accs: Sequence[float]) -> dict[str, float]:
    """avg_acc (the paper's "Average Acc."), last_acc and PD = acc_0 - acc_last."""
    return {
        "avg_acc": sum(accs) / len(accs),
        "last_acc": accs[-1],
        "pd": accs[0] - accs[-1],
    }


def base_novel_summary(sessions: Sequence[dict[str, float]]) -> dict[str, float]:
    """Base and novel accuracy of a trial in one number each, for validation and test, so a search, a table or
    a plot can use them: `{split}_last_base_acc` / `{split}_last_novel_acc` (the last session's), the means over
    the incremental sessions 1..N (`{split}_mean_base_acc`, `{split}_mean_novel_acc`; session 0 has no novel
    classes, so its base accuracy is left out of the base mean too, keeping both means over the same sessions),
    and `{split}_last_hmean`, the harmonic mean of the last session's base and novel accuracy.

    `sessions` are the trial's session rows (`session`, `{split}_base_acc`, `{split}_novel_acc`). A trial
    without incremental sessions gets NaN for every novel number and every mean.
    """
    rows = sorted(sessions, key=lambda r: int(r["session"]))
    later = [r for r in rows if int(r["session"]) > 0]
    out: dict[str, float] = {}
    for split in ("val", "test"):
        last = later[-1] if later else None
        base = math.nan if last is None else float(last[f"{split}_base_acc"])
        novel = math.nan if last is None else float(last[f"{split}_novel_acc"])
        out[f"{split}_last_base_acc"], out[f"{split}_last_novel_acc"] = base, novel
        out[f"{split}_last_hmean"] = harmonic_mean(base, novel)
        for part in ("base", "novel"):
            vals = [float(r[f"{split}_{part}_acc"]) for r in later]
            out[f"{split}_mean_{part}_acc"] = sum(vals) / len(vals) if vals else math.nan
    return out
