"""Result tables: sessions.parquet (trial x session), trials.parquet (trial), best config, paper-style table.

`paper_table` is a pure function of the sessions DataFrame, so the same table can be rebuilt
from any source that yields those columns (e.g. the MLflow store, for a report command).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from adbs.config import FIELDS
from adbs_lab import metrics_keys as K
from adbs_lab.artifacts import BOUNDARIES_KEY
from adbs_lab.pruning import OPTUNA_TRIAL_KEY, outcome
from adbs_lab.space import SEED_KEY, describe, resolve

CONFIG_COLUMNS = list(FIELDS)
BASE_BOUNDARIES = "base_boundaries"
"""trials.parquet column (and MLflow tag adbs.base_boundaries): the base m after the base session, as JSON."""
LABEL = "label"
"""Column naming the configuration without the seed (rows of the paper table)."""


def _flat(v: Any) -> Any:
    return json.dumps(list(v)) if isinstance(v, (list, tuple)) else v


def collect(results: Iterable, *, rows: dict[str, dict] | None, varying: list[str],
            run_ids: dict[str, str], pruned=lambda number: True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sessions, trials) DataFrames from a Tune ResultGrid (or any iterable of tune Results)."""
    label_keys = [k for k in varying if k != SEED_KEY]
    session_rows, trial_rows = [], []
    for r in results:
        config = r.config or {}
        df = r.metrics_dataframe
        last = r.metrics or {}
        trial_id = last.get("trial_id") or Path(r.path).name
        if r.error or last.get(K.REPORT_KIND) == K.KIND_FAILED:
            state = K.FAILED  # an exception, or a numerical fault reported by the trainable
        elif last.get(K.REPORT_KIND) != K.KIND_SUMMARY and not last.get("done"):
            state = K.INTERRUPTED  # the study stopped before this trial ended; --resume continues it
        else:
            state = outcome(last, error=False, pruned=pruned(config.get(OPTUNA_TRIAL_KEY)))
            state = state if isinstance(state, str) else K.COMPLETE
        cfg = {k: _flat(v) for k, v in resolve(config, rows).to_dict().items()}
        ident = {
            "trial_id": trial_id,
            "state": state,
            LABEL: describe(config, label_keys) if label_keys else "all",
            "optuna_trial": config.get(OPTUNA_TRIAL_KEY),
            "mlflow_run_id": run_ids.get(trial_id),
        }
        if df is not None and K.REPORT_KIND in df.columns:
            sess = df[df[K.REPORT_KIND] == K.KIND_SESSION]
            if K.SESSION_STEP in sess:  # a trial restarted from a checkpoint reports some sessions twice
                sess = sess.drop_duplicates(subset=K.SESSION_STEP, keep="last")
            for _, row in sess.iterrows():
                m = {k: row[K.SESSION + k] for k in ("session",) + K.SESSION_METRICS if K.SESSION + k in row}
                m["session"] = int(m["session"])
                session_rows.append({**ident, **cfg, **m})
            base = df[df[K.REPORT_KIND] == K.KIND_BASE]
            epochs = int(base[K.BASE_STEP].max()) if len(base) else 0
        else:
            epochs = 0
        span = _span(df)
        summary = K.strip(K.SUMMARY, last) if state == K.COMPLETE else {}
        trial_rows.append({**ident, **cfg, "base_epochs_run": epochs, **span, **summary,
                           "error": str(r.error)[:2000] if r.error else last.get(K.ERROR),
                           K.WARNING: (last.get(K.WARNING) or "") if state == K.COMPLETE else "",
                           BASE_BOUNDARIES: base_boundaries(last.get(BOUNDARIES_KEY))})
    sessions = pd.DataFrame(session_rows)
    trials = pd.DataFrame(trial_rows)
    return sessions, trials


def base_boundaries(boundaries_json: str | None) -> str | None:
    """m of the base classes as they enter the sessions (JSON list, 4 decimals), from a trial's boundaries."""
    if not boundaries_json:
        return None
    return json.dumps([round(float(m), 4) for m in json.loads(boundaries_json)[0]])


def _span(df) -> dict[str, float]:
    """started_at / finished_at (unix seconds) of a trial from Tune's per-report timestamps.

    Tune's `timestamp` has 1 s resolution; bench/bench.py uses these spans for throughput.
    """
    if df is None or not {"timestamp", "time_total_s"} <= set(df.columns) or not len(df):
        return {"started_at": math.nan, "finished_at": math.nan}
    return {"started_at": float((df["timestamp"] - df["time_total_s"]).min()), "finished_at": float(df["timestamp"].max())}


def ci95(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of the t-distribution confidence interval (0 for one value)."""
    from scipy import stats

    vals = [float(v) for v in values if K.finite(v)]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan
    mean = sum(vals) / n
    if n == 1:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    return mean, float(stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n))


def paper_table(sessions: pd.DataFrame, *, metric: str = "test_acc", baseline: str | dict[str, str] | None = None,
                order: list[str] | None = None, label: str = LABEL) -> pd.DataFrame:
    """Rows = configurations, columns = sessions 0..N, average, (Delta_last vs `baseline`).

    Cells are mean over seeds (trials) of `metric` in percent, with the 95% CI half-width
    (t-distribution) when a row has several seeds. Only COMPLETE trials count. `baseline` is one
    row every row is compared with, or {row: its reference row} (the hosts study: each host with
    ADBS against the same host without); rows without a reference get no Delta_last.
    """
    s = sessions[sessions["state"] == K.COMPLETE] if "state" in sessions else sessions
    if s.empty:
        return pd.DataFrame()
    labels = list(dict.fromkeys(s[label]))
    if order:
        labels = [x for x in order if x in labels] + [x for x in labels if x not in order]
    n_sessions = int(s["session"].max()) + 1
    per_trial = s.pivot_table(index=[label, "trial_id"], columns="session", values=metric, aggfunc="first")
    last_of = {}
    out = []
    for lab in labels:
        t = per_trial.loc[lab]
        row: dict[str, Any] = {"config": lab, "seeds": len(t)}
        for sess in range(n_sessions):
            row[str(sess)] = ci95(list(t[sess])) if sess in t else (math.nan, math.nan)
        # each trial's average over its own sessions (10-way rows have fewer sessions than 5-way ones)
        row["avg"] = ci95(list(t.mean(axis=1, skipna=True)))
        last_col = max(c for c in t.columns if t[c].notna().any())
        last_of[lab] = ci95(list(t[last_col]))[0]
        out.append(row)
    reference = baseline if isinstance(baseline, dict) else {lab: baseline for lab in labels} if baseline else {}
    if any(ref in last_of for ref in reference.values()):
        for row in out:
            ref = reference.get(row["config"])
            row["delta_last"] = last_of[row["config"]] - last_of[ref] if ref in last_of else math.nan
    return pd.DataFrame(out)


def format_table(table: pd.DataFrame, *, markdown: bool = False) -> str:
    """Fixed-width text (or Markdown) rendering of `paper_table`: `58.71 ± 1.20` cells."""
    if table.empty:
        return "(no completed trials)"

    def cell(v: Any, seeds: int) -> str:
        if isinstance(v, tuple):
            m, h = v
            if not K.finite(m):
                return "-"
            return f"{m:.2f}" if seeds < 2 or not K.finite(h) else f"{m:.2f} ± {h:.2f}"
        if isinstance(v, float):
            return f"{v:+.2f}" if K.finite(v) else "-"
        return str(v)

    headers = ["config", "seeds"] + [c for c in table.columns if c not in ("config", "seeds")]
    names = {"avg": "avg", "delta_last": "Δlast"}
    head = [names.get(h, h if not h.isdigit() else f"s{h}") for h in headers]
    body = [[cell(r[h], int(r["seeds"])) for h in headers] for _, r in table.iterrows()]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def departure_lines(trials: pd.DataFrame) -> list[str]:
    """A header line when every trial departs from the released code's boundary handling in the same way."""
    from adbs.config import BOUNDARY_REMEDIES, Config

    if trials.empty:
        return []
    default = Config()
    same = {}
    for name in BOUNDARY_REMEDIES:
        if name not in trials:
            continue
        values = trials[name].dropna().unique()
        if len(values) == 1 and values[0] != getattr(default, name):
            same[name] = values[0]
    if not same:
        return []
    return ["departs from the released code in every trial: "
            + ", ".join(f"{k}={_plain(v)}" for k, v in same.items())
            + " (a boundary remedy; docs/boundary-dynamics.md, studies/boundary.py)"]


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def annotate(text: str, trials: pd.DataFrame, *, markdown: bool = False, order: list[str] | None = None) -> str:
    """The table with its departures from the released code above it and the collapse warnings below it."""
    head, foot = departure_lines(trials), warning_lines(trials, order)
    if not markdown:
        return "\n".join([*head, text, *foot])
    return "\n\n".join([*head, text] + (["\n".join(f"- {w}" for w in foot)] if foot else []))


def warning_lines(trials: pd.DataFrame, order: list[str] | None = None) -> list[str]:
    """One line per completed trial with a collapse warning (printed under the study's table, in its row order)."""
    if trials.empty or K.WARNING not in trials:
        return []
    flagged = trials[(trials["state"] == K.COMPLETE) & trials[K.WARNING].fillna("").astype(bool)]
    rank = {lab: i for i, lab in enumerate(order or [])}
    rows = sorted(flagged.to_dict("records"), key=lambda r: (rank.get(r[LABEL], len(rank)), str(r[LABEL]),
                                                             r.get("seed") if K.finite(r.get("seed")) else 0))
    return [f"WARNING {_trial_name(r)}: {r[K.WARNING]}" for r in rows]


def _trial_name(r: dict) -> str:
    seed = r.get("seed")
    return f"{r[LABEL]} seed={int(seed)}" if seed is not None and K.finite(seed) else str(r[LABEL])


def best_config(trials: pd.DataFrame) -> dict[str, Any] | None:
    """The configuration with the best mean objective over its seeds (validation, never test)."""
    obj = K.OBJECTIVE[len(K.SUMMARY):]
    t = trials[(trials["state"] == K.COMPLETE)] if len(trials) else trials
    if t.empty or obj not in t:
        return None
    means = t.groupby(LABEL)[obj].mean()
    lab = means.idxmax()
    rep = t[t[LABEL] == lab].iloc[0]
    cfg = {k: (json.loads(rep[k]) if isinstance(rep[k], str) and rep[k].startswith("[") else rep[k])
           for k in CONFIG_COLUMNS}
    cfg = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in cfg.items()}
    cfg = {k: (v.item() if hasattr(v, "item") else v) for k, v in cfg.items()}
    return {"config_label": lab, "objective": K.OBJECTIVE, "mean_over_seeds": float(means[lab]),
            "seeds": int((t[LABEL] == lab).sum()), "config": cfg}


def write(study_dir: Path, sessions: pd.DataFrame, trials: pd.DataFrame, table_text: str,
          best: dict | None) -> list[Path]:
    """Write the study's result files; returns their paths (attached to the parent MLflow run)."""
    files = [study_dir / "sessions.parquet", study_dir / "trials.parquet", study_dir / "table.txt",
             study_dir / "best_config.json"]
    sessions.to_parquet(files[0], index=False)
    trials.to_parquet(files[1], index=False)
    files[2].write_text(table_text + "\n")
    files[3].write_text(json.dumps(best, indent=1, default=str) + "\n")
    return files
