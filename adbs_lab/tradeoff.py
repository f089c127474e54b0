"""The base/novel trade-off of a study: the last session's base accuracy against its novel accuracy, one point per
configuration (mean over its seeds), validation beside test, the Pareto front (no other configuration is better on
both) and the baseline row marked. ADBS moves accuracy between base and novel classes; a table's average hides
which way a configuration went.

Drawn from the sessions table (each trial's own last session), so a store from before the summary/*_last_*
metrics draws it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from adbs_lab import metrics_keys as K

TRADEOFF_PNG = "tradeoff.png"


def points(sessions: pd.DataFrame, split: str, label: str = "label") -> pd.DataFrame:
    """One row per configuration: `base`, `novel` = mean over its complete trials of the last session's accuracy."""
    cols = [f"{split}_base_acc", f"{split}_novel_acc"]
    s = sessions[sessions["state"] == K.COMPLETE] if "state" in sessions else sessions
    if s.empty or not set(cols) <= set(s.columns):
        return pd.DataFrame(columns=[label, "base", "novel", "seeds"])
    s = s[s["session"] > 0]  # novel accuracy exists from session 1 on
    last = s.loc[s.groupby("trial_id")["session"].idxmax()] if len(s) else s
    g = last.groupby(label, sort=False)
    return pd.DataFrame({"base": g[cols[0]].mean(), "novel": g[cols[1]].mean(), "seeds": g.size()}).reset_index()


def pareto(p: pd.DataFrame) -> list[int]:
    """Positions of the points no other point beats on both base and novel accuracy (ties do not dominate)."""
    front = []
    for i, (b, n) in enumerate(zip(p["base"], p["novel"])):
        if not any((b2 >= b and n2 >= n) and (b2 > b or n2 > n) for b2, n2 in zip(p["base"], p["novel"])):
            front.append(i)
    return front


def baselines(baseline: str | dict[str, str] | None) -> set[str]:
    if not baseline:
        return set()
    return set(baseline.values()) if isinstance(baseline, dict) else {baseline}


def figure(sessions: pd.DataFrame, path: Path, *, baseline: str | dict[str, str] | None = None,
           title: str = "", label: str = "label") -> Path | None:
    """tradeoff.png: validation (left, what selection may look at) and test (right, reported only) panels."""
    from adbs_lab.figures import _plt

    panels = {split: points(sessions, split, label) for split in ("val", "test")}
    if all(p.empty for p in panels.values()):
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    refs = baselines(baseline)
    # a search (many configurations, or labels naming several knobs): points, not a legend of every configuration
    many = max(len(p) for p in panels.values()) > 12 or any(len(str(x)) > 40 for p in panels.values() for x in p[label])
    for ax, (split, p) in zip(axes, panels.items()):
        _panel(ax, p, refs, many, label)
        ax.set_title({"val": "validation (used for selection)", "test": "test (reported, never used for selection)"}[
            split], fontsize=9)
        ax.set_xlabel(f"{split} novel accuracy, last session (%)")
        ax.set_ylabel(f"{split} base accuracy, last session (%)")
        ax.grid(alpha=0.3)
    fig.suptitle(title or "base vs novel accuracy, last session (mean over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _panel(ax, p: pd.DataFrame, refs: set[str], many: bool, label: str) -> None:
    if p.empty:
        ax.text(0.5, 0.5, "no complete trial with an incremental session", ha="center", transform=ax.transAxes)
        return
    front = pareto(p)
    f = p.iloc[front].sort_values("novel")
    ax.step(f["novel"], f["base"], where="pre", color="k", lw=1, alpha=0.6, label="Pareto front")
    for i, r in p.iterrows():
        on = i in front
        is_ref = r[label] in refs
        kw: dict[str, Any] = {"marker": "*" if is_ref else "o", "s": 140 if is_ref else 40,
                              "edgecolor": "k" if on else "none", "linewidths": 1.2}
        if many and not is_ref:
            ax.scatter(r["novel"], r["base"], color="C0", alpha=0.7, **kw)
        else:
            ax.scatter(r["novel"], r["base"], label=f"{r[label]}{' (baseline)' if is_ref and r[label] != 'baseline' else ''}", **kw)
    if many:
        ax.scatter([], [], color="C0", label=f"{len(p)} configurations (outlined: on the front)")
    ax.legend(fontsize=7)
