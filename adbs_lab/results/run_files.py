"""Artifact builders: pure functions from plain data (dicts, lists, DataFrames) to files.

Per trial (logged on the trial's MLflow run by the tracker): the session-accuracy curve
(`session_curve.png`: val and test, all / base / novel classes), the boundary m of every class
after every session (`boundaries.csv`), the resolved config (`config.json`).
Per study (logged on the parent run, and rebuilt from the store by studies/report.py): the
study's figure(s), and `report.md` with the paper-style table, the best configuration and
what pruning saved.
"""

from __future__ import annotations

import csv
import errno
import json
import math
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.metrics_keys import EMBEDDINGS

__all__ = ["CURVE_PNG", "BOUNDARIES_CSV", "CONFIG_JSON", "REPORT_MD", "EMBEDDINGS_JSON", "session_curve",
           "boundaries_table", "write_trial_artifacts", "session_curves", "CURVE_ROWS", "curve_rows", "guarded",
           "study_figures", "pruning_savings", "report_markdown", "write_study_report"]

CURVE_PNG, BOUNDARIES_CSV, CONFIG_JSON, REPORT_MD = "session_curve.png", "boundaries.csv", "config.json", "report.md"
EMBEDDINGS_JSON = "embeddings.json"
_T = TypeVar("_T")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -- per trial --------------------------------------------------------------------------------
def session_curve(sessions: list[dict[str, float]], path: Path, title: str = "") -> Path:
    """Accuracy per session: test (solid) and val (dashed); all, base and novel classes."""
    plt = _plt()
    rows = sorted(sessions, key=lambda r: r["session"])
    x = [int(r["session"]) for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    colors = {"acc": "C0", "base_acc": "C1", "novel_acc": "C2"}
    names = {"acc": "all", "base_acc": "base", "novel_acc": "novel"}
    for split, style in (("test", "o-"), ("val", "s--")):
        for part, color in colors.items():
            y = [r.get(f"{split}_{part}", math.nan) for r in rows]
            if any(K.finite(v) for v in y):  # novel accuracy is undefined (NaN) in session 0
                ax.plot(x, y, style, color=color, label=f"{split} {names[part]}", alpha=1.0 if split == "test" else 0.6)
    ax.set_xticks(x)
    ax.set_xlabel("session (0 = base)")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(title or "accuracy per session")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    # fixed margins for the fixed size and labels: tight_layout measured them again for every trial, a third of
    # the 0.15 CPU s this picture costs the driver per trial (adbs_lab/driver/tracker.py draws it at its end)
    fig.subplots_adjust(left=0.12, right=0.97, top=0.92, bottom=0.13)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def boundaries_table(boundaries: list[list[float]]) -> pd.DataFrame:
    """One row per class (in the order classes were seen), one column `m_s<t>` per session.

    `boundaries[t]` lists m for every class seen after session t (TrialResult.boundaries); a class
    introduced in session t has no value before it.
    """
    if not boundaries:
        return pd.DataFrame(columns=["class", "session_added", "kind"])
    n_base = len(boundaries[0])
    n = len(boundaries[-1])
    added = [0] * n
    for t in range(1, len(boundaries)):
        for c in range(len(boundaries[t - 1]), len(boundaries[t])):
            added[c] = t
    out = pd.DataFrame({"class": range(n), "session_added": added,
                        "kind": ["base" if c < n_base else "novel" for c in range(n)]})
    for t, m in enumerate(boundaries):
        out[f"m_s{t}"] = list(m) + [math.nan] * (n - len(m))
    return out


def write_trial_artifacts(folder: Path, *, sessions: list[dict[str, float]] | None = None,
                          boundaries: list[list[float]] | None = None, config: dict[str, Any] | None = None,
                          title: str = "", embeddings: str | None = None) -> list[Path]:
    """The trial's files that have data (a pruned trial has no sessions): curve, boundaries, config, and the
    embedding sample (encode_embeddings) when the trial kept one."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    if config is not None:
        p = folder / CONFIG_JSON
        p.write_text(json.dumps(config, indent=1, sort_keys=True, default=str) + "\n")
        out.append(p)
    if sessions:
        out.append(session_curve(sessions, folder / CURVE_PNG, title))
    if boundaries:
        p = folder / BOUNDARIES_CSV
        boundaries_table(boundaries).to_csv(p, index=False, float_format="%.6g", quoting=csv.QUOTE_MINIMAL)
        out.append(p)
    if embeddings:
        p = folder / EMBEDDINGS_JSON
        p.write_text(embeddings)
        out.append(p)
    return out


# -- per study --------------------------------------------------------------------------------
def session_curves(sessions: pd.DataFrame, path: Path, title: str, label: str = "label",
                   metric: str = "test_acc", order: list[str] | None = None,
                   colors: dict[str, str] | None = None, styles: dict[str, str] | None = None,
                   note: str = "", rows: list[str] | None = None) -> Path:
    """One curve per configuration (mean over seeds) with its 95% confidence band (the tables' interval,
    adbs_lab/stats/intervals.py: mean_t; none for one seed), in the table's row order and the study's row colours
    (figures.row_colors);
    `styles`: a line style per row (default solid with dots); `note`: a line under the title; `rows`: draw only these
    rows (`curve_rows`), each named as in a legend of every row (figures.legend_names: `#n` is its table number).
    The legend lies outside the axes, so it covers no curve."""
    from adbs_lab.results import figures

    plt = _plt()
    s = sessions[sessions["state"] == K.COMPLETE] if len(sessions) else sessions
    every = figures.row_order(s, order=order, label=label)
    kept = set(every if rows is None else rows)
    labels = [lab for lab in every if lab in kept]
    colors = colors or figures.row_colors(every)
    names = figures.legend_names(every)
    if rows is not None:
        s = s[s[label].isin(labels)]  # one pass over the frame, not one per row of the table
    groups = dict(tuple(s.groupby(label, sort=False))) if len(s) else {}
    note = textwrap.fill(note, 90)  # a capped figure's line (curve_rows) in two, on the figure's width
    fig, ax = plt.subplots(figsize=(5.5 + (2.4 if labels else 0), 3.9 + 0.3 * (note.count("\n") + 1 if note else 0)))
    banded = [figures.curve_with_band(ax, groups.get(lab, s.iloc[:0]), metric, color=colors.get(lab), name=names[lab],
                                      style=(styles or {}).get(lab, "o-")) for lab in labels]
    if len(s):
        ax.set_xticks(sorted(int(x) for x in s["session"].unique()))
    ax.set_xlabel("session (0 = base)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    under = [line for line in (note, figures.BAND_NOTE if any(banded) else "") if line]
    ax.set_title("\n".join([title, *(f"({line})" for line in under)]), fontsize=10 if not under else 9)
    if labels:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


CURVE_ROWS = 12
"""The most rows a study's session-curve figure draws (`curve_rows`): a search of hundreds of configurations drew a
line, a band and a legend entry for each, unreadable (and ~10 s at 1,000 rows); the table lists every row. Twelve,
as the trade-off figure shows at most 12 rows by name (tradeoff.py: `many`)."""
_CURVE_STYLES = tuple(f"{m}{ls}" for m, ls in zip("os^Dv<>pPXh*", ("-", "--", ":", "-.") * 3))
"""Line styles of the rows a capped figure draws that share a colour with a row drawn before them (the study's
colours repeat after ten rows: figures.row_colors), so no two of its CURVE_ROWS curves look alike."""


def curve_rows(trials: pd.DataFrame, labels: list[str], *, baseline: str | dict[str, str] | None = None,
               objectives: tuple | None = None, cap: int = CURVE_ROWS, label: str = "label") -> tuple[list[str], str]:
    """(the rows the study's session-curve figure draws, in the table's order `labels`; the line under its title
    that says which, "" when it draws them all). A study of at most `cap` rows (every study of the paper's): all of
    them. Else the baseline row(s) present and the best other rows by the study's own ranking (tables.best_config:
    the mean over seeds of the first objective, a validation metric, in its direction, among configurations every
    seed of which completed; the rest after them, in the table's order), `cap` rows in all."""
    from adbs_lab.records.objectives import DEFAULT
    from adbs_lab.results import seed_counts, tradeoff

    if len(labels) <= cap:
        return list(labels), ""
    refs = [lab for lab in labels if lab in tradeoff.baselines(baseline)][:cap]
    first = (objectives or DEFAULT)[0]
    t = seed_counts.ranked(trials, label) if len(trials) and "state" in trials else trials
    means = (t.groupby(label, sort=False)[first.name].mean(skipna=False).dropna()
             if len(t) and {label, first.name} <= set(t.columns) else pd.Series(dtype=float))
    sign = -1.0 if first.direction == "max" else 1.0
    ranked = sorted((lab for lab in labels if lab in means.index and lab not in refs), key=lambda lab: sign * means[lab])
    best = ranked[:cap - len(refs)]
    # rows without a value (a seed missing, or no such column in an old store): the table's first, after the ranked
    rest = [lab for lab in labels if lab not in refs and lab not in means.index][:cap - len(refs) - len(best)]
    keep = set(refs) | set(best) | set(rest)
    said = (f"the best {len(best)} by the study's objective {first.text}" + (f", then {len(rest)} without a value of it"
                                                                              if rest else "") if best else
            f"the table's first {len(rest)} (no row has a value of the study's objective {first.text})")
    said += f" and the baseline{'s' * (len(refs) > 1)}" if refs else ""
    if not best and not rest:  # the reference rows alone fill the cap: no other row was ranked or taken
        said = f"the baseline{'s' * (len(refs) > 1)}"
    return [lab for lab in labels if lab in keep], f"{said}; {len(keep)} of {len(labels)} rows, all in table.txt"


def _capped_styles(rows: list[str], colors: dict[str, str]) -> dict[str, str]:
    """A line style per drawn row: the default for the first row of each colour, _CURVE_STYLES for those after it."""
    seen: dict[str, int] = {}
    out = {}
    for lab in rows:
        n = seen[colors.get(lab, "")] = seen.get(colors.get(lab, ""), -1) + 1
        out[lab] = _CURVE_STYLES[n % len(_CURVE_STYLES)]
    return out


def guarded(what: str, draw: Callable[[], _T], not_drawn: list[str]) -> _T | None:
    """`draw()`, or None and one line in `not_drawn` (printed too) when it raises: an analysis drawn after the
    trials (a figure, the importance ranking, the report) never sinks a study whose trials ran, nor a report
    rebuilt from the store; the tables are written before any analysis starts (adbs_lab/driver/summarise.py).
    A full disk is not the analysis's failure: it propagates, to the study's "no space left" message and exit 1."""
    try:
        return draw()
    except Exception as e:  # noqa: BLE001 - whatever an analysis library raises; the line says what it was
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        why = (str(e).strip().splitlines() or [""])[0][:300]
        line = f"{what}: not drawn ({type(e).__name__}{': ' + why if why else ''})"
        not_drawn.append(line)
        print(f"warning: {line}", flush=True)
        return None


def study_figures(study: str, sessions: pd.DataFrame, trials: pd.DataFrame, folder: Path,
                  order: list[str] | None = None, baseline: str | dict[str, str] | None = None,
                  objectives: tuple | None = None, not_drawn: list[str] | None = None,
                  conditions: Sequence[str] = ()) -> list[Path]:
    """The study's figure(s), drawn by the study itself and by studies/report.py from the store alike:
    alpha sensitivity, k-shot curves, the boundary study's histograms, else session curves per row (of a study of
    more than CURVE_ROWS rows, the best of them: `curve_rows`, as the boundary study's histograms); and for
    the ablation the t-SNE and prototype-similarity figures when its trials kept embedding samples
    (Config.keep_embeddings). Each is drawn `guarded`: one that fails is a line in `not_drawn`, not an error."""
    from adbs_lab.results import figures

    not_drawn = [] if not_drawn is None else not_drawn
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    colors = figures.study_colors(sessions, trials, order=order)  # the same in every figure, and in report.py A B
    if baseline is None:  # the study's own (studies/report.py passes the one its parent run recorded)
        baseline = _space_baseline(study)
    done = sessions[sessions["state"] == K.COMPLETE] if len(sessions) else sessions
    rows, note = curve_rows(trials, figures.row_order(done, order=order), baseline=baseline, objectives=objectives)
    curves: dict[str, Any] = {"rows": rows, "note": note, "styles": _capped_styles(rows, colors)} if note else {}
    draw: dict[str, Callable[[], list[Path]]]
    if study == "alpha_sweep":
        draw = {"alpha_sensitivity.png": lambda: [figures.alpha_sensitivity(trials, folder / "alpha_sensitivity.png")]}
    elif study == "kshot_grid":
        draw = {"k-shot curves": lambda: figures.kshot_curves(sessions, folder)}
    elif study == "hosts":
        draw = {"hosts_sessions.png": lambda: [figures.host_curves(sessions, folder / "hosts_sessions.png",
                                                                   order=order, colors=colors)]}
    elif study == "boundary":
        shown = trials[trials["label"].isin(rows)] if note and "label" in trials else trials
        draw = {"boundary_sessions.png": lambda: [session_curves(sessions, folder / "boundary_sessions.png",
                                                                 "boundary: test accuracy per session",
                                                                 order=order, colors=colors, **curves)],
                "boundary_histograms.png": lambda: [figures.boundary_histograms(
                    shown, folder / "boundary_histograms.png", order=order, colors=colors, note=note)]}
    else:
        draw = {f"{study}_sessions.png": lambda: [session_curves(sessions, folder / f"{study}_sessions.png",
                                                                 f"{study}: test accuracy per session",
                                                                 order=order, colors=colors, **curves)]}
    if study == "ablation" and EMBEDDINGS in trials:
        # the paper's t-SNE and similarity figures compare the fixed boundary with ADBS: the ablation's rows
        draw.update(_embedding_draw(trials, folder, order, not_drawn))
    out = [f for what, d in draw.items() for f in guarded(what, d, not_drawn) or []]
    return out + beyond_the_table(study, sessions, trials, folder, baseline, objectives, not_drawn, colors=colors,
                                  conditions=conditions)


def _embedding_draw(trials: pd.DataFrame, folder: Path, order: list[str] | None,
                    not_drawn: list[str]) -> dict[str, Callable[[], list[Path]]]:
    """The t-SNE and similarity figures of the trials that kept an embedding sample; a complete trial that kept
    one (keep_embeddings) whose sample is gone (an artifact deleted from the store) is said in `not_drawn`."""
    from adbs_lab.results import figures

    done = trials[trials["state"] == K.COMPLETE] if "state" in trials else trials
    kept = done[done["keep_embeddings"].astype(str).str.lower() == "true"] if "keep_embeddings" in done else done
    gone = int(kept[EMBEDDINGS].isna().sum()) if len(kept) else 0
    if gone:
        not_drawn.append(f"t-SNE and prototype-similarity figures: {gone} of {len(kept)} trials that kept an "
                         f"embedding sample have no {EMBEDDINGS_JSON} any more (its artifact is gone from the store)"
                         + ("; drawn from the others" if gone < len(kept) else "; not drawn"))
    if not trials[EMBEDDINGS].notna().any():
        return {}
    return {"t-SNE and prototype-similarity figures": lambda: figures.embedding_figures(trials, folder, order=order)}


def beyond_the_table(study: str, sessions: pd.DataFrame, trials: pd.DataFrame, folder: Path,
                     baseline: str | dict[str, str] | None = None, objectives: tuple | None = None,
                     not_drawn: list[str] | None = None, colors: dict[str, str] | None = None,
                     conditions: Sequence[str] = ()) -> list[Path]:
    """Every study's base/novel trade-off figure (adbs_lab/results/tradeoff.py; a study of two --objectives: those two;
    no front across `conditions`, the study's data conditions, nor across importance.CONDITIONS),
    and for a study that searched two or more parameters the importance analysis (adbs_lab/results/importance.py:
    importance.md, which write_study_report puts into report.md, and its figures); each `guarded`."""
    from adbs_lab.results import importance
    from adbs_lab.results import tradeoff

    not_drawn = [] if not_drawn is None else not_drawn
    if baseline is None:  # the study's own (studies/report.py passes the one its parent run recorded)
        baseline = _space_baseline(study)
    if objectives is not None and len(objectives) == 2:
        title = f"{study}: {objectives[0].text} vs {objectives[1].text}, the search's objectives (mean over seeds)"
    else:
        title = f"{study}: base vs novel accuracy, last session (mean over seeds)"
    trade = guarded(tradeoff.TRADEOFF_PNG, lambda: tradeoff.figure(
        sessions, Path(folder) / tradeoff.TRADEOFF_PNG, baseline=baseline, title=title, trials=trials,
        objectives=objectives, colors=colors, order=list(colors or {}),
        conditions=tuple(dict.fromkeys((*conditions, *importance.CONDITIONS)))), not_drawn)
    (Path(folder) / importance.IMPORTANCE_MD).unlink(missing_ok=True)  # never a stale one from an earlier draw
    ranked = (guarded("importance analysis (importance.md and its figures)",
                      lambda: importance.write(trials, folder, objectives), not_drawn) or []) if len(trials) else []
    return ([trade] if trade else []) + ranked


def _space_baseline(study: str) -> str | dict[str, str] | None:
    import importlib

    try:
        return getattr(importlib.import_module(f"search_spaces.{study}"), "BASELINE", None)
    except ImportError:
        return None


def pruning_savings(trials: pd.DataFrame) -> dict[str, Any]:
    """How many trials were pruned and the base epochs (and roughly the seconds) they did not run; of the base epochs
    run, those reused: replayed from a base session the cache held, not trained (trials.parquet's base_epochs_reused;
    a table written before that column counts a complete trial's epochs reused by its summary's base_reused)."""
    if trials.empty or "state" not in trials:
        return {"trials": 0, "pruned": 0, "base_epochs_planned": 0, "base_epochs_run": 0, "base_epochs_reused": 0,
                "base_epochs_saved": 0, "seconds_saved_est": None}
    planned = pd.to_numeric(trials["base_epochs"], errors="coerce").fillna(0)
    run = pd.to_numeric(trials.get("base_epochs_run", planned), errors="coerce").fillna(0)
    if "base_epochs_reused" in trials:
        reused = pd.to_numeric(trials["base_epochs_reused"], errors="coerce").fillna(0)
    elif "base_reused" in trials:
        reused = run.where(pd.to_numeric(trials["base_reused"], errors="coerce").fillna(0) == 1, 0)
    else:
        reused = run * 0
    pruned = trials["state"] == K.PRUNED
    saved = int((planned - run)[pruned].clip(lower=0).sum())
    seconds = None
    done = trials[trials["state"] == K.COMPLETE]
    if saved and "wall_time_s" in done and len(done):
        per_epoch = (pd.to_numeric(done["wall_time_s"], errors="coerce")
                     / pd.to_numeric(done["base_epochs"], errors="coerce").clip(lower=1)).dropna()
        seconds = float(per_epoch.mean() * saved) if len(per_epoch) else None
    return {"trials": int(len(trials)), "pruned": int(pruned.sum()),
            "failed": int((trials["state"] == K.FAILED).sum()),
            "diverged": int((trials["state"] == K.DIVERGED).sum()),
            "base_epochs_planned": int(planned.sum()), "base_epochs_run": int(run.sum()),
            "base_epochs_reused": int(reused.clip(upper=run).sum()), "base_epochs_saved": saved,
            "seconds_saved_est": seconds}


LEADS_WITH_IMPORTANCE = ("knobs",)
"""Studies whose report opens with the importance ranking and the trade-off figure (studies/knobs.py)."""


def report_markdown(*, study: str, table_md: str, best: dict | None, savings: dict[str, Any],
                    figures: Iterable[str | Path] = (), meta: dict[str, str] | None = None,
                    paper_md: str | None = None, importance_md: str | None = None,
                    pareto: dict[str, Any] | None = None, not_ranked: list[dict[str, Any]] | None = None,
                    no_best: str | None = None, not_drawn: Iterable[str] = (),
                    notes: list[str] | tuple[str, ...] = (), across_md: str | None = None) -> str:
    """The study's Markdown report (`report.md` on the parent run); `pareto`: pareto.json of a study of two or more
    --objectives (adbs_lab/records/objectives.py), listed under the best configuration; `not_ranked`: the configurations
    missing a seed (adbs_lab/results/seed_counts.py); `no_best`: why there is no best configuration, when it is not that
    nothing completed; `not_drawn`: one line per analysis that failed or could not be drawn (`guarded`); `notes`
    (adbs_lab/results/notes.py: a smoke run, the settings changed from the study's defaults) first, under the title;
    `across_md`: the comparisons across tasks of a report (its studies, hosts, k-shot cells: adbs_lab/results/across_tasks.py)."""
    lines = [f"# {study}", ""] + [line for n in notes for line in (f"**{n}**", "")]
    for k, v in (meta or {}).items():
        lines.append(f"- {k}: {v}")
    if meta:
        lines.append("")
    names = [Path(f).name for f in figures]
    beyond = (["## Which parameters matter", "", importance_md, ""] if importance_md else [])
    trade = (["## Base vs novel accuracy", "", "The last session's base against novel accuracy per configuration "
              "(mean over seeds), validation beside test; the Pareto front is the line, the baseline a star.", "",
              "![tradeoff.png](tradeoff.png)", ""] if "tradeoff.png" in names else [])
    lead = study in LEADS_WITH_IMPORTANCE
    if lead:
        lines += beyond + trade
    lines += ["## Test accuracy (%) per session", "",
              "Mean ± 95% CI over seeds; selection and pruning used validation accuracy only.", "",
              table_md, ""]
    if paper_md:
        lines += ["## Paper's numbers beside ours", "", paper_md, ""]
    if across_md:
        lines += ["## Across tasks", "", "```text", across_md, "```", ""]
    lines += _best_lines(best, not_ranked, no_best) + _pareto_lines(pareto) + _pruning_lines(savings)
    if not lead:
        lines += beyond + trade
    figs = [f for f in names if not (trade and f == "tradeoff.png")]  # each figure once: the trade-off has its section
    if figs:
        lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figs] + [""]
    missing = list(not_drawn)
    if missing:
        lines += ["## Not drawn", "", "The tables above are complete; these analyses were not drawn:", ""]
        lines += [f"- {m}" for m in missing] + [""]
    return "\n".join(lines)


def _best_lines(best: dict | None, not_ranked: list[dict[str, Any]] | None, no_best: str | None) -> list[str]:
    """report.md's best configuration (per group of comparable rows, where there are several), or why there is none,
    and the configurations not ranked."""
    from adbs_lab.results import seed_counts

    lines = ["## Best configuration", ""]
    if best and best.get("config_label") is None and best.get("why"):  # a grid of data conditions (kshot_grid)
        return lines + [f"None: {best['why']}.", ""]
    if best and best.get("named") is False:  # a study without verdicts (adbs_lab/results/best.py)
        lines += [f"None named: {best['why']}. The highest mean, for reference only:", ""]
    elif best and best.get("resolved_by_verdicts") is False:
        tied = ", ".join(f"`{r}`" for r in best.get("indistinguishable_from") or []) or "the rows it is compared with"
        lines += [f"None resolved at this budget: the verdicts cannot tell `{best['config_label']}` (the best mean) "
                  f"from {tied}. Its configuration, for reference:", ""]
    if best:
        lines += [f"`{best['config_label']}`: {best['objective']} = {best['mean_over_seeds']:.2f} "
                  f"(mean over {best['seeds']} seed(s); {_seeds_said(best)}"
                  f"{'; post-selection: the race chose it on these seeds' if best.get('race') else ''})", "",
                  "```json",
                  json.dumps(best["config"], indent=1, sort_keys=True, default=str), "```", ""]
        if best.get("per_group"):  # rows of different ways/sessions average over different sessions
            within = ", ".join(f"{k} {v}" for k, v in best["compared_within"].items())
            lines += [f"Chosen within the rows of {within}; the best of each group of rows that ran the same ways "
                      "and sessions:", ""]
            lines += [f"- {', '.join(f'{k} {g[k]}' for k in best['compared_within'])}: `{g['config_label']}` "
                      f"{g['mean_over_seeds']:.2f} ({g['seeds']} seed(s))" for g in best["per_group"]] + [""]
    else:
        lines += [no_best or ("(no configuration completed every seed: none is ranked)" if not_ranked
                              else "(no completed trials)"), ""]
    if not_ranked:  # shown from their completed seeds in the table, never ranked (adbs_lab/results/seed_counts.py)
        head = seed_counts.not_ranked_lines(not_ranked)[0]
        lines += [head[0].upper() + head[1:] + ":", ""] + [f"- `{r['config_label']}`: {r['seeds']}"
                                                           for r in not_ranked] + [""]
    return lines


def _pareto_lines(pareto: dict[str, Any] | None) -> list[str]:
    """report.md's Pareto front of a study of several --objectives (none for one objective)."""
    if pareto is None:
        return []
    from adbs_lab.results.pareto import front_lines

    head, *points = front_lines({**pareto, "not_ranked": []})  # listed under the best configuration
    lines = ["## Pareto front", "", head + ("; best_config.json is its first point." if points else "."), ""]
    return lines + (["```", *points, "```", ""] if points else [])


def _pruning_lines(s: dict[str, Any]) -> list[str]:
    """report.md's pruning section: what the trials ended as, the base epochs trained and those reused from the
    base-session cache (a reused base session replays its epochs in a moment: counting them as run overstated the
    work done), and the base epochs pruning saved."""
    saved = (f"pruning saved {s['base_epochs_saved']} base epochs"
             + (f" (≈ {s['seconds_saved_est']:.0f} s of trial time at the complete trials' pace)"
                if s.get("seconds_saved_est") else "") + " and every incremental session of the pruned trials."
             if s["pruned"] else "no trial was pruned.")
    return ["## Pruning", "",
            f"{s['trials']} trials: {s['pruned']} pruned, {s.get('diverged', 0)} diverged, {s.get('failed', 0)} failed. "
            f"{_base_epochs_text(s)}; {saved}", ""]


def _base_epochs_text(s: dict[str, Any]) -> str:
    """"Base epochs trained 16, reused from the cache 176, of 192 planned" (pruning_savings' counts)."""
    reused = int(s.get("base_epochs_reused") or 0)
    return (f"Base epochs trained {s['base_epochs_run'] - reused}, reused from the cache {reused} (adbs/cache.py), "
            f"of {s['base_epochs_planned']} planned")


def _seeds_said(best: dict[str, Any]) -> str:
    """"seeds 2 of 2": how many of the configuration's seeds completed (every one, or it would not be ranked)."""
    states = best.get("seed_states") or {"complete": best["seeds"]}
    return f"seeds {states.get('complete', 0)} of {sum(states.values())} completed"


def write_study_report(folder: Path, *, study: str, table: pd.DataFrame, trials: pd.DataFrame,
                       best: dict | None, figures: Iterable[Path] = (), meta: dict[str, str] | None = None,
                       paper_md: str | None = None, order: list[str] | None = None,
                       pareto: dict[str, Any] | None = None, no_best: str | None = None,
                       not_drawn: Iterable[str] = (), notes: list[str] | tuple[str, ...] = (),
                       across_md: str | None = None) -> Path:
    """report.md in `folder` (report_markdown), with the configurations missing a seed listed from `trials`."""
    from adbs_lab.results import seed_counts
    from adbs_lab.results.tables import annotate, format_table

    path = Path(folder) / REPORT_MD
    table_md = annotate(format_table(table, markdown=True), trials, markdown=True, order=order)
    imp = Path(folder) / "importance.md"  # written by study_figures (adbs_lab/results/importance.py) into the same folder
    path.write_text(report_markdown(study=study, table_md=table_md, best=best,
                                    savings=pruning_savings(trials), figures=figures, meta=meta,
                                    paper_md=paper_md, importance_md=imp.read_text().strip() if imp.is_file() else None,
                                    pareto=pareto, not_ranked=seed_counts.not_ranked(trials) if len(trials) else [],
                                    no_best=no_best, not_drawn=not_drawn, notes=notes, across_md=across_md)
                    + "\n")
    return path
