"""Launch: the Ray session (adbs_lab/driver/session.py), the cluster checks, Optuna (sampler, pruner) and MLflow
(tracker), then Ray Tune runs the trials. `launch` reads top to bottom: resources per trial, searcher + stopper,
tracker + progress line, tuner, fit. Ctrl-C or SIGTERM stops the trials gracefully (--resume continues), and a
full disk or a failed MLflow store ends in a message: either way `Launched` holds the results so far."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shlex
import sys
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adbs.config import from_dict
from adbs_lab.records import metrics_keys as K
from adbs_lab.records import objectives
from adbs_lab.results import notes as study_notes
from adbs_lab.results.best import TAG as NO_BEST_TAG, progress_text, tag_value as no_best_tag
from adbs_lab.search import space as sp
from adbs_lab.records import tune_keys
from adbs_lab.driver.tracker import MlflowTracker
from adbs_lab.stores import db_server, tracking_store
from adbs_lab.driver.outcome import error_line
from adbs_lab.driver.preflight import held as study_held, logged_argv
from adbs_lab.driver.prepared import Study, bad_input, fail
from adbs_lab.driver import interrupts
from adbs.light import pause_point
from adbs_lab.driver.session import disk_full, interrupted, ray_session
from adbs_lab.stores.paths import code_version
from adbs_lab.stores.study_folder import StudyFolder

if TYPE_CHECKING:
    from ray.tune import Result, ResultGrid

    from adbs_lab.driver.base_sessions import BaseSessions

__all__ = ["Launched", "Slots", "cluster_slots", "launch", "trial_slots", "resources", "print_start", "resumed",
           "load_factor", "load_range", "niced", "MEASURED_AT", "CACHED_TRIAL_S", "RAY_NICENESS", "trials_text", "sampler",
           "progress_lines", "base_sessions", "estimate_text", "trial_maker"]


@dataclass
class Launched:
    results: Any
    """Ray Tune's ResultGrid (every trial that started)."""
    tracker: MlflowTracker
    interrupted: str | None
    """The user stopped the study early (Ctrl-C, SIGTERM): which; None when nobody did."""
    failed: str | None = None
    """Why the study itself failed after it started (a full disk, a failed MLflow store), None when it did not."""



@dataclass
class Slots:
    """What each trial gets and how many run at once."""

    gpus: float
    cpus: float
    max_concurrent: int


def cluster_slots(p: Study) -> Slots:
    """Ray started (or joined, --address) and the trials' resources checked against it: what the cluster refuses
    (nothing at --address, too few GPUs, a multi-node check) ends here, exit 2, before `claim` moves earlier
    results aside or a store is created (adbs_lab/driver/run.py)."""
    with ray_session(p) as res:
        return trial_slots(p, res)


def launch(p: Study, slots: Slots) -> Launched:
    """With Ray up and `slots` checked (`cluster_slots`): the MLflow store, Optuna (sampler, pruner) and MLflow
    (tracker), then Tune runs the trials."""
    with bad_input():
        tracking_store.check_tracking_uri(p.tracking_uri)  # a new SQLite store gets its schema here, in one process
    tracker = None
    try:  # Ray is up; to Tune's fit: an interruption here ends the study with its line (no trial ran yet)
        bases = base_sessions(p, slots)
        print_start(p, slots.max_concurrent, bases=bases)
        pause_point("ray_started")
        searcher, stopper = _search(p, slots)
        tracker, progress = _tracking(p, searcher, slots, bases)
        tuner = _tuner(p, slots, searcher, stopper, [tracker, progress])
    except KeyboardInterrupt:
        if tracker is not None:
            tracker.finish("KILLED")
        interrupted("preparing the first trials", p)
    fitted = _fit(p, tuner)
    return Launched(tracker=tracker.in_tune(), **fitted)  # on --resume, the tracker Tune unpickled and ran


def trial_slots(p: Study, res: dict[str, float], probe: bool = True) -> Slots:
    """Resources per trial (flags or packing), checked against the cluster (multi-node: cluster.preflight)."""
    from adbs_lab.cluster import checks as cluster

    try:
        gpus, cpus = resources(p, res, probe)
    except KeyboardInterrupt:
        interrupted("probing a trial's GPU memory", p)
    if gpus > res.get("GPU", 0):
        fail(f"--gpus-per-trial {gpus:g} but the Ray cluster has {res.get('GPU', 0):g} GPUs; "
             "use --gpus-per-trial 0 or a cluster with GPUs")
    if gpus == 0 and any(c.device == "cuda" for c in p.configs):
        fail(f"device=cuda but the trials get no GPU (the Ray cluster has {res.get('GPU', 0):g} GPUs); use "
             "device=auto or cpu, or a cluster with GPUs")
    try:  # multi-node: shared storage, a tracking server, the dataset on every node
        cluster.preflight(storage=p.run.storage if p.where.remote else str(p.where.local.parent),
                          tracking_uri=p.tracking_uri, configs=p.configs, cpus_per_trial=cpus, gpus_per_trial=gpus)
    except cluster.ClusterCheckError as e:
        fail(str(e))
    fit = int(res.get("CPU", 1) // cpus)
    if gpus > 0:
        fit = min(fit, int(res.get("GPU", 0) / gpus + 1e-6))
    max_concurrent = p.run.max_concurrent or max(1, min(fit, p.total))
    if p.run.resume:
        held = p.settings.get("max_concurrent") or max_concurrent
        if p.run.max_concurrent and p.run.max_concurrent != held:
            print(f"note: --max-concurrent {p.run.max_concurrent} is ignored on --resume: Ray Tune continues with "
                  f"the interrupted run's limit, {held}", flush=True)
        max_concurrent = held
    return Slots(gpus, cpus, max_concurrent)


def base_sessions(p: Study, slots: Slots) -> BaseSessions | None:
    """The base sessions the study's trials will train (adbs_lab/driver/base_sessions.py: count), for the time
    estimates; None where that cannot be told, or telling it failed: an estimate never stops a study."""
    from adbs_lab.driver.base_sessions import count

    try:
        return count(p, trial_maker(p, slots))
    except Exception as e:  # noqa: BLE001 - a file the key reads is unreadable: the trial says so, not the estimate
        logging.getLogger(__name__).debug("base sessions not counted: %s", e)
        return None


def trial_maker(p: Study, slots: Slots) -> sp.TrialMaker:
    """The study's trial maker (Study.trial) with the trials' torch threads set: a trial's threads are its CPUs,
    written into its config: logged with it, part of the base-session key, and what `python -m adbs.run --threads N`
    needs to give the same numbers (adbs/runtime.py). Tune's param_space and the searcher both take this one."""
    return dataclasses.replace(p.trial, base=dataclasses.replace(p.base, threads=p.threads or max(1, int(slots.cpus))))


def sampler(p: Study):
    """Optuna's sampler of the study: a grid's in an order its seed fixes, else TPE whose every draw is seeded from
    each trial's number, so a study resumed after its driver was killed draws no value twice, with every setting that
    decides what it samples named (adbs_lab/search/samplers.py; tests/adbs_lab/search/test_sampler_settings.py reads
    them off this object)."""
    from adbs_lab.search.samplers import TrialSeededTPE
    from adbs_lab.search.searcher import StudyGridSampler

    return (StudyGridSampler(sp.grid_points(p.space), seed=p.sampler_seed) if p.is_grid
            else TrialSeededTPE(seed=p.sampler_seed, n_objectives=len(p.objectives)))


def _search(p: Study, slots: Slots):
    """Optuna's sampler inside the searcher (which also resolves and records each trial) and the pruner's stopper."""
    from adbs_lab.search.optuna_storage import optuna_storage
    from adbs_lab.search.searcher import BaseEpochStopper, StudySearch
    from adbs_lab.search.shadows import make_pruner

    where = p.where
    trial = trial_maker(p, slots)
    optuna_storage(p.optuna_url)  # create the Optuna schema now, in this process
    snapshot = ({tracking_store.RUNS_FILE: str(p.dir / tracking_store.RUNS_FILE),
                 **({} if p.run.optuna_storage else {"optuna.db": str(p.dir / "optuna.db")})} if where.remote else None)
    searcher = StudySearch(sp.optuna_distributions(p.space),
                           storage_url=p.optuna_url, study_name=p.folder, sampler=sampler(p), policy=p.seeding,
                           trial=trial, points_to_evaluate=p.plan.points_to_evaluate,
                           snapshot=snapshot,  # object store: optuna.db travels with every Tune state upload
                           objectives=p.objectives)
    pruner = make_pruner(p.pruner, p.base.base_epochs)
    stopper = None
    if pruner:
        stopper = BaseEpochStopper(storage_url=p.optuna_url, study_name=p.folder, pruner=pruner,
                                   shadow_share=p.run.shadow_share, shadow_seed=p.sampler_seed)
        _record_shadows(p)
    return searcher, stopper


def _record_shadows(p: Study) -> None:
    """The share and seed of the shadows' draws, on the Optuna study (adbs_lab/search/shadows.py reads them back;
    --resume keeps both: RESUME_FIXED)."""
    from adbs_lab.search import shadows
    from adbs_lab.search.optuna_storage import optuna_storage

    storage = optuna_storage(p.optuna_url)
    study_id = storage.get_study_id_from_name(p.folder)
    storage.set_study_user_attr(study_id, shadows.SHARE_ATTR, float(p.run.shadow_share))
    storage.set_study_user_attr(study_id, shadows.SEED_ATTR, int(p.sampler_seed))


def trials_text(p: Study) -> str:
    """`12 trials (4 configurations x 3 seeds)`, or the range the seed policy may run (first batch to cap)."""
    return p.seeding.size_text(p.n_configs)


def _tracking(p: Study, searcher, slots: Slots, bases: BaseSessions | None = None):
    """The MLflow tracker (parent run; its settings on a new study) and the progress line (`bases`: the base
    sessions its trials will train, for its estimate); both read how a trial ended from the searcher (Tune pickles
    them with it, in one tuner.pkl, so they keep sharing it on --resume)."""
    run, plan, where = p.run, p.plan, p.where
    tags = {"adbs.study": plan.name, "adbs.search_space": f"{plan.space_source}: {plan.space!r}"[:7500],
            "adbs.code_version": code_version(),
            "adbs.command": shlex.join([sys.executable, *logged_argv(run.argv)])[:7500],
            "adbs.storage": str(where),
            # object store: the staging SQLite file is temporary; name the uploaded copy
            "adbs.optuna_storage": (where.display("optuna.db") if where.remote and not run.optuna_storage
                                    else p.optuna_url),
            "adbs.baseline": (json.dumps(p.reference) if isinstance(p.reference, dict) else p.reference or ""),
            **p.verdicts.tags(),  # the family, α, δ, the looks: what studies/report.py reads its verdicts at
            "adbs.order": json.dumps(plan.order or []),  # studies/report.py
            objectives.TAG: json.dumps(objectives.texts(p.objectives)),
            study_notes.TAG: study_notes.tag_value([*p.notes, *([p.no_best] if p.no_best else [])]),  # studies/report.py
            **({NO_BEST_TAG: no_best_tag(p.no_best, p.conditions)} if p.no_best else {})}  # report.py, likewise
    run_name = f"{plan.name}" + (f" {run.name}" if run.name else "") + f" {time.strftime('%Y-%m-%d %H:%M')}"
    searched, objs = searched_axes(p), objectives.texts(p.objectives)
    tracker = MlflowTracker(uri=p.tracking_uri, study=plan.name, folder=p.folder, study_dir=p.dir,
                                     run_name=run_name, tags=tags, varying=p.varying, resume=run.resume,
                                     ends=searcher, storage=run.storage, experiment=p.experiment,
                                     description=study_description(p, searched, objs))
    progress = progress_lines(p, searcher.ended, slots.max_concurrent, bases)
    if not run.resume:  # the study's own settings on the parent run (trial runs hold full configs)
        tracker.log_params({"study.searched": " ".join(searched) or "-", "study.objectives": " ".join(objs),
                            "study.seeds": json.dumps(p.seeding.checked_seeds()), "study.trials": p.total,
                            **p.seeding.params(),
                            "study.configurations": p.n_configs,
                            "study.sampler": p.sampler,  # as _search builds it
                            "study.pruner": p.pruner,
                            **({"study.shadow_share": p.run.shadow_share} if p.pruner != "none" else {}),
                            "study.cpus_per_trial": slots.cpus,
                            "study.gpus_per_trial": slots.gpus, "study.max_concurrent": slots.max_concurrent,
                            **{f"base.{k}": v for k, v in p.base_values.items()}})
    return tracker, progress


def progress_lines(p: Study, ended, max_concurrent: int, bases: BaseSessions | None = None):
    """The progress callback: a line per trial event, ending with the best so far only where the study names a best
    (adbs_lab/results/best.py), and the Pareto front's size of several objectives except across data conditions;
    its estimate from the first base epoch counts the base sessions still to train (`bases`, where told)."""
    from adbs_lab.driver.progress import Progress

    return Progress(study=p.plan.name, total=p.total, varying=p.varying, ended=ended, max_concurrent=max_concurrent,
                    to_train=None if bases is None else bases.to_train,
                    objectives=p.objectives,  # several: the front's size, no best (unless across conditions)
                    no_best=progress_text(p.conditions, verdicts=not p.no_best or len(p.objectives) > 1,
                                          race=p.seeding.chooses and len(p.objectives) == 1))


def searched_axes(p: Study) -> dict[str, str]:
    """What the study varies, each with its values: {"alpha": "0.01, 0.1"}, {"alpha": "0.01..0.1 (log)"} for a
    sampled range, {"row": "baseline, adb, adb+ic"} for named rows. Not the seed: it repeats a configuration."""
    out: dict[str, str] = {}
    for key in p.varying:
        value: Any = p.plan.rows if key == tune_keys.ROW_KEY else p.space.get(key)
        if key == tune_keys.SEED_KEY or value is None:
            continue
        choices = getattr(value, "choices", None) if sp.is_dist(value) else value
        out[key] = (", ".join(map(str, choices)) if choices is not None else
                    f"{value.low}..{value.high}" + (" (log)" if getattr(value, "log", False) else ""))
    return out


def study_description(p: Study, searched: dict[str, str], objs: list[str]) -> str:
    """The parent run's description in the MLflow UI (Markdown): what the study searches, for what, over which seeds,
    and which columns show it; the tracker adds the study's table when it ends (MlflowTracker.finish)."""
    axes = "; ".join(f"`{k}` in {v}" for k, v in searched.items()) or "one configuration"
    cols = ", ".join([f"`{k}`" for k in searched if k != tune_keys.ROW_KEY] + [f"`summary/{o.split(':')[0]}`" for o in objs])
    named = ", ".join(o.replace(":", " (") + ")" for o in objs)
    seeds = p.seeding.description(p.n_configs)
    return (f"**{p.plan.name}**{' ' + p.run.name if p.run.name else ''}: {axes}; {seeds}; objective {named}, the "
            "mean over seeds on validation data.\n\n"
            "Each trial is a run nested under this one (expand it with `+`), named after what differs. Columns to add "
            f"in the runs table (**Columns**): {cols}.")


def reopen_search(where: StudyFolder, total: int) -> None:
    """--more-seeds: the finished experiment's search state open again for `total` trials in all. Tune saved it with
    the searcher's FINISHED (its seeds had paused) and the study's trials then as Tune's sample budget
    (ray/tune/search/search_generator.py: get_state, set_state), and a restored experiment asks its searcher for no
    trial while either holds; the restored searcher itself takes the next pause (adbs_lab/stores/study_folder.py: rebind)."""
    import glob

    import ray.cloudpickle as cloudpickle

    for name in glob.glob(os.path.join(where.local, "tune", "search_gen_state-*.json")):
        with open(name, "rb") as f:
            state = cloudpickle.load(f)
        state.update(finished=False, total_samples=max(int(state.get("total_samples", 0)), total))
        tmp = f"{name}.tmp"
        with open(tmp, "wb") as f:
            cloudpickle.dump(state, f)
        os.replace(tmp, name)


def _tuner(p: Study, slots: Slots, searcher, stopper, callbacks: list):
    """A new Tuner, or on --resume the interrupted one restored (Tune unpickles its searcher, stopper and
    callbacks: Tuner.restore takes none, so this run's are not used then; see study_folder.rebind)."""
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback

    from adbs_lab.search.trainable import make_trainable

    run, where = p.run, p.where
    trainable = tune.with_resources(
        make_trainable(trial_fn=p.plan.trial_fn, cache_dir=where.cache_location if run.cache else None,
                       checkpoint_every=run.checkpoint_every),
        {"cpu": slots.cpus, "gpu": slots.gpus},
    )
    param_space = trial_maker(p, slots).param_space()
    storage_path, tune_fs = where.tune_location()
    _loggers(resume=run.resume)
    if run.more_seeds:
        reopen_search(where, p.total)
    if run.resume:
        # errored trials run again from their last checkpoint: what stopped them (a full disk, a lost node) is
        # what --resume is for; a numerical fault is not an error (the trial ended FAILED) and is not rerun
        return tune.Tuner.restore(where.tune_experiment(), trainable=trainable, resume_unfinished=True,
                                  resume_errored=True, param_space=param_space, storage_filesystem=tune_fs)
    return tune.Tuner(
        trainable, param_space=param_space,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=p.total,
                                    max_concurrent_trials=slots.max_concurrent, reuse_actors=True),
        run_config=tune.RunConfig(name="tune", storage_path=storage_path, storage_filesystem=tune_fs,
                                  stop=stopper, callbacks=[*callbacks, JsonLoggerCallback()], verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=run.max_failures),
                                  # Tune deletes a trial's older checkpoints as new ones register, and saves
                                  # its experiment state (which names the latest) every TUNE_GLOBAL_CHECKPOINT_S
                                  # (adbs_lab/driver/session.py), and at once when a trial has made num_to_keep
                                  # checkpoints since the last save (ray/tune/execution/experiment_state.py:
                                  # on_trial_checkpoint), so a state never names a deleted checkpoint. 4: a
                                  # trial checkpointing every few seconds forces a save every 4th checkpoint,
                                  # not every one; each kept checkpoint is the trial's state (a model's size).
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=4)),
    )


_NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
_SET_HERE: list[bool] = []  # whether this process set it (a value the user set is theirs and stays)


def _loggers(resume: bool) -> None:
    """Of Tune's per-trial loggers only the JSON one (result.json: Tune's Result.metrics_dataframe, read by
    adbs_lab/records/trial_records.py, and bench/load_check.py's count); progress.csv and the TensorBoard events
    nobody reads cost the driver CPU on every report (ray/tune/utils/callback.py: _create_default_callbacks adds
    all three unless TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1). A new study passes JsonLoggerCallback itself and turns
    the defaults off; a resumed one runs with the callbacks Tune pickled when it started, which lack it when an
    earlier version started it, so on --resume the defaults are on again."""
    if os.environ.get(_NO_AUTO_LOGGERS) is not None and not _SET_HERE:
        return
    os.environ[_NO_AUTO_LOGGERS] = "0" if resume else "1"
    _SET_HERE[:] = [True]


def _fit(p: Study, tuner) -> dict[str, Any]:
    """Tune's results, and why the study stopped early: `interrupted` by the user (Ctrl-C, SIGTERM), or `failed`
    (a full disk, a failed MLflow store, or anything else Tune raised, whose traceback is printed once); both end
    with the results so far and the study's own summary (exit 1 for `failed`, with the --resume command)."""
    from adbs_lab.search import optuna_storage as search

    _, tune_fs = p.where.tune_location()
    interrupted = failed = None
    # Tune logs a searcher's error with its traceback ("Error stopping trial"); a StoreDown is reported once, below
    logging.getLogger("ray.tune.execution.tune_controller").addFilter(_NOT_STORE_DOWN)
    search.STORE_DOWN.clear()  # an earlier study of this process (a part of studies/paper.py) is not this one
    stop = interrupts.current()
    try:
        with stop.during("tune"):  # Ctrl-C and SIGTERM: Tune's graceful stop, once it listens for it
            grid = tuner.fit()
        if search.STORE_DOWN:  # the searcher asked Tune to stop (SIGUSR1): the study failed, nobody interrupted it
            failed = search.STORE_DOWN[0]
        elif stop.signal:
            interrupted = stop.name
    except KeyboardInterrupt:
        interrupted = stop.name
        grid = _results_so_far(p.where, tune_fs)
    except Exception as e:  # noqa: BLE001 - a full disk or a dead store ends in a message, not a traceback
        # Tune wraps what its callbacks raise in a TuneError holding the formatted traceback
        if isinstance(e, tracking_store.TrackingError) or "TrackingError" in str(e):
            why = str(e).strip().splitlines()[-1].split("TrackingError: ")[-1]
            failed = why if why.startswith("the MLflow store") else f"the MLflow store failed: {why}"
        elif disk_full(e):
            failed = f"no space left in {p.where} (or in the Optuna/MLflow store): free space, then --resume"
        elif search.STORE_DOWN or db_server.store_down(e):
            # the Optuna storage's database stopped answering (the searcher and stopper read it every result):
            # one line, not the chained tracebacks of every call that found it gone
            failed = search.STORE_DOWN[0] if search.STORE_DOWN else (
                f"the Optuna storage {tracking_store.redact_uri(p.optuna_url)} stopped answering "
                f"({error_line(str(e))[:200]}); start it again")
        else:  # e.g. Ray's memory monitor or a lost node: the results so far, the cause once, exit 1
            traceback.print_exc(file=sys.stderr)
            failed = f"Ray Tune stopped: {error_line(traceback.format_exc())}"
        grid = _results_so_far(p.where, tune_fs)
    return {"results": grid, "interrupted": interrupted, "failed": failed}


class _NotStoreDown(logging.Filter):
    """Drops Tune's log record of a searcher or stopper call that found the Optuna storage gone (search.StoreDown),
    or of the tracker's call that found the MLflow store gone (tracking_store.TrackingError, "Error stopping trial"):
    the study says so once, with the --resume command (adbs_lab/driver/summarise.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from adbs_lab.search.optuna_storage import StoreDown

        exc = record.exc_info[1] if record.exc_info else None
        gone = isinstance(exc, tracking_store.TrackingError) and "stopped answering" in str(exc)
        return not (gone or isinstance(exc, StoreDown) or "StoreDown" in str(exc or ""))


_NOT_STORE_DOWN = _NotStoreDown()  # one instance: adding it again (every part of a composition) is a no-op


def resources(p: Study, res: dict[str, float], probe: bool = True) -> tuple[float, float]:
    """(GPUs, CPUs) per trial: the flags when given; on a cluster with GPUs, packing (adbs_lab/cluster/packing.py: a probe
    of the study's kinds of trial, then one printed line); else 0 GPUs and 1 CPU, as on a CPU cluster. `probe`
    False (a dry run): no probe trial; a trial that packing would place gets at most one GPU."""
    from adbs_lab.cluster import packing

    gpus, cpus = p.gpus_per_trial, p.run.cpus_per_trial
    if cpus is None and p.threads:  # --set threads=N: the trial's CPUs follow
        cpus = float(p.threads)
    packs = p.run.gpus_per_trial is None and res.get("GPU", 0) >= 1 and any(c.device != "cpu" for c in p.configs)
    if packs and not probe:
        return min(1.0, res["GPU"]), 1.0 if cpus is None else cpus
    if packs:
        print("packing: probing one trial's peak GPU memory ...", flush=True)
        choice, _ = packing.plan([c.to_dict() for c in p.configs], cluster_cpus=res.get("CPU", 1),
                                 cluster_gpus=res.get("GPU", 0), trials=p.total, cpus_per_trial=cpus)
        print(choice.line(), flush=True)
        gpus, cpus = choice.gpus_per_trial, choice.cpus_per_trial
    return gpus, 1.0 if cpus is None else cpus


def _results_so_far(where: StudyFolder, tune_fs) -> ResultGrid | list[Result]:
    """Tune's results as last saved (after Tune itself was interrupted); [] when it saved nothing yet."""
    from ray import tune

    try:
        return tune.Tuner.restore(where.tune_experiment(), trainable=lambda c: None,
                                  storage_filesystem=tune_fs).get_results()
    except Exception:  # noqa: BLE001 - nothing restorable: no trial had started
        return []


def ended_so_far(p: Study) -> tuple[int, int]:
    """(trials ended, trials begun and not ended) of the interrupted run, from its runs file (adbs_lab/driver/tracker.py:
    trial -> MLflow run, trial -> how it ended)."""
    runs = tracking_store.load_runs(p.dir)
    ended = sum(1 for state in runs.get("ended", {}).values() if state in K.ENDED)
    return ended, len(runs.get("trials", {})) - ended


def resumed(p: Study) -> str:
    """What --resume continues, as the resumed run's first line (and its dry run) says it: the folder, when its study
    started (study.json: adbs_lab/driver/claim.py) and its trials, e.g. "resuming the study in runs/alpha_sweep started
    2026-11-28 10:02: 5 of 12 trials ended, 7 to go (2 continue from their last checkpoint)", or that it finished."""
    try:
        held = json.loads(p.where.read_text("study.json") or "{}")
    except ValueError:  # checked before Ray started (adbs_lab/driver/resume.py: check_resume); said there
        held = {}
    started = f" started {held['started']}" if isinstance(held, dict) and held.get("started") else ""
    ended, begun = ended_so_far(p)
    if p.run.more_seeds:  # a finished study taken on to its next pause (adbs_lab/driver/more_seeds.py)
        return (f"continuing the study in {p.where}{started} to {getattr(p.seeding, 'stop', '?')} seeds a row: "
                f"{ended} trials ended, up to {max(0, p.total - ended)} more for the rows of its open comparisons")
    if study_held(p) == "finished":  # its parent run FINISHED: Tune runs no trial again (--seeds auto: before its cap)
        return (f"the study in {p.where}{started} finished ({ended} trials ended): nothing to continue, so "
                "it runs no trial and writes its tables again from them")
    text = f"resuming the study in {p.where}{started}: {ended} of {p.total} trials ended, {p.total - ended} to go"
    return text + (f" ({begun} continue{'s from its' if begun == 1 else ' from their'} last checkpoint)" if begun else "")


MEASURED_AT = (2, 2)
"""(CPUs, trials at a time) of the measured times of studies/times.json: two trials sharing two cores."""

CACHED_TRIAL_S = 8.0
"""Seconds of a CPU-preset trial whose base session the cache holds, in a fresh process (Ray Tune runs each trial
in its own): the images, the base session loaded, the incremental sessions. Measured with adbs.trial.run_trial and a
BaseCache on the 2-core machine at load average 1.3-3.4, one trial at a time (2026-12-03): 8.1 s against 54.8 s for
the same trial training its base session (1.0 s against 52.4 s in one process, the images already in memory);
--smoke 7.2 s against 10.7 s. Those fresh processes generated the images; a study's trials load them from its
images folder (adbs_lab/driver/session.py: IMAGES_ENV), so 8 s is on the high side. The same figure for every base
epochs setting: the incremental sessions do not follow the base epochs."""

RAY_NICENESS = 15
"""The nice value Ray gives its worker processes (trials) unless RAY_worker_niceness says otherwise: Ray's
src/ray/common/ray_config_def.h: worker_niceness (15), "so that the OS prioritizes CPU for other processes over
worker"; a local Ray's worker printed os.nice(0) = 15 beside a driver at 0 (ray 2.60, 2026-12-03)."""


def load_factor(load_now: float, cpus: int, running: int, load_then: float = 0.0) -> float:
    """How many times longer a CPU trial takes now than when its time was measured, at the least (load_range)."""
    return load_range(load_now, cpus, running, load_then)[0]


def load_range(load_now: float, cpus: int, running: int, load_then: float = 0.0) -> tuple[float, float]:
    """How many times longer a CPU trial takes now than when its time was measured (MEASURED_AT, at load average
    `load_then`), as a rough range (low, high), each at least 1, from r, the ratio of a trial's share of the CPUs
    then and now with `running` trials beside the load of `load_now` (one thread each: adbs/runtime.py).

    low = sqrt(r): the load average counts processes that wait more than they compute. On the 2-core machine of
    studies/times.json the ablation took 1.7x its idle time at load average 2-5 (445 s, not 263 s) and an
    alpha_sweep --smoke trial 1.6x at 12.8, where r says 2.5x and 7.4x.
    high = r: the other jobs compute, and the trials get at most a share of the CPUs equal to theirs. At most,
    because Ray runs the trials at nice 15 (RAY_NICENESS) and other jobs at 0: Linux's scheduler weighs a nice-15
    process 36 against 1024, so a trial gets about the CPU the other jobs leave idle, which no load average says.
    Studies at load average 7-41 took 47, 51 and 26 min where sqrt(r) had said 7.3, 9.2 and 6.8 (3.8-6.4x),
    while r is 2.1-4.6x sqrt(r) at those loads (2 CPUs, 2 trials, measured at 0): beyond even r at the lower
    loads, so the start line says the time can be longer still (estimate_text). Without the nice
    (RAY_worker_niceness=0) high is r as well: equal priority shares the CPUs as r says, or better."""
    def share(load: float, trials: int, cores: int) -> float:
        return min(1.0, cores / max(1e-9, load + trials))

    ratio = share(load_then, MEASURED_AT[1], MEASURED_AT[0]) / share(load_now, running, max(1, cpus))
    return max(1.0, ratio ** 0.5), max(1.0, ratio)


def niced() -> bool:
    """Whether Ray runs the trial processes below the driver's priority (RAY_worker_niceness unset: RAY_NICENESS)."""
    try:
        return int(os.environ.get("RAY_worker_niceness", RAY_NICENESS)) > 0
    except ValueError:
        return True


def estimate_text(p: Study, max_concurrent: int, left: int | None = None, load: float | None = None,
                  bases: BaseSessions | None = None) -> str:
    """The time the trials take on this CPU at its load now (`left`: the trials still to run, default the study's
    most), a rough range from its fewest trials at the low load factor to its most at the high (load_range); or that
    the first base epoch gives one (a preset with no measured figure on this machine). `bases`: the base sessions
    the trials will train (adbs_lab/driver/base_sessions.py); a trial that loads its base session counts
    CACHED_TRIAL_S, not a whole trial's time (22 of 24 trials of a k-shot grid did)."""
    if p.preset not in ("cpu", "smoke"):  # the preset in effect (--dataset cifar100 picks cifar100's)
        return "a time estimate follows the first measured base epoch"
    from adbs.config import resolve

    # measured at the preset's base epochs; the base session is most of a CPU trial, so scale by them
    preset_epochs = from_dict(resolve(p.preset, None, {})).base_epochs
    load = os.getloadavg()[0] if load is None else load
    cpus = os.cpu_count() or 1
    low, high = load_range(load, cpus, max_concurrent, p.plan.est_load)
    est = (p.plan.est_smoke_trial_s if p.smoke else p.plan.est_trial_s) * p.base.base_epochs / max(1, preset_epochs)
    most = p.total if left is None else left
    fewest = min(most, p.seeding.trials(p.n_configs)[0]) if not p.run.resume else most
    minutes = [_trial_minutes(n, max_concurrent, est, bases) * f for n, f in ((fewest, low), (most, high))]
    span = f"{minutes[1]:.1f}" if f"{minutes[0]:.1f}" == f"{minutes[1]:.1f}" else f"{minutes[0]:.1f} to {minutes[1]:.1f}"
    factor = f"x{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"x{low:.1f} to x{high:.1f}"
    reused = (f"; {bases.reusing} of {bases.trials} trials load their base session, trained before or by another "
              "trial") if bases is not None and bases.reusing else ""
    longer = (", longer still where other jobs keep the CPUs busy: Ray runs the trials at nice "
              f"{os.environ.get('RAY_worker_niceness', RAY_NICENESS)}, below them" if niced() and high > 1 else "")
    return (f"on this CPU roughly {span} min of training at its load now (load average {load:.1f} on {cpus} CPUs: "
            f"{factor} the time measured at {p.plan.est_load:g}, studies/times.json{longer}{reused}) (+~30 s to "
            "start Ray and the MLflow store and write the results)")


def _trial_minutes(n: int, max_concurrent: int, est: float, bases: BaseSessions | None) -> float:
    """Minutes of `n` trials of `est` s, `max_concurrent` at a time, at the load they were measured at; those that
    load their base session (`bases`) at CACHED_TRIAL_S each."""
    training = n if bases is None else min(n, bases.to_train)
    return (math.ceil(training / max_concurrent) * est + (n - training) * min(est, CACHED_TRIAL_S) / max_concurrent) / 60


def print_start(p: Study, max_concurrent: int, load: float | None = None, bases: BaseSessions | None = None) -> None:
    """The start line: the trials (or what --resume continues), a time estimate on the CPU presets that follows
    the machine's load (`load`: its load average, read here when None) and the base sessions the cache provides
    (`bases`: estimate_text), then the study's notes."""
    head = f"{p.plan.name}: {trials_text(p)}, {max_concurrent} at a time"
    left = p.total
    if p.run.resume:
        head = f"{p.plan.name}: {resumed(p)}; {max_concurrent} at a time"
        left = max(0, p.total - ended_so_far(p)[0])
    head += "; " + estimate_text(p, max_concurrent, left, load, bases)
    print(head + "; each running trial prints its base epochs (at most one line per 30 s)", flush=True)
    if p.smoke:  # apart from the study's own runs, in every store (adbs_lab/stores/paths.py: SMOKE)
        named = f" --name {p.run.name}" if p.run.name else ""
        print(f"smoke run: its results go to {p.where} and MLflow experiment '{p.experiment}', apart "
              f"from the study's own; its report: python studies/report.py {p.plan.name} --smoke{named}", flush=True)
    line = p.seeding.start_line(p.n_configs)
    if line:
        print(line, flush=True)
    if p.pruner != "none":
        from adbs_lab.stats.premise import CHECKS, PREMISE_LOWER

        gate = (f"it prunes at a base epoch only once Spearman's rho between that epoch's validation accuracy and the "
                f"objective, checked over the first {', '.join(map(str, CHECKS))} trials to end, has a lower bound "
                f">= {PREMISE_LOWER:g} (95% over the checks together); until then every trial runs to the end"
                if p.pruner == "auto" else "")
        print(f"pruner {p.pruner}: {gate + '; ' if gate else ''}{p.run.shadow_share:g} of the trials it stops run on "
              "to the end (shadows, pruned to the search) to measure whether base accuracy predicts the objective",
              flush=True)
    for line in list(p.notes) + ([p.no_best] if p.no_best else []):  # and tables
        print(f"note: {line}", flush=True)

