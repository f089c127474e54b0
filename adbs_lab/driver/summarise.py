"""Summarise: what ran turned into the tables, figures and report, whether the study finished or not, and how it
ended into the exit code (adbs/exits.py: 0 ok, 1 a trial raised or the study failed after it started,
130 interrupted), with the --resume command where one helps. An object store's study is uploaded here."""

from __future__ import annotations

import math
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pandas as pd

from adbs.exits import FAILED, INTERRUPTED, OK, Exit
from adbs.redaction import redact
from adbs_lab.records import metrics_keys as K
from adbs_lab.results import comparisons
from adbs_lab.results.best import choose as choose_best
from adbs_lab.results import pareto
from adbs_lab.driver import outcome
from adbs_lab.results import run_files
from adbs_lab.results import seed_counts
from adbs_lab.results import notes as study_notes
from adbs_lab.results import tables
from adbs_lab.stores import tracking_store
from adbs_lab.records import trial_records
from adbs_lab.driver.launch import Launched
from adbs_lab.driver.prepared import Study, more_seeds_command, resume_command
from adbs_lab.driver.session import disk_full
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder
from adbs_lab.search.seeds.policy import Ended, Standing
from adbs_lab.search.seeds.until_resolved import LAST_KEY, UntilResolved
from adbs_lab.stats.continuation import next_pause
from adbs_lab.stats.intervals import DESCRIPTIVE_LEVEL
from adbs_lab.stats.sequential import PAUSE

__all__ = ["Outcome", "summarise", "figures_and_report", "ended_count", "upload", "standing", "best_record",
           "print_best"]


@dataclass
class Outcome:
    plan: Plan
    dir: Path
    """The study's folder (for an object store, its local staging copy, uploaded by `summarise`)."""
    sessions: pd.DataFrame
    trials: pd.DataFrame
    table: pd.DataFrame
    table_text: str
    best: dict | None
    files: list[Path]
    where: StudyFolder
    wall_s: float
    code: int = OK
    """The exit code (adbs/exits.py): OK, or FAILED when a trial raised or none completed."""
    pareto: dict | None = None
    """pareto.json's content (adbs_lab/results/pareto.py: pareto_record) of a study of two or more --objectives."""
    standing: Standing = Standing()
    """Where the study's seed policy stands, replayed from the trials as the tables read them (`standing`; the
    searcher took the same looks: adbs_lab/search/seeds/)."""


def _write_summary(p: Study, launched: Launched, t0: float) -> Outcome:
    """Tables of every trial that ran, then (when it ran to its end) figures, report, parent-run metrics; uploads;
    the exit code. A study stopped by the user exits 130 and one that failed after it started exits 1, here, both
    with their tables and the --resume command."""
    plan, where, tracker = p.plan, p.where, launched.tracker
    recs, out = _tables(p, launched, t0)
    trials, counts = out.trials, _counts(out.trials)
    # what is left: a seed list's trials that did not end; --seeds auto's batch under way (it runs the trials its
    # looks ask for, not its cap); a race ends when its searcher says so, anything short of that is unfinished
    unfinished = p.seeding.unfinished(out.standing, sum(r.state == K.INTERRUPTED for r in recs), p.total - len(recs))
    metrics = {"study/trials_complete": counts.get(K.COMPLETE, 0), "study/trials_pruned": counts.get(K.PRUNED, 0),
               "study/trials_diverged": counts.get(K.DIVERGED, 0), "study/trials_failed": counts.get(K.FAILED, 0),
               "study/trials_unfinished": unfinished, "study/wall_time_s": out.wall_s}
    if out.best and "mean_over_seeds" in out.best:
        metrics["study/best_objective"] = out.best["mean_over_seeds"]
    # Tune handles Ctrl-C inside fit() itself (its own SIGINT handler) and returns the trials so far: trials that
    # did not end while nothing failed mean the user stopped it.
    if launched.interrupted or (unfinished and not launched.failed):
        _stop(p, tracker, out.files, metrics, launched.interrupted or "Ctrl-C", ended_count(recs),
              INTERRUPTED)
    if launched.failed:
        _stop(p, tracker, out.files, metrics, launched.failed,
              ended_count(recs), FAILED)
    out.code = outcome.study_code(counts)
    upload(where)  # the tables are safe in the object store before figures and the report are drawn
    print(f"\n{plan.name}: test accuracy (%) per session, mean ± {DESCRIPTIVE_LEVEL:.0%} CI over seeds "
          f"(selection used validation accuracy only)\n{out.table_text}")
    print_best(out)
    extra = figures_and_report(p, tracker, out)
    premise = pruning_premise(p, tracker, extra, metrics)
    tracker.finish("FINISHED" if out.code == OK else "FAILED", [*out.files, *extra], metrics)
    upload(where)
    where.cleanup()
    print(f"\n{plan.name}: {len(trials)} trials ({counts.get(K.COMPLETE, 0)} complete, {counts.get(K.PRUNED, 0)} "
          f"pruned, {f'{counts[K.DIVERGED]} diverged, ' if counts.get(K.DIVERGED) else ''}{counts.get(K.FAILED, 0)} failed) "
          f"in {out.wall_s:.0f} s")
    print(f"results: {where}  (sessions.parquet, trials.parquet, table.txt, best_config.json"
          + (f", {pareto.PARETO_JSON}" if out.pareto else "")
          + "".join(f", {Path(a).name}" for a in extra) + ")")
    if out.pareto:  # last, where a reader looks for what the study found
        print("\n" + "\n".join(pareto.front_lines(out.pareto)))
    said = comparisons.opening(out.table.attrs.get("comparisons") or [])[:-1]  # the family's heading, a verdict each
    if said:  # and what it concludes, each comparison's verdict (docs/statistics.md)
        print("\n" + "\n".join(said))
    _print_seeding(p, out)
    if premise:  # last before where the runs are: whether pruning on base accuracy was sound
        print("\n" + "\n".join(premise))
    print(f"MLflow: experiment '{p.experiment}', parent run {tracker.parent_run_id}")
    print(f"open the MLflow UI: {tracking_store.ui_command(p.tracking_uri, p.run.storage)}")
    if out.code != OK:
        _print_failed(p, recs, counts)
    return out


def best_record(p: Study, trials: pd.DataFrame, table: pd.DataFrame, standing: Standing) -> dict | None:
    """best_config.json, as adbs_lab/results/best.py decides it: none across data conditions, the highest mean not
    named best in a study without verdicts (and why), the configuration the seed policy chose (a race's leader),
    else the best mean said to be resolved or not by the table's verdicts."""
    if not p.no_best:
        chosen = p.seeding.chosen(standing)
        if chosen is not None:
            return _chosen(trials, p, standing, chosen)
    return choose_best(trials, p.objectives, why=p.no_best, across_conditions=bool(p.conditions),
                       compared=table.attrs.get("comparisons") or [])


def _print_seeding(p: Study, out: Outcome) -> None:
    """The seed policy's own verdicts (a race's, each with the n that reached it), and why its seeds stopped."""
    said = p.seeding.verdict_lines(out.standing, p.objectives[0].name)
    if said:
        print(f"\nthe race's verdicts ({p.verdicts.guarantee()}; docs/statistics.md):\n" + "\n".join(said))
    end = p.seeding.end_line(out.standing)
    if end:
        print(end)
    if out.standing.reason == PAUSE and isinstance(p.seeding, UntilResolved):  # "continue": the plan kept α for it
        nxt = next_pause(p.seeding.looks, p.seeding.stop)
        print(f"more seeds: {shlex.join(more_seeds_command(p.run))} continues this study (the same folder, "
              f"MLflow run and Optuna study) on the next unused seeds, to {nxt} a row, within the same guarantee; "
              "a new run with other seeds or --name would make a second family of verdicts, which it does not cover "
              "(docs/statistics.md)")


def _chosen(trials: pd.DataFrame, p: Study, standing: Standing, chosen: dict) -> dict | None:
    """best_config.json of the configuration the seed policy chose (a raced search's leader, not the best mean over
    all samples: a sample that ran only seed 0 is not ranked against the contenders' fresh seeds), with its keys
    (whether the race resolved it, its test figures marked post-selection: adbs_lab/search/seeds/race.py)."""
    if standing.leader is None:  # a race with no leader says why (its `why`); none chosen otherwise
        return chosen if chosen.get("why") else None
    mine = trials[trials[trial_records.LABEL] == standing.leader]
    # Its value is the mean over the seeds the policy chose it on: seed 0 screened the contenders and carries the
    # winner's curse (docs/statistics.md), so pooling it in could rank the leader below a contender it beat on
    # every fresh seed.
    fresh = mine[mine["seed"].isin(standing.seeds(standing.leader))] if "seed" in mine else mine
    best = tables.best_config(fresh if len(fresh) else mine, p.objectives)
    return None if best is None else {**best, **chosen}


def standing(p: Study, sessions: pd.DataFrame, trials: pd.DataFrame) -> Standing:
    """Where the seed policy stands, replayed from the trials that ended as the tables read them: each trial's
    last-session test accuracy (the table's reading, adbs_lab/results/comparisons.py: seed_values) and its first
    objective (trials.parquet), the policy taking its own (adbs_lab/search/seeds/policy.py: value)."""
    last, _ = (comparisons.seed_values(sessions, trials, "test_acc", trial_records.LABEL)
               if len(sessions) else ({}, {}))
    name = p.objectives[0].name
    rows = trials[trials["state"].isin(K.ENDED)] if len(trials) and "state" in trials else trials.iloc[:0]
    ended = []
    for r in rows.to_dict("records"):
        if not K.finite(r.get("seed")):
            continue
        lab, seed, state = str(r[trial_records.LABEL]), int(r["seed"]), str(r["state"])
        objective = [float(r[name])] if state == K.COMPLETE and K.finite(r.get(name)) else None
        value = p.seeding.value(state, {LAST_KEY: last.get(lab, {}).get(seed, math.nan)}, objective)
        ended.append(Ended(lab, seed, state, value))
    return p.seeding.standing(ended)


def print_best(out: Outcome) -> None:
    """The best configuration, and the configurations not ranked because a seed is missing (adbs_lab/results/seed_counts.py),
    with their counts; a study of several objectives lists those under its front instead (pareto.front_lines)."""
    missing = seed_counts.not_ranked(out.trials) if len(out.trials) else []
    if out.best and out.best.get("config_label") is None and out.best.get("why"):
        print(f"best configuration: none ({out.best['why']})")
        return
    if out.best and out.best.get("named") is False:
        print(f"best configuration: none named ({out.best['why']}); best_config.json holds the highest mean, "
              f"{out.best['config_label']} ({out.best['mean_over_seeds']:.2f}; seeds "
              f"{seed_counts.text(_upper(out.best.get('seed_states') or {}))}), for reference only")
    elif out.best and out.best.get("resolved_by_verdicts") is False:
        tied = out.best.get("indistinguishable_from") or []
        print(f"best configuration: none resolved at this budget: {out.best['config_label']} has the best mean "
              f"{out.best['objective']} ({out.best['mean_over_seeds']:.2f}"
              f"{', post-selection: the race chose it on these seeds' if out.best.get('race') else ''}), but the "
              "verdicts cannot tell it from "
              f"{', '.join(tied) or 'the rows it is compared with'} (best_config.json holds it; "
              + ("a larger --max-seeds races on)" if out.best.get("race") else
                 "--more-seeds continues the study, below)" if getattr(out.standing, "reason", "") == PAUSE else
                 "--plan says how many seeds would settle it)"))
    elif out.best and out.best.get("race"):
        r = out.best["race"]
        print(f"best configuration by {out.best['objective']}: {out.best['config_label']} "
              f"({out.best['mean_over_seeds']:.2f} over seeds {', '.join(map(str, out.best['trial_seeds']))}, "
              "post-selection: the race chose it on them), the "
              f"race's leader, resolved against the other {len(r['contenders']) - 1} contender"
              f"{'s' * (len(r['contenders']) != 2)} at "
              f"{r['fresh_seeds']} fresh seeds; its test figures are post-selection (best_config.json)")
    elif out.best:
        print(f"best configuration by {out.best['objective']}"
              f"{' (' + out.best['chosen'] + ')' if out.best.get('chosen') else ''}: {out.best['config_label']} "
              f"({out.best['mean_over_seeds']:.2f}; seeds {seed_counts.text(_upper(out.best.get('seed_states') or {}))})")
    elif missing:
        print("best configuration: none (no configuration completed every seed, and one missing a seed is never "
              "ranked)")
    if missing and out.pareto is None:
        print("\n".join(seed_counts.not_ranked_lines(missing)))


def _upper(states: dict[str, int]) -> dict[str, int]:
    return {k.upper(): v for k, v in states.items()}


def _print_failed(p: Study, recs: list, counts: dict[str, int]) -> None:
    """Why the study exits 1: one line per trial that raised (its error line; the traceback is in MLflow and in
    the trial's error.txt), and how to run those trials again."""
    failed = [r for r in recs if r.state == K.FAILED]
    print(f"\nerror: {p.plan.name} failed: {outcome.why_failed(counts)}", file=sys.stderr, flush=True)
    for r in failed:
        print(f"  {r.label} seed={r.config.get('seed')}: {outcome.error_line(r.error)}", file=sys.stderr)
    if failed:
        print(f"tracebacks: MLflow tag adbs.error of each trial's run, and error.txt in its folder under "
              f"{p.where.display('tune')}\nrun the failed trials again (the others are kept): "
              f"{shlex.join(resume_command(p.run))}", file=sys.stderr, flush=True)


def _counts(trials: pd.DataFrame) -> dict[str, int]:
    return trials["state"].value_counts().to_dict() if len(trials) else {}


def _tables(p: Study, launched: Launched, t0: float) -> tuple[list, Outcome]:
    """The trials' records (each trial's state as the study recorded it when it ended: the runs file) and the
    tables written from them (sessions.parquet, trials.parquet, table.txt, table.md, best_config.json)."""
    plan = p.plan
    runs = tracking_store.load_runs(p.dir)
    recs = trial_records.from_results(launched.results, varying=p.varying, runs=runs)
    sessions, trials = trial_records.frames(recs)
    objs = p.objectives
    multi = len(objs) > 1  # a front: pareto.json and the table's front column
    front = pareto.front_labels(trials, objs) if multi and len(trials) else None
    table = (tables.paper_table(sessions, baseline=p.reference, order=plan.order, trials=trials, front=front,
                                verdicts=p.verdicts)
             if len(sessions) else pd.DataFrame())
    policy_now = standing(p, sessions, trials)
    notes = (list(p.notes) + p.seeding.notes(policy_now, objs[0].name)
             + ([p.no_best] if p.no_best else []))
    seconds = comparisons.row_seconds(trials)
    table_text = tables.annotate(tables.format_table(table, seconds=seconds), trials, order=plan.order, notes=notes)
    best = best_record(p, trials, table, policy_now)
    files = tables.write(p.dir, sessions, trials, table_text, best)
    record = pareto.pareto_record(trials, objs) if multi else None
    if record is not None:
        files.append(pareto.write_pareto(p.dir, record))
    table_md = tables.format_table(table, markdown=True, seconds=seconds)
    (p.dir / "table.md").write_text(tables.annotate(table_md, trials, markdown=True, order=plan.order, notes=notes)
                                    + "\n")
    files.append(p.dir / "table.md")
    return recs, Outcome(plan, p.dir, sessions, trials, table, table_text, best, files, p.where, time.time() - t0,
                         pareto=record, standing=policy_now)


def _stop(p: Study, tracker, files: list[Path], metrics: dict, why: str, ended: int, code: int) -> NoReturn:
    """A study that stopped early: runs KILLED (the user stopped it) or FAILED, files uploaded, the --resume
    command printed; exit `code` (INTERRUPTED or FAILED)."""
    status = "KILLED" if code == INTERRUPTED else "FAILED"
    try:
        tracker.close_open_runs()
        tracker.finish(status, files, metrics)
    except tracking_store.TrackingError as e:  # the store itself is what stopped the study
        print(f"warning: the MLflow runs could not be marked {status} ({e}); --resume reopens them", flush=True)
    upload(p.where)
    head = "stopped" if code == INTERRUPTED else "error: failed after it started"
    print(f"\n{p.plan.name} {head} ({why}); the tables of the {ended} trial{'s' * (ended != 1)} that ended "
          f"are in {p.where}.\ncontinue with: {shlex.join(resume_command(p.run))}", flush=True,
          file=sys.stdout if code == INTERRUPTED else sys.stderr)
    raise Exit(code)


def figures_and_report(p: Study, tracker, out: Outcome) -> list[Path]:
    """The study's figures and report.md (with where its runs are in MLflow). Each analysis is drawn guarded
    (adbs_lab/results/run_files.py: guarded): one that fails is a line in report.md and the output, and the study still
    finishes, its exit code the trials' (the tables are written already)."""
    plan = p.plan
    not_drawn: list[str] = []
    figs = (run_files.study_figures(plan.name, out.sessions, out.trials, p.dir, order=plan.order,
                                    objectives=p.objectives, not_drawn=not_drawn, conditions=p.conditions,
                                    baseline=p.reference)  # as studies/report.py draws them (its tag)
            if len(out.sessions) else [])
    parent = tracker.client.get_run(tracker.parent_run_id)
    meta = {"MLflow experiment": p.experiment, "parent run": f"{parent.info.run_name} ({parent.info.run_id})",
            "tracking URI": p.tracking_uri, "code version": parent.data.tags.get("adbs.code_version", "unknown"),
            "command": f"`{parent.data.tags.get('adbs.command', '?')}`"}
    raced = p.seeding.notes(out.standing, p.objectives[0].name)
    notes = list(p.notes) + raced
    if raced:  # studies/report.py redraws the table's notes from this tag: the race's verdicts and post-selection
        tracker.client.set_tag(tracker.parent_run_id, study_notes.TAG, study_notes.tag_value(notes))
    report = run_files.guarded(run_files.REPORT_MD, lambda: run_files.write_study_report(
        p.dir, study=plan.name, table=out.table, trials=out.trials, best=out.best, figures=figs, meta=meta,
        order=plan.order, pareto=out.pareto, not_drawn=not_drawn, notes=notes), [])
    return [*figs, *([report] if report else [])]


def pruning_premise(p: Study, tracker, extra: list[Path], metrics: dict) -> list[str]:
    """A pruned study's premise, measured from its Optuna storage (adbs_lab/search/shadows.py: completed trials and
    shadows): the lines the study prints last, appended to report.md, and on the parent run premise/* metrics (the
    correlations by base epoch as their step), `metrics` (regret, counts) and the tag adbs.premise. Nothing for a
    study without a pruner; a line saying why when it cannot be measured (the study's results stand without it)."""
    if p.pruner == "none":
        return []
    import optuna
    from mlflow.entities import Metric

    from adbs_lab.search import shadows
    from adbs_lab.search.optuna_storage import optuna_storage

    try:
        study = optuna.load_study(study_name=p.folder, storage=optuna_storage(p.optuna_url))
        measured = shadows.measure(study, p.pruner, p.base.base_epochs)
        lines = shadows.premise_lines(measured, p.pruner)
        stepped, flat, tag = shadows.premise_metrics(measured)
        ts = int(time.time() * 1000)
        batch = [Metric(k, v, ts, step) for k, vs in stepped.items() for step, v in vs]
        for i in range(0, len(batch), 1000):  # MLflow takes at most 1000 metrics a batch
            tracker.client.log_batch(tracker.parent_run_id, metrics=batch[i:i + 1000])
        tracker.client.set_tag(tracker.parent_run_id, "adbs.premise", tag)
        metrics.update(flat)
    except Exception as e:  # noqa: BLE001 - a measurement of the pruner must not fail the study
        return [f"pruning premise not measured: {str(e).strip().splitlines()[0][:300] if str(e).strip() else e!r}"]
    report = next((Path(a) for a in extra if Path(a).name == run_files.REPORT_MD), None)
    if report is not None and report.is_file():
        with report.open("a") as f:
            f.write("\n## Pruning premise\n\n```\n" + "\n".join(lines) + "\n```\n")
    return lines


def ended_count(recs: list) -> int:
    """Trials that ran to their end (complete, pruned, diverged or failed): neither interrupted nor never started."""
    return sum(r.state in K.ENDED for r in recs)


def upload(where: StudyFolder) -> None:
    """Upload the staging folder of an object-store study; on failure say where the files are and exit."""
    try:
        where.push()
    except Exception as e:  # noqa: BLE001 - the files are still here: say where, lose nothing
        raise Exit(FAILED, f"error: uploading the study's files to {where} failed "
                           f"({redact(str(e)).strip().splitlines()[0][:300]}); they are all in {where.local}: copy them there "
                           "once the store is reachable (Tune's results and checkpoints are written by the trials "
                           "directly)") from None



def summarise(p: Study, launched: Launched, t0: float) -> Outcome:
    """The study summarised (`_write_summary`); a disk that fills while the tables are written ends in a message
    and the --resume command."""
    try:
        return _write_summary(p, launched, t0)
    except OSError as e:
        if not disk_full(e):
            raise
        launched.tracker.close_open_runs()
        launched.tracker.finish("FAILED")
        raise Exit(FAILED, f"\nerror: no space left in {p.where} while writing the study's tables ({e}); free "
                           f"space, then continue with: {shlex.join(resume_command(p.run))}") from None
