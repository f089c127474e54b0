"""Study figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from adbs_lab import metrics_keys as K


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def alpha_sensitivity(trials: pd.DataFrame, path: Path) -> Path:
    """Average accuracy vs alpha (the paper supplement's figure): val and test, mean over seeds."""
    plt = _plt()
    t = trials[trials["state"] == K.COMPLETE]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    if len(t):
        g = t.groupby("alpha")[["val_avg_acc", "test_avg_acc"]].mean().sort_index()
        ax.plot(g.index, g["test_avg_acc"], "o-", label="test avg acc")
        ax.plot(g.index, g["val_avg_acc"], "s--", label="val avg acc (objective)")
        ax.set_xscale("log")
    ax.set_xlabel("alpha (IC loss weight)")
    ax.set_ylabel("average accuracy (%)")
    ax.set_title("ADBS: sensitivity to alpha")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def kshot_curves(sessions: pd.DataFrame, folder: Path) -> list[Path]:
    """One figure per ways value: test accuracy per session, one curve per shot count."""
    plt = _plt()
    s = sessions[sessions["state"] == K.COMPLETE]
    out = []
    for ways, sw in s.groupby("ways"):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for shots, ss in sw.groupby("shots"):
            curve = ss.groupby("session")["test_acc"].mean()
            ax.plot(curve.index, curve.values, "o-", label=f"{shots}-shot")
        ax.set_xlabel("session")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"ADBS, {ways}-way")
        ax.legend()
        fig.tight_layout()
        path = Path(folder) / f"kshot_{int(ways)}way.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        out.append(path)
    return out
