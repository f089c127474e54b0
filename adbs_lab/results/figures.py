"""Study figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.stats.intervals import mean_t

__all__ = ["alpha_sensitivity", "kshot_curves", "boundary_histograms", "host_curves", "embedding_figures",
           "row_order", "row_colors", "study_colors", "curve_with_band", "legend_names", "PAIRED", "BAND_NOTE",
           "BARS_NOTE"]


def row_order(*frames: pd.DataFrame, order: list[str] | None = None, label: str = "label") -> list[str]:
    """The rows of a study in the order its table lists them (adbs_lab/results/tables.py: paper_table): the study's own
    `order`, else by the values they swept; every label of `frames` (sessions, trials) once."""
    from adbs_lab.results import compare

    frames = tuple(f for f in frames if len(f) and label in f)
    labels = list(dict.fromkeys(x for f in frames for x in f[label]))
    if order:
        return [x for x in order if x in labels] + [x for x in labels if x not in order]
    return compare.sort_by_swept(pd.concat(frames, ignore_index=True), labels, label) if labels else []


PAIRED = "+ADBS"
"""The suffix of a row with ADBS beside its host's row without it (the hosts study: `<host>`, `<host>+ADBS`)."""
BAND_NOTE = ("bands: each row's own 95% CI over seeds (t-interval, the table's ±; none for one seed), unpaired;\n"
             "the table's verdicts are paired (each seed's difference), so bands may overlap where a verdict is resolved")
"""What a sessions plot's shaded band is (adbs_lab/stats/intervals.py: mean_t, the interval the tables print), and
why it is not the verdict: a verdict's interval is of the paired differences over the seeds two rows share
(adbs_lab/results/comparisons.py), whose seed-to-seed spread cancels, so it is narrower than the two
rows' own intervals suggest."""
BARS_NOTE = "bars: each alpha's own 95% CI, unpaired;\nthe table's verdicts are paired over the seeds"
"""The alpha figure's error bars, as BAND_NOTE says of the bands."""


def row_colors(labels: list[str]) -> dict[str, str]:
    """One colour per row label, assigned once in the table's row order (`row_order`) and used by every figure of a
    study (sessions plot, hosts curves, boundary histograms, trade-off) and by its rows in `report.py A B`'s figure.
    Rows `<host>` and `<host>+ADBS` share their host's hue, light without ADBS and dark with it (matplotlib's tab20
    pairs); other rows get matplotlib's cycle colours C0, C1, ... in order (the ten repeat after the tenth row)."""
    labels = list(dict.fromkeys(labels))
    if not any(str(lab).endswith(PAIRED) for lab in labels):
        return {lab: f"C{i % 10}" for i, lab in enumerate(labels)}
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    hosts = list(dict.fromkeys(str(lab).removesuffix(PAIRED) for lab in labels))
    return {lab: to_hex(colormaps["tab20"]((2 * hosts.index(str(lab).removesuffix(PAIRED))
                                            + (0 if str(lab).endswith(PAIRED) else 1)) % 20)) for lab in labels}


def study_colors(sessions: pd.DataFrame, trials: pd.DataFrame, order: list[str] | None = None,
                 label: str = "label") -> dict[str, str]:
    """The study's row colours (`row_colors` of its rows in the table's order): the one mapping its figures share."""
    return row_colors(row_order(sessions, trials, order=order, label=label))


def curve_with_band(ax, rows: pd.DataFrame, metric: str, *, color: str | None, style: str = "o-",
                    name: str = "") -> bool:
    """One row's mean per session over its seeds, and its 95% confidence band where it has two or more seeds (the
    table's ± interval, adbs_lab/stats/intervals.py: mean_t, unadjusted); True when a band was drawn."""
    cells = rows.groupby("session")[metric].apply(lambda v: mean_t(list(v))).sort_index()
    mean, half = [m for m, _ in cells], [h for _, h in cells]
    ax.plot(cells.index, mean, style, color=color, label=name)
    if not any(h > 0 for h in half):  # one seed: no interval, no band
        return False
    ax.fill_between(cells.index, [m - h for m, h in zip(mean, half)], [m + h for m, h in zip(mean, half)],
                    color=color, alpha=0.15, linewidth=0)
    return True


def legend_names(labels: list[str]) -> dict[str, str]:
    """The name of each row in a legend: its label, or `#n` where the table numbers its rows (labels longer than
    tables.LABEL_WIDTH: the table's legend names them), so a figure and its table read the same."""
    from adbs_lab.results.tables import LABEL_WIDTH

    if max((len(str(x)) for x in labels), default=0) <= LABEL_WIDTH:
        return {lab: str(lab) for lab in labels}
    return {lab: f"#{i}" for i, lab in enumerate(labels, 1)}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def alpha_sensitivity(trials: pd.DataFrame, path: Path) -> Path:
    """Average accuracy vs alpha (the paper supplement's figure): val and test, mean over seeds with the 95%
    confidence interval as error bars (t-distribution, as in the tables; none where an alpha has one seed)."""
    plt = _plt()
    t = trials[trials["state"] == K.COMPLETE]
    fig, ax = plt.subplots(figsize=(5, 4.3))
    if len(t):
        seeds = t.groupby("alpha").size()
        n = f"n = {seeds.min()}" if seeds.min() == seeds.max() else f"n = {seeds.min()}-{seeds.max()}"
        for col, style, name in (("test_avg_acc", "o-", "test avg acc"), ("val_avg_acc", "s--", "val avg acc (objective)")):
            if col not in t:  # a store from before the metric existed
                continue
            g = t.groupby("alpha")[col].apply(lambda v: mean_t(list(v))).sort_index()
            mean, half = [m for m, _ in g], [h for _, h in g]
            label = f"{name}, mean ± 95% CI ({n} seeds)" if seeds.max() > 1 else name
            ax.errorbar(g.index, mean, yerr=half if seeds.max() > 1 else None, fmt=style, capsize=3, label=label)
        ax.set_xscale("log")
        if seeds.max() > 1:  # a grid: label its points (a TPE search's many sampled alphas keep the log ticks)
            ax.set_xticks(sorted(t["alpha"].unique()))
            ax.set_xticklabels([f"{a:g}" for a in sorted(t["alpha"].unique())], fontsize=7)
            ax.minorticks_off()
    ax.margins(y=0.08)  # the top and bottom bars' caps inside the axes, not on their edge
    ax.set_xlabel("alpha (IC loss weight)")
    ax.set_ylabel("average accuracy (%)")
    ax.set_title("ADBS: sensitivity to alpha" + (f"\n({BARS_NOTE})" if len(t) and seeds.max() > 1 else ""),
                 fontsize=10 if not len(t) or seeds.max() == 1 else 8)
    if ax.get_legend_handles_labels()[0]:  # below the axes: it covers no bar
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def kshot_curves(sessions: pd.DataFrame, folder: Path) -> list[Path]:
    """One figure per ways value: test accuracy per session, one curve per shot count (and variant)."""
    plt = _plt()
    s = sessions[sessions["state"] == K.COMPLETE]
    out = []
    variants = list(dict.fromkeys(s["variant"])) if "variant" in s else []
    for ways, sw in s.groupby("ways"):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for i, (shots, ss) in enumerate(sw.groupby("shots")):
            # each shot count one colour; with several variants (kshot_grid's baseline beside ADBS) one line style each
            for variant, sv in (ss.groupby("variant", sort=False) if len(variants) > 1 else [(None, ss)]):
                curve = sv.groupby("session")["test_acc"].mean()
                style = "o-" if variant in (None, "adb+ic") else "s--"
                ax.plot(curve.index, curve.values, style, color=f"C{i % 10}",
                        label=f"{shots}-shot" + (f" {variant}" if variant else ""))
        ax.set_xlabel("session")
        ax.set_ylabel("test accuracy (%)")
        what = ", ".join(variants) if len(variants) > 1 else (variants[0] if variants else "ADBS")
        ax.set_title(f"{ways}-way ({what})")
        ax.legend()
        fig.tight_layout()
        path = Path(folder) / f"kshot_{int(ways)}way.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        out.append(path)
    return out


def boundary_histograms(trials: pd.DataFrame, path: Path, *, order: list[str] | None = None,
                        column: str = "base_boundaries", colors: dict[str, str] | None = None, note: str = "") -> Path:
    """One panel per row: histogram of the base boundaries m as they enter the sessions, pooled over seeds; `note`:
    a line under the title (which rows, where `trials` holds some of the study's: run_files.curve_rows).

    `column` holds each trial's m as a JSON list (trials.parquet; MLflow tag adbs.base_boundaries).
    The dashed line is m = 0: boundaries left of it are the ones that crossed zero.
    """
    import json
    import math

    plt = _plt()
    t = trials[(trials["state"] == K.COMPLETE) & trials[column].notna()] if column in trials else trials.iloc[0:0]
    labels = list(dict.fromkeys(t["label"])) if len(t) else []
    if order:
        labels = [x for x in order if x in labels] + [x for x in labels if x not in order]
    values = {lab: [m for raw in t[t["label"] == lab][column] for m in json.loads(raw)] for lab in labels}
    flat = [m for v in values.values() for m in v]
    lo, hi = (min(flat + [0.0]), max(flat + [1.0])) if flat else (-1.0, 2.0)
    bins = [lo + (hi - lo) * i / 40 for i in range(41)]
    cols = 2
    rows = max(1, math.ceil(len(labels) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(8, 1.9 * rows + 0.6), squeeze=False, sharex=True)
    for ax, lab in zip(axes.flat, labels):
        m = values[lab]
        ax.hist(m, bins=bins, color=(colors or {}).get(lab, "C0"))
        ax.axvline(0.0, color="k", ls="--", lw=0.8)
        neg = sum(v < 0 for v in m)
        ax.set_title(f"{lab}: {neg} of {len(m)} m < 0", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(labels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("m after the base session", fontsize=8)
    fig.suptitle("base boundaries per row (pooled over seeds)" + (f"\n({note})" if note else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def host_curves(sessions: pd.DataFrame, path: Path, *, order: list[str] | None = None,
                metric: str = "test_acc", colors: dict[str, str] | None = None) -> Path:
    """The hosts study's figure: one curve per row (mean over seeds) with its 95% confidence band, dashed without
    ADBS and solid with it (rows `<host>` and `<host>+ADBS`), each row in the study's colour (`row_colors`: a host's
    two rows share its hue), the legend outside the axes so it covers no curve."""
    plt = _plt()
    s = sessions[sessions["state"] == K.COMPLETE] if len(sessions) else sessions
    labels = row_order(s, order=order)
    colors = colors or row_colors(labels)
    fig, ax = plt.subplots(figsize=(6 + (2.2 if labels else 0), 4))
    banded = [curve_with_band(ax, s[s["label"] == lab], metric, color=colors.get(lab), name=lab,
                              style="o-" if lab.endswith(PAIRED) else "s--") for lab in labels]
    if len(s):
        ax.set_xticks(sorted(int(x) for x in s["session"].unique()))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_xlabel("session (0 = base)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.set_title("hosts: each method without (dashed) and with ADBS (solid)"
                 + (f"\n({BAND_NOTE})" if any(banded) else ""), fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _embedding_rows(trials: pd.DataFrame, order: list[str] | None) -> list[tuple[str, dict]]:
    """(row label with the seed shown, decoded embedding sample) for each row, in the table's row order: its complete
    trial with the lowest seed, so every panel shows one trial's embedding (t-SNE does not average over seeds), and
    its title says which (its D_cs is that trial's, not the table's mean over seeds). The sample's key TABLE_D_CS holds
    the row's D_cs as the table gives it: (mean over its complete seeds, their number), or None."""
    from adbs_lab.records.metrics_keys import EMBEDDINGS, decode_embeddings

    done = trials[trials["state"] == K.COMPLETE] if "state" in trials else trials
    t = done[done[EMBEDDINGS].notna()] if EMBEDDINGS in done else done.iloc[0:0]
    if "seed" in t:
        t = t.sort_values("seed", kind="stable")
    labels = row_order(t, order=order) if len(t) else []

    def shown(lab: str) -> str:
        seed = t[t["label"] == lab]["seed"].iloc[0] if "seed" in t else None
        return f"{lab} (seed {int(seed)})" if seed is not None and K.finite(seed) else str(lab)

    def table_d_cs(lab: str) -> tuple[float, int] | None:
        vals = [float(v) for v in done[done["label"] == lab]["d_cs"] if K.finite(v)] if "d_cs" in done else []
        return (sum(vals) / len(vals), len(vals)) if vals else None

    return [(shown(lab), {**decode_embeddings(t[t["label"] == lab][EMBEDDINGS].iloc[0]), TABLE_D_CS: table_d_cs(lab)})
            for lab in labels]


TABLE_D_CS = "table_d_cs"
"""The key of `_embedding_rows`' samples that holds the row's D_cs as the table gives it (mean over seeds, n)."""


def embedding_figures(trials: pd.DataFrame, folder: Path, *, order: list[str] | None = None) -> list[Path]:
    """The paper's two feature figures, one panel per row (e.g. the fixed boundary beside ADBS), from the
    trials' embedding samples (adbs.metrics.embedding_sample, kept with keep_embeddings=true):

    - `tsne.png`: t-SNE of the last session's test features of 6 base (circles) and 4 novel (triangles)
      classes, the same classes and colours in every panel;
    - `prototype_similarity.png`: cosine similarity of every pair of class prototypes, base and novel
      classes split by lines, with the D_cs (paper Table 4) these similarities give.
    """
    rows = _embedding_rows(trials, order)
    if not rows:
        return []
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [_tsne_figure(rows, folder), _similarity_figure(rows, folder)]


def _tsne_figure(rows: list, folder: Path) -> Path:
    import numpy as np
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    plt = _plt()
    n = len(rows)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.2), squeeze=False)
    classes = list(dict.fromkeys(c for _, e in rows for c in e["classes"]))
    colors = {c: plt.get_cmap("tab10")(i % 10) for i, c in enumerate(classes)}
    for ax, (lab, e) in zip(axes.flat, rows):
        f, y = e["features"], np.asarray(e["labels"])
        if len(f) > 3:
            # perplexity below the sample size (sklearn requires it); PCA start and a fixed seed: reproducible.
            # One OpenMP thread: ~2.5 CPU s a panel, where two threads beside busy trials spin for ~20 s.
            with threadpool_limits(1):
                xy = TSNE(n_components=2, perplexity=min(30.0, (len(f) - 1) / 3), init="pca",
                          random_state=0).fit_transform(f.astype(np.float64))
        else:
            xy = np.zeros((len(f), 2))
        for c in e["classes"]:
            k = y == c
            novel = c >= e["n_base"]
            ax.scatter(xy[k, 0], xy[k, 1], s=9, marker="^" if novel else "o", color=colors[c],
                       label=f"{'novel' if novel else 'base'} {c}", alpha=0.8, linewidths=0)
        ax.set_title(lab, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    axes.flat[0].legend(fontsize=6, ncol=2, loc="best", markerscale=1.5)
    fig.suptitle("t-SNE of last-session test features (circles: base classes, triangles: novel); one trial per "
                 "row, its seed in the panel's title\n(the table's values are means over seeds; a t-SNE is of one "
                 "trial and is not averaged)", fontsize=10)
    fig.tight_layout()
    tsne = folder / "tsne.png"
    fig.savefig(tsne, dpi=110)
    plt.close(fig)
    return tsne


def _similarity_figure(rows: list, folder: Path) -> Path:
    plt = _plt()
    n = len(rows)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n + 1.0, 4.6), squeeze=False, layout="constrained")
    for ax, (lab, e) in zip(axes.flat, rows):
        sim, nb = e["similarity"], e["n_base"]
        im = ax.imshow(sim, vmin=-1.0, vmax=1.0, cmap="coolwarm", interpolation="nearest")
        for pos in (nb - 0.5,):  # base classes above/left of the lines, novel classes below/right
            ax.axhline(pos, color="k", lw=0.8)
            ax.axvline(pos, color="k", lw=0.8)
        d_cs = float((1.0 - sim).mean())
        table = e.get(TABLE_D_CS)
        ax.set_title(f"{lab}: D_cs {d_cs:.3f}" + (f"\ntable's D_cs: {table[0]:.3f}, mean of {table[1]} seed(s)"
                                                    if table else ""), fontsize=9)
        ax.set_xlabel(f"class (0-{nb - 1} base, {nb}-{e['n_seen'] - 1} novel)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=list(axes.flat), shrink=0.8, label="cosine similarity")
    fig.suptitle("class-prototype cosine similarity after the last session: one trial per row (its seed in the "
                 "panel's title)\nthe table's D_cs is the mean over the row's seeds, given under each trial's own",
                 fontsize=10)
    heat = folder / "prototype_similarity.png"
    fig.savefig(heat, dpi=110)
    plt.close(fig)
    return heat
