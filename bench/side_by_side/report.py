"""The report (text) and the files a run writes to --out: vs_official.json, report.txt, runs.csv, summary.csv,
negatives.csv.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from . import BASE_CLASSES
from adbs_lab.stats.intervals import mean_t

from .stats import negative_counts, summarize_negatives


def _pm(mean: float, ci: float, n: int = 2) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:6.2f} ± {ci:5.2f}" if n > 1 and not math.isnan(ci) else f"{mean:6.2f} ±   n/a"


def _flag(row: dict[str, Any]) -> str:
    return "" if row["within_noise"] is None else ("  within noise" if row["within_noise"] else "  DIFFERS")


def _diff_ci(row: dict[str, Any]) -> str:
    return "  n/a" if math.isnan(row["diff_ci95"]) else f"{row['diff_ci95']:5.2f}"


def format_report(res: dict[str, Any]) -> str:
    """The report printed at the end of a run and written to report.txt; res is what vs_official.json holds."""
    return "\n".join(_accuracy_lines(res) + _boundary_lines(res) + _time_lines(res) + _setting_lines(res))


def _accuracy_lines(res: dict[str, Any]) -> list[str]:
    """The data and run, then test accuracy per figure: each code's mean ± CI, ours - released ± Welch CI."""
    a, data = res["args"], res["data"]
    lines = [
        f"Released ADBS code vs ours on identical data: benchmark v{data['synthetic_version']} (synthetic seed "
        f"{data['synthetic_seed']}), {data['train_per_class']} train / {data['test_per_class']} test images per class, "
        f"split seed {data['split_seed']}",
        f"device {a['device']}{' (' + res['device_name'] + ')' if res.get('device_name') else ''}, {a['epochs']} base "
        f"epochs, {a['sessions']} incremental sessions, seeds {' '.join(map(str, a['seeds']))} (each code)",
        "",
        "test accuracy (%), mean ± 95% CI half-width over seeds (t-distribution); diff = ours - released ± its Welch "
        "95% CI (within noise: the CI holds 0)",
        f"{'':>6}  {'released':>15}  {'ours':>15}  {'diff':>16}",
    ]
    for r in res["summary"]:
        lines.append(f"{r['figure']:>6}  {_pm(r['released_mean'], r['released_ci95'], r['n_released']):>15}  "
                     f"{_pm(r['ours_mean'], r['ours_ci95'], r['n_ours']):>15}  {r['diff']:+7.2f} ± {_diff_ci(r)}"
                     f"{_flag(r)}")
    s0c = [r["s0_carried"] for r in res["released"] if r.get("s0_carried") is not None]
    if s0c:
        m, c = mean_t(s0c)
        lines.append(f"released s0 is what it reports, the best test accuracy over the base epochs; the model it "
                     f"carries into the sessions scores {_pm(m, c, len(s0c)).strip()} (ours s0 is that model's)")
    return lines


def _per_seed(runs: list[dict[str, Any]], key: str, fmt: str = "{}") -> str:
    vals = [r.get(key) for r in runs]
    shown = " ".join("-" if v is None else fmt.format(v) for v in vals)
    ok = [v for v in vals if v is not None]
    return shown + (" (mean " + fmt.format(float(np.mean(ok))) + ")" if len(ok) > 1 else "")


def _boundary_lines(res: dict[str, Any]) -> list[str]:
    """Negative base boundaries and mean |m| per seed, then across seeds with CIs."""
    rel, ours = res["released"], res["ours"]
    lines = [
        "",
        f"negative base boundaries (of {BASE_CLASSES}) after the base session, per seed: released "
        f"{_per_seed(rel, 'negative_base', '{:.3g}')} | ours {_per_seed(ours, 'negative_base', '{:.3g}')}",
        f"mean |m| of the base boundaries: released {_per_seed(rel, 'base_abs_mean', '{:.2f}')} | ours "
        f"{_per_seed(ours, 'base_abs_mean', '{:.2f}')}",
    ]
    neg = res.get("negatives") or summarize_negatives(rel, ours)
    if neg:
        lines += ["", f"negative base boundaries (of {BASE_CLASSES}) across seeds, mean ± 95% CI half-width (t); "
                      "diff = ours - released ± its Welch 95% CI"]
        for r in neg:
            diff = "-" if math.isnan(r["diff"]) else f"{r['diff']:+6.2f} ± {_diff_ci(r)}"
            lines.append(f"  {r['label']:<23} released {_pm(r['released_mean'], r['released_ci95'], r['n_released'])}"
                         f"  ours {_pm(r['ours_mean'], r['ours_ci95'], r['n_ours'])}  diff {diff}{_flag(r)}"
                         f"  (per seed: released {' '.join(map(str, r['released'])) or '-'} | ours "
                         f"{' '.join(map(str, r['ours'])) or '-'})")
    if res.get("released_from"):
        lines.append(f"released runs reused from {res['released_from']} (same data, seeds, epochs, sessions, device)")
    return lines


def _time_lines(res: dict[str, Any]) -> list[str]:
    """Base epoch times and wall time per run."""
    rel, ours = res["released"], res["ours"]
    rt = [e["train_s"] for r in rel for e in r["epochs"] if "train_s" in e]
    rs = [e["test_s"] for r in rel for e in r["epochs"] if "test_s" in e]
    ot = [e["epoch_s"] for r in ours for e in r["epochs"]]
    return [
        "base epoch time (s, mean over epochs and seeds): released train "
        + (f"{np.mean(rt):.2f}" if rt else "-") + " + test " + (f"{np.mean(rs):.2f}" if rs else "-")
        + " | ours train + validation pass " + (f"{np.mean(ot):.2f}" if ot else "-"),
        "wall time per run (s), process start to exit: released "
        + " ".join(f"{r['wall_s']:.0f}" for r in rel) + " | ours " + " ".join(f"{r['wall_s']:.0f}" for r in ours)
        + f" | all runs {res['wall_s']:.0f} s ({res['args']['jobs']} at a time)",
    ]


def _setting_lines(res: dict[str, Any]) -> list[str]:
    """The settings of ours that differ from the released run, and the patches with the run setting."""
    diffs = res["differences"]
    lines = ["", "settings of ours that differ from the released run" + (
        ": (ours not run, --released-only)" if not res["ours"] else ":" if diffs else ": none")]
    lines += [f"  - {d}" for d in diffs]
    lines += ["", f"patches applied to the temporary copy of {res['args']['official']} (bench/side_by_side/"
                  "patches.yaml):"]
    lines += [f"  {p}" for p in res["patches"]]
    lines.append("  run setting  -num_crops 1 1 -size_crops 32 32 (published 2 x 224 + 4 x 96 px crops are "
                 "computed and dropped by base_train)")
    return lines


def write_outputs(out: Path, res: dict[str, Any], report: str) -> None:
    """vs_official.json (everything), report.txt, and the CSVs: runs, summary, negatives."""
    (out / "vs_official.json").write_text(json.dumps(res, indent=1, default=str))
    (out / "report.txt").write_text(report + "\n")
    with open(out / "runs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "seed", "session", "test_acc", "negative_base", "wall_s"])
        for code in ("released", "ours"):
            for r in res[code]:
                for t, v in enumerate(r["sessions"]):
                    w.writerow([code, r["seed"], t, v, r.get("negative_base"), r.get("wall_s")])
    with open(out / "summary.csv", "w", newline="") as fh:
        keys = ["figure", "released_mean", "released_ci95", "ours_mean", "ours_ci95", "diff", "diff_ci95",
                "n_released", "n_ours", "within_noise"]
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in res["summary"]:
            w.writerow(r)
        for r in res.get("negatives", []):  # negative base boundaries: figures negative_epoch1, negative_base
            w.writerow({**{k: r[k] for k in keys}, "figure": f"negative_{r['figure']}"})
    with open(out / "negatives.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "seed", "negative_epoch1", "negative_base"])
        for code in ("released", "ours"):
            for r in res[code]:
                c = negative_counts(r)
                w.writerow([code, r["seed"], c["epoch1"], c["base"]])
