"""Which searched parameters decide the validation objective, and how sure one can be (the report of every study
that searched two or more parameters other than the seed and a study's row).

From the trials table alone (a study's own, or one rebuilt from the MLflow store by studies/report.py):

- the searched parameters are the `key=value` parts of the row labels (adbs_lab/records/tune_keys.py: describe), so a
  study's named rows (the ablation's) and the seed never count as parameters;
- each configuration's objective is its mean over seeds (the study's objective: summary/val_avg_acc, or each
  of its --objectives, adbs_lab/records/objectives.py; validation only: test metrics never feed a search or its
  analysis). Every trial is counted: one that collapsed (novel accuracy 0 in every session) ran to its end and
  keeps its measured value (leaving it out would hide exactly the knobs that cause collapse: ranked on the
  survivors alone, a knob whose only effect is collapse looks irrelevant); one that diverged has no value and is
  never imputed: it is counted and its settings go to the "Diverges when" table (`diverges_when`); pruned and
  failed ones have no objective and are left out and counted;
- the configurations become an in-memory Optuna study (distributions spanning the values seen), and Optuna's
  PED-ANOVA and fANOVA evaluators (`optuna.importance`; fANOVA needs scikit-learn, a dependency of this
  project) rank the parameters; an interval comes from resampling the configurations with replacement;
- a parameter is ranked only while its interval's lower end lies above the upper end of every parameter below
  it (fANOVA); the others are "not resolved at this budget";
- above MAX_CONFIGS configurations, fANOVA and PED-ANOVA rank a uniform random sample of MAX_CONFIGS of them
  (`subsample`: numpy's default_rng(SUBSAMPLE_SEED)), said in the header; every count stays over all trials.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.config_values import column, missing, texts
from adbs_lab.records.value_text import is_number, plain, text
from adbs_lab.records.objectives import DEFAULT, Objective, OptunaDirection

MIN_CONFIGS = 8
"""Fewer complete configurations than this: no ranking (PED-ANOVA compares the best few with the rest, fANOVA
fits a forest; with a handful of points either ranks noise)."""
RESAMPLES = 20
"""Bootstrap resamples of the configurations for the intervals (fANOVA's forest is refitted each time)."""
FANOVA_TREES = 16
"""Trees of fANOVA's forest (Optuna's default is 64): Optuna's fANOVA walks every tree in Python, 64 trees take
about 1.2 s per fit on 18 configurations on a busy 2-core CPU and 16 about 0.3 s, so the point estimate and 20
resamples stay within the ~30 s a report may spend on importance; the resampling interval shows what fewer trees
add to the spread."""
MAX_CONFIGS = 200
"""The most configurations the ranking stands on: a study with more is ranked on a uniform random sample of this
many (`subsample`), so the analysis costs the same from here on: each of its 21 Optuna studies and fANOVA fits grows
faster than the configurations (on a busy 2-core CPU: 5,000 configurations of 3 parameters took 108 s; 500 of 8
continuous parameters 32 CPU s, 200 of them 8.4, 200 of the 3 parameters 4.8, each with ~2 s of figures). Its header
says so; the counts of collapsed, diverged, pruned and failed trials, and "Diverges when", stay over every trial."""
SUBSAMPLE_SEED = 0
"""The seed of `subsample`'s numpy generator (numpy.random.default_rng)."""
IMPORTANCE_MD, IMPORTANCE_PNG = "importance.md", "importance.png"
COLLAPSED = "novel accuracy 0.00 in every incremental session"
"""The collapse warning (adbs/metrics.py: collapse_warnings) that leaves a trial out of the importance analysis."""
PLOTS = {"parallel": "parallel_coordinate.png", "contour": "contour.png", "slice": "slice.png"}
_TOKEN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")


CONDITIONS = ("ways", "shots", "sessions", "dataset")
"""Config keys that set the few-shot problem, not the method: a study may grid over them (kshot_grid), but they are
conditions, not knobs, and no importance ranks them (a 10-way row averages 4 sessions, a 5-way row 8)."""


def searched_params(trials: pd.DataFrame) -> list[str]:
    """The config keys named in the row labels (`alpha=0.05 temperature=16`) whose values differ between trials
    (None is one of them: adbs_lab/records/config_values.py), data conditions (CONDITIONS) left out."""
    if trials.empty or "label" not in trials:
        return []
    keys: dict[str, None] = {}
    for lab in trials["label"].dropna().unique():
        for word in str(lab).split(" "):
            m = _TOKEN.match(word)
            if m and m.group(1) in trials and m.group(1) != "seed" and m.group(1) not in CONDITIONS:
                keys[m.group(1)] = None
    return [k for k in keys if texts(trials[k]).nunique() > 1]


def configurations(trials: pd.DataFrame, params: list[str], objective: Objective = DEFAULT[0]
                   ) -> tuple[pd.DataFrame, dict[str, int]]:
    """(one row per configuration: its params, `objective` = the mean over its seeds of `objective`, `seeds`; and
    the counts of the header: "collapsed" trials, kept with their measured values, then those left out: diverged,
    pruned, failed, and complete trials without a finite value of the objective)."""
    obj = objective.name
    trials = trials.reset_index(drop=True)  # positions, so the masks below align on any index
    states = trials["state"] if "state" in trials else pd.Series([K.COMPLETE] * len(trials))
    # collapsed: novel classes never right in any session (adbs.metrics.collapse_warnings' first warning). Such a
    # trial is a result (often the knob's effect), so it stays in with its measured value and is counted; a class or
    # two never predicted is not counted as collapse: on the CPU default that happens to healthy trials too
    # (docs/boundary-dynamics.md: one or two of 85-95 classes in a late session)
    collapsed = (trials[K.WARNING].fillna("").astype(str).str.contains(COLLAPSED, regex=False) if K.WARNING in trials
                 else states != states)
    value = pd.to_numeric(trials[obj], errors="coerce") if obj in trials else pd.Series([math.nan] * len(trials))
    complete = states == K.COMPLETE
    counts = {"collapsed": int((complete & collapsed & value.notna()).sum()),
              "diverged": int((states == K.DIVERGED).sum()), "pruned": int((states == K.PRUNED).sum()),
              "failed": int((states == K.FAILED).sum()), "without a value": int((complete & value.isna()).sum())}
    # a trial without a value of a searched parameter (its record lacks the field; None is a value) has no place
    # in Optuna's distributions (create_trial refuses a NaN): left out, and counted
    bare = missing(trials[params]).any(axis=1) if params else states != states
    counts["without a parameter"] = int((complete & value.notna() & bare).sum())
    keep = trials[complete & value.notna() & ~bare]
    if keep.empty or not params:
        return pd.DataFrame(columns=[*params, "objective", "seeds"]), counts
    # one pass: each configuration's first trial and its trials' values, in the order configurations first appear
    # (a pandas group per configuration took 8 s at 5,000); each mean summed as pandas' Series.mean sums
    group = keep.groupby([texts(keep[p]) for p in params], sort=False).ngroup().to_numpy()
    by = np.argsort(group, kind="stable")
    vals = keep[obj].astype(float).to_numpy()[by]
    ends = np.searchsorted(group[by], np.arange(group.max() + 2))
    first = keep.iloc[by[ends[:-1]]]
    rows = {p: column([plain(v) for v in first[p]]) for p in params}  # None stays None beside numbers
    return pd.DataFrame({**rows, "objective": [float(vals[a:b].sum() / (b - a)) for a, b in zip(ends[:-1], ends[1:])],
                         "seeds": np.diff(ends).tolist()}), counts


FEW_VALUES = 6
"""A parameter with at most this many values among the trials is shown value by value in "Diverges when"; one with
more (a continuous range) by the range and median of each group."""


def diverges_when(trials: pd.DataFrame, params: list[str]) -> str | None:
    """The "Diverges when" table (None when no trial diverged): for each searched parameter, its values among the
    diverged trials beside those among the trials that ran to their end (pruned and failed trials are in neither).
    Diverged trials have no objective and are never imputed, so this is where they show: counts, not a test."""
    trials = trials.reset_index(drop=True)
    states = trials["state"] if "state" in trials else pd.Series([K.COMPLETE] * len(trials))
    div, ran = trials[states == K.DIVERGED], trials[states == K.COMPLETE]
    if div.empty or not params:
        return None
    from adbs_lab.results.tables import render_cells

    body = [[p, _spread(div[p], trials[p]), _spread(ran[p], trials[p])] for p in params if p in trials]
    table = render_cells(["parameter", f"diverged ({len(div)} trials)", f"ran to the end ({len(ran)} trials)"],
                         body, "markdown")
    return "\n".join([
        f"{len(div)} of {len(trials)} trials diverged; they have no value and are in no mean or ranking (never "
        "imputed). Their settings beside those of the trials that ran to the end (pruned and failed trials are in "
        f"neither): a parameter with at most {FEW_VALUES} values by value (trials at each), a range by its "
        "minimum, median and maximum. A value or range that only the diverged trials take is where training "
        "diverges; with few diverged trials this is a count, not a test.", "", table])


def _spread(vals: pd.Series, every: pd.Series) -> str:
    """One group's values of a parameter: `0.05: 2, 0.1: 1` (few values), `0.001 to 0.02 (median 0.004)` (a
    range), `-` (no trial)."""
    if vals.empty:
        return "-"
    if texts(every).nunique() > FEW_VALUES and all(map(is_number, every)):
        v = pd.to_numeric(vals, errors="coerce")
        return f"{v.min():.4g} to {v.max():.4g} (median {v.median():.4g})"
    counts = texts(vals).value_counts()  # None is a value (adbs_lab/records/config_values.py)
    order = sorted(counts.index, key=lambda x: (float(x) if _number(x) else math.inf, x))
    return ", ".join(f"{x}: {counts[x]}" for x in order)


def _number(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def distributions(configs: pd.DataFrame, params: list[str]) -> dict[str, Any]:
    """An Optuna distribution per parameter spanning the values seen: numbers as ranges (log when they span a
    factor of 10 or more above 0), anything else (None, bools, texts, numbers beside them) as a choice among their
    texts (adbs_lab/records/value_text.py: text; Optuna finds a choice by ==, and True == 1 == 1.0)."""
    from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, BaseDistribution] = {}
    for p in params:
        vals = [plain(v) for v in configs[p]]
        if not all(map(is_number, vals)):
            out[p] = CategoricalDistribution(sorted({text(v) for v in vals}))
        elif all(isinstance(v, int) for v in vals):
            out[p] = IntDistribution(int(min(vals)), int(max(vals)))
        else:
            lo, hi = float(min(vals)), float(max(vals))
            out[p] = FloatDistribution(lo, hi, log=lo > 0 and hi / lo >= 10)
    return out


def _study(configs: pd.DataFrame, params: list[str], dists: dict[str, Any], direction: OptunaDirection = "maximize",
           made: list | None = None):
    """An in-memory Optuna study of `configs` (or of the trials `made` from them, `_made`, reused by every resample)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # the direction matters to PED-ANOVA, which compares the best configurations with all
    study = optuna.create_study(direction=direction)
    study.add_trials(made if made is not None else _made(configs, params, dists))
    return study


def _made(configs: pd.DataFrame, params: list[str], dists: dict[str, Any]) -> list:
    """One Optuna trial per configuration (its params and objective), in `configs`' order."""
    import optuna

    return [optuna.trial.create_trial(params={p: _param(r[p], dists[p]) for p in params}, distributions=dists,
                                      value=float(r["objective"])) for r in configs.to_dict("records")]


def _param(v: Any, dist) -> Any:
    from optuna.distributions import FloatDistribution, IntDistribution

    return float(v) if isinstance(dist, FloatDistribution) else int(v) if isinstance(dist, IntDistribution) else text(v)


def _evaluators(n: int) -> dict[str, Any]:
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    # PED-ANOVA compares the top quantile with all: Optuna advises at least 5 configurations above it. Every setting is
    # named (at Optuna 5.0's values): Optuna 5.0 changed get_param_importances' default evaluator from fANOVA to
    # PED-ANOVA, and a report must rank alike after an upgrade (tests/adbs_lab/results/test_importance.py)
    quantile = min(0.5, max(0.1, 5 / n))
    return {"fANOVA": FanovaImportanceEvaluator(n_trees=FANOVA_TREES, max_depth=64, seed=0),
            "PED-ANOVA": PedAnovaImportanceEvaluator(target_quantile=quantile, region_quantile=1.0, evaluate_on_local=True)}


def _importances(study, evaluator, params: list[str]) -> dict[str, float]:
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "importances will be equal" on a resample of identical points: kept as 0
        got = optuna.importance.get_param_importances(study, evaluator=evaluator, params=params, normalize=True)
    return {p: float(got.get(p, 0.0)) for p in params}


def analyse(trials: pd.DataFrame, *, objective: Objective = DEFAULT[0], resamples: int = RESAMPLES,
            seed: int = 0, max_configs: int = MAX_CONFIGS) -> dict[str, Any] | None:
    """The importance analysis of a study for one of its objectives (None when it searched fewer than two
    parameters): params, the configurations, what was left out, and per evaluator {param: (importance, low, high)};
    `too_few` set instead when there are fewer than MIN_CONFIGS complete configurations. Ranked on at most
    `max_configs` of the configurations (`subsample`; `sample` says how many when it took fewer than all)."""
    params = searched_params(trials)
    if len(params) < 2:
        return None
    configs, counts = configurations(trials, params, objective)
    ranked = subsample(configs, params, max_configs)  # every configuration, or max_configs of them (counts: of all)
    out: dict[str, Any] = {"params": params, "configs": configs, "counts": counts, "n": len(configs),
                           "objective": objective, "sample": len(ranked) if len(ranked) < len(configs) else None,
                           "max_configs": max_configs}
    # a parameter that took one value among the complete configurations cannot be ranked
    varying = [p for p in params if len(ranked) and texts(ranked[p]).nunique() > 1]
    if len(ranked) < MIN_CONFIGS or len(varying) < 2:
        out["too_few"] = True
        return out
    dists = distributions(configs, varying)  # the values every configuration took, sampled or not
    direction = objective.optuna_direction
    made = _made(ranked, varying, dists)
    study = _study(ranked, varying, dists, direction, made)
    evaluators = _evaluators(len(ranked))
    point = {name: _importances(study, ev, varying) for name, ev in evaluators.items()}
    rng = np.random.default_rng(seed)
    boot: dict[str, list[dict[str, float]]] = {name: [] for name in evaluators}
    values = ranked["objective"].to_numpy()
    for _ in range(resamples):
        pick = rng.integers(0, len(ranked), len(ranked))
        if len(set(values[pick])) < 2:
            continue
        s = _study(ranked, varying, dists, direction, [made[i] for i in pick])
        for name, ev in evaluators.items():
            boot[name].append(_importances(s, ev, varying))
    out["importance"] = {name: {p: (point[name][p], *_interval([b[p] for b in boot[name]])) for p in varying}
                         for name in evaluators}
    out["resamples"] = len(boot["fANOVA"])
    out["study"] = study
    out["varying"] = varying
    return out


def subsample(configs: pd.DataFrame, params: list[str], limit: int = MAX_CONFIGS,
              seed: int = SUBSAMPLE_SEED) -> pd.DataFrame:
    """`configs` when there are at most `limit`; else `limit` of them drawn uniformly without replacement by
    numpy.random.default_rng(`seed`) from the configurations sorted by their values (each configuration's values as
    text), so the same trials give the same sample in whatever order they were read (a study's end or report.py)."""
    if len(configs) <= limit:
        return configs
    keys = pd.DataFrame({p: texts(configs[p]) for p in params}).agg("\x1f".join, axis=1)  # configurations()' groups
    ordered = configs.iloc[np.argsort(keys.to_numpy(), kind="stable")]
    pick = np.sort(np.random.default_rng(seed).choice(len(ordered), size=limit, replace=False))
    return ordered.iloc[pick].reset_index(drop=True)


def _interval(vals: list[float]) -> tuple[float, float]:
    if len(vals) < 2:
        return math.nan, math.nan
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def resolved(imp: dict[str, tuple[float, float, float]]) -> tuple[list[str], list[str]]:
    """(ranked, not resolved): walking down the ranking, a parameter is ranked while its interval's lower end is
    above the upper end of every parameter below it."""
    order = sorted(imp, key=lambda p: -imp[p][0])
    ranked = []
    for i, p in enumerate(order):
        below = [imp[q][2] for q in order[i + 1:]]
        if not K.finite(imp[p][1]) or (below and not imp[p][1] > max(below)):
            break
        ranked.append(p)
    return ranked, [p for p in order if p not in ranked]


def markdown(a: dict[str, Any] | None) -> str | None:
    """The importance section's text (None for a study that searched fewer than two parameters)."""
    if a is None:
        return None
    head = _header(a)
    if a.get("too_few"):
        return (f"{head}\n\nToo few complete configurations to rank the parameters ({', '.join(a['params'])}): "
                f"importance needs at least {MIN_CONFIGS} configurations in which two or more parameters vary.")
    imp = a["importance"]
    ranked, unresolved = resolved(imp["fANOVA"])
    from adbs_lab.results.tables import render_cells

    order = ranked + unresolved
    body = [[p, *(f"{imp[e][p][0]:.3f} [{imp[e][p][1]:.3f}, {imp[e][p][2]:.3f}]" for e in ("fANOVA", "PED-ANOVA")),
             str(ranked.index(p) + 1) if p in ranked else "not resolved"] for p in order]
    table = render_cells(["parameter", "fANOVA [95%]", "PED-ANOVA [95%]", "rank"], body, "markdown")
    lines = [head, "", table, "",
             f"Importance: share of the objective's variation a parameter explains (fANOVA) and how much the best "
             f"configurations' values of it differ from all (PED-ANOVA), normalised to sum to 1; the interval is "
             f"the 2.5-97.5 percentile over {a['resamples']} resamples of the configurations. A parameter is ranked "
             f"only while its fANOVA interval lies above every parameter's below it."]
    if unresolved:
        lines += ["", f"Not resolved at this budget: {', '.join(unresolved)} (their intervals overlap; more "
                      "configurations or seeds would separate them)."]
    return "\n".join(lines)


def _header(a: dict[str, Any]) -> str:
    """What the ranking stands on: configurations and trials, the collapsed ones among them (kept), and every
    trial left out, counted by why."""
    c = a["counts"]
    o = a.get("objective", DEFAULT[0])
    what = "validation average accuracy" if o == DEFAULT[0] else f"{o.name}, to {o.direction}imise"
    used = int(a["configs"]["seeds"].sum()) if a["n"] else 0
    collapsed = (f"{c['collapsed']} of them collapsed (novel accuracy 0 in every session) and kept with their "
                 f"measured values" if c["collapsed"] else "none collapsed")
    why = {"diverged": "diverged (no value, never imputed; \"Diverges when\" below)", "pruned": "pruned",
           "failed": "failed", "without a value": f"complete without a value of {o.key}",
           "without a parameter": "complete without a value of a searched parameter"}
    left = ", ".join(f"{c[k]} {w}" for k, w in why.items() if c.get(k)) or "none"
    sample = (f" Ranked on {a['sample']} of the {a['n']} configurations, a uniform random sample (numpy's "
              f"default_rng, seed {SUBSAMPLE_SEED}, over the configurations in the order of their values): at most "
              f"{a.get('max_configs', MAX_CONFIGS)} keep the analysis's time bounded; the counts above are of every trial."
              if a.get("sample") else "")
    return (f"{a['n']} complete configurations (each the mean of its seeds' {what}, {o.key}) from {used} trials, "
            f"{collapsed}; trials left out: {left}.{sample}")


# -- figures ---------------------------------------------------------------------------------------------------
def figures(a: dict[str, Any] | None, folder: Path, png: str = IMPORTANCE_PNG, plots: bool = True) -> list[Path]:
    """`png` (importance.png: both evaluators with their intervals) and, with `plots`, Optuna's
    parallel-coordinate, contour (the two most important parameters) and slice plots of the seed-averaged
    configurations."""
    if a is None or a.get("too_few"):
        return []
    from adbs_lab.results.figures import _plt

    plt = _plt()
    folder = Path(folder)
    imp = a["importance"]
    order = sorted(imp["fANOVA"], key=lambda p: imp["fANOVA"][p][0])
    fig, ax = plt.subplots(figsize=(6, 1.6 + 0.5 * len(order)))
    y = np.arange(len(order))
    for k, (name, color) in enumerate((("fANOVA", "C0"), ("PED-ANOVA", "C1"))):
        vals = np.array([imp[name][p] for p in order])
        err = np.array([np.nan_to_num(vals[:, 0] - vals[:, 1]), np.nan_to_num(vals[:, 2] - vals[:, 0])]).clip(0)
        ax.barh(y + (k - 0.5) * 0.38, vals[:, 0], height=0.38, xerr=err, color=color, capsize=2, label=name)
    ax.set_yticks(y)
    ax.set_yticklabels(order, fontsize=8)
    o = a.get("objective", DEFAULT[0])
    target = "validation avg acc" if o == DEFAULT[0] else o.text
    ax.set_xlabel(f"importance for {target} (95% interval, {a['resamples']} resamples)")
    n = f"a random {a['sample']} of {a['n']}" if a.get("sample") else a["n"]
    ax.set_title(f"parameter importance ({n} configurations, mean over seeds)", fontsize=9)
    ax.set_xlim(0, 1.05)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = [folder / png]
    fig.savefig(out[0], dpi=110)
    plt.close(fig)
    if not plots:
        return out
    top = sorted(imp["fANOVA"], key=lambda p: -imp["fANOVA"][p][0])[:2]
    return out + _optuna_plots(a["study"], top, folder, plt)


def _optuna_plots(study, top: list[str], folder: Path, plt) -> list[Path]:
    from matplotlib.figure import Figure
    from optuna.visualization import matplotlib as ovm

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        for key, draw in (("parallel", lambda: ovm.plot_parallel_coordinate(study)),
                          ("contour", lambda: ovm.plot_contour(study, params=top)),
                          ("slice", lambda: ovm.plot_slice(study))):
            ax = draw()
            fig = (ax.flat[0] if isinstance(ax, np.ndarray) else ax).get_figure()
            if not isinstance(fig, Figure):  # Optuna draws each plot on a top-level figure of its own
                raise TypeError(f"Optuna's {key} plot is not on a top-level matplotlib figure: {fig!r}")
            fig.set_size_inches(max(fig.get_size_inches()[0], 6), max(fig.get_size_inches()[1], 4))
            fig.tight_layout()
            path = folder / PLOTS[key]
            fig.savefig(path, dpi=100)
            plt.close(fig)
            out.append(path)
    return out


def write(trials: pd.DataFrame, folder: Path, objectives: tuple[Objective, ...] | None = None) -> list[Path]:
    """importance.md and the figures in `folder` (nothing for a study that searched fewer than two parameters);
    run_files.write_study_report puts importance.md into report.md. Where trials diverged, importance.md ends with
    the "Diverges when" table. A study of several --objectives gets a section
    and an importance figure per objective (importance.png for the first, importance-<name>.png for the others);
    the parallel-coordinate, contour and slice plots show the first objective, the one best_config.json is best on."""
    objectives = tuple(objectives or DEFAULT)
    for old in Path(folder).glob("importance-*.png"):  # never a stale one from an earlier draw with other objectives
        old.unlink()
    sections, files = [], []
    for i, o in enumerate(objectives):
        a = analyse(trials, objective=o)
        text = markdown(a)
        if text is None:
            return []
        sections.append(text if len(objectives) == 1 else f"### {o.text}\n\n{text}")
        files += figures(a, folder, png=IMPORTANCE_PNG if i == 0 else f"importance-{o.name}.png", plots=i == 0)
    diverged = diverges_when(trials, searched_params(trials))
    if diverged:  # once: a diverged trial has no value of any objective
        sections.append(f"### Diverges when\n\n{diverged}")
    (Path(folder) / IMPORTANCE_MD).write_text("\n\n".join(sections) + "\n")
    return files
