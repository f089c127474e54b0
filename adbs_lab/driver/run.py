"""Run one study: preflight (every check, nothing written) -> Ray and the cluster's checks -> claim (the study's
name and folder) -> launch (Ray Tune, Optuna, MLflow) -> summarise (tables, figures, report) -> an exit code. A
study script builds a `Plan` and calls `main(plan, opts)`; `run(plan, opts)` is the same without the exit, for
Python callers; several studies run as one through adbs_lab/driver/compose.py (studies/paper.py).

- `preflight` (adbs_lab/driver/preflight.py) touches no Ray and trains nothing: whatever the run can refuse before
  its first trial ends there with exit 2 and nothing written; `--dry-run` is that preflight and one line.
- inside `with study_lock(...)`, `cluster_slots` (launch.py) starts (or joins) Ray (session.py: ray_session)
  and checks the cluster: every refusal, the cluster's too, comes before the claim.
- `claim` (claim.py) takes the study's name in the Optuna storage (created once, atomically: a run that does not
  own the name is refused, exit 2, before it writes anything) and its folder: earlier results moved aside (a new
  study) or the interrupted run's files fetched (--resume).
- `launch` (launch.py) lets Optuna choose trials through Tune while the tracker logs to MLflow from this process;
  Ctrl-C or SIGTERM stops it gracefully.
- `summarise` (summarise.py) turns what ran into the tables, figures and report, whether the study finished or
  not, and how it ended into the exit code (adbs/exits.py: 0 ok, 1 a trial raised or the study failed after
  it started, 2 refused, 130 interrupted).
"""

from __future__ import annotations

import os

import sys
import time
from typing import NoReturn

from adbs.exits import INTERRUPTED, OK, Exit, status
from adbs_lab.driver import flags, interrupts
from adbs_lab.driver.claim import claim, study_lock
from adbs.light import pause_point
from adbs_lab.driver.launch import cluster_slots, launch, resumed, trial_slots
from adbs_lab.driver.preflight import note_owned, note_repeats, preflight, study
from adbs_lab.driver.prepared import Study, bad_input
from adbs_lab.driver.resume import resume_notes
from adbs_lab.driver.session import env_defaults, interrupted, ray_session
from adbs_lab.driver import more_seeds
from adbs_lab.driver.summarise import Outcome, summarise
from adbs_lab.driver.summarise import standing as summarise_standing
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan
from adbs_lab.driver.resume import mlflow_has_run
from adbs_lab.stats.policy import VerdictPolicy

__all__ = ["seed_plan", "run", "code", "main", "dry_run"]


def recorded_standing(p: Study):
    """The standing of the study's recorded trials (its sessions.parquet and trials.parquet) under `p`'s seed policy,
    as its summary replays it; None where they are not in a local folder (an object store's study)."""
    folder = p.where.local
    if p.where.remote or not (folder / "sessions.parquet").is_file() or not (folder / "trials.parquet").is_file():
        return None
    import pandas as pd

    return summarise_standing(p, pd.read_parquet(folder / "sessions.parquet"), pd.read_parquet(folder / "trials.parquet"))


def dry_run(p: Study) -> None:
    """--dry-run: the preflight passed (every check a run makes before its first trial); with --address, the
    cluster's checks too (connected to, not started; no probe trial); then what would run."""
    cfg, how = p.base, p.run
    if how.address:
        import ray

        with ray_session(p) as res:
            trial_slots(p, res, probe=False)
        ray.shutdown()  # disconnects this driver; the cluster runs on
    size = p.seeding.size_text(p.n_configs, dry=True)
    if not how.resume:  # the time its trials take here, as the start line would say (2 at a time on 2 CPUs)
        from adbs_lab.driver.launch import estimate_text

        cpus = how.cpus_per_trial or p.threads or 1  # as launch.resources gives a trial on this machine
        slots = how.max_concurrent or max(1, min(int((os.cpu_count() or 1) // cpus), p.total))
        size += f" ({estimate_text(p, slots)}, {slots} at a time)"
    print(f"dry run: study {p.plan.name}, preset {p.preset}, {size} on {cfg.dataset} "
          f"({cfg.base_epochs} base epochs each; search space {p.plan.space_source}); flags, config, data, "
          f"storage {p.where}, the MLflow store, the "
          f"Optuna storage{', the Ray cluster' if how.address else ''}"
          f"{' and what --resume continues' if how.resume else ''} checked; nothing was started and no result "
          "written", flush=True)
    if how.resume:  # what a run of this command would do: continue the trials left, or, finished, run none
        print(f"a run of this command: {resumed(p)}", flush=True)
    for line in list(p.notes) + ([p.no_best] if p.no_best else []):  # as a run says
        print(f"note: {line}", flush=True)
    if not how.resume and p.where.in_use():  # what a run would move aside, said before any run moves it
        from adbs_lab.driver.claim import aside_line

        print(aside_line(p), flush=True)


def _recorded(p: Study) -> tuple[VerdictPolicy, str | dict[str, str] | None, bool]:
    """The verdict policy and reference the study in `p`'s folder ran under, as it recorded them (study.json, else its
    MLflow parent run's tags: adbs_lab/results/rereading.py: recorded), never this command's flags, and whether this
    command names the run's --reference (else its comparisons are another family); StudyInputError
    where the folder holds another study, a run of this one with another seed design, or no record of its policy."""
    from adbs_lab.driver.resume import json_object
    from adbs_lab.results import rereading
    from adbs_lab.stores import tracking_store

    held = json_object(p.where.read_text("study.json"), p.where.display("study.json"))
    if not held:
        raise StudyInputError(f"--plan: {p.dir} holds no study.json, the record of the study's run (its verdict "
                              "policy); run the study first, with the same flags (and --name, --smoke) as this command")
    if held.get("fingerprint") != p.fingerprint:  # its seeds, looks, space or base config are not this command's
        raise StudyInputError(
            f"--plan reads a study's run as it ran, and {p.dir} holds a run of other seeds, looks or settings than "
            f"this command's ({held.get('command', '?')}); rerun --plan with that command's flags (another --resolve "
            "or --reference is then printed as a re-reading, apart from its verdicts)")

    def parent_tags() -> dict[str, str] | None:
        parent = json_object(p.where.read_text(tracking_store.RUNS_FILE),
                             p.where.display(tracking_store.RUNS_FILE)).get("parent")
        if not parent or not mlflow_has_run(p.tracking_uri, parent):
            return None
        return dict(tracking_store.client(p.tracking_uri).get_run(parent).data.tags)

    policy = rereading.recorded(held, parent_tags)
    if policy is None:
        raise StudyInputError(f"--plan: the verdict policy of the run in {p.dir} is recorded neither in its study.json "
                              f"nor in the MLflow store {tracking_store.redact_uri(p.tracking_uri)} (its parent run); "
                              "pass the --tracking-uri the study ran with, or `python studies/report.py "
                              f"{p.experiment} --tracking-uri URI` reads it from that store")
    same = (held.get("settings") or {}).get("reference") == p.run.reference  # this command names the run's
    # a study.json from before it recorded its reference: this command's, where it names the run's --reference
    return policy, held["baseline"] if "baseline" in held else p.reference if same else None, same


def seed_plan(p: Study) -> None:
    """--plan: the verdicts of the study's finished run in its folder, read by the verdict policy the run recorded
    (never this command's flags: another --resolve or --reference is printed apart, as a re-reading), and where the
    sequential design would stop the unresolved comparisons, with their cost at the trials' measured times; runs
    and writes nothing."""
    from adbs_lab.records import attempts
    from adbs_lab.records.config_values import read_parquet
    from adbs_lab.results import comparisons, rereading, tables

    if p.where.remote:
        raise StudyInputError(f"--plan reads the study's folder on this machine, and {p.where} is an object store; "
                              f"`python studies/report.py {p.experiment}` gives its verdicts from the "
                              "MLflow store")
    files = [p.dir / "sessions.parquet", p.dir / "trials.parquet"]
    if not all(f.is_file() for f in files):
        raise StudyInputError(f"--plan: {p.dir} holds no finished run of study {p.plan.name} (no sessions.parquet); "
                              f"run it first, with the same flags (and --name, --smoke) as this command")
    verdicts, baseline, same_reference = _recorded(p)
    # one row per trial, as every reader counts them (a study's own files hold one already); every config value as
    # written (None, mixed types)
    sessions, trials = attempts.standing_frames(*(read_parquet(f) for f in files))
    from adbs_lab.driver import summarise

    standing = summarise.standing(p, sessions, trials)
    said = p.seeding.verdict_lines(standing, p.objectives[0].name)
    if said is not None:  # a raced search: its race's verdicts replayed from the trials, as the study printed them
        print("\n".join([f"{p.plan.name} ({p.dir}): the race's verdicts of its last run, {verdicts.guarantee()} "
                         "(docs/statistics.md)", *said,
                         p.seeding.end_line(standing) or ""]))
        return

    def read(policy: VerdictPolicy) -> list:
        table = tables.paper_table(sessions, baseline=baseline, order=p.plan.order, trials=trials, verdicts=policy)
        return table.attrs.get("comparisons") or []

    compared = read(verdicts)
    if not compared:
        print(f"{p.plan.name}: no comparisons to plan (its table compares no rows: no reference row ran, or it "
              "samples its configurations)")
        return
    # what this command asks of the run: another δ (--resolve), and other comparisons only where --reference differs
    asked = p.verdicts if not same_reference else verdicts.with_delta(p.verdicts.delta)
    again = rereading.lines(verdicts, asked, read)
    print("\n".join([f"{p.plan.name} ({p.dir}): the verdicts of its last run, as it recorded them",
                     *comparisons.opening(compared)]
                    + (comparisons.plan_lines(compared, comparisons.row_seconds(trials))
                       or ["every comparison is resolved: no more seeds needed"]) + again))


def run(plan: Plan, opts: StudyOptions) -> Outcome | None:
    """preflight -> claim -> launch -> summarise; returns the Outcome (its `code`: 0, or 1 when a trial raised or
    none completed), None for --dry-run. Refused input exits 2 before anything starts; a study stopped by the user
    (Ctrl-C or SIGTERM, at any step: one handler for the whole run, adbs_lab/driver/interrupts.py) exits 130, one
    that failed after it started 1 (SystemExit, with the --resume command)."""
    if opts.plan_only:
        with bad_input():
            p = study(plan, opts)
            if p.run.dry_run:
                print(f"dry run: study {plan.name} --plan would read the finished run in {p.where} and print its "
                      "verdicts and seed plan; flags checked, nothing read or written", flush=True)
            else:
                seed_plan(p)
        return None
    shared = flags.shipped_name(plan, opts)  # the last read of the options: every step after the preflight reads `p`
    with interrupts.handling():
        env_defaults()
        t0 = time.time()
        try:
            with bad_input():
                p = preflight(plan, opts)
                if p.run.more_seeds:  # the next pause, or why there is none (adbs_lab/driver/more_seeds.py)
                    p = more_seeds.continued(p, recorded_standing)
            pause_point("preflight")
        except KeyboardInterrupt:
            interrupted("checking the study (nothing was written)")
        note_owned(p)
        note_repeats(p)
        if shared:  # said by the dry run and the run alike, before anything is claimed
            print(f"warning: {shared}", file=sys.stderr, flush=True)
        if p.run.dry_run:
            p.where.cleanup()
            dry_run(p)
            return None
        resume_notes(p)
        return _claimed(p, t0)


def _claimed(p: Study, t0: float) -> Outcome:
    """claim -> launch -> summarise under the study's lock. Claiming the folder and writing the results are not
    cut in half by a signal (it acts when they end); anywhere else it stops the study there."""
    ints = interrupts.current()
    with study_lock(p):
        try:  # Ray and the cluster's checks: their refusals too come before the claim, which moves and creates
            slots = cluster_slots(p)
        except KeyboardInterrupt:
            interrupted("starting Ray and checking the cluster (nothing was written)")
        try:
            with ints.during("defer"):
                claim(p)
        except KeyboardInterrupt:
            interrupted("claiming the study's folder", p)
        launched = launch(p, slots)
        before = ints.count
        try:
            with ints.during("defer"):
                return summarise(p, launched, t0)
        except KeyboardInterrupt:
            if ints.count - before > 1:  # a second signal: the writing stopped where it was
                interrupted("writing its results", p, ran=True)
            print(f"\n{p.plan.name}: interrupted ({ints.name}) as its results were written; they were written "
                  f"whole, in {p.where}", file=sys.stderr, flush=True)
            raise Exit(INTERRUPTED) from None


def main(plan: Plan, opts: StudyOptions) -> NoReturn:
    """A study script's last line: run the study and exit with how it ended (adbs/exits.py), the one place a
    study turns the Exit any step raises into its exit status."""
    raise SystemExit(status(code, plan, opts))


def code(plan: Plan, opts: StudyOptions) -> int:
    """`run`'s exit code (adbs/exits.py): how the study ended, OK for --dry-run; an Exit raised at any step
    propagates (the caller's `main` turns it into the exit status: studies/knobs.py)."""
    out = run(plan, opts)
    return OK if out is None else out.code
