"""Run one study: validate everything, start Ray, let Optuna choose trials through Tune, track in
MLflow from the driver, then write the tables. Study scripts call `run(Plan(...), args)`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from adbs.config import Config, ConfigError
from adbs_lab import cli, results, space as sp, tracking
from adbs_lab import metrics_keys as K
from adbs_lab.paths import code_version
from adbs_lab.study_folder import StudyFolder


class StudyInputError(ValueError):
    """Bad study input, found before any trial starts; the message says what to change."""


@dataclass
class Plan:
    name: str
    """Study name = MLflow experiment = Optuna study name = storage folder."""
    space: dict[str, Any]
    """Search space (see adbs_lab.space): fixed values, grid axes (lists), Optuna distributions."""
    space_source: str
    """Where the space is defined, e.g. search_spaces/alpha_sweep.py:SPACE (MLflow tag adbs.search_space)."""
    num_samples: int | None = None
    """Configurations to sample (sampled studies); grids run every point."""
    rows: dict[str, dict] | None = None
    """Named rows of Config overrides (a grid axis `row`), for studies that are not a product."""
    cpu_defaults: dict[str, Any] = field(default_factory=dict)
    """Config overrides applied on the default CPU preset only, to fit the CPU budget."""
    baseline: str | dict[str, str] | None = None
    """Label of the baseline row (Delta_last column), or {row: its reference row}."""
    order: list[str] | None = None
    """Row order of the paper table."""
    points_to_evaluate: list[dict] | None = None
    """Configurations Optuna runs first (sampled studies)."""
    est_trial_s: float = 45.0
    """Rough single-thread CPU seconds per trial on the default preset (printed estimate)."""
    trial_fn: Callable | None = None
    """Test hook: replaces adbs.trial.run_trial inside the trainable."""


@dataclass
class Outcome:
    plan: Plan
    dir: Path
    sessions: pd.DataFrame
    trials: pd.DataFrame
    table: pd.DataFrame
    table_text: str
    best: dict | None
    tracker: tracking.MlflowTracker
    uri: str
    files: list[Path]
    wall_s: float
    where: StudyFolder
    """The study's folder; for an object store, `dir` is its local staging copy, uploaded by finish()."""

    def finish(self, extra_artifacts: list[Path] = ()) -> None:
        """Attach result files to the parent run, close it, print where everything is."""
        from adbs_lab import artifacts

        figs = list(extra_artifacts) or (
            artifacts.study_figures(self.plan.name, self.sessions, self.trials, self.dir) if len(self.sessions) else [])
        parent = self.tracker.client.get_run(self.tracker.parent_run_id)
        meta = {"MLflow experiment": self.plan.name, "parent run": f"{parent.info.run_name} ({parent.info.run_id})",
                "tracking URI": self.uri, "code version": parent.data.tags.get("adbs.code_version", "unknown"),
                "command": f"`{parent.data.tags.get('adbs.command', '?')}`"}
        report = artifacts.write_study_report(self.dir, study=self.plan.name, table=self.table, trials=self.trials,
                                              best=self.best, figures=figs, meta=meta, order=self.plan.order)
        extra_artifacts = [*figs, report]
        self.tracker.finish("FINISHED", [*self.files, *extra_artifacts])
        upload(self.where)
        self.where.cleanup()
        n = self.trials["state"].value_counts().to_dict() if len(self.trials) else {}
        print(f"\n{self.plan.name}: {len(self.trials)} trials "
              f"({n.get(K.COMPLETE, 0)} complete, {n.get(K.PRUNED, 0)} pruned, {n.get(K.FAILED, 0)} failed) "
              f"in {self.wall_s:.0f} s")
        print(f"results: {self.where}  (sessions.parquet, trials.parquet, table.txt, best_config.json"
              + "".join(f", {Path(a).name}" for a in extra_artifacts) + ")")
        print(f"MLflow: experiment '{self.plan.name}', parent run {self.tracker.parent_run_id}")
        print(f"open the MLflow UI: {tracking.ui_command(self.uri)}")


def _logged_argv() -> list[str]:
    """sys.argv for study.json and MLflow, with credentials cut out of object-store URLs."""
    from adbs.storage import redact

    def one(a: str) -> str:
        opt, eq, value = a.partition("=")
        return f"{opt}={redact(value)}" if a.startswith("--") and eq else redact(a)

    return [one(a) for a in sys.argv]


def upload(where: StudyFolder) -> None:
    """Upload the staging folder of an object-store study; on failure say where the files are and exit."""
    try:
        where.push()
    except Exception as e:  # noqa: BLE001 - the files are still here: say where, lose nothing
        print(f"error: uploading the study's files to {where} failed ({str(e).strip().splitlines()[0][:300]}); "
              f"they are all in {where.local}: copy them there once the store is reachable "
              f"(Tune's results and checkpoints are written by the trials directly)", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def _env_defaults() -> None:
    # Telemetry and usage stats off unless the user turned them on (issue 3).
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
    import logging

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # progress lines come from adbs_lab.progress
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def check_data(cfg: Config) -> None:
    """Dataset-dependent checks (shots vs images per class, ways vs novel classes)."""
    import adbs.data as data

    cfg.validate()
    checker = getattr(data, "check_data", None)
    if checker is not None:
        checker(cfg)
        return
    spec = data.DATASETS[cfg.dataset]
    ways = cfg.ways or spec.default_ways
    if cfg.sessions is None and spec.novel_classes % ways:
        divisors = [d for d in range(1, spec.novel_classes + 1) if spec.novel_classes % d == 0]
        raise ConfigError(f"ways={ways} does not divide the {spec.novel_classes} novel classes of {cfg.dataset}; "
                          f"use one of {divisors} or set sessions explicitly")
    if cfg.sessions is not None and cfg.sessions * ways > spec.novel_classes:
        raise ConfigError(f"sessions={cfg.sessions} x ways={ways} needs more than the {spec.novel_classes} "
                          f"novel classes of {cfg.dataset}")


def _fingerprint(plan: Plan, base: dict, seeds: list[int], num_samples: int) -> str:
    ident = repr((plan.name, sorted((k, repr(v)) for k, v in plan.space.items()), plan.rows,
                  sorted((k, repr(v)) for k, v in base.items()), seeds, num_samples))
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def check_storage(location: str) -> None:
    """--storage: a writable folder, or an object-store URL this machine can write to (issue 6)."""
    from adbs import storage as st

    if st.is_url(location):
        try:
            st.check_writable(location)
        except st.StorageError as e:
            raise StudyInputError(f"--storage: {e}") from None
        return
    if "://" in location:
        raise StudyInputError(f"--storage {location}: unsupported URL scheme {location.split('://')[0]!r}; pass a "
                              f"folder or an object-store URL ({', '.join(s + '://' for s in st.OBJECT_STORE_SCHEMES)})")
    root = Path(location).expanduser().resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StudyInputError(f"--storage {location}: cannot create it ({e}); pass a writable folder") from None
    if not os.access(root, os.W_OK):
        raise StudyInputError(f"--storage {location} is not writable; pass a writable folder")


def validate(plan: Plan, args: argparse.Namespace) -> dict[str, Any]:
    """Everything that can be wrong before a trial starts; raises StudyInputError/ConfigError."""
    import torch

    sp.check(plan.space, source=plan.space_source, rows=plan.rows)
    base = cli.base_overrides(args, plan.cpu_defaults)
    _, grid, dists = sp.split(plan.space)
    searched = set(grid) | set(dists) | {k for r in (plan.rows or {}).values() for k in r}
    clash = [k for k in (x.split("=", 1)[0].strip() for x in args.overrides) if k in searched]
    if clash:
        raise StudyInputError(f"--set {', '.join(clash)}: this study searches {', '.join(clash)} "
                              f"({plan.space_source}); remove the --set or edit the search space")
    fixed, _, _ = sp.split(plan.space)
    base = {**base, **{k: v for k, v in fixed.items() if k not in {x.split('=', 1)[0].strip() for x in args.overrides}}}
    if args.gpus_per_trial is None:
        args.gpus_per_trial = 1.0 if torch.cuda.is_available() else 0.0
    if args.gpus_per_trial < 0 or args.cpus_per_trial <= 0:
        raise StudyInputError("--cpus-per-trial must be > 0 and --gpus-per-trial >= 0")
    if args.gpus_per_trial > 0 and args.address is None and not torch.cuda.is_available():
        raise StudyInputError(
            f"--gpus-per-trial {args.gpus_per_trial:g} asks for GPUs but this machine has none "
            "(torch.cuda.is_available() is False); use --gpus-per-trial 0 for CPU trials, or run on a GPU "
            "machine / pass --address of a Ray cluster with GPUs")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise StudyInputError("--max-concurrent must be >= 1")
    if args.max_failures < 0 or args.checkpoint_every < 1:
        raise StudyInputError("--max-failures must be >= 0 and --checkpoint-every >= 1")
    check_storage(args.storage)
    checked = sp.configs_to_check(base, plan.space, args.seeds, plan.rows)
    for cfg in checked:
        try:
            check_data(cfg)
        except ValueError as e:
            what = " ".join(f"{k}={getattr(cfg, k)}" for k in sorted(searched | {"dataset", "ways", "shots"}) if k in cfg.to_dict())
            raise StudyInputError(f"configuration {what}: {e}") from None
    return base


def run(plan: Plan, args: argparse.Namespace) -> Outcome:
    _env_defaults()
    t0 = time.time()
    try:
        base = validate(plan, args)
        uri = tracking.tracking_uri(args.tracking_uri)
        tracking.check_tracking_uri(uri)
    except (ConfigError, StudyInputError, tracking.TrackingError) as e:
        fail(str(e))

    seeds = list(args.seeds)
    _, grid, dists = sp.split(plan.space)
    is_grid = bool(grid) or bool(plan.rows)
    space = dict(plan.space)
    if plan.rows:
        space[sp.ROW_KEY] = list(plan.rows)
    n_configs = sp.grid_size(space, None) if is_grid else (args.num_samples if hasattr(args, "num_samples") else plan.num_samples)
    total = n_configs * len(seeds)
    folder = plan.name + (f"-{args.name}" if args.name else "")
    # A folder, or for an object-store URL a local staging folder mirrored to it (adbs_lab.study_folder).
    where = StudyFolder(args.storage, folder)
    study_dir = where.local
    optuna_url = args.optuna_storage or f"sqlite:///{study_dir / 'optuna.db'}"
    fingerprint = _fingerprint(plan, base, seeds, total)
    ident_file = study_dir / "study.json"

    import optuna
    from ray import tune

    _, tune_fs = where.tune_location()
    from adbs_lab.study_folder import rebind

    snapshot = ({tracking.RUNS_FILE: str(study_dir / tracking.RUNS_FILE),
                 **({} if args.optuna_storage else {"optuna.db": str(study_dir / "optuna.db")})} if where.remote else None)
    rebind(folder, optuna_url=optuna_url, study_dir=str(study_dir))
    if args.resume:
        if where.remote:
            where.pull_for_resume()
        held = json.loads(where.read_text("study.json") or "{}")
        if held and held.get("fingerprint") != fingerprint:
            fail(f"--resume: {where} holds a different study ({held.get('study')}: {held.get('command')}); "
                 "rerun with the same arguments as that study, or drop --resume (or pass --name) to start a new one")
        if not held or not tune.Tuner.can_restore(where.tune_experiment(), storage_filesystem=tune_fs):
            fail(f"--resume: no interrupted study to continue in {where}; run without --resume to start one")
    else:
        if where.in_use():
            if where.remote:
                print(f"moving the previous results of {folder} aside in {where} ...", flush=True)
            moved = where.move_aside()
            print(f"previous results of {folder} moved to {moved} (use --resume to continue a study instead)")
        if args.optuna_storage:
            try:
                optuna.load_study(study_name=folder, storage=args.optuna_storage)
                fail(f"Optuna storage {args.optuna_storage} already holds a study named {folder!r}; pass --resume "
                     "to continue it, --name to start another, or delete it (optuna delete-study)")
            except KeyError:
                pass
        where.prepare()
        ident_file.write_text(json.dumps({"study": plan.name, "folder": folder, "fingerprint": fingerprint,
                                          "command": shlex.join(_logged_argv())}, indent=1))
        where.push([ident_file])

    import ray

    from adbs_lab.trainable import FAULT_ENV

    # Workers of an existing cluster do not inherit this shell's environment: forward what trials read.
    forward = {k: os.environ[k] for k in (FAULT_ENV,) if k in os.environ}
    ray.init(address=args.address, include_dashboard=False, log_to_driver=True, ignore_reinit_error=True,
             configure_logging=True, logging_level="WARNING",
             runtime_env={"env_vars": forward} if forward else None)
    res = ray.cluster_resources()
    if args.gpus_per_trial > res.get("GPU", 0):
        ray.shutdown()
        fail(f"--gpus-per-trial {args.gpus_per_trial:g} but the Ray cluster has {res.get('GPU', 0):g} GPUs; "
             "use --gpus-per-trial 0 or a cluster with GPUs")
    from adbs_lab import cluster

    try:  # multi-node: shared storage, a tracking server, the dataset on every node (issue 6)
        cluster.preflight(storage=args.storage if where.remote else str(study_dir.parent), tracking_uri=uri,
                          configs=sp.configs_to_check(base, plan.space, seeds, plan.rows),
                          cpus_per_trial=args.cpus_per_trial, gpus_per_trial=args.gpus_per_trial)
    except cluster.ClusterCheckError as e:
        ray.shutdown()
        fail(str(e))
    fit = int(res.get("CPU", 1) // args.cpus_per_trial)
    if args.gpus_per_trial > 0:
        fit = min(fit, int(res.get("GPU", 0) // args.gpus_per_trial))
    max_concurrent = args.max_concurrent or max(1, min(fit, total))

    varying = ([sp.ROW_KEY] if plan.rows else []) + list(grid) + list(dists) + [sp.SEED_KEY]
    est = 35.0 if args.smoke else plan.est_trial_s  # seconds per trial, 2 trials sharing 2 cores
    if args.preset == "cpu" or args.smoke:
        print(f"{plan.name}: {total} trials ({n_configs} configurations x {len(seeds)} seeds), "
              f"{max_concurrent} at a time; on this CPU roughly {math.ceil(total / max_concurrent) * est / 60:.1f} min "
              f"of training (+~30 s to start Ray and the MLflow store and write the results)", flush=True)
    else:
        print(f"{plan.name}: {total} trials ({n_configs} configurations x {len(seeds)} seeds), {max_concurrent} at a time",
              flush=True)

    from adbs_lab.pruning import BasePruner, StudySearch, make_pruner, storage
    from adbs_lab.progress import Progress
    from adbs_lab.trainable import make_trainable

    storage(optuna_url)  # create the Optuna schema now, in this process
    sampler = (optuna.samplers.GridSampler(sp.grid_points(space, seeds), seed=args.sampler_seed) if is_grid
               else optuna.samplers.TPESampler(seed=args.sampler_seed))
    searcher = StudySearch(sp.optuna_distributions(space, seeds if is_grid else None), storage_url=optuna_url,
                           study_name=folder, sampler=sampler, seeds=seeds, points_to_evaluate=plan.points_to_evaluate,
                           # object store: optuna.db and mlflow_runs.json travel with every Tune state upload
                           snapshot=snapshot)
    pruner = make_pruner(args.pruner, int(base.get("base_epochs", Config().base_epochs)))
    stopper = BasePruner(storage_url=optuna_url, study_name=folder, pruner=pruner) if pruner else None

    tags = {"adbs.study": plan.name, "adbs.search_space": f"{plan.space_source}: {plan.space!r}"[:7500],
            "adbs.code_version": code_version(), "adbs.command": shlex.join([sys.executable, *_logged_argv()])[:7500],
            "adbs.storage": str(where),
            # object store: the staging SQLite file is temporary; name the uploaded copy
            "adbs.optuna_storage": (where.display("optuna.db") if where.remote and not args.optuna_storage
                                    else optuna_url),
            "adbs.baseline": (json.dumps(plan.baseline) if isinstance(plan.baseline, dict) else plan.baseline or ""),
            "adbs.order": json.dumps(plan.order or [])}  # studies/report.py
    run_name = f"{plan.name}" + (f" {args.name}" if args.name else "") + f" {time.strftime('%Y-%m-%d %H:%M')}"
    tracker = tracking.MlflowTracker(uri=uri, study=plan.name, study_dir=study_dir, run_name=run_name, tags=tags,
                                     varying=varying, rows=plan.rows, resume=args.resume, optuna_url=optuna_url,
                                     optuna_study=folder)
    progress = Progress(study=plan.name, total=total, varying=varying)
    if not args.resume:  # the study's own settings on the parent run (trial runs hold full configs)
        from mlflow.entities import Param

        study_params = {"study.seeds": json.dumps(seeds), "study.trials": total, "study.configurations": n_configs,
                        "study.sampler": type(sampler).__name__, "study.pruner": args.pruner,
                        "study.cpus_per_trial": args.cpus_per_trial, "study.gpus_per_trial": args.gpus_per_trial,
                        "study.max_concurrent": max_concurrent, **{f"base.{k}": v for k, v in base.items()}}
        tracker.client.log_batch(tracker.parent_run_id, params=[Param(k, str(v)[:6000]) for k, v in study_params.items()])

    trainable = tune.with_resources(
        make_trainable(cpus_per_trial=args.cpus_per_trial, rows=plan.rows, trial_fn=plan.trial_fn,
                       cache_dir=None if args.no_cache else where.cache_location,
                       checkpoint_every=args.checkpoint_every),
        {"cpu": args.cpus_per_trial, "gpu": args.gpus_per_trial},
    )
    param_space = {k: (list(v) if isinstance(v, tuple) else v) for k, v in Config(**base).to_dict().items()}
    if args.resume:
        tuner = tune.Tuner.restore(where.tune_experiment(), trainable=trainable, resume_unfinished=True,
                                   resume_errored=False, param_space=param_space, storage_filesystem=tune_fs)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space=param_space,
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=total, max_concurrent_trials=max_concurrent,
                                        reuse_actors=True),
            run_config=tune.RunConfig(name="tune", storage_path=where.tune_location()[0], storage_filesystem=tune_fs,
                                      stop=stopper,
                                      callbacks=[tracker, progress], verbose=0,
                                      failure_config=tune.FailureConfig(max_failures=args.max_failures),
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=2)),
        )
    try:
        grid_result = tuner.fit()
    except KeyboardInterrupt:
        tracker.finish("KILLED")
        upload(where)
        print(f"\ninterrupted; continue with: {shlex.join([sys.executable, *sys.argv] + ([] if '--resume' in sys.argv else ['--resume']))}")
        raise SystemExit(130)

    from adbs_lab.pruning import optuna_pruned

    sessions, trials = results.collect(grid_result, rows=plan.rows, varying=varying,
                                       run_ids=tracking.load_runs(study_dir)["trials"],
                                       pruned=lambda n: optuna_pruned(optuna_url, folder, n))
    unfinished = int((trials["state"] == K.INTERRUPTED).sum()) if len(trials) else 0
    if unfinished or len(trials) < total:
        tracker.finish("KILLED")
        upload(where)
        print(f"\n{plan.name} interrupted: {total - len(trials) + unfinished} of {total} trials unfinished; "
              f"results so far are in {where}.\ncontinue with: {shlex.join([sys.executable, *sys.argv] + ([] if '--resume' in sys.argv else ['--resume']))}")
        raise SystemExit(130)
    table = results.paper_table(sessions, baseline=plan.baseline, order=plan.order) if len(sessions) else pd.DataFrame()
    table_text = results.annotate(results.format_table(table), trials, order=plan.order)
    best = results.best_config(trials) if len(trials) else None
    files = results.write(study_dir, sessions, trials, table_text, best)
    (study_dir / "table.md").write_text(results.annotate(results.format_table(table, markdown=True), trials, markdown=True,
                                                           order=plan.order) + "\n")
    files.append(study_dir / "table.md")
    upload(where)  # the tables are safe in the object store before figures and the report are drawn
    print(f"\n{plan.name}: test accuracy (%) per session, mean ± 95% CI over seeds "
          f"(selection used validation accuracy only)\n{table_text}")
    if best:
        print(f"best configuration by {K.OBJECTIVE}: {best['config_label']} ({best['mean_over_seeds']:.2f})")
    return Outcome(plan, study_dir, sessions, trials, table, table_text, best, tracker, uri, files, time.time() - t0,
                   where)
