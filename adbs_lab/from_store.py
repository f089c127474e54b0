"""Rebuild a study's tables and figures from the MLflow tracking store alone.

A study run on a cluster can be reported on a laptop: the nested trial runs hold everything
(params = the resolved Config, `session/*` metric histories stepped by session, `summary/*`,
tags adbs.state / adbs.trial_id / adbs.optuna_trial). They become the same TrialRecords a study builds
from its Tune results (adbs_lab.trial_records), so `tables.paper_table` gives the table the study printed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from adbs.config import ConfigError
from adbs.overrides import coerce
from adbs.renames import canonical
from adbs_lab import compare, run_files, trial_records, tables
from adbs_lab import metrics_keys as K
from adbs_lab.trial_records import CONFIG_COLUMNS

RUN_ID = re.compile(r"^[0-9a-f]{32}$")

# docs/method.md, "Paper results worth regenerating", and docs/hosts.md, the paper's CIFAR100 rows: top-1 %
# after sessions 0..N and the average. None = not given there. Keys are this platform's row labels: the
# ablation's (baseline, adb, adb+ic) and the hosts study's (<host> and <host>+ADBS; the baseline host with
# ADBS is adb+ic).
# `d_cs`: the class separation of the paper's Table 4 (baseline and ADBS on CIFAR100; the baseline only is
# quoted for miniImageNet and CUB200).
_CIFAR_ADBS = {"sessions": [79.93, 75.22, 71.11, 65.99, 62.46, 58.38, 55.96, 53.72, 51.15], "avg": 63.77,
               "d_cs": 0.9497}
PAPER: dict[str, dict[str, dict[str, Any]]] = {
    "cifar100": {
        "baseline": {"sessions": [73.92, 67.14, 63.71, 60.07, 57.10, 54.85, 52.52, 50.49, 48.60], "avg": 58.71,
                     "d_cs": 0.8846},
        "adb+ic": _CIFAR_ADBS,
        "baseline+ADBS": _CIFAR_ADBS,
        "SAVC": {"sessions": [78.60, 72.95, 68.73, 64.59, 61.41, 58.46, 56.29, 54.40, 52.19], "avg": 63.07},
        "SAVC+ADBS": {"sessions": [85.13, 80.39, 77.07, 72.61, 69.54, 66.54, 64.70, 62.72, 60.60], "avg": 71.03},
        "ALICE": {"sessions": [80.37, 72.34, 67.67, 63.61, 61.11, 58.53, 57.40, 55.43, 53.46], "avg": 63.32},
        "ALICE+ADBS": {"sessions": [80.12, 74.11, 70.51, 66.72, 63.90, 61.25, 60.00, 58.07, 56.00], "avg": 65.63},
        "OrCo": {"sessions": [79.77, 63.29, 62.39, 60.13, 58.76, 56.56, 55.49, 54.19, 51.12], "avg": 60.19},
        "OrCo+ADBS": {"sessions": [79.77, 63.46, 61.89, 60.43, 59.23, 56.32, 55.76, 54.48, 51.54], "avg": 60.32},
    },
    "mini_imagenet": {
        "baseline": {"sessions": [74.80] + [None] * 7 + [50.81], "avg": 60.25, "d_cs": 0.8944},
        "adb": {"sessions": [80.13] + [None] * 7 + [54.67], "avg": None},
        "adb+ic": {"sessions": [81.40, 75.03, 71.03, 68.00, 65.56, 61.87, 59.04, 56.87, 55.38], "avg": 66.02},
    },
    "cub200": {
        "baseline": {"sessions": [74.37] + [None] * 9 + [56.26], "avg": 62.34, "d_cs": 0.3517},
        "adb+ic": {"sessions": [79.99] + [None] * 9 + [59.65], "avg": 67.12},
    },
}
PAPER_SOURCE = "ADBS (AAAI 2025), as quoted in docs/method.md and docs/hosts.md"


class ReportError(LookupError):
    """The study or run cannot be found in the store; the message lists what exists."""


@dataclass
class Study:
    parent: Any  # mlflow.entities.Run (role=study)
    name: str
    sessions: pd.DataFrame
    trials: pd.DataFrame
    baseline: str | dict[str, str] | None
    order: list[str] | None

    @property
    def dataset(self) -> str | None:
        if self.trials.empty or "dataset" not in self.trials:
            return None
        ds = self.trials["dataset"].dropna().unique()
        return str(ds[0]) if len(ds) == 1 else None


# -- finding runs ----------------------------------------------------------------------------
def all_runs(client, experiment_ids: list[str], filter_string: str) -> list:
    """Every run of the experiments that matches `filter_string`, oldest first (all pages)."""
    out, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000,
                                  order_by=["attributes.start_time ASC"], page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def find_parent(client, ref: str, name: str | None = None):
    """The parent (study) run: a run id (a trial's id gives its parent), or a study name = experiment: its latest
    run of the default folder, or of `--name` `name` (adbs_lab/run_pick.py)."""
    if RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except Exception:  # noqa: BLE001 - not a run id after all: try it as a study name
            run = None
        if run is not None:
            parent_id = run.data.tags.get("mlflow.parentRunId")
            if run.data.tags.get("adbs.role") == "trial" and parent_id:
                return client.get_run(parent_id)
            return run
    exp = client.get_experiment_by_name(ref)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments() if e.name != "Default")
        raise ReportError(f"no study or run {ref!r} in this store; studies here: {', '.join(names) or '(none)'}")
    parents = all_runs(client, [exp.experiment_id], "tags.`adbs.role` = 'study'")
    if not parents:
        raise ReportError(f"experiment {ref!r} has no study run (tag adbs.role=study)")
    from adbs_lab import run_pick

    picked, _ = run_pick.of_name(parents, name)
    if not picked:
        raise ReportError(f"study {ref!r} has no run of --name {name}; its runs' names: "
                          f"{', '.join(run_pick.names(parents))}")
    parents = picked
    finished = [p for p in parents if p.info.status == "FINISHED"]
    return (finished or parents)[-1]  # the latest finished invocation, else the latest one


# -- trial records from the store ------------------------------------------------------------
def _config_value(key: str, raw: str) -> Any:
    if raw.startswith("["):
        return raw  # lists are logged (and tabled) as JSON
    try:
        return coerce(key, raw)
    except (ConfigError, ValueError, TypeError):
        return raw


def _label(run) -> str:
    tag = run.data.tags.get("adbs.label")
    if tag is not None:
        return tag
    # The run name is describe(config, varying) with the seed last: the label is the rest.
    words = [w for w in (run.info.run_name or "").split(" ") if not w.startswith("seed=")]
    return " ".join(words) or "all"


def _history(client, run_id: str, key: str) -> dict[int, float]:
    return {int(m.step): float(m.value) for m in client.get_metric_history(run_id, key)}


def records_from_runs(client, parent) -> list[trial_records.TrialRecord]:
    """The study's nested runs as TrialRecords, from params, tags and metric histories."""
    runs = all_runs(client, [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    runs = [r for r in runs if r.data.tags.get("adbs.role", "trial") == "trial"]

    def order(r):  # the study's order: Optuna trial number (Tune's creation order), then start time
        n = r.data.tags.get("adbs.optuna_trial", "")
        return (int(n) if n.isdigit() else math.inf, r.info.start_time)

    live = parent.info.status == "RUNNING"  # the study is still running (or its driver died without a word)
    out = []
    for r in sorted(runs, key=order):
        tags = r.data.tags
        state = tags.get("adbs.state", K.INTERRUPTED)
        if state == "RUNNING":  # the tracker has not seen it end: still running, or stopped with its study
            state = K.RUNNING if live and r.info.status == "RUNNING" else K.INTERRUPTED
        n = tags.get("adbs.optuna_trial", "")
        per_session: dict[int, dict[str, float]] = {}
        for key in (k for k in r.data.metrics if k.startswith(K.SESSION)):
            name = key[len(K.SESSION):]
            for step, v in _history(client, r.info.run_id, key).items():
                per_session.setdefault(step, {})[K.LEGACY_NAMES.get(name, name)] = v
        base = _history(client, r.info.run_id, K.BASE_PRUNE_VALUE) if K.BASE_PRUNE_VALUE in r.data.metrics else {}
        out.append(trial_records.TrialRecord(
            trial_id=tags.get("adbs.trial_id", r.info.run_id), state=state, label=_label(r),
            config={canonical(k): _config_value(canonical(k), v) for k, v in r.data.params.items()
                    if canonical(k) in CONFIG_COLUMNS},  # runs logged before a field was renamed
            optuna_trial=int(n) if n.isdigit() else None, mlflow_run_id=r.info.run_id,
            base_epochs_run=max(base) if base else 0,
            started_at=r.info.start_time / 1000 if r.info.start_time else math.nan,
            finished_at=r.info.end_time / 1000 if r.info.end_time else math.nan,
            summary=K.strip(K.SUMMARY, r.data.metrics),
            sessions=[{"session": step, **per_session[step]} for step in sorted(per_session)],
            error=tags.get("adbs.error"), warning=tags.get("adbs.warning", ""),
            base_boundaries=tags.get("adbs.base_boundaries"),
            embeddings=_embeddings(client, r) if state == K.COMPLETE else None))
    return out


def _embeddings(client, run) -> str | None:
    """The trial's embedding sample (artifacts.EMBEDDINGS_JSON), when its config kept one (keep_embeddings)."""
    if str(run.data.params.get("keep_embeddings", "")).lower() != "true":
        return None  # one artifact listing saved per trial of every study that keeps none
    import tempfile

    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run.info.run_id, run_files.EMBEDDINGS_JSON, tmp)
            return Path(path).read_text()
    except Exception as e:  # noqa: BLE001 - a missing figure must not stop the tables
        print(f"warning: run {run.info.run_id} kept no {run_files.EMBEDDINGS_JSON} ({str(e).splitlines()[0][:200]}); "
              "its t-SNE and similarity panels are left out", flush=True)
        return None


def trial_frames(client, parent) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sessions, trials) of a study's nested runs: the schema of the study's own parquet files."""
    return trial_records.frames(records_from_runs(client, parent))


def _table_layout(parent, study: str) -> tuple[str | None, list[str] | None]:
    """Baseline row and row order: the parent run's tags, else the study's search space module."""
    tags = parent.data.tags
    if "adbs.order" in tags or "adbs.baseline" in tags:
        order = json.loads(tags["adbs.order"]) if tags.get("adbs.order") else None
        baseline = tags.get("adbs.baseline") or None
        if baseline and baseline.startswith("{"):  # {row: reference row} (the hosts study)
            baseline = json.loads(baseline)
        return baseline, order
    try:
        import importlib

        mod = importlib.import_module(f"search_spaces.{study}")
    except ImportError:
        return None, None
    rows = getattr(mod, "ROWS", None)
    return getattr(mod, "BASELINE", None), (list(rows) if isinstance(rows, dict) else None)


def load_study(client, ref: str, name: str | None = None) -> Study:
    parent = find_parent(client, ref, name)
    name = parent.data.tags.get("adbs.study") or client.get_experiment(parent.info.experiment_id).name
    sessions, trials = trial_frames(client, parent)
    baseline, order = _table_layout(parent, name)
    return Study(parent, name, sessions, trials, baseline, order)


def study_table(study: Study, metric: str = "test_acc") -> pd.DataFrame:
    """Exactly `results.paper_table` as the study calls it."""
    if study.sessions.empty:
        return pd.DataFrame()
    return tables.paper_table(study.sessions, metric=metric, baseline=study.baseline, order=study.order,
                               trials=study.trials)


# -- several studies as one table ------------------------------------------------------------
def combine(studies: list[Study]) -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, str]]:
    """(sessions, trials, row order, {row: reference row}) of several studies as one: each row becomes
    '<study>: <row>' ('<study> (<run id>): <row>' when a study appears twice, e.g. two runs of `ablation` on
    two presets), and each row keeps the Delta_last reference it has in its own study."""
    names = [s.name for s in studies]
    sessions, trials, order, reference = [], [], [], {}
    for st in studies:
        prefix = st.name if names.count(st.name) == 1 else f"{st.name} ({st.parent.info.run_id[:8]})"
        rename = lambda lab, prefix=prefix: f"{prefix}: {lab}"  # noqa: E731
        for frame, out in ((st.sessions, sessions), (st.trials, trials)):
            if len(frame):
                out.append(frame.assign(**{trial_records.LABEL: frame[trial_records.LABEL].map(rename)}))
        labels = list(dict.fromkeys(st.sessions[trial_records.LABEL])) if len(st.sessions) else []
        order += [rename(lab) for lab in dict.fromkeys((st.order or []) + labels)]
        base = st.baseline if isinstance(st.baseline, dict) else {lab: st.baseline for lab in labels} if st.baseline else {}
        reference.update({rename(lab): rename(ref) for lab, ref in base.items()})
    cat = lambda frames: pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()  # noqa: E731
    return cat(sessions), cat(trials), order, reference


def write_comparison(studies: list[Study], table: pd.DataFrame, sessions: pd.DataFrame, trials: pd.DataFrame,
                     out: Path, *, fmt: str, uri: str, metric: str = "test_acc") -> list[Path]:
    """One table and one figure (every row's accuracy per session) for several studies, with report.md."""
    title = " + ".join(dict.fromkeys(s.name for s in studies))
    files = _write_tables(out, sessions, trials, table, fmt, caption=f"{title}: {metric} (%) per session")
    figs = [run_files.session_curves(sessions, out / "compare_sessions.png", f"{title}: {metric} per session",
                                     metric=metric)] if len(sessions) else []
    meta = {"tracking URI": uri, **{f"{s.name} ({s.parent.info.run_id[:8]})":
                                    f"parent run {s.parent.info.run_name}, `{s.parent.data.tags.get('adbs.command', '?')}`"
                                    for s in studies}}
    files.append(run_files.write_study_report(out, study=title, table=table, trials=trials,
                                              best=tables.best_config(trials) if len(trials) else None,
                                              figures=figs, meta=meta))
    return files + figs


# -- renderings ------------------------------------------------------------------------------
def _session_cols(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.isdigit()]


def to_csv(table: pd.DataFrame) -> str:
    """Machine-readable: a mean and a 95% CI half-width column per session and for the average."""
    rows = []
    for _, r in table.iterrows():
        row: dict[str, Any] = {"config": r["config"], "seeds": r["seeds"]}
        if "sessions" in table:
            row["sessions"] = r["sessions"]
        for c in _session_cols(table) + [c for c in ("avg", "last", "pd", "hmean") if c in table]:
            name = f"s{c}" if c.isdigit() else c
            row[name], row[f"{name}_ci95"] = r[c]
        if "delta_last" in table:
            row["delta_last"] = r["delta_last"]
        if "delta_paired" in table:  # seed by seed: mean, 95% half-width (NaN for n < 2), n
            row["delta_last_paired"], row["delta_last_paired_ci95"], row["delta_last_paired_n"] = r["delta_paired"]
        if "d_cs" in table:
            row["d_cs"], row["d_cs_ci95"] = r["d_cs"]
        rows.append(row)
    return pd.DataFrame(rows).to_csv(index=False, float_format="%.4f")


def _tex(s: str) -> str:
    return re.sub(r"([&%$#_{}])", r"\\\1", str(s))


def to_latex(table: pd.DataFrame, caption: str = "") -> str:
    """A booktabs tabular with `58.71 $\\pm$ 1.20` cells (paste into the paper)."""
    if table.empty:
        return "% (no completed trials)"
    cols = _session_cols(table)
    has_delta, has_dcs = "delta_last" in table, "d_cs" in table
    has_sessions = "sessions" in table
    extra = [c for c in ("last", "pd", "hmean") if c in table]  # last session, performance drop, hmean of it
    head = (["Config", "Seeds"] + (["Sessions"] if has_sessions else []) + [f"S{c}" for c in cols] + ["Avg"]
            + [{"last": "Last", "pd": "PD", "hmean": "H$_{last}$"}[c] for c in extra] + (["$\\Delta_{last}$"] if has_delta else [])
            + (["paired $\\Delta_{last}$"] if "delta_paired" in table else [])
            + (["$D_{cs}$"] if has_dcs else []))

    def cell(v, digits: int = 2) -> str:
        m, h = v
        if not K.finite(m):
            return "-"
        return f"{m:.{digits}f}" if not K.finite(h) or h == 0 else f"{m:.{digits}f} $\\pm$ {h:.{digits}f}"

    body = []
    for _, r in table.iterrows():
        cells = ([_tex(r["config"]), str(r["seeds"])] + ([str(r["sessions"])] if has_sessions else [])
                 + [cell(r[c]) for c in cols] + [cell(r["avg"])] + [cell(r[c]) for c in extra])
        if has_delta:
            cells.append(f"{r['delta_last']:+.2f}" if K.finite(r["delta_last"]) else "-")
        if "delta_paired" in table:
            cells.append(_tex(compare.format_paired(r["delta_paired"])).replace("±", "$\\pm$"))
        if has_dcs:
            cells.append(cell(r["d_cs"], 3))
        body.append(cells)
    lines = ["\\begin{table}[t]", "\\centering", tables.render_cells(head, body, "latex")]
    if caption:
        lines.append(f"\\caption{{{_tex(caption)}}}")
    lines.append("\\end{table}")
    return "\n".join(lines)


def render(table: pd.DataFrame, fmt: str, caption: str = "", trials: pd.DataFrame | None = None,
           order: list[str] | None = None) -> str:
    """The table in `fmt`; text and markdown carry the departures and warnings the study printed (`trials`)."""
    if fmt in ("text", "markdown"):
        text = tables.format_table(table, markdown=fmt == "markdown")
        return text if trials is None else tables.annotate(text, trials, markdown=fmt == "markdown", order=order)
    if fmt == "latex":
        return to_latex(table, caption)
    if fmt == "csv":
        return to_csv(table)
    raise ValueError(f"unknown format {fmt!r}; choose text, markdown, latex or csv")


def paper_beside(table: pd.DataFrame, dataset: str | None) -> pd.DataFrame | None:
    """Our means and the paper's numbers, row by row (ours, paper), for the rows the paper reports."""
    paper = PAPER.get(dataset or "")
    if paper is None or table.empty:
        return None
    rows = []
    for _, r in table.iterrows():
        ref = paper.get(r["config"])
        if ref is None:
            continue
        cols = _session_cols(table)
        ours = {"config": r["config"], "source": "ours", **{f"s{c}": r[c][0] for c in cols}, "avg": r["avg"][0]}
        theirs = {"config": r["config"], "source": "paper",
                  **{f"s{c}": (ref["sessions"][int(c)] if int(c) < len(ref["sessions"]) else None) for c in cols},
                  "avg": ref["avg"]}
        if "pd" in table:  # the paper's PD: its first minus its last quoted session
            ours["PD"], theirs["PD"] = r["pd"][0], ref["sessions"][0] - ref["sessions"][-1]
        if "d_cs" in table:  # the class geometry beside the accuracies (paper Table 4)
            ours["D_cs"], theirs["D_cs"] = r["d_cs"][0], ref.get("d_cs")
        rows += [ours, theirs]
    return pd.DataFrame(rows) if rows else None


def render_plain(df: pd.DataFrame, fmt: str, digits: int | None = None) -> str:
    """Render a DataFrame of plain values (paper_beside) in a report format; floats with `digits` decimals, by
    default 4 in a D_cs column (as the paper quotes it) and 2 elsewhere."""
    def cell(v, digits: int) -> str:
        return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else (
            f"{v:.{digits}f}" if isinstance(v, float) else str(v))

    head = list(df.columns)
    places = [digits if digits is not None else 4 if h == "D_cs" else 2 for h in head]  # the paper: D_cs to 4
    body = [[cell(v, d) for v, d in zip(row, places)] for row in df.itertuples(index=False)]
    if fmt == "csv":
        return df.to_csv(index=False, float_format="%.2f")
    if fmt == "latex":
        head, body = [_tex(h) for h in head], [[_tex(c) for c in b] for b in body]
    return tables.render_cells(head, body, fmt, left=2)


# -- everything at once ----------------------------------------------------------------------
EXT = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv"}


def _write_tables(out: Path, sessions: pd.DataFrame, trials: pd.DataFrame, table: pd.DataFrame, fmt: str, *,
                  caption: str, order: list[str] | None = None) -> list[Path]:
    """sessions.parquet, trials.parquet, table.txt and table.<fmt> in `out` (made if missing)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "sessions.parquet", out / "trials.parquet"]
    sessions.to_parquet(files[0], index=False)
    trials.to_parquet(files[1], index=False)
    for f in {"text", fmt}:
        p = out / f"table.{EXT[f]}"
        p.write_text(render(table, f, caption=caption, trials=trials, order=order) + "\n")
        files.append(p)
    return files


def write(study: Study, table: pd.DataFrame, out: Path, *, fmt: str, uri: str, paper: bool) -> list[Path]:
    """Tables (chosen format + text), parquet frames, figures and report.md, rebuilt from the store."""
    files = _write_tables(out, study.sessions, study.trials, table, fmt,
                          caption=f"{study.name}: test accuracy (%) per session", order=study.order)
    figs = (run_files.study_figures(study.name, study.sessions, study.trials, out, order=study.order,
                                    baseline=study.baseline) if len(study.sessions) else [])
    beside = paper_beside(table, study.dataset) if paper else None
    best = tables.best_config(study.trials) if len(study.trials) else None
    from adbs_lab import run_pick

    meta = {"MLflow experiment": study.name, "parent run": f"{study.parent.info.run_name} ({study.parent.info.run_id}; "
                                                           f"{run_pick.describe(study.parent)})",
            "tracking URI": uri, "code version": study.parent.data.tags.get("adbs.code_version", "unknown"),
            "command": f"`{study.parent.data.tags.get('adbs.command', '?')}`"}
    files.append(run_files.write_study_report(out, study=study.name, table=table, trials=study.trials, best=best,
                                              figures=figs, meta=meta,
                                              paper_md=render_plain(beside, "markdown") if beside is not None else None,
                                              order=study.order))
    return files + figs
