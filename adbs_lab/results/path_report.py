"""The ablation path's outputs (studies/ablation_path.py): its table, its figure, report.md, path.json and its MLflow
run. The numbers come from adbs_lab/search/path.py; the printed intervals are rounded outward until their ends
give the verdict printed beside them (the table's rule, adbs_lab/results/comparisons.py: ends)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from adbs import light
from adbs_lab.results import run_pick
from adbs_lab.search.path import Confirmed, Step, runs_saved
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.verdicts import Verdict, printed_ends, why_no_interval
from adbs_lab.stores.paths import SMOKE

if TYPE_CHECKING:
    from adbs_lab.results import from_store
else:  # pandas: loaded where a path run is looked up (studies/ablation_path.py imports this module before its checks)
    from_store = light.lazy("adbs_lab.results.from_store")

__all__ = ["EXPERIMENT", "ROLE", "FILES", "interval_text", "table_rows", "table_text", "saved_line", "figure", "write",
           "log_run", "find", "redraw"]

EXPERIMENT = "ablation_path"
ROLE = "ablation_path"
"""The tag adbs.role of the path's own MLflow run; its experiment also holds the parent runs of the path's Tune runs
(role study: one race look or the confirmation each, not the path)."""
FILES = ("table.txt", "table.md", "path.json", "report.md", "path.png")


def interval_text(v: Verdict, delta: float) -> str:
    """`+1.23 (95% CI +0.40 to +2.06)`, the ends rounded outward so they give `v`'s verdict (`printed_ends`), the
    estimate with as many decimals; none from too few pairs or without spread (verdicts.why_no_interval)."""
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{v.estimate:+.2f} (n={v.n}: {why_no_interval(v)})"
    lo, hi, d = printed_ends(v, delta)
    return f"{v.estimate:+.{d}f} ({lo} to {hi})"


def table_rows(start: float, confirmed: Sequence[Confirmed], policy: VerdictPolicy) -> list[list[str]]:
    """[step, change, objective, Δ with interval, verdict]: step 0 is A, each later row one change."""
    rows = [["0", "(from)", f"{start:.2f}", "", ""]]
    for c in confirmed:
        note = " (post-selection)" if c.post_selection else ""
        rows.append([str(c.step), c.change, f"{c.mean:.2f}", interval_text(c.verdict, policy.delta),
                     policy.wording(c.verdict.verdict) + note])
    return rows


def table_text(rows: list[list[str]], markdown: bool, policy: VerdictPolicy) -> str:
    head = ["step", "change", "objective", f"Δ ({policy.level_text} CI)", "verdict"]
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *rows])


def saved_line(steps: Sequence[Step]) -> str:
    """How many trials racing saved against running every candidate on every selection seed."""
    full = sum(s.full for s in steps)
    return (f"racing saved {runs_saved(steps)} of {full} selection trials (each step's candidates on every selection "
            f"seed; it ran {sum(s.runs for s in steps)})")


def figure(path: Path, start: float, confirmed: Sequence[Confirmed], objective: str, policy: VerdictPolicy) -> Path:
    """Left: the objective along the path; right: each step's Δ with its interval (Bonferroni over the steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.45 * len(confirmed) + 3.2))
    names = ["from"] + [f"{c.step}. {c.change}" for c in confirmed]
    ax1.plot(range(len(names)), [start] + [c.mean for c in confirmed], marker="o")
    ax1.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax1.set_ylabel(f"{objective} (confirmation seeds)")
    ax1.set_title("the path from A to B")
    ys = list(range(len(confirmed)))[::-1]
    for y, c in zip(ys, confirmed):
        v = c.verdict
        ax2.plot([v.estimate], [y], "o", color="C1" if c.post_selection else "C0")
        if math.isfinite(v.lo):
            ax2.plot([v.lo, v.hi], [y, y], color="C1" if c.post_selection else "C0")
    ax2.axvline(0, color="grey", lw=0.8)
    ax2.set_yticks(ys, [f"{c.step}. {c.change}" for c in confirmed], fontsize=8)
    ax2.set_xlabel(f"Δ, points ({policy.level_text} CI, Bonferroni over the steps; orange: post-selection)", fontsize=8)
    ax2.set_title("each step's change")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(folder: Path, *, a_name: str, b_name: str, fields: Sequence[str], steps: Sequence[Step], start: float,
          confirmed: Sequence[Confirmed], objective: str, policy: VerdictPolicy, seeds: Sequence[int],
          confirm_seeds: Sequence[int], wall_s: float) -> list[Path]:
    """table.txt, table.md, path.png, path.json and report.md in `folder`; the intervals at the policy's α (its
    level printed), the verdicts against its δ."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = table_rows(start, confirmed, policy)
    (folder / "table.txt").write_text(table_text(rows, False, policy) + "\n")
    (folder / "table.md").write_text(table_text(rows, True, policy) + "\n")
    png = figure(folder / "path.png", start, confirmed, objective, policy)
    delta = policy.delta
    record = {"from": a_name, "to": b_name, "differences": list(fields), "objective": objective, "delta": delta,
              "alpha": policy.alpha,
              "selection_seeds": list(seeds), "confirmation_seeds": list(confirm_seeds), "wall_s": round(wall_s, 1),
              "runs_saved": runs_saved(steps), "steps": [_step_record(s, c) for s, c in zip(steps, confirmed)]}
    (folder / "path.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    post = any(c.post_selection for c in confirmed)
    report = [f"# Ablation path: {a_name} -> {b_name}", "",
              f"{len(fields)} differences ({', '.join(fields)}); selection on {objective} over seeds "
              f"{' '.join(map(str, seeds))}, racing (docs/statistics.md); Δ on confirmation seeds "
              f"{' '.join(map(str, confirm_seeds))}, each step against the one before, paired t-interval at "
              f"{policy.level_text} with Bonferroni over the {len(confirmed)} steps, δ = {delta:g} points.", "",
              table_text(rows, True, policy), "", saved_line(steps) + ".", "",
              *(["Post-selection: the confirmation seeds include seeds that chose the step or one before it (the "
                 "configuration its Δ is measured against), so its Δ is biased; rerun with --confirm-seeds of other "
                 "numbers for an unbiased Δ.", ""] if post else []),
              "![path](path.png)", "", f"wall time {wall_s:.0f} s", ""]
    (folder / "report.md").write_text("\n".join(report))
    return [folder / n for n in ("table.txt", "table.md", "path.json", "report.md")] + [png]


def _step_record(s: Step, c: Confirmed) -> dict[str, Any]:
    v = asdict(c.verdict)
    v["verdict"] = c.verdict.verdict.value
    return {"step": s.k, "field": s.field, "value": s.value, "change": s.change, "candidates": list(s.candidates),
            "race_trials": s.runs, "trials_without_racing": s.full, "selection_seeds": list(s.seeds),
            "looks": [{"k": lk.k, "seeds": lk.n, "leader": lk.leader, "means": lk.means, "dropped": list(lk.dropped)}
                      for lk in s.looks],
            "objective": c.mean, "delta": v, "post_selection": c.post_selection}


def log_run(client, uri: str, storage: str | None, files: Sequence[Path], steps: Sequence[Step],
            confirmed: Sequence[Confirmed], tags: dict[str, str], experiment: str = EXPERIMENT) -> str:
    """The path's MLflow run (in `experiment`: `ablation_path`, `ablation_path-smoke` for --smoke; beside the parent
    runs of its steps' Tune runs): a metric per step (its objective and Δ, step = its number), the runs racing saved,
    the outputs as artifacts."""
    from adbs_lab.stores.paths import artifact_root

    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment,
                                                                   artifact_location=artifact_root(uri, storage))
    run = client.create_run(exp_id, run_name=f"ablation path {time.strftime('%Y-%m-%d %H:%M')}",
                            tags={"adbs.role": ROLE, **tags})
    rid = run.info.run_id
    for c in confirmed:
        client.log_metric(rid, "path/objective", c.mean, step=c.step)
        client.log_metric(rid, "path/delta", c.verdict.estimate, step=c.step)
    client.log_metric(rid, "path/runs_saved", runs_saved(steps))
    for f in files:
        client.log_artifact(rid, str(f))
    client.set_terminated(rid, "FINISHED")
    return rid


def find(client, ref: str, name: str | None = None):
    """The path run `ref` names (studies/report.py): its run id, or, for the experiment's name, the latest path run
    of `--name` `name` (adbs_lab/results/run_pick.py; the latest finished one where there is one); None when `ref`
    names no path (a Tune run of a path is a study of its own: its table, not the path's)."""
    if from_store.RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except Exception:  # noqa: BLE001 - not a run id: maybe a study name
            return None
        return run if run.data.tags.get("adbs.role") == ROLE else None
    exp = client.get_experiment_by_name(ref) if ref in (EXPERIMENT, EXPERIMENT + SMOKE) else None  # smoke: --smoke's
    runs = [] if exp is None else from_store.all_runs(client, [exp.experiment_id], f"tags.`adbs.role` = '{ROLE}'")
    if not runs:
        return None
    picked, _ = run_pick.of_name(runs, name)
    if not picked:
        raise from_store.ReportError(f"{ref} has no path of --name {name}; its paths' names: "
                                     f"{', '.join(run_pick.names(runs))}")
    finished = [r for r in picked if r.info.status == "FINISHED"]
    return (finished or picked)[-1]


def redraw(client, run, out: Path) -> list[Path]:
    """The path's table, figure, report and path.json as its run logged them (FILES), copied into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    got = []
    for f in FILES:
        try:
            got.append(Path(client.download_artifacts(run.info.run_id, f, str(out))))
        except Exception:  # noqa: BLE001 - a path run from before one of them was written: the others
            continue
    return got
