"""Run one study: preflight (every check, nothing written) -> claim (the study's folder) -> launch (Ray Tune,
Optuna, MLflow) -> summarise (tables, figures, report) -> an exit code. A study script builds a `Plan` and calls
`main(plan, opts)`; `run(plan, opts)` is the same without the exit, for Python callers (studies/paper.py).

- `preflight` (adbs_lab/preflight.py) touches no Ray and trains nothing: whatever the run can refuse before its
  first trial ends there with exit 2 and nothing written; `--dry-run` is that preflight and one line.
- `claim`, inside `with study_lock(...)`, takes the study's folder: earlier results moved aside (a new study) or
  the interrupted run's files fetched (--resume).
- `launch` starts (or joins) Ray (`with ray_session(...)`), checks the cluster, and lets Optuna choose trials
  through Tune while the tracker logs to MLflow from this process; Ctrl-C or SIGTERM stops it gracefully. It reads
  top to bottom: resources per trial, searcher + stopper, tracker + progress line, tuner, fit.
- `summarise` turns what ran into the tables, figures and report, whether the study finished or not, and how it
  ended into the exit code (adbs_lab/outcome.py: 0 ok, 1 a trial raised or the study failed after it started,
  2 refused, 130 interrupted).
"""

from __future__ import annotations

import errno
import json
import math
import os
import shlex
import signal
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NoReturn

import pandas as pd

from adbs.config import Config, ConfigError
from adbs.overrides import from_dict
from adbs_lab import metrics_keys as K
from adbs_lab import outcome, run_files, tables, tracking, trial_records
from adbs_lab import space as sp
from adbs_lab.options import StudyInputError, StudyOptions, resume_command
from adbs_lab.paths import code_version
from adbs_lab.plan import Plan
from adbs_lab.preflight import (
    Prepared,
    _logged_argv,
    fail,
    held,
    note_owned,
    preflight,
    resume_notes,
    size,
    validate,
)
from adbs_lab.study_folder import StudyBusy, StudyFolder

__all__ = ["Plan", "Prepared", "Outcome", "StudyInputError", "validate", "size", "held", "preflight", "claim",
           "launch", "summarise", "run", "main", "fail"]


def _env_defaults() -> None:
    # Telemetry and usage stats off unless the user turned them on.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # Ray >= 2.59 turns token auth on for local clusters depending on ~/.ray state: be explicit.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Save Tune's experiment state often, so --resume after a crash reruns as little as possible.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Trials checkpoint after every session (seconds apart), which forces Tune state snapshots; that is
    # intended, so silence the "snapshotting triggered multiple times" warning.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Keep Tune's console quiet: its slow-operation warnings fire on a busy 2-core machine.
    os.environ.setdefault("TUNE_WARN_THRESHOLD_S", "10")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per artifact a report downloads
    # A trial's traceback goes to its error.txt and to MLflow (tag adbs.error); the terminal gets one line per
    # failed trial (adbs_lab/progress.py) instead of Tune's traceback for every attempt.
    os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")
    import logging

    logging.getLogger("ray.tune.tune").addFilter(_NotCompleteLine())

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # progress lines come from adbs_lab.progress
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


class _NotCompleteLine:
    """Drops Tune's "Trials did not complete: [ids]": the study's own summary names the failed trials."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith("Trials did not complete")


@contextmanager
def study_lock(p: Prepared) -> Iterator[None]:
    """Hold the study folder's lock (StudyFolder.lock) for the block; another driver holding it: exit 2."""
    try:
        lock = p.where.lock(p.command)
    except StudyBusy as e:
        fail(str(e))
    try:
        yield
    finally:
        lock.release()


def claim(p: Prepared) -> None:
    """Under `study_lock`, after every check has passed (preflight): a new study gets its folder (earlier results
    moved aside) and study.json; --resume gets the interrupted run's files (an object store's snapshot)."""
    from adbs_lab.study_folder import rebind

    # Tuner.restore unpickles the searcher, stopper and tracker of the driver that started the study, with its
    # paths; it takes no new ones (ray/tune/tuner.py: restore), so they look this driver's paths up here.
    rebind(p.where.folder, optuna_url=p.optuna_url, study_dir=str(p.where.local))
    where = p.where
    if p.opts.resume:
        if where.remote:
            where.pull_for_resume()
        return
    if where.in_use():
        if where.remote:
            print(f"moving the previous results of {where.folder} aside in {where} ...", flush=True)
        moved = where.move_aside()
        print(f"previous results of {where.folder} moved to {moved} (use --resume to continue a study instead)")
    where.prepare()
    ident_file = where.local / "study.json"
    ident_file.write_text(json.dumps({"study": p.plan.name, "folder": where.folder, "fingerprint": p.fingerprint,
                                      "command": p.command, "settings": p.settings}, indent=1))
    where.push([ident_file])


# -- launch -----------------------------------------------------------------------------------------


@dataclass
class Launched:
    results: Any
    """Ray Tune's ResultGrid (every trial that started)."""
    tracker: tracking.MlflowTracker
    interrupted: str | None
    """The user stopped the study early (Ctrl-C, SIGTERM): which; None when nobody did."""
    failed: str | None = None
    """Why the study itself failed after it started (a full disk, a failed MLflow store), None when it did not."""


def _probe_ray(address: str) -> None:
    """Fail fast when nothing answers at --address (ray.init would wait minutes and ignore Ctrl-C)."""
    target = address.split("://", 1)[-1]
    if address == "auto" or address.startswith("ray://") or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return
    except (OSError, ValueError) as e:
        raise StudyInputError(
            f"--address {address}: no Ray cluster answers there ({e.__class__.__name__}: {e}); start one with "
            f"`ray start --head --port={port}`, pass the address `ray start` printed, or drop --address to "
            "start a local Ray instance") from None


def _start_ray(p: Prepared) -> dict[str, float]:
    import ray

    from adbs_lab.trainable import FAULT_ENV

    if p.opts.address:
        _probe_ray(p.opts.address)
    # Workers of an existing cluster do not inherit this shell's environment: forward what trials read.
    forward = {k: os.environ[k] for k in (FAULT_ENV,) if k in os.environ}
    try:
        ray.init(address=p.opts.address, include_dashboard=False, log_to_driver=True, ignore_reinit_error=True,
                 configure_logging=True, logging_level="WARNING",
                 runtime_env={"env_vars": forward} if forward else None)
    except ConnectionError as e:
        raise StudyInputError(f"--address {p.opts.address}: no Ray cluster there ({str(e).strip().splitlines()[0]}); "
                              "start one with `ray start --head`, or drop --address to start a local Ray "
                              "instance") from None
    return ray.cluster_resources()


class _Stop:
    """SIGTERM ends a study the way Ctrl-C does: Tune stops the trials, saves its state, and --resume continues.

    During tuner.fit Tune's own handler (SIGUSR1 = its graceful stop, as for the first Ctrl-C) does the
    work; outside it, SIGTERM raises KeyboardInterrupt where the study is.
    """

    def __init__(self) -> None:
        self.in_fit = False
        self.signal: str | None = None

    def __enter__(self) -> "_Stop":
        self._old = signal.signal(signal.SIGTERM, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGTERM, self._old)

    def _handler(self, signum, frame) -> None:
        self.signal = "SIGTERM"
        if self.in_fit and hasattr(signal, "SIGUSR1"):
            os.kill(os.getpid(), signal.SIGUSR1)
        else:
            raise KeyboardInterrupt


def _disk_full(e: BaseException) -> bool:
    while e is not None:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        text = str(e).lower()
        if "no space left" in text or "database or disk is full" in text or "disk is full" in text:
            return True
        e = e.__cause__ or e.__context__
    return False


@contextmanager
def ray_session(p: Prepared) -> Iterator[dict[str, float]]:
    """Ray started (or joined, --address) for the study; yields the cluster's resources. When the study ends
    inside the block (bad input, Ctrl-C), Ray is shut down here; otherwise it stays up: the trials run in it
    next, and it ends with this process (as a Ray session the caller started keeps running)."""
    import ray

    try:
        res = _start_ray(p)
    except KeyboardInterrupt:
        _interrupted("starting Ray")
    except StudyInputError as e:
        fail(str(e))
    try:
        yield res
    except BaseException:
        ray.shutdown()
        raise


def _interrupted(doing: str) -> None:
    print(f"\ninterrupted while {doing}; no trial ran", file=sys.stderr)
    raise SystemExit(130) from None


@dataclass
class Slots:
    """What each trial gets and how many run at once."""

    gpus: float
    cpus: float
    max_concurrent: int


def launch(p: Prepared) -> Launched:
    """Ray, the cluster checks, Optuna (sampler, pruner) and MLflow (tracker), then Tune runs the trials."""
    with _bad_input():
        tracking.check_tracking_uri(p.tracking_uri)  # a new SQLite store gets its schema here, in one process
    with ray_session(p) as res:
        slots = _slots(p, res)
    _print_start(p, slots.max_concurrent)
    searcher, stopper = _search(p)
    tracker, progress = _tracking(p, searcher, slots)
    tuner = _tuner(p, slots, searcher, stopper, [tracker, progress])
    return Launched(tracker=tracker, **_fit(p, tuner))


def _slots(p: Prepared, res: dict[str, float], probe: bool = True) -> Slots:
    """Resources per trial (flags or packing), checked against the cluster (multi-node: cluster.preflight)."""
    from adbs_lab import cluster

    try:
        gpus, cpus = resources(p, res, probe)
    except KeyboardInterrupt:
        _interrupted("probing a trial's GPU memory")
    if gpus > res.get("GPU", 0):
        fail(f"--gpus-per-trial {gpus:g} but the Ray cluster has {res.get('GPU', 0):g} GPUs; "
             "use --gpus-per-trial 0 or a cluster with GPUs")
    if gpus == 0 and any(c.device == "cuda" for c in p.configs):
        fail(f"device=cuda but the trials get no GPU (the Ray cluster has {res.get('GPU', 0):g} GPUs); use "
             "device=auto or cpu, or a cluster with GPUs")
    try:  # multi-node: shared storage, a tracking server, the dataset on every node
        cluster.preflight(storage=p.opts.storage if p.where.remote else str(p.where.local.parent),
                          tracking_uri=p.tracking_uri, configs=p.configs, cpus_per_trial=cpus, gpus_per_trial=gpus)
    except cluster.ClusterCheckError as e:
        fail(str(e))
    fit = int(res.get("CPU", 1) // cpus)
    if gpus > 0:
        fit = min(fit, int(res.get("GPU", 0) / gpus + 1e-6))
    max_concurrent = p.opts.max_concurrent or max(1, min(fit, p.total))
    if p.opts.resume:
        held = p.settings.get("max_concurrent") or max_concurrent
        if p.opts.max_concurrent and p.opts.max_concurrent != held:
            print(f"note: --max-concurrent {p.opts.max_concurrent} is ignored on --resume: Ray Tune continues with "
                  f"the interrupted run's limit, {held}", flush=True)
        max_concurrent = held
    return Slots(gpus, cpus, max_concurrent)


def _search(p: Prepared):
    """Optuna's sampler inside the searcher (which also resolves and records each trial) and the pruner's stopper."""
    import optuna

    from adbs_lab.search import (
        BaseEpochStopper,
        StudySearch,
        make_pruner,
        optuna_storage,
    )

    opts, where = p.opts, p.where
    optuna_storage(p.optuna_url)  # create the Optuna schema now, in this process
    sampler = (optuna.samplers.GridSampler(sp.grid_points(p.space, list(opts.seeds)), seed=opts.sampler_seed)
               if p.is_grid else optuna.samplers.TPESampler(seed=opts.sampler_seed))
    snapshot = ({tracking.RUNS_FILE: str(p.dir / tracking.RUNS_FILE),
                 **({} if opts.optuna_storage else {"optuna.db": str(p.dir / "optuna.db")})} if where.remote else None)
    searcher = StudySearch(sp.optuna_distributions(p.space, list(opts.seeds) if p.is_grid else None),
                           storage_url=p.optuna_url, study_name=p.folder, sampler=sampler, seeds=list(opts.seeds),
                           rows=p.plan.rows, points_to_evaluate=p.plan.points_to_evaluate,
                           snapshot=snapshot)  # object store: optuna.db travels with every Tune state upload
    pruner = make_pruner(opts.pruner, int(p.base.get("base_epochs", Config().base_epochs)))
    stopper = BaseEpochStopper(storage_url=p.optuna_url, study_name=p.folder, pruner=pruner) if pruner else None
    return searcher, stopper


def _tracking(p: Prepared, searcher, slots: Slots):
    """The MLflow tracker (parent run; its settings on a new study) and the progress line; both read how a trial
    ended from the searcher (Tune pickles them with it, in one tuner.pkl, so they keep sharing it on --resume)."""
    from adbs_lab.progress import Progress

    opts, plan, where = p.opts, p.plan, p.where
    tags = {"adbs.study": plan.name, "adbs.search_space": f"{plan.space_source}: {plan.space!r}"[:7500],
            "adbs.code_version": code_version(),
            "adbs.command": shlex.join([sys.executable, *_logged_argv(opts.argv)])[:7500],
            "adbs.storage": str(where),
            # object store: the staging SQLite file is temporary; name the uploaded copy
            "adbs.optuna_storage": (where.display("optuna.db") if where.remote and not opts.optuna_storage
                                    else p.optuna_url),
            "adbs.baseline": (json.dumps(plan.baseline) if isinstance(plan.baseline, dict) else plan.baseline or ""),
            "adbs.order": json.dumps(plan.order or [])}  # studies/report.py
    run_name = f"{plan.name}" + (f" {opts.name}" if opts.name else "") + f" {time.strftime('%Y-%m-%d %H:%M')}"
    tracker = tracking.MlflowTracker(uri=p.tracking_uri, study=plan.name, folder=p.folder, study_dir=p.dir,
                                     run_name=run_name, tags=tags, varying=p.varying, resume=opts.resume,
                                     ends=searcher)
    progress = Progress(study=plan.name, total=p.total, varying=p.varying, ended=searcher.ended,
                        max_concurrent=slots.max_concurrent)
    if not opts.resume:  # the study's own settings on the parent run (trial runs hold full configs)
        tracker.log_params({"study.seeds": json.dumps(list(opts.seeds)), "study.trials": p.total,
                            "study.configurations": p.n_configs,
                            "study.sampler": "GridSampler" if p.is_grid else "TPESampler",  # as _search builds it
                            "study.pruner": opts.pruner, "study.cpus_per_trial": slots.cpus,
                            "study.gpus_per_trial": slots.gpus, "study.max_concurrent": slots.max_concurrent,
                            **{f"base.{k}": v for k, v in p.base.items()}})
    return tracker, progress


def _tuner(p: Prepared, slots: Slots, searcher, stopper, callbacks: list):
    """A new Tuner, or on --resume the interrupted one restored (Tune unpickles its searcher, stopper and
    callbacks: Tuner.restore takes none, so this run's are not used then; see study_folder.rebind)."""
    from ray import tune

    from adbs_lab.trainable import make_trainable

    opts, where = p.opts, p.where
    trainable = tune.with_resources(
        make_trainable(trial_fn=p.plan.trial_fn, cache_dir=where.cache_location if opts.cache else None,
                       checkpoint_every=opts.checkpoint_every),
        {"cpu": slots.cpus, "gpu": slots.gpus},
    )
    param_space = {k: (list(v) if isinstance(v, tuple) else v) for k, v in Config(**p.base).to_dict().items()}
    # A trial's torch threads are its CPUs, written into its config: logged with it, part of the base-session
    # key, and what `python -m adbs.run --threads N` needs to give the same numbers (adbs/runtime.py).
    param_space["threads"] = param_space["threads"] or max(1, int(slots.cpus))
    storage_path, tune_fs = where.tune_location()
    if opts.resume:
        # errored trials run again from their last checkpoint: what stopped them (a full disk, a lost node) is
        # what --resume is for; a numerical fault is not an error (the trial ended FAILED) and is not rerun
        return tune.Tuner.restore(where.tune_experiment(), trainable=trainable, resume_unfinished=True,
                                  resume_errored=True, param_space=param_space, storage_filesystem=tune_fs)
    return tune.Tuner(
        trainable, param_space=param_space,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=p.total,
                                    max_concurrent_trials=slots.max_concurrent, reuse_actors=True),
        run_config=tune.RunConfig(name="tune", storage_path=storage_path, storage_filesystem=tune_fs,
                                  stop=stopper, callbacks=callbacks, verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=opts.max_failures),
                                  # Tune deletes a trial's older checkpoints as new ones register, and
                                  # uploads its experiment state (which names the latest) every
                                  # TUNE_GLOBAL_CHECKPOINT_S; a driver killed between the two leaves a state
                                  # naming a deleted checkpoint, and that trial cannot be resumed. Keeping 4
                                  # covers trials that checkpoint faster than the state is uploaded.
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=4)),
    )


def _fit(p: Prepared, tuner) -> dict[str, Any]:
    """Tune's results, and why the study stopped early: `interrupted` by the user (Ctrl-C, SIGTERM), or `failed`
    (a full disk, a failed MLflow store); both end with the results so far instead of a traceback."""
    _, tune_fs = p.where.tune_location()
    interrupted = failed = None
    with _Stop() as stop:
        try:
            stop.in_fit = True
            grid = tuner.fit()
            stop.in_fit = False
            if stop.signal:
                interrupted = stop.signal
        except KeyboardInterrupt:
            interrupted = stop.signal or "Ctrl-C"
            grid = _results_so_far(p.where, tune_fs)
        except Exception as e:  # noqa: BLE001 - a full disk or a dead store ends in a message, not a traceback
            # Tune wraps what its callbacks raise in a TuneError holding the formatted traceback
            if isinstance(e, tracking.TrackingError) or "TrackingError" in str(e):
                failed = "the MLflow store failed: " + str(e).strip().splitlines()[-1].split("TrackingError: ")[-1]
            elif _disk_full(e):
                failed = f"no space left in {p.where} (or in the Optuna/MLflow store): free space, then --resume"
            else:
                raise
            grid = _results_so_far(p.where, tune_fs)
    return {"results": grid, "interrupted": interrupted, "failed": failed}


def resources(p: Prepared, res: dict[str, float], probe: bool = True) -> tuple[float, float]:
    """(GPUs, CPUs) per trial: the flags when given; on a cluster with GPUs, packing (adbs_lab/packing.py: a probe
    of the study's kinds of trial, then one printed line); else 0 GPUs and 1 CPU, as on a CPU cluster. `probe`
    False (a dry run): no probe trial; a trial that packing would place gets at most one GPU."""
    from adbs_lab import packing

    gpus, cpus = p.gpus_per_trial, p.opts.cpus_per_trial
    if cpus is None and p.base.get("threads"):  # --set threads=N: the trial's CPUs follow
        cpus = float(p.base["threads"])
    packs = p.opts.gpus_per_trial is None and res.get("GPU", 0) >= 1 and any(c.device != "cpu" for c in p.configs)
    if packs and not probe:
        return min(1.0, res["GPU"]), 1.0 if cpus is None else cpus
    if packs:
        print("packing: probing one trial's peak GPU memory ...", flush=True)
        choice, _ = packing.plan([c.to_dict() for c in p.configs], cluster_cpus=res.get("CPU", 1),
                                 cluster_gpus=res.get("GPU", 0), trials=p.total, cpus_per_trial=cpus)
        print(choice.line(), flush=True)
        gpus, cpus = choice.gpus_per_trial, choice.cpus_per_trial
    return gpus, 1.0 if cpus is None else cpus


def _results_so_far(where: StudyFolder, tune_fs) -> list:
    """Tune's results as last saved (after Tune itself was interrupted); [] when it saved nothing yet."""
    from ray import tune

    try:
        return tune.Tuner.restore(where.tune_experiment(), trainable=lambda c: None,
                                  storage_filesystem=tune_fs).get_results()
    except Exception:  # noqa: BLE001 - nothing restorable: no trial had started
        return []


def _print_start(p: Prepared, max_concurrent: int) -> None:
    head = (f"{p.plan.name}: {p.total} trials ({p.n_configs} configurations x {len(p.opts.seeds)} seeds), "
            f"{max_concurrent} at a time")
    if p.opts.preset_name in ("cpu", "smoke"):  # the preset in effect (--dataset cifar100 picks cifar100's)
        from adbs.presets import resolve

        # measured at the preset's base epochs; the base session is most of a CPU trial, so scale by them
        preset_epochs = from_dict(resolve(p.opts.preset_name, None, {})).base_epochs
        est = (35.0 if p.opts.smoke else p.plan.est_trial_s) * from_dict(p.base).base_epochs / max(1, preset_epochs)
        head += (f"; on this CPU roughly {math.ceil(p.total / max_concurrent) * est / 60:.1f} min of training "
                 f"(+~30 s to start Ray and the MLflow store and write the results)")
    else:  # no measured figure for this preset on this machine: the first base epoch gives one
        head += "; a time estimate follows the first measured base epoch"
    print(head + "; each running trial prints its base epochs (at most one line per 30 s)", flush=True)


# -- summarise --------------------------------------------------------------------------------------


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
    code: int = outcome.OK
    """The exit code (adbs_lab/outcome.py): OK, or FAILED when a trial raised or none completed."""


def summarise(p: Prepared, launched: Launched, t0: float) -> Outcome:
    """Tables of every trial that ran, then (when it ran to its end) figures, report, parent-run metrics; uploads;
    the exit code. A study stopped by the user exits 130 and one that failed after it started exits 1, here, both
    with their tables and the --resume command."""
    plan, where, tracker = p.plan, p.where, launched.tracker
    recs, out = _tables(p, launched, t0)
    trials, counts = out.trials, _counts(out.trials)
    unfinished = sum(r.state == K.INTERRUPTED for r in recs) + (p.total - len(recs))
    metrics = {"study/trials_complete": counts.get(K.COMPLETE, 0), "study/trials_pruned": counts.get(K.PRUNED, 0),
               "study/trials_diverged": counts.get(K.DIVERGED, 0), "study/trials_failed": counts.get(K.FAILED, 0),
               "study/trials_unfinished": unfinished, "study/wall_time_s": out.wall_s}
    if out.best:
        metrics["study/best_objective"] = out.best["mean_over_seeds"]
    if launched.interrupted:
        _stop(p, tracker, out.files, metrics, launched.interrupted, ended_count(recs), outcome.INTERRUPTED)
    if launched.failed or unfinished:
        _stop(p, tracker, out.files, metrics, launched.failed or f"{unfinished} of {p.total} trials did not end",
              ended_count(recs), outcome.FAILED)
    out.code = outcome.study_code(counts)
    _upload(where)  # the tables are safe in the object store before figures and the report are drawn
    print(f"\n{plan.name}: test accuracy (%) per session, mean ± 95% CI over seeds "
          f"(selection used validation accuracy only)\n{out.table_text}")
    if out.best:
        print(f"best configuration by {K.OBJECTIVE}: {out.best['config_label']} ({out.best['mean_over_seeds']:.2f})")
    extra = _figures_and_report(p, tracker, out)
    tracker.finish("FINISHED" if out.code == outcome.OK else "FAILED", [*out.files, *extra], metrics)
    _upload(where)
    where.cleanup()
    print(f"\n{plan.name}: {len(trials)} trials ({counts.get(K.COMPLETE, 0)} complete, {counts.get(K.PRUNED, 0)} "
          f"pruned, {counts.get(K.DIVERGED, 0)} diverged, {counts.get(K.FAILED, 0)} failed) in {out.wall_s:.0f} s")
    print(f"results: {where}  (sessions.parquet, trials.parquet, table.txt, best_config.json"
          + "".join(f", {Path(a).name}" for a in extra) + ")")
    print(f"MLflow: experiment '{plan.name}', parent run {tracker.parent_run_id}")
    print(f"open the MLflow UI: {tracking.ui_command(p.tracking_uri)}")
    if out.code != outcome.OK:
        _print_failed(p, recs, counts)
    return out


def _print_failed(p: Prepared, recs: list, counts: dict[str, int]) -> None:
    """Why the study exits 1: one line per trial that raised (its error line; the traceback is in MLflow and in
    the trial's error.txt), and how to run those trials again."""
    failed = [r for r in recs if r.state == K.FAILED]
    print(f"\nerror: {p.plan.name} failed: {outcome.why_failed(counts)}", file=sys.stderr, flush=True)
    for r in failed:
        print(f"  {r.label} seed={r.config.get('seed')}: {outcome.error_line(r.error)}", file=sys.stderr)
    if failed:
        print(f"tracebacks: MLflow tag adbs.error of each trial's run, and error.txt in its folder under "
              f"{p.where.display('tune')}\nrun the failed trials again (the others are kept): "
              f"{shlex.join(resume_command(p.opts))}", file=sys.stderr, flush=True)


def _counts(trials: pd.DataFrame) -> dict[str, int]:
    return trials["state"].value_counts().to_dict() if len(trials) else {}


def _tables(p: Prepared, launched: Launched, t0: float) -> tuple[list, Outcome]:
    """The trials' records (each trial's state as the study recorded it when it ended: the runs file) and the
    tables written from them (sessions.parquet, trials.parquet, table.txt, table.md, best_config.json)."""
    plan = p.plan
    runs = tracking.load_runs(p.dir)
    recs = [trial_records.from_tune(r, varying=p.varying, run_ids=runs["trials"], ended=runs.get("ended", {}))
            for r in launched.results]
    sessions, trials = trial_records.frames(recs)
    table = tables.paper_table(sessions, baseline=plan.baseline, order=plan.order, trials=trials) if len(sessions) else pd.DataFrame()
    table_text = tables.annotate(tables.format_table(table), trials, order=plan.order)
    best = tables.best_config(trials) if len(trials) else None
    files = tables.write(p.dir, sessions, trials, table_text, best)
    (p.dir / "table.md").write_text(tables.annotate(tables.format_table(table, markdown=True), trials,
                                                     markdown=True, order=plan.order) + "\n")
    files.append(p.dir / "table.md")
    return recs, Outcome(plan, p.dir, sessions, trials, table, table_text, best, files, p.where, time.time() - t0)


def _stop(p: Prepared, tracker, files: list[Path], metrics: dict, why: str, ended: int, code: int) -> NoReturn:
    """A study that stopped early: runs KILLED (the user stopped it) or FAILED, files uploaded, the --resume
    command printed; exit `code` (INTERRUPTED or FAILED)."""
    status = "KILLED" if code == outcome.INTERRUPTED else "FAILED"
    try:
        tracker.close_open_runs()
        tracker.finish(status, files, metrics)
    except tracking.TrackingError as e:  # the store itself is what stopped the study
        print(f"warning: the MLflow runs could not be marked {status} ({e}); --resume reopens them", flush=True)
    _upload(p.where)
    head = "stopped" if code == outcome.INTERRUPTED else "error: failed after it started"
    print(f"\n{p.plan.name} {head} ({why}); the tables of the {ended} trial{'s' * (ended != 1)} that ended "
          f"are in {p.where}.\ncontinue with: {shlex.join(resume_command(p.opts))}", flush=True,
          file=sys.stdout if code == outcome.INTERRUPTED else sys.stderr)
    raise SystemExit(code)


def _figures_and_report(p: Prepared, tracker, out: Outcome) -> list[Path]:
    """The study's figures and report.md (with where its runs are in MLflow)."""
    plan = p.plan
    figs = (run_files.study_figures(plan.name, out.sessions, out.trials, p.dir, order=plan.order)
            if len(out.sessions) else [])
    parent = tracker.client.get_run(tracker.parent_run_id)
    meta = {"MLflow experiment": plan.name, "parent run": f"{parent.info.run_name} ({parent.info.run_id})",
            "tracking URI": p.tracking_uri, "code version": parent.data.tags.get("adbs.code_version", "unknown"),
            "command": f"`{parent.data.tags.get('adbs.command', '?')}`"}
    report = run_files.write_study_report(p.dir, study=plan.name, table=out.table, trials=out.trials, best=out.best,
                                          figures=figs, meta=meta, order=plan.order)
    return [*figs, report]


def ended_count(recs: list) -> int:
    """Trials that ran to their end (complete, pruned, diverged or failed): neither interrupted nor never started."""
    return sum(r.state in K.ENDED for r in recs)


def _upload(where: StudyFolder) -> None:
    """Upload the staging folder of an object-store study; on failure say where the files are and exit."""
    try:
        where.push()
    except Exception as e:  # noqa: BLE001 - the files are still here: say where, lose nothing
        print(f"error: uploading the study's files to {where} failed ({str(e).strip().splitlines()[0][:300]}); "
              f"they are all in {where.local}: copy them there once the store is reachable "
              f"(Tune's results and checkpoints are written by the trials directly)", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


# -- run --------------------------------------------------------------------------------------------


def dry_run(p: Prepared) -> None:
    """--dry-run: the preflight passed (every check a run makes before its first trial); with --address, the
    cluster's checks too (connected to, not started; no probe trial); then what would run."""
    cfg = from_dict(p.base)
    opts = p.opts
    if opts.address:
        import ray

        with ray_session(p) as res:
            _slots(p, res, probe=False)
        ray.shutdown()  # disconnects this driver; the cluster runs on
    print(f"dry run: study {p.plan.name}, preset {opts.preset_name}, {p.n_configs} configuration(s) x "
          f"{len(opts.seeds)} seed(s) = {p.total} trials on {cfg.dataset} ({cfg.base_epochs} base epochs each; "
          f"search space {p.plan.space_source}); flags, config, data, storage {p.where}, the MLflow store, the "
          f"Optuna storage{', the Ray cluster' if opts.address else ''}"
          f"{' and what --resume continues' if opts.resume else ''} checked; nothing was started and no result "
          "written", flush=True)


def run(plan: Plan, opts: StudyOptions) -> Outcome | None:
    """preflight -> claim -> launch -> summarise; returns the Outcome (its `code`: 0, or 1 when a trial raised or
    none completed), None for --dry-run. Refused input exits 2 before anything starts; a study stopped by the user
    exits 130, one that failed after it started 1 (SystemExit, with the --resume command)."""
    _env_defaults()
    t0 = time.time()
    with _bad_input():
        p = preflight(plan, opts)
    note_owned(p)
    if opts.dry_run:
        p.where.cleanup()
        dry_run(p)
        return None
    resume_notes(p)
    with study_lock(p):
        claim(p)
        launched = launch(p)
        return _summarise(p, launched, t0)


def main(plan: Plan, opts: StudyOptions) -> NoReturn:
    """A study script's last line: run the study and exit with how it ended (adbs_lab/outcome.py)."""
    out = run(plan, opts)
    raise SystemExit(outcome.OK if out is None else out.code)


@contextmanager
def _bad_input() -> Iterator[None]:
    """Bad input (flags, config, stores) ends the study with its message and exit code 2."""
    try:
        yield
    except (ConfigError, StudyInputError, tracking.TrackingError) as e:
        fail(str(e))


def _summarise(p: Prepared, launched: Launched, t0: float) -> Outcome:
    """summarise; a disk that fills while the tables are written ends in a message and the --resume command."""
    try:
        return summarise(p, launched, t0)
    except OSError as e:
        if not _disk_full(e):
            raise
        launched.tracker.close_open_runs()
        launched.tracker.finish("FAILED")
        print(f"\nerror: no space left in {p.where} while writing the study's tables ({e}); free space, then "
              f"continue with: {shlex.join(resume_command(p.opts))}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
