"""A study's table in each report format (text, markdown, LaTeX, CSV), and beside the paper's quoted numbers
(PAPER): the renderings of adbs_lab/results/from_store.py (studies/report.py), which re-exports them."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from adbs.cells import mean_ci, number
from adbs_lab.results import compare
from adbs_lab.results import comparisons
from adbs_lab.results import tables

__all__ = ["PAPER", "PAPER_SOURCE", "to_csv", "to_latex", "render", "paper_beside", "render_plain"]


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
        if "delta_paired" in table:  # seed by seed: mean, the adjusted 95% half-width (NaN for n < 2), n, verdict
            row["delta_last_paired"], row["delta_last_paired_ci95"], row["delta_last_paired_n"] = r["delta_paired"]
            if tables.VERDICT in table:
                row["verdict"] = r[tables.VERDICT] if isinstance(r[tables.VERDICT], str) else ""
        if "d_cs" in table:
            row["d_cs"], row["d_cs_ci95"] = r["d_cs"]
        if tables.FRONT in table:  # 1 on the Pareto front of the study's objectives
            row["front"] = int(r[tables.FRONT] == "*")
        if tables.SEED_STATES in table:  # completed of ran, and what is missing (adbs_lab/results/seed_counts.py)
            row["seed_states"] = r[tables.SEED_STATES]
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
            + [{"last": "Last", "pd": "PD", "hmean": "H$_{last}$"}[c] for c in extra]
            + (["$\\Delta_{last}$"] if has_delta else [])
            + (["paired $\\Delta_{last}$"] if "delta_paired" in table else [])
            + (["Verdict"] if tables.VERDICT in table else [])
            + (["$D_{cs}$"] if has_dcs else []) + (["Front"] if tables.FRONT in table else []))

    def cell(v, digits: int = 2) -> str:
        m, h = v
        return mean_ci(m, None if h == 0 else h, digits, pm=" $\\pm$ ")

    body = []
    for _, r in table.iterrows():
        cells = ([_tex(r["config"]), tables.seeds_cell(r)] + ([str(r["sessions"])] if has_sessions else [])
                 + [cell(r[c]) for c in cols] + [cell(r["avg"])] + [cell(r[c]) for c in extra])
        if has_delta:
            cells.append(number(r["delta_last"], signed=True))
        if "delta_paired" in table:
            cells.append(_tex(compare.format_paired(r["delta_paired"])).replace("±", "$\\pm$"))
        if tables.VERDICT in table:
            v = r[tables.VERDICT] if isinstance(r[tables.VERDICT], str) else ""
            cells.append(_tex(v).replace("±", "$\\pm$"))
        if has_dcs:
            cells.append(cell(r["d_cs"], 3))
        if tables.FRONT in table:
            cells.append("$\\ast$" if r[tables.FRONT] == "*" else "")
        body.append(cells)
    said = [f"% {line}" for line in comparisons.quotable(table.attrs.get("comparisons") or [])]
    lines = [*said, "\\begin{table}[t]", "\\centering", tables.render_cells(head, body, "latex")]
    if caption:
        lines.append(f"\\caption{{{_tex(caption)}}}")
    lines.append("\\end{table}")
    return "\n".join(lines)


def render(table: pd.DataFrame, fmt: str, caption: str = "", trials: pd.DataFrame | None = None,
           order: list[str] | None = None, notes: list[str] | tuple[str, ...] = ()) -> str:
    """The table in `fmt`; text and markdown carry the notes, departures and warnings the study printed
    (`notes`, `trials`)."""
    if fmt in ("text", "markdown"):
        text = tables.format_table(table, markdown=fmt == "markdown")
        return text if trials is None else tables.annotate(text, trials, markdown=fmt == "markdown", order=order,
                                                            notes=notes)
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
        return number(v, digits) if v is None or isinstance(v, float) else str(v)

    head = list(df.columns)
    places = [digits if digits is not None else 4 if h == "D_cs" else 2 for h in head]  # the paper: D_cs to 4
    body = [[cell(v, d) for v, d in zip(row, places)] for row in df.itertuples(index=False)]
    if fmt == "csv":
        return df.to_csv(index=False, float_format="%.2f")
    if fmt == "latex":
        head, body = [_tex(h) for h in head], [[_tex(c) for c in b] for b in body]
    return tables.render_cells(head, body, fmt, left=2)
