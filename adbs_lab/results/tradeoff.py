"""The base/novel trade-off of a study: the last session's base accuracy against its novel accuracy, one point per
configuration (mean over its seeds), validation beside test, the Pareto front (no other configuration is better on
both) and the baseline row marked. ADBS moves accuracy between base and novel classes; a table's average hides
which way a configuration went.

Where the rows differ in a data condition (ways, shots: adbs_lab/results/best.py), no front is drawn: a point of
one cell is never said to beat one of another; each cell's rows are joined in a colour of their own and named.

Drawn from the sessions table (each trial's own last session), so a store from before the summary/*_last_*
metrics draws it too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from adbs_lab.records import metrics_keys as K

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


def pareto(p: pd.DataFrame, cols: tuple[str, str] = ("base", "novel"),
           directions: tuple[str, str] = ("max", "max")) -> list[int]:
    """Positions of the points no other point beats on both columns (ties do not dominate): adbs_lab/records/objectives.py's
    front, by default of base and novel accuracy, both maximised."""
    from adbs_lab.results.pareto import front

    return front(p[list(cols)].to_numpy().tolist(), directions)


def objective_points(trials: pd.DataFrame, names: tuple[str, str], label: str = "label") -> pd.DataFrame:
    """One row per configuration: `y`, `x` = the mean over its complete trials of the summary metrics `names`."""
    t = trials[trials["state"] == K.COMPLETE] if len(trials) and "state" in trials else trials
    if t.empty or not set(names) <= set(t.columns):
        return pd.DataFrame(columns=[label, "y", "x", "seeds"])
    g = t.groupby(label, sort=False)
    return pd.DataFrame({"y": g[names[0]].mean(), "x": g[names[1]].mean(), "seeds": g.size()}).reset_index()


def _test_twin(name: str, trials: pd.DataFrame) -> str:
    """The test metric beside a validation objective (val_last_novel_acc -> test_last_novel_acc), where there is one;
    a metric of the trained model (d_cs) is its own."""
    twin = "test_" + name[len("val_"):] if name.startswith("val_") else name
    return twin if twin in trials else name


def cells(labels: Sequence[Any], conditions: Sequence[str]) -> dict[Any, str]:
    """{row: its cell, as its label names it ("ways=5 shots=1")}: the words key=value of `conditions` in each label;
    empty where the rows share one cell (then the figure draws the front)."""
    out = {lab: " ".join(w for w in str(lab).split(" ") if "=" in w and w.split("=", 1)[0] in conditions)
           for lab in labels}
    return out if len(set(out.values())) > 1 else {}


def baselines(baseline: str | dict[str, str] | None) -> set[str]:
    if not baseline:
        return set()
    return set(baseline.values()) if isinstance(baseline, dict) else {baseline}


def figure(sessions: pd.DataFrame, path: Path, *, baseline: str | dict[str, str] | None = None,
           title: str = "", label: str = "label", trials: pd.DataFrame | None = None,
           objectives: tuple | None = None, colors: dict[str, str] | None = None,
           order: list[str] | None = None, conditions: Sequence[str] = ()) -> Path | None:
    """tradeoff.png: validation (left, what selection may look at) and test (right, reported only) panels.

    With exactly two `objectives` (a study's --objectives, adbs_lab/records/objectives.py) and the `trials` table, the panels
    plot those two (the first up, the second across) and their front in their directions; else the last session's
    base against novel accuracy. With `trials`, only the configurations every seed of which completed are drawn,
    as only they are ranked. Points and legend follow `order` (default: the order of `colors`, the study's rows in its
    table's order, figures.row_colors); the one legend lies below the panels, covering no point. Rows that differ in
    `conditions` (config keys that set the problem) get no front: each cell's rows are joined and named (`cells`)."""
    from adbs_lab.results.figures import _plt

    two = objectives is not None and len(objectives) == 2 and trials is not None and len(trials) > 0
    if two:
        assert objectives is not None and trials is not None, "two is set only when both are given"
        o1, o2 = objectives
        names = {"val": (o1.name, o2.name), "test": (_test_twin(o1.name, trials), _test_twin(o2.name, trials))}
        panels = {split: objective_points(trials, names[split], label) for split in ("val", "test")}
        directions = (o1.direction, o2.direction)
    else:
        panels = {split: points(sessions, split, label).rename(columns={"base": "y", "novel": "x"})
                  for split in ("val", "test")}
        directions = ("max", "max")
    if trials is not None and len(trials) and "state" in trials:
        # a configuration missing a seed is never ranked (adbs_lab/results/seed_counts.py): not on this front either
        from adbs_lab.results.seed_counts import whole_labels

        whole = set(whole_labels(trials, label))
        panels = {split: p[p[label].astype(str).isin(whole)] for split, p in panels.items()}
    if all(p.empty for p in panels.values()):
        return None
    rank = {lab: i for i, lab in enumerate(order if order is not None else list(colors or {}))}
    panels = {split: p.iloc[np.argsort(p[label].map(lambda x: rank.get(x, len(rank))).to_numpy(), kind="stable")]
              .reset_index(drop=True) for split, p in panels.items()}
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    refs = baselines(baseline)
    # a search (many configurations, or labels naming several knobs): points, not a legend of every configuration
    many = max(len(p) for p in panels.values()) > 12 or any(len(str(x)) > 40 for p in panels.values() for x in p[label])
    cell_of = cells([x for p in panels.values() for x in p[label]], conditions)
    for ax, (split, p) in zip(axes, panels.items()):
        if cell_of:
            _cell_panel(ax, p, refs, label, cell_of)
        else:
            _panel(ax, p, refs, many, label, directions, colors or {})
        _axes_text(ax, split, names[split] if two else None, directions)
    legend_rows = _legend(fig, axes)
    default = (f"{o1.text} vs {o2.text}: the study's objectives (mean over seeds)" if two else
               "base vs novel accuracy, last session (mean over seeds)")
    fig.suptitle(_cells_title(title or default, conditions, cell_of, refs) if cell_of else title or default,
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.02 + 0.045 * legend_rows, 1, 1))  # room below the panels for the legend
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _panel(ax, p: pd.DataFrame, refs: set[str], many: bool, label: str,
           directions: tuple[str, str] = ("max", "max"), colors: dict[str, str] | None = None) -> None:
    """One panel: a point per configuration (x across, y up), the front outlined and joined."""
    if p.empty:
        ax.text(0.5, 0.5, "no complete trial with an incremental session", ha="center", transform=ax.transAxes)
        return
    front = pareto(p, ("y", "x"), directions)
    f = p.iloc[front].sort_values("x")
    if directions == ("max", "max"):  # the staircase of what the front attains
        ax.step(f["x"], f["y"], where="pre", color="k", lw=1, alpha=0.6, label="Pareto front")
    else:
        ax.plot(f["x"], f["y"], color="k", lw=1, alpha=0.6, label="Pareto front")
    on = set(front)
    is_ref = p[label].isin(refs)
    if many:  # one collection for the configurations (a scatter call per point took seconds at 1,000 points)
        from matplotlib.colors import to_rgba

        rest = p[~is_ref]
        # the alpha in the colours: a collection's alpha would make its "none" edges black (to_rgba_array's (0,0,0,0))
        ax.scatter(rest["x"], rest["y"], color=to_rgba("C0", 0.7), marker="o", s=40, linewidths=1.2,
                   edgecolors=[(0.0, 0.0, 0.0, 0.7 if i in on else 0.0) for i in rest.index])
    for i, r in (p[is_ref] if many else p).iterrows():  # by name: every row of a few, the baseline of many
        ref = bool(is_ref[i])
        kw: dict[str, Any] = {"marker": "*" if ref else "o", "s": 140 if ref else 40,
                              "edgecolor": "k" if i in on else "none", "linewidths": 1.2}
        ax.scatter(r["x"], r["y"], color=(colors or {}).get(r[label]),  # the study's row colour (figures.row_colors)
                   label=f"{r[label]}{' (baseline)' if ref and r[label] != 'baseline' else ''}", **kw)
    if many:
        ax.scatter([], [], color="C0", label=f"{len(p)} configurations (outlined: on the front)")


def _axes_text(ax, split: str, names: tuple[str, str] | None, directions: tuple[str, str]) -> None:
    """A panel's title and axis labels: the two objectives `names` (up, across), else base and novel accuracy."""
    ax.set_title({"val": "validation (used for selection)", "test": "test (reported, never used for selection)"}[
        split], fontsize=9)
    if names is not None:
        ax.set_xlabel(f"{names[1]} ({directions[1]}, mean over seeds)")
        ax.set_ylabel(f"{names[0]} ({directions[0]}, mean over seeds)")
    else:
        ax.set_xlabel(f"{split} novel accuracy, last session (%)")
        ax.set_ylabel(f"{split} base accuracy, last session (%)")
    ax.grid(alpha=0.3)


def _cells_title(title: str, conditions: Sequence[str], cell_of: dict[Any, str], refs: set[str]) -> str:
    """The title of a figure of several cells: it says why no front is drawn."""
    varied = ", ".join(k for k in conditions if any(f"{k}=" in c for c in cell_of.values()))
    starred = ", its reference starred" if refs else ""
    return f"{title}\n(no Pareto front across {varied}: data conditions; each cell's rows joined{starred})"


def _cell_panel(ax, p: pd.DataFrame, refs: set[str], label: str, cell_of: dict[Any, str]) -> None:
    """One panel of rows in several cells: each cell's rows in one colour, joined, named by the cell; no front."""
    if p.empty:
        ax.text(0.5, 0.5, "no complete trial with an incremental session", ha="center", transform=ax.transAxes)
        return
    for k, (cell, g) in enumerate(p.groupby(p[label].map(cell_of), sort=False)):
        color = f"C{k % 10}"
        ax.plot(g["x"], g["y"], "-", color=color, lw=0.8, alpha=0.6)
        is_ref = g[label].isin(refs)
        ax.scatter(g.loc[~is_ref, "x"], g.loc[~is_ref, "y"], color=color, marker="o", s=40, label=cell)
        ax.scatter(g.loc[is_ref, "x"], g.loc[is_ref, "y"], color=color, marker="*", s=140)


def _legend(fig, axes) -> int:
    """One legend for both panels (the same rows), below them: inside a panel it would cover points; its number of
    lines."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(name, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(5, len(seen)), fontsize=7,
                   frameon=False)
    return math.ceil(len(seen) / 5)
