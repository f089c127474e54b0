"""The paper's report for one dataset: every part study's table beside the paper's numbers, its figures, and
the D_cs table, drawn from the MLflow store alone (studies/paper.py writes it after its parts ran;
studies/report.py redraws it for a finished paper study, on any machine that reaches the store).

A paper study is an MLflow run (experiment `paper`, `paper-smoke` for --smoke; tag adbs.role=paper) whose tag adbs.parts names the
parent run of each part study ({"hosts": run id, "ablation": ..., ...}); nothing else is stored for it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from adbs_lab.results import from_store
from adbs_lab.results import renderings
from adbs_lab.results import run_files
from adbs_lab.results.names import EMBEDDED
from adbs_lab.stores.paths import SMOKE

__all__ = ["EXPERIMENT", "ROLE", "PARTS", "NOT_QUOTED", "dcs_table", "render_dcs", "dcs_across",
           "write_report", "write_across", "redraw_meta", "log_run", "find", "latest_by_dataset", "by_dataset"]

EXPERIMENT = "paper"
ROLE = "paper"

PARTS = {
    "hosts": "Hosts table: the four hosts without and with ADBS (paper Tables 1-3)",
    "ablation": "Ablation: fixed boundary, ADB, ADB+IC (paper's ablation table); t-SNE and prototype similarity",
    "alpha_sweep": "Sensitivity to the IC loss weight alpha (supplement's alpha curve)",
    "kshot_grid": "Practical settings: 5- and 10-way, k-shot (supplement's k-shot figures)",
}
"""The part studies in report order, with what each reproduces."""

NOT_QUOTED = {
    "alpha_sweep": "the paper gives this as a figure; its points are not quoted in this repository's docs, so no "
                   "numbers are printed beside ours",
    "kshot_grid": "the paper gives these as figures; their points are not quoted in this repository's docs, so no "
                  "numbers are printed beside ours",
}


def dcs_table(tables: dict[str, pd.DataFrame], dataset: str | None) -> pd.DataFrame:
    """Class separation D_cs after the last session, without vs with ADBS, ours (mean over seeds) beside the paper's
    Table 4: one row per host of the hosts study, and the ablation's baseline vs adb+ic. '-' where not quoted."""
    paper = renderings.PAPER.get(dataset or "", {})
    rows = []

    def ours(table: pd.DataFrame, label: str) -> float:
        hit = table[table["config"] == label] if len(table) and "d_cs" in table else table.iloc[0:0]
        return float(hit["d_cs"].iloc[0][0]) if len(hit) else math.nan

    def add(study: str, name: str, without: str, with_: str, table: pd.DataFrame) -> None:
        rows.append({"dataset": dataset or EMBEDDED, "study": study, "row": name,
                     "ours without": ours(table, without), "ours with ADBS": ours(table, with_),
                     "paper without": paper.get(without, {}).get("d_cs"),
                     "paper with ADBS": paper.get(with_, {}).get("d_cs")})

    hosts = tables.get("hosts", pd.DataFrame())
    for label in (c for c in (hosts["config"] if len(hosts) else []) if not c.endswith("+ADBS")):
        add("hosts", label, label, f"{label}+ADBS", hosts)
    if len(tables.get("ablation", pd.DataFrame())):
        add("ablation", "baseline vs adb+ic", "baseline", "adb+ic", tables["ablation"])
    return pd.DataFrame(rows)


def render_dcs(df: pd.DataFrame) -> str:
    """Markdown, 4 decimals as the paper quotes D_cs."""
    return renderings.render_plain(df, "markdown", digits=4) if len(df) else "(no completed trials with D_cs)"


def dcs_across(per_dataset: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One D_cs table across datasets (`per_dataset`: dataset label -> its dcs_table): a row per method row (the
    hosts' rows, then the ablation's), and per dataset ours without and with ADBS, followed by the paper's Table 4
    values where the paper reports that dataset. NaN where a dataset's study has no such row."""
    columns = ["study", "row"]
    rows: dict[tuple[Any, Any], dict[str, Any]] = {}  # (study, row) -> the row across datasets
    for name, dcs in per_dataset.items():
        cols = ["ours without", "ours with ADBS"] + (["paper without", "paper with ADBS"] if name in renderings.PAPER
                                                     else [])
        columns += [f"{name}: {c}" for c in cols]
        for r in dcs.to_dict("records"):
            row = rows.setdefault((r["study"], r["row"]), {"study": r["study"], "row": r["row"]})
            row.update({f"{name}: {c}": r[c] for c in cols})
    # a host only one dataset ran still comes before the ablation's row (sorted is stable)
    return pd.DataFrame(sorted(rows.values(), key=lambda r: r["study"] != "hosts"), columns=columns)


def write_report(client, parts: dict[str, str], out: Path, *, dataset: str | None,
                 meta: dict[str, str]) -> list[Path]:
    """report.md, dcs.md/.csv and each part's tables and figures (out/figures/<part>/), from the parts' parent
    runs in the store (`parts`: {part: parent run id})."""
    return _write_report(client, parts, out, dataset=dataset, meta=meta)[0]


def _write_report(client, parts: dict[str, str], out: Path, *, dataset: str | None,
                  meta: dict[str, str]) -> tuple[list[Path], pd.DataFrame]:
    """write_report's files, and its D_cs table (for the table across datasets)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# ADBS paper reproduction: {dataset or 'embedded benchmark'}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()] + [""]
    lines += [("Every table: test accuracy (%) per session, mean ± 95% CI over seeds (selection and pruning used "
               f"validation accuracy only). Paper numbers: {renderings.PAPER_SOURCE}. Each part's verdicts are a "
               "family of their own, named where its table opens: all true together with probability at least 95%, "
               "not adjusted for the other parts' verdicts (docs/statistics.md)."), ""]
    if dataset not in renderings.PAPER:
        lines += [(f"The paper reports no numbers for {repr(dataset) if dataset else 'the embedded benchmark'}; the "
                   f"tables beside the paper's need {', '.join(renderings.PAPER)}."), ""]
    files, tables = [], {}
    for part, title in PARTS.items():
        if part not in parts:
            continue
        study = from_store.load_study(client, parts[part])
        table = from_store.study_table(study)
        tables[part] = table
        folder = out / "figures" / part
        folder.mkdir(parents=True, exist_ok=True)
        # the part's notes above its table (a smoke run, settings changed), as the part itself wrote it
        text = renderings.render(table, "text", trials=study.trials, order=study.order, notes=study.notes)
        (folder / "table.txt").write_text(text + "\n")
        md = renderings.render(table, "markdown", trials=study.trials, order=study.order, notes=study.notes)
        (folder / "table.md").write_text(md + "\n")
        figs = (run_files.study_figures(study.name, study.sessions, study.trials, folder, order=study.order)
                if len(study.sessions) else [])
        files += [folder / "table.txt", folder / "table.md", *figs]
        run = study.parent.info
        lines += [f"## {title}", "", (f"Study `{part}`, parent run {run.run_id} ({run.status.lower()}), "
                                      f"{len(study.trials)} trials."), "", md, ""]
        beside = renderings.paper_beside(table, dataset)
        if beside is not None:
            lines += ["Ours (mean over seeds) beside the paper ('-' = not quoted):", "",
                      renderings.render_plain(beside, "markdown"), ""]
        elif part in NOT_QUOTED:
            lines += [f"Paper: {NOT_QUOTED[part]}.", ""]
        elif dataset in renderings.PAPER:
            lines += [f"Paper: no rows of this table are quoted for {dataset}.", ""]
        lines += [f"![{f.name}](figures/{part}/{f.name})" for f in figs] + [""]
    dcs = dcs_table(tables, dataset)
    dcs.to_csv(out / "dcs.csv", index=False, float_format="%.4f")
    (out / "dcs.md").write_text(render_dcs(dcs) + "\n")
    lines += ["## Class separation D_cs (paper Table 4)", "",
              ("D_cs after the last session (docs/metrics.md), mean over seeds, without and with ADBS; the paper's "
               "value beside ours where it quotes one ('-' where not)."),
              "", render_dcs(dcs), ""]
    path = out / run_files.REPORT_MD
    path.write_text("\n".join(lines))
    return [path, out / "dcs.md", out / "dcs.csv", *files], dcs


def write_across(client, runs: dict, out: Path, *, uri: str) -> list[Path]:
    """Each dataset's paper report in out/<dataset>/ (what `report.py paper` draws for one), and out/report.md and
    dcs.md/.csv: one D_cs table across the datasets (`runs`: dataset label -> paper run)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files, dcs = [], {}
    for name, run in runs.items():
        got, dcs[name] = _write_report(client, json.loads(run.data.tags["adbs.parts"]), out / name,
                                       dataset=None if name == EMBEDDED else name, meta=redraw_meta(run, uri))
        files += got
    table = dcs_across(dcs)
    table.to_csv(out / "dcs.csv", index=False, float_format="%.4f")
    (out / "dcs.md").write_text(render_dcs(table) + "\n")
    lines = ["# ADBS paper reproduction: class separation D_cs across datasets", ""]
    lines += [f"- {name}: paper run {run.info.run_name} ({run.info.run_id}), [its report]({name}/report.md)"
              for name, run in runs.items()]
    lines += [f"- tracking URI: {uri}", "",
              ("D_cs after the last session (docs/metrics.md), mean over seeds, without and with ADBS, one column pair "
               "per dataset; the paper's Table 4 value beside ours where the paper reports the dataset ('-' where it "
               f"quotes none). Paper numbers: {renderings.PAPER_SOURCE}."), "", render_dcs(table), ""]
    path = out / run_files.REPORT_MD
    path.write_text("\n".join(lines))
    return [path, out / "dcs.md", out / "dcs.csv", *files]


def redraw_meta(run, uri: str) -> dict[str, str]:
    """The header lines of a report redrawn from paper run `run`."""
    return {"paper run": f"{run.info.run_name} ({run.info.run_id})",
            "command": f"`{run.data.tags.get('adbs.command', '?')}`", "tracking URI": uri}


def log_run(client, uri: str, *, dataset: str | None, parts: dict[str, str], tags: dict[str, str], files: list[Path],
            root: Path, storage: str | None = None, experiment: str = EXPERIMENT) -> str:
    """The paper study's MLflow run (in `experiment`: `paper`, or `paper-smoke` for --smoke): the parts' parent runs in
    a tag, the report as artifacts (beside the store's other artifacts, as the studies' experiments keep theirs;
    `storage`: the parts' --storage, where a database store's artifacts go)."""
    import time

    from adbs_lab.stores.paths import artifact_root

    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment, artifact_location=artifact_root(uri, storage))
    run = client.create_run(exp_id, run_name=f"paper {dataset or 'embedded'} {time.strftime('%Y-%m-%d %H:%M')}",
                            tags={"adbs.role": ROLE, "adbs.dataset": dataset or "", "adbs.parts": json.dumps(parts),
                                  **tags})
    for f in files:
        rel = Path(f).relative_to(root).parent
        client.log_artifact(run.info.run_id, str(f), artifact_path=None if str(rel) == "." else str(rel))
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def find(client, ref: str):
    """The paper run `ref` names (its run id), or the latest finished one of experiment `paper` (`paper-smoke`: of the
    --smoke paper studies); None when `ref` is neither (then it names an ordinary study)."""
    if from_store.RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except Exception:  # noqa: BLE001 - not a run id: maybe a study name
            return None
        return run if run.data.tags.get("adbs.role") == ROLE else None
    if ref not in (EXPERIMENT, EXPERIMENT + SMOKE) or client.get_experiment_by_name(ref) is None:
        return None
    runs = client.search_runs([client.get_experiment_by_name(ref).experiment_id],
                              filter_string=f"tags.`adbs.role` = '{ROLE}' and attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    if not runs:
        raise from_store.ReportError(f"experiment {ref!r} holds no finished paper study; run studies/paper.py")
    return runs[0]


def latest_by_dataset(client, wanted: list[str], experiment: str = EXPERIMENT) -> dict:
    """The latest finished paper run of each dataset in `wanted` (labels; ['all']: every dataset the store holds one
    of, the paper's datasets first, in Table 4's order, then the embedded benchmark), in `experiment` (`paper`, or
    `paper-smoke` for the --smoke paper studies)."""
    exp = client.get_experiment_by_name(experiment)
    runs = [] if exp is None else from_store.all_runs(
        client, [exp.experiment_id], f"tags.`adbs.role` = '{ROLE}' and attributes.status = 'FINISHED'")
    latest = {run.data.tags.get("adbs.dataset") or EMBEDDED: run for run in runs}  # oldest first: the latest wins
    if not latest:
        raise from_store.ReportError(f"experiment {experiment!r} holds no finished paper study; run studies/paper.py")
    order = [*renderings.PAPER, EMBEDDED]
    have = sorted(latest, key=lambda d: (order.index(d) if d in order else len(order), d))
    names = have if wanted == ["all"] else list(dict.fromkeys(wanted))
    missing = [d for d in names if d not in latest]
    if missing:
        raise from_store.ReportError(f"no finished paper study of {', '.join(missing)} in this store; paper studies here: "
                                 f"{', '.join(have)} (--datasets all takes every one)")
    return {d: latest[d] for d in names}


def by_dataset(runs: list) -> dict:
    """Paper runs named by id, keyed by their dataset label; two runs of one dataset cannot share a column."""
    out: dict[str, Any] = {}  # dataset label -> its mlflow Run
    for run in runs:
        name = run.data.tags.get("adbs.dataset") or EMBEDDED
        if name in out:
            raise from_store.ReportError(f"paper runs {out[name].info.run_id} and {run.info.run_id} are both of {name}; "
                                     "the table across datasets takes one paper run per dataset")
        out[name] = run
    return out
