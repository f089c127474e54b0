"""Statistics over seeds: means with 95% t intervals (adbs_lab/stats/intervals.py: mean_t) and ours - released with
its Welch 95% interval (adbs_lab/stats/intervals.py: welch_t, Welch-Satterthwaite df), per figure: the sessions'
accuracies, average, PD, and the negative base boundaries.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from adbs_lab.stats.intervals import mean_t, welch_t

NEGATIVE_FIGURES = {"epoch1": "after base epoch 1", "base": "after the base session"}


def welch_ci95(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(b) - mean(a) and the half-width of its Welch 95% CI (nan when a side has fewer than 2 values; 0 when
    neither side spreads)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        return math.nan, math.nan
    diff = sum(b) / len(b) - sum(a) / len(a)
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan
    _, lo, hi, _ = welch_t(np.array(b), np.array(a), 0.05)
    return diff, float((hi - lo) / 2)


def _rows(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per-run figures: s0..sN, avg, PD."""
    out: dict[str, list[float]] = {}
    for r in runs:
        acc = r["sessions"]
        for t, v in enumerate(acc):
            out.setdefault(f"s{t}", []).append(v)
        out.setdefault("avg", []).append(sum(acc) / len(acc))
        out.setdefault("PD", []).append(acc[0] - acc[-1])
    return out


def summarize(released: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per figure (s0..sN, avg, PD): means, 95% CIs, ours - released with its Welch CI."""
    ra, oa = _rows(released), _rows(ours)
    rows = []
    for key in [k for k in ra if k in oa]:
        rm, rc = mean_t(ra[key])
        om, oc = mean_t(oa[key])
        d, dc = welch_ci95(ra[key], oa[key])
        rows.append({"figure": key, "released_mean": rm, "released_ci95": rc, "ours_mean": om, "ours_ci95": oc,
                     "diff": d, "diff_ci95": dc, "n_released": len(ra[key]), "n_ours": len(oa[key]),
                     "within_noise": None if math.isnan(dc) else abs(d) <= dc})
    return rows


def negative_counts(run: dict[str, Any]) -> dict[str, int | None]:
    """A run's negative base boundaries after its first base epoch and after the base session (None: not logged).

    Released: VS_EPOCH's count of the first epoch (the print-epoch patch) and VS_BASE_MARGINS;
    ours: the base curve's first epoch (boundary_negative) and the base boundaries carried into the sessions.
    """
    first = run["epochs"][0].get("negative") if run.get("epochs") else None
    return {"epoch1": None if first is None else int(first), "base": run.get("negative_base")}


def summarize_negatives(released: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Negative base boundaries across seeds, per figure (NEGATIVE_FIGURES): per-seed counts, mean and 95% CI per
    code (t), ours - released with its Welch 95% CI; within_noise is None when a side has fewer than 2 counts."""
    rows = []
    for key, label in NEGATIVE_FIGURES.items():
        r = [c for c in (negative_counts(x)[key] for x in released) if c is not None]
        o = [c for c in (negative_counts(x)[key] for x in ours) if c is not None]
        if not r and not o:
            continue
        rm, rc = mean_t(r) if r else (math.nan, math.nan)
        om, oc = mean_t(o) if o else (math.nan, math.nan)
        d, dc = welch_ci95(r, o)
        rows.append({"figure": key, "label": label, "released": r, "ours": o, "released_mean": rm,
                     "released_ci95": rc, "ours_mean": om, "ours_ci95": oc, "diff": d, "diff_ci95": dc,
                     "n_released": len(r), "n_ours": len(o), "within_noise": None if math.isnan(dc) else abs(d) <= dc})
    return rows
