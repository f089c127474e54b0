"""report: a study's tables and figures, rebuilt from the MLflow tracking store alone.

    python studies/report.py ablation                          # latest 'ablation' study in the project's store
    python studies/report.py ablation --format latex --paper   # LaTeX, with the paper's numbers beside ours
    python studies/report.py hosts --paper                     # SAVC, SAVC+ADBS, ... beside the paper's rows
    python studies/report.py 8a27a18c...  --tracking-uri http://127.0.0.1:5000   # a parent (or trial) run id
    python studies/report.py alpha_sweep --tracking-uri sqlite:////abs/laptop/copy/mlflow.db --out DIR
    python studies/report.py ablation boundary                 # two studies in one table and one figure
    python studies/report.py ablation --name try               # the latest run of `ablation.py --name try`
    python studies/report.py ablation --smoke                  # the latest `ablation.py --smoke` (experiment ablation-smoke)
    python studies/report.py paper --out DIR                   # the latest studies/paper.py report, redrawn
    python studies/report.py paper --datasets all --out DIR    # every dataset's, and one D_cs table across them

Reads only the tracking store (nested trial runs: params, session/* metric histories, summary/*,
tags), so a study run on a cluster can be reported on a laptop. The table is
adbs_lab.results.tables.paper_table, the same function the study printed its table with.
With several studies (names or run ids; the same study twice compares two of its runs by id), the rows
of all of them form one table ('<study>: <row>', each row's Delta_last against its own study's baseline)
and one figure (compare_sessions.png: every row's accuracy per session, in its own study's colour, a line style per
study, with its 95% CI band). Each comparison that ran in two or more
tasks (each study run, e.g. one per dataset, and each host or k-shot cell within it: one hosts or kshot_grid study
has several) also gets the interquartile mean of the per-seed differences, the mean of the task means and the
paired probability of improvement, each with its interval (adbs_lab/results/across_tasks.py; docs/statistics.md),
and a warning below 5 runs per task.
`paper --datasets A B` (or 'all', or several paper run ids) redraws the latest paper report of each dataset into
<out>/<dataset>/ and writes one D_cs table across them (<out>/report.md, dcs.md, dcs.csv): a row per host (and
the ablation), per dataset ours without and with ADBS beside the paper's Table 4.
Time: seconds. Writes to --out (default <repo>/results/reports/<study>-<run id>/, or compare-<studies>/):
table.txt and table.<format>, sessions.parquet, trials.parquet, the study's figure(s), report.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# one embeddings.json download per ablation trial: MLflow would draw a progress bar for each of them
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from adbs import exits, writable  # noqa: E402
from adbs.redaction import redact, reveal  # noqa: E402
from adbs_lab.records import metrics_keys as K  # noqa: E402
from adbs_lab.results import names  # noqa: E402
from adbs_lab.results import run_pick  # noqa: E402
from adbs_lab.stats import policy, rules  # noqa: E402
from adbs_lab.stores import paths  # noqa: E402
from adbs_lab.stores import tracking_store  # noqa: E402

if TYPE_CHECKING:
    import mlflow.tracking as mlflow_tracking
    import pandas as pd

    from adbs_lab.results import (across_tasks, figures, from_store, paper, path_report, pareto, renderings, rereading,
                                  tables)
else:  # pandas and MLflow: loaded at their first use, once the flags are checked (adbs/light.py)
    mlflow_tracking = light.lazy("mlflow.tracking")
    pd = light.lazy("pandas")
    across_tasks = light.lazy("adbs_lab.results.across_tasks")
    figures = light.lazy("adbs_lab.results.figures")
    from_store = light.lazy("adbs_lab.results.from_store")
    paper = light.lazy("adbs_lab.results.paper")
    path_report = light.lazy("adbs_lab.results.path_report")
    pareto = light.lazy("adbs_lab.results.pareto")
    renderings = light.lazy("adbs_lab.results.renderings")
    rereading = light.lazy("adbs_lab.results.rereading")
    tables = light.lazy("adbs_lab.results.tables")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", nargs="+",
                   help="study name (= MLflow experiment; its latest study run) or a parent/trial run id; several "
                        "for one table across studies; 'paper' (or a paper run's id) redraws a studies/paper.py report")
    p.add_argument("--tracking-uri", default=None,
                   help=f"MLflow tracking URI (default $MLFLOW_TRACKING_URI or {paths.DEFAULT_TRACKING_URI})")
    p.add_argument("--format", default="text", choices=list(names.EXT),
                   help="table format printed and written (text = exactly what the study printed)")
    p.add_argument("--metric", default="test_acc",
                   help="session metric of the table (default: %(default)s; one of "
                        f"{', '.join(K.SESSION_METRICS)})")
    p.add_argument("--name", default=None,
                   help="the runs of `--name NAME` (a study run beside the default one; default: the default folder's "
                        "runs, so a `--smoke --name try` run is never read by mistake)")
    p.add_argument("--smoke", action="store_true",
                   help="the study's --smoke runs, which its name alone never reads: they live in MLflow experiment "
                        "<study>-smoke (naming that experiment does the same); with 'paper', experiment paper-smoke")
    p.add_argument("--out", type=Path, default=None, help="folder for the rebuilt files")
    p.add_argument("--reference", default=None, metavar="ROW",
                   help="compare every row of the table with this one (its label as the table shows it; across "
                        "studies '<study>: <row>'); default: each row against its own study's reference, as the "
                        "study compared them. Rows of different studies pair seed by seed only where they ran the "
                        "same seeds on the same data; otherwise the comparison is unpaired (Welch) and says so")
    p.add_argument("--resolve", type=float, default=None, metavar="DELTA",
                   help="δ in accuracy points for the verdicts (default: the δ each study ran with, the smallest "
                        "where they differ; docs/statistics.md)")
    p.add_argument("--paper", action="store_true",
                   help="print the paper's numbers beside ours when the study matches a paper table "
                        "(ablation rows on cifar100, mini_imagenet, cub200; hosts rows on cifar100)")
    p.add_argument("--datasets", nargs="+", default=None, metavar="DATASET",
                   help="with 'paper': the latest paper report of each dataset (cifar100, mini_imagenet, cub200, "
                        f"{names.EMBEDDED}; 'all': every one the store holds), and one D_cs table across them")
    return p


def _check_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The refusals that need no store (p.error: usage and exit code 2), before the heavy imports."""
    if args.datasets and args.study != ["paper"]:
        p.error("--datasets picks the datasets of `report.py paper`; several paper run ids need no --datasets")
    if args.datasets and "all" in args.datasets and len(args.datasets) > 1:
        p.error("--datasets all already takes every dataset; name datasets or 'all', not both")
    if args.paper and len(args.study) > 1:
        p.error("--paper compares one study with the paper's table; report the studies one at a time with --paper")
    if args.resolve is not None and rules.delta_problem(args.resolve):
        p.error(f"--resolve {rules.shown(args.resolve)}: {rules.delta_problem(args.resolve)}")
    if args.metric not in K.SESSION_METRICS or args.metric == "n_classes":
        p.error(f"--metric {args.metric!r} is not a session metric; valid metrics: "
                + ", ".join(m for m in K.SESSION_METRICS if m != "n_classes"))


def _smoke(args: argparse.Namespace) -> str:
    return paths.SMOKE if args.smoke else ""


def _refs(args: argparse.Namespace) -> list[str]:
    """What the command names: run ids as given, study names (and 'paper') as their experiments, `<study>-smoke` with
    --smoke (adbs_lab/stores/paths.py: SMOKE)."""
    return [ref if from_store.RUN_ID.match(ref) or ref.endswith(paths.SMOKE) else ref + _smoke(args)
            for ref in args.study]


def _store_form_problem(uri: str) -> str | None:
    """What is wrong with the store's URL that needs no store to say: its form (tracking_store.form_problem), or a
    SQLite file that is not there (a report reads a store; it never makes one)."""
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
        return f"no tracking store at {redact(uri[len('sqlite:///'):])}; pass --tracking-uri"
    return tracking_store.form_problem(uri)


def _read_store(args: argparse.Namespace, uri: str):
    """What the command names, read from the store: (client, the paper reports across datasets or None, one paper
    run or None, the studies, an ablation path's own run or None)."""
    tracking_store.check_tracking_uri(uri)
    client = mlflow_tracking.MlflowClient(reveal(uri))  # the SecretUrl's real URL (adbs/redaction.py)
    refs = _refs(args)
    found = [] if args.datasets else [paper.find(client, ref) for ref in refs]
    papers = [run for run in found if run is not None]
    if papers and len(papers) < len(found):
        raise from_store.ReportError("paper runs and studies cannot share a report: name paper runs only (one per "
                                     "dataset, for the D_cs table across them) or studies only")
    across = (paper.latest_by_dataset(client, args.datasets, paper.EXPERIMENT + _smoke(args)) if args.datasets
              else paper.by_dataset(papers) if len(papers) > 1 else None)
    paper_run = found[0] if len(found) == 1 else None
    paths_named = [] if papers or args.datasets else [path_report.find(client, ref, args.name) for ref in refs]
    if any(paths_named):  # the path's own run (its experiment also holds the parent runs of its Tune runs)
        if len(args.study) > 1:
            raise from_store.ReportError(f"{' '.join(args.study)}: an ablation path's report is its table of steps, "
                                         "not a table of rows to join others; report the path alone")
        return client, None, None, [], paths_named[0]
    studies = ([from_store.load_study(client, ref, args.name) for ref in refs]
               if across is None and paper_run is None else [])
    return client, across, paper_run, studies, None


def _report_across(client, across, args: argparse.Namespace, uri: str) -> int:
    """Each dataset's paper report, and one D_cs table across them beside the paper's Table 4."""
    out = args.out or paths.REPO_ROOT / "results" / "reports" / f"paper-{'-'.join(across)}"
    files = paper.write_across(client, across, out, uri=uri)
    print(files[0].read_text())
    print(f"wrote {out}: report.md, dcs.md, dcs.csv; each dataset's report in {', '.join(f'{d}/' for d in across)}")
    return exits.OK


def _report_paper(client, paper_run, args: argparse.Namespace, uri: str) -> int:
    """studies/paper.py's report: every part's tables beside the paper's, figures, D_cs."""
    tags = paper_run.data.tags
    out = args.out or paths.REPO_ROOT / "results" / "reports" / f"paper-{paper_run.info.run_id[:8]}"
    files = paper.write_report(client, json.loads(tags["adbs.parts"]), out,
                               dataset=tags.get("adbs.dataset") or None, meta=paper.redraw_meta(paper_run, uri))
    print(files[0].read_text())
    print(f"wrote {out}: {', '.join(str(f.relative_to(out)) for f in files)}")
    experiment = client.get_experiment(paper_run.info.experiment_id).name  # paper, or paper-smoke
    others = [d for d in paper.latest_by_dataset(client, ["all"], experiment)
              if d != (tags.get("adbs.dataset") or names.EMBEDDED)
              ] if paper_run.info.status == "FINISHED" else []  # else the store may hold no finished paper study
    if others:
        smoke = " --smoke" if experiment.endswith(paths.SMOKE) else ""
        print(f"note: this store also holds paper studies of {', '.join(others)}; `python studies/report.py paper "
              f"--datasets all{smoke}` writes every dataset's report and one D_cs table across them")
    return exits.OK


def _report_path(client, run, args: argparse.Namespace) -> int:
    """An ablation path (studies/ablation_path.py): its table of steps, figure and report as its run logged them;
    the flags that reshape a table of rows do not apply to it."""
    given = [f for f, on in (("--paper", args.paper), ("--reference", args.reference is not None),
                             ("--resolve", args.resolve is not None), ("--metric", args.metric != "test_acc"),
                             ("--format", args.format not in ("text", "markdown"))) if on]
    if given:
        raise exits.Exit(exits.REFUSED, f"error: {', '.join(given)}: an ablation path's report is its table of steps on "
                         "the validation objective as the path measured it (its Δs and verdicts on the confirmation "
                         "seeds); drop them (--format text or markdown)")
    out = args.out or paths.REPO_ROOT / "results" / "reports" / f"ablation_path-{run.info.run_id[:8]}"
    files = path_report.redraw(client, run, out)
    table = out / ("table.md" if args.format == "markdown" else "table.txt")
    print(f"ablation_path: run '{run.info.run_name}' ({run.info.run_id}; {run_pick.describe(run)}), "
          f"{run.data.tags.get('adbs.from', '?')} -> {run.data.tags.get('adbs.to', '?')}"
          + ("" if run.info.status == "FINISHED" else f" (not finished: {run.info.status})") + "\n")
    print(table.read_text() if table.is_file() else "(its table was not logged)")
    print(f"wrote {out}: {', '.join(f.name for f in files)}")
    return exits.OK


def _print_runs(studies) -> None:
    """Each study's parent run, its trials by state, and a note where it is still running or did not finish."""
    for study in studies:
        run = study.parent.info
        n = study.trials["state"].value_counts().to_dict() if len(study.trials) else {}
        counts = [f"{n[k]} {k.lower()}" for k in (K.COMPLETE, K.PRUNED, K.DIVERGED, K.FAILED, K.INTERRUPTED, K.RUNNING)
                  if n.get(k)]
        print(f"{study.name}: parent run '{run.run_name}' ({run.run_id}; {run_pick.describe(study.parent)}), "
              f"{len(study.trials)} trials ({', '.join(counts) or 'none'})")
        if run.status == "RUNNING":
            print(f"note: this study is still running (parent run RUNNING): the table holds the trials that ended so "
                  f"far; report again when it finishes (if its process died instead, rerun its command with --resume: "
                  f"{study.parent.data.tags.get('adbs.command', '?')})")
        elif run.status != "FINISHED":
            print(f"note: this study did not finish (parent run {run.status}): the table holds the trials that ended; "
                  f"rerun its command with --resume to complete it: {study.parent.data.tags.get('adbs.command', '?')}")


def _report_comparison(studies, ids: list[str], args: argparse.Namespace, uri: str) -> int:
    """Several studies: one table of all their rows and one figure."""
    sessions, trials, order, reference = from_store.combine(studies)
    pairs = from_store.combined_pairs(studies)
    if args.reference is not None:  # a row of the table (main checked it)
        reference, pairs = args.reference, [(r, args.reference) for r in _rows(studies) if r != args.reference]
    verdicts = policy.combined([st.verdicts for st in studies]).with_pairs(pairs)  # the smallest α and δ of theirs
    if args.resolve is not None:
        verdicts = verdicts.with_delta(args.resolve)
    table = tables.paper_table(sessions, metric=args.metric, baseline=reference or None, order=order,
                               trials=trials, front=from_store.combined_front(studies), verdicts=verdicts,
                               across=True) if len(sessions) else pd.DataFrame()
    print(renderings.render(table, args.format, caption=f"{args.metric} (%) per session", trials=trials, order=order,
                            notes=from_store.combined_notes(studies)))
    # the family's comparisons that ran in two or more tasks (datasets, hosts): IQM and P(X > Y) over the tasks
    said = across_tasks.table_lines(table, sessions, trials, args.metric)
    if said:
        print("\n" + "\n".join(said))
    names = "-".join(dict.fromkeys(s.name for s in studies))
    out = args.out or paths.REPO_ROOT / "results" / "reports" / f"compare-{names}-{'-'.join(i[:8] for i in ids)}"
    files = from_store.write_comparison(studies, table, sessions, trials, out, fmt=args.format, uri=uri,
                                        metric=args.metric, across=said)
    print(f"\nwrote {out}: {', '.join(f.name for f in files)}")
    return exits.OK


def _rows(studies) -> list[str]:
    """The rows of the table the studies make, in its order (across studies, '<study>: <row>'): the study's own
    order, else by the values they swept (alpha_sweep by alpha), never the order the trials ran in."""
    if len(studies) == 1:
        return figures.row_order(studies[0].sessions, order=studies[0].order)
    sessions, _, order, _ = from_store.combine(studies)
    ran = set(sessions["label"]) if len(sessions) else set()
    return [r for r in dict.fromkeys([*order, *(sessions["label"] if len(sessions) else [])]) if r in ran]


def _asked(study, args: argparse.Namespace):
    """(the verdict policy --resolve and --reference ask of the study, the reference they name): the study's recorded
    policy as the flags change it; what the study recorded where they change nothing."""
    verdicts = study.verdicts if args.resolve is None else study.verdicts.with_delta(args.resolve)
    if args.reference is None:
        return verdicts, study.baseline
    pairs = [(r, args.reference) for r in _rows([study]) if r != args.reference]
    return verdicts.with_pairs(pairs, verdicts.m), args.reference


def _report_study(study, args: argparse.Namespace, uri: str) -> int:
    """One study: its table with the verdicts it recorded (beside the paper's with --paper), its files, and its
    Pareto front where it has one. Another --resolve or --reference is a re-reading, printed apart under its own
    heading (adbs_lab/results/rereading.py), never in the place of the study's own verdicts."""
    run = study.parent.info
    table = from_store.study_table(study, metric=args.metric)
    print(renderings.render(table, args.format, caption=f"{study.name}: {args.metric} (%) per session",
                            trials=study.trials, order=study.order, notes=study.notes))
    asked, reference = _asked(study, args)

    def read(verdicts):
        other = dataclasses.replace(study, baseline=reference, verdicts=verdicts)
        return from_store.study_table(other, metric=args.metric).attrs.get("comparisons") or []

    again = rereading.lines(study.verdicts, asked, read) if len(study.sessions) else []
    if again:
        print("\n".join(again))
    if args.paper:
        beside = renderings.paper_beside(table, study.dataset)
        if beside is None:
            print(f"\n--paper: no paper table matches this study (dataset {study.dataset!r}, rows "
                  f"{', '.join(table['config']) if len(table) else '-'}); the paper reports ablation rows "
                  f"baseline / adb / adb+ic on {', '.join(renderings.PAPER)}, and the hosts study's rows "
                  f"(SAVC, SAVC+ADBS, ALICE, ALICE+ADBS, ...) on cifar100")
        else:
            print(f"\nours (mean over seeds) beside the paper ({renderings.PAPER_SOURCE}; '-' = not quoted):\n")
            print(renderings.render_plain(beside, args.format))

    # its comparisons that ran in two or more of its tasks (hosts, k-shot cells): as `report.py A B` prints them
    said = across_tasks.table_lines(table, study.sessions, study.trials, args.metric)
    if said:
        print("\n" + "\n".join(said))
    out = args.out or paths.REPO_ROOT / "results" / "reports" / f"{study.name}-{run.run_id[:8]}"
    files = from_store.write(study, table, out, fmt=args.format, uri=uri, paper=args.paper, across=said)
    if study.multi:  # a search of several --objectives: its Pareto front, as the study listed it
        print("\n" + "\n".join(pareto.front_lines(json.loads((out / pareto.PARETO_JSON).read_text()))))
    print(f"\nwrote {out}: {', '.join(f.name for f in files)}")
    return exits.OK


@exits.entry
def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    _check_flags(p, args)
    if args.out is not None and writable.out_dir_problem(args.out):  # before reading the store, not at the write
        raise exits.Exit(exits.REFUSED, f"error: {writable.out_dir_problem(args.out)}")
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    uri = tracking_store.tracking_uri(args.tracking_uri)
    problem = _store_form_problem(uri)  # what needs no store, refused before pandas and MLflow load
    if problem:
        raise exits.Exit(exits.REFUSED, f"error: {problem}")
    # named before the try, so the table modules load here: an except clause naming a lazy module would load it
    # while a signal's exit passes through it (adbs/light.py: lazy)
    refused = (from_store.ReportError, tracking_store.TrackingError)
    light.doing("while reading the MLflow store or writing the report: run the same command again for the whole "
                "report")
    try:
        client, across, paper_run, studies, path_run = _read_store(args, uri)
    except refused as e:
        raise exits.Exit(exits.REFUSED, f"error: {redact(str(e))}") from None
    if path_run is not None:
        return _report_path(client, path_run, args)
    if across is not None:
        return _report_across(client, across, args, uri)
    if paper_run is not None:
        return _report_paper(client, paper_run, args, uri)

    ids = [s.parent.info.run_id for s in studies]
    if len(set(ids)) < len(ids):
        raise exits.Exit(exits.REFUSED, f"error: {' '.join(args.study)} name the same study run twice; to compare "
                         "two runs of one study, pass their parent run ids (MLflow's run page, or report.py NAME "
                         "prints the latest one's id)")
    rows = _rows(studies)
    if args.reference is not None and args.reference not in rows:
        raise exits.Exit(exits.REFUSED, f"error: --reference {args.reference!r} is not a row of this table; its rows: "
                         f"{', '.join(repr(r) for r in rows)}")
    _print_runs(studies)
    print(f"{args.metric.replace('_', ' ')} (%) per session, mean ± 95% CI over seeds\n")
    if len(studies) > 1:
        return _report_comparison(studies, ids, args, uri)
    return _report_study(studies[0], args, uri)


if __name__ == "__main__":
    sys.exit(main())
