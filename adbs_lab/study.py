"""Run one study: prepare (check everything, claim the folder) -> launch (Ray Tune, Optuna, MLflow) -> summarise
(tables, figures, report). A study script builds a `Plan` and calls `run(plan, opts)`.

- `prepare` touches no Ray and trains nothing: bad input ends here with exit 2 and nothing written; then
  `claim`, inside `with study_lock(...)`, takes the study's folder (earlier results moved aside, or --resume checked).
- `launch` starts (or joins) Ray (`with ray_session(...)`), checks the cluster, and lets Optuna choose trials
  through Tune while the tracker logs to MLflow from this process; Ctrl-C or SIGTERM stops it gracefully. It reads
  top to bottom: resources per trial, searcher + stopper, tracker + progress line, tuner, fit.
- `summarise` turns what ran into the tables, figures and report, whether the study finished or not.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import shlex
import signal
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from adbs.config import Config, ConfigError
from adbs.overrides import from_dict
from adbs.renames import canonical
from adbs_lab import metrics_keys as K
from adbs_lab import run_files, tables, tracking, trial_records
from adbs_lab import space as sp
from adbs_lab.options import StudyInputError, StudyOptions, resume_command
from adbs_lab.paths import code_version, folder_problem
from adbs_lab.study_folder import StudyBusy, StudyFolder

__all__ = ["Plan", "Outcome", "StudyInputError", "validate", "size", "held", "prepare", "launch", "summarise", "run"]

SEEDED = {"seed", "split_seed"}
"""Config fields a study sets from --seeds (adbs_lab/space.py: resolve): never typed, searched or fixed."""


@dataclass
class Plan:
    name: str
    """Study name = MLflow experiment = Optuna study name = storage folder."""
    space: dict[str, Any]
    """Search space (see adbs_lab.space): fixed values, grid axes (lists), Optuna distributions."""
    space_source: str
    """Where the space is defined, e.g. search_spaces/alpha_sweep.py:SPACE (MLflow tag adbs.search_space)."""
    rows: dict[str, dict] | None = None
    """Named rows of Config overrides (a grid axis `row`), for studies that are not a product."""
    cpu_defaults: dict[str, Any] = field(default_factory=dict)
    """Config overrides applied on the default CPU preset only, to fit the CPU budget."""
    baseline: str | dict[str, str] | None = None
    """Label of the baseline row (Delta_last column), or {row: its reference row}."""
    order: list[str] | None = None
    """Row order of the paper table."""
    axis_flags: dict[str, str] = field(default_factory=dict)
    """Study flags that pick part of a grid axis, e.g. {"ways": "--ways"} (named when --set on that axis is refused)."""
    points_to_evaluate: list[dict] | None = None
    """Configurations Optuna runs first (sampled studies)."""
    est_trial_s: float = 45.0
    """Rough seconds per trial on the default CPU preset, 2 trials sharing 2 cores (printed estimate)."""
    trial_fn: Callable | None = None
    """Test hook: replaces adbs.trial.run_trial inside the trainable."""


# -- prepare ----------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """Everything decided before Ray starts."""

    plan: Plan
    opts: StudyOptions
    base: dict[str, Any]
    """The config every trial starts from (preset < study defaults < --set), before the searched fields."""
    configs: list[Config]
    """Every distinct configuration of a grid, or the extremes of a sampled space (already checked)."""
    space: dict[str, Any]
    """The search space with the row axis added."""
    is_grid: bool
    n_configs: int
    total: int
    varying: list[str]
    gpus_per_trial: float
    tracking_uri: str
    where: StudyFolder
    optuna_url: str
    fingerprint: str
    """What makes two runs the same study (study.json; --resume checks it)."""
    command: str
    """The command line, credentials cut out (study.json, the lock, MLflow)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """What the study was launched with (study.json; `claim` writes it, --resume reads it back)."""

    @property
    def folder(self) -> str:
        return self.where.folder

    @property
    def dir(self) -> Path:
        return self.where.local


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
    import logging

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # progress lines come from adbs_lab.progress
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def fail(msg: str, code: int = 2) -> None:
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def check_config_and_data(cfg: Config) -> None:
    """Dataset-dependent checks (shots vs images per class, ways vs novel classes), cheap."""
    from adbs.data import check_data as check

    cfg.validate()
    check(cfg)


def check_storage_writable(location: str) -> None:
    """--storage: a writable folder, or an object-store URL this machine can write to."""
    from adbs import objstore as st

    if st.is_url(location):
        try:
            st.check_writable(location)
        except st.ObjectStoreError as e:
            raise StudyInputError(f"--storage: {e}") from None
        return
    if "://" in location:
        raise StudyInputError(f"--storage {location}: unsupported URL scheme {location.split('://')[0]!r}; pass a "
                              f"folder or an object-store URL ({', '.join(s + '://' for s in st.OBJECT_STORE_SCHEMES)})")
    problem = folder_problem(Path(location).expanduser().resolve(), f"--storage {location}")
    if problem:
        raise StudyInputError(problem)


def validate(plan: Plan, opts: StudyOptions) -> tuple[dict[str, Any], list[Config], float]:
    """(base config, configurations to run, GPUs per trial) or StudyInputError/ConfigError: no side effects."""
    import torch

    opts.check()
    sp.check(plan.space, source=plan.space_source, rows=plan.rows)
    _, grid, dists = sp.split(plan.space)
    searched = set(grid) | set(dists) | {k for r in (plan.rows or {}).values() for k in r}
    base = opts.base_config(plan.cpu_defaults, without=study_owned(plan, opts))
    set_keys = [canonical(k) for k in opts.config_overrides()]  # --host, --dataset, --data-root and --set
    _check_overrides(plan, opts, searched, set_keys)
    fixed, _, _ = sp.split(plan.space)
    base = {**base, **{k: v for k, v in fixed.items() if k not in set_keys}}
    # None: decided in launch from the Ray cluster's resources (packing on GPU clusters, adbs_lab/packing.py)
    gpus = opts.gpus_per_trial if opts.gpus_per_trial is not None else 0.0
    if gpus > 0 and opts.address is None and not torch.cuda.is_available():
        raise StudyInputError(
            f"--gpus-per-trial {gpus:g} asks for GPUs but this machine has none "
            "(torch.cuda.is_available() is False); use --gpus-per-trial 0 for CPU trials, or run on a GPU "
            "machine / pass --address of a Ray cluster with GPUs")
    threads = from_dict(base).threads
    if threads and opts.cpus_per_trial is not None and max(1, int(opts.cpus_per_trial)) != threads:
        raise StudyInputError(f"--set threads={threads} and --cpus-per-trial {opts.cpus_per_trial:g} disagree: a "
                              "trial's torch threads are its CPUs; give one of them")
    check_storage_writable(opts.storage)
    if opts.optuna_storage and opts.optuna_storage.startswith("sqlite:///"):
        from adbs_lab.stores import sqlite_path, sqlite_problem

        problem = sqlite_problem(sqlite_path(opts.optuna_storage), "optuna")  # Optuna would add its tables
        if problem:
            raise StudyInputError(f"--optuna-storage {opts.optuna_storage}: {problem}")
    configs = sp.configs_to_check(base, plan.space, list(opts.seeds), plan.rows)
    _check_configs(opts, configs, searched)
    return base, configs, gpus


def _check_overrides(plan: Plan, opts: StudyOptions, searched: set[str], set_keys: list[str]) -> None:
    """--set and the config flags may not set what the study sets itself (seeds, what it searches)."""
    seeded = [(k, v) for k, v in opts.overrides if canonical(k) in SEEDED]
    if seeded:
        raise StudyInputError(
            f"--set {seeded[0][0]}={seeded[0][1]}: a study sets seed and split_seed from --seeds (each seed is one "
            f"repetition: the training seed and the few-shot draw together), so the --set would be overridden; use "
            f"--seeds {seeded[0][1]} instead")
    in_space = sorted(SEEDED & (searched | set(sp.split(plan.space)[0])))
    if in_space:
        raise StudyInputError(f"search space {plan.space_source} sets {', '.join(in_space)}, which a study sets from "
                              "--seeds; remove it from the space and pass --seeds")
    clash = [k for k in set_keys if k in searched]
    if clash:
        typed = {k for k, _ in opts.overrides}
        flags = ", ".join(f"--set {k}" if k in typed else f"--{k.replace('_', '-')}" for k in clash)
        typed_values = {canonical(k): v for k, v in opts.config_overrides().items()}
        hint = "; ".join(f"to run part of the grid, use {plan.axis_flags[k]} {typed_values[k]}" for k in clash
                         if k in plan.axis_flags)
        raise StudyInputError(f"{flags}: this study searches {', '.join(clash)} "
                              f"({plan.space_source}); remove the flag or edit the search space"
                              + (f" ({hint})" if hint else ""))


def _check_configs(opts: StudyOptions, configs: list[Config], searched: set[str]) -> None:
    """Each configuration to run against the device flags and its dataset (cheap checks, no training)."""
    import torch

    if any(c.device == "cuda" for c in configs):
        if opts.gpus_per_trial == 0:
            raise StudyInputError("device=cuda but --gpus-per-trial 0: the trials would get no GPU and fail; give "
                                  "them GPUs (--gpus-per-trial 1, or leave it out to pack them) or use device=auto/cpu")
        if opts.address is None and not torch.cuda.is_available():
            raise StudyInputError("device=cuda but torch sees no CUDA GPU on this machine; use device=auto (CUDA "
                                  "when there is one, else CPU) or device=cpu, or pass --address of a Ray cluster "
                                  "with GPUs")
    for cfg in configs:
        try:
            check_config_and_data(cfg)
        except ValueError as e:
            what = " ".join(f"{k}={getattr(cfg, k)}" for k in sorted(searched | {"dataset", "ways", "shots"})
                            if k in cfg.to_dict())
            raise StudyInputError(f"configuration {what}: {e}") from None


def study_owned(plan: Plan, opts: StudyOptions) -> tuple[str, ...]:
    """Keys of the --config file that the study sets itself, so the file's values are not used: what it searches
    (grid axes, distributions, rows), what its space fixes, seed and split_seed (from --seeds), and threads when
    --cpus-per-trial is given (a trial's threads are its CPUs; the explicit flag wins over the file)."""
    from adbs.overrides import coerce

    fixed, grid, dists = sp.split(plan.space)
    own = set(grid) | set(dists) | {k for r in (plan.rows or {}).values() for k in r} | SEEDED
    own |= {k for k, v in opts.config_values if k in fixed and coerce(k, fixed[k]) != v}  # same value: no news
    if opts.cpus_per_trial is not None:
        own.add("threads")
    return tuple(k for k, _ in opts.config_values if k in own)


def _fingerprint(plan: Plan, base: dict, seeds: list[int], total: int) -> str:
    ident = repr((plan.name, sorted((k, repr(v)) for k, v in plan.space.items()), plan.rows,
                  sorted((k, repr(v)) for k, v in base.items()), seeds, total))
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _logged_argv(argv: tuple[str, ...]) -> list[str]:
    """The command for study.json and MLflow, with credentials cut out of object-store URLs."""
    from adbs.objstore import redact

    def one(a: str) -> str:
        opt, eq, value = a.partition("=")
        return f"{opt}={redact(value)}" if a.startswith("--") and eq else redact(a)

    return [one(a) for a in argv]


def prepare(plan: Plan, opts: StudyOptions) -> Prepared:
    """Check everything and decide where the study lives; touches nothing (`claim` does, under `study_lock`)."""
    base, configs, gpus = validate(plan, opts)
    owned = study_owned(plan, opts)
    if owned:  # not an error: a best_config.json holds every field, and a study sets some of them itself
        print(f"note: --config {opts.config_file}: this study sets {', '.join(owned)} itself (its search space "
              f"{plan.space_source}, --seeds{', --cpus-per-trial' if 'threads' in owned else ''}); the file's "
              "values of those keys are not used", flush=True)
    uri = tracking.tracking_uri(opts.tracking_uri)
    tracking.check_tracking_uri(uri)

    seeds = list(opts.seeds)
    _, grid, dists = sp.split(plan.space)
    space, is_grid, n_configs, total = size(plan, opts)
    varying = ([sp.ROW_KEY] if plan.rows else []) + list(grid) + list(dists) + [sp.SEED_KEY]
    folder = plan.name + opts.folder
    where = StudyFolder(opts.storage, folder)
    optuna_url = opts.optuna_storage or f"sqlite:///{where.local / 'optuna.db'}"
    return Prepared(plan, opts, base, configs, space, is_grid, n_configs, total, varying, gpus, uri, where,
                    optuna_url, _fingerprint(plan, base, seeds, total), shlex.join(_logged_argv(opts.argv)))


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


def size(plan: Plan, opts: StudyOptions) -> tuple[dict[str, Any], bool, int, int]:
    """(search space with the row axis, is it a grid, configurations, trials) or StudyInputError; no side effects."""
    seeds = list(opts.seeds)
    _, grid, _ = sp.split(plan.space)
    is_grid = bool(grid) or bool(plan.rows)
    space = dict(plan.space)
    if plan.rows:
        space[sp.ROW_KEY] = list(plan.rows)
    if not is_grid and opts.num_samples is None:
        raise StudyInputError(f"study {plan.name} samples its space: it needs --num-samples >= 1")
    if is_grid and any(a == "--num-samples" or a.startswith("--num-samples=") for a in opts.argv[1:]):
        raise StudyInputError(f"--num-samples: this run of {plan.name} is a grid, which runs every point "
                              f"({sp.grid_size(space, None)} configurations x {len(seeds)} seeds); drop --num-samples "
                              "(it sizes sampled studies only)")
    n_configs = sp.grid_size(space, None) if is_grid else int(opts.num_samples)
    return space, is_grid, n_configs, n_configs * len(seeds)


def held(plan: Plan, opts: StudyOptions, base: dict[str, Any]) -> str | None:
    """What the study's folder holds of this very study (same plan, base config `validate` gave, seeds):
    "finished" (its MLflow parent run FINISHED), "unfinished" (--resume continues it), or None (nothing, or
    another study). Reads study.json, the runs file and the parent run; writes nothing."""
    where = StudyFolder(opts.storage, plan.name + opts.folder)
    try:
        ident, runs = where.read_text("study.json"), where.read_text(tracking.RUNS_FILE)
    finally:
        where.cleanup()  # for a URL, StudyFolder makes a staging folder even to read
    total = size(plan, opts)[3]
    if json.loads(ident or "{}").get("fingerprint") != _fingerprint(plan, base, list(opts.seeds), total):
        return None
    parent = json.loads(runs or "{}").get("parent")
    if not parent:
        return "unfinished"
    from mlflow.tracking import MlflowClient

    try:
        status = MlflowClient(tracking.tracking_uri(opts.tracking_uri)).get_run(parent).info.status
    except Exception:  # noqa: BLE001 - tracked in another store: not this study's record
        return None
    return "finished" if status == "FINISHED" else "unfinished"


def claim(p: Prepared) -> dict[str, Any]:
    """Under `study_lock`: for a new study, earlier results moved aside and study.json written; for --resume,
    what there is to resume, checked. Returns the study's settings (study.json)."""
    from adbs_lab.study_folder import rebind

    # Tuner.restore unpickles the searcher, stopper and tracker of the driver that started the study, with its
    # paths; it takes no new ones (ray/tune/tuner.py: restore), so they look this driver's paths up here.
    rebind(p.where.folder, optuna_url=p.optuna_url, study_dir=str(p.where.local))
    return _claim_resume(p) if p.opts.resume else _claim_new(p)


def _claim_resume(p: Prepared) -> dict[str, Any]:
    from ray import tune

    opts, where = p.opts, p.where
    if where.remote:
        where.pull_for_resume()
    held = json.loads(where.read_text("study.json") or "{}")
    if held and held.get("fingerprint") != p.fingerprint:
        raise StudyInputError(
            f"--resume: {where} holds a different study ({held.get('study')}: {held.get('command')}); rerun with "
            "the same arguments as that study, or drop --resume (or pass --name) to start a new one")
    if not held or not tune.Tuner.can_restore(where.tune_experiment(), storage_filesystem=where.tune_location()[1]):
        raise StudyInputError(f"--resume: no interrupted study to continue in {where}; run without --resume "
                              "to start one")
    missing = [name for name in (("optuna.db",) if not opts.optuna_storage else ()) + (tracking.RUNS_FILE,)
               if not (where.local / name).exists()]
    if missing:
        raise StudyInputError(
            f"--resume: {', '.join(where.display(m) for m in missing)} is missing: the study cannot continue "
            f"without its record of the trials ({'Optuna' if 'optuna.db' in missing else 'MLflow runs'}); "
            "restore the file, or run without --resume to start the study again (earlier results are moved aside)")
    # after the check above: loading Tune's searcher state opens (and so creates) optuna.db
    damaged = _damaged_tune_state(where)
    if damaged:
        raise StudyInputError(_unloadable_state(*damaged, cache=where.cache_location))
    settings = held.get("settings", {})
    _check_resume(opts, where, settings, held.get("command", "?"), p.tracking_uri, p.optuna_url)
    return settings


def _claim_new(p: Prepared) -> dict[str, Any]:
    import optuna

    opts, where = p.opts, p.where
    if where.in_use():
        if where.remote:
            print(f"moving the previous results of {where.folder} aside in {where} ...", flush=True)
        moved = where.move_aside()
        print(f"previous results of {where.folder} moved to {moved} (use --resume to continue a study instead)")
    if opts.optuna_storage:
        try:
            optuna.load_study(study_name=where.folder, storage=opts.optuna_storage)
            raise StudyInputError(
                f"Optuna storage {opts.optuna_storage} already holds a study named {where.folder!r}; pass --resume "
                "to continue it, --name to start another, or delete it (optuna delete-study)")
        except KeyError:
            pass
    where.prepare()
    settings = {"max_concurrent": opts.max_concurrent, "cpus_per_trial": opts.cpus_per_trial,
                "gpus_per_trial": opts.gpus_per_trial, "pruner": opts.pruner, "sampler_seed": opts.sampler_seed,
                "max_failures": opts.max_failures}
    ident_file = where.local / "study.json"
    ident_file.write_text(json.dumps({"study": p.plan.name, "folder": where.folder, "fingerprint": p.fingerprint,
                                      "command": p.command, "settings": settings}, indent=1))
    where.push([ident_file])
    return settings


RESUME_FIXED = {"pruner": "--pruner", "sampler_seed": "--sampler-seed", "cpus_per_trial": "--cpus-per-trial"}
"""Settings --resume cannot change: Tune restores the pruner (its stopper) and the sampler (its searcher) of the
interrupted run, and a trial's CPUs are its torch threads, which change CPU numbers (adbs/runtime.py)."""


def _check_resume(opts: StudyOptions, where: StudyFolder, held: dict[str, Any], command: str, tracking_uri: str,
                  optuna_url: str) -> None:
    """--resume continues the study as it was started: the same pruner, sampler seed and CPUs per trial, and
    the same MLflow and Optuna stores, which must hold its runs; otherwise StudyInputError, before Ray starts."""
    import re

    import optuna
    from mlflow.tracking import MlflowClient

    def redact(uri: str) -> str:  # user:password@ never printed
        return re.sub(r"://[^/@\s]+@", "://", uri)

    for key, flag in RESUME_FIXED.items():
        if key in held and held[key] != getattr(opts, key):
            def show(v):
                return "(not given)" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

            raise StudyInputError(
                f"--resume: {flag} {show(getattr(opts, key))} differs from the study's {flag} {show(held[key])} "
                f"({command}); a study cannot change it midway: rerun with {flag} {show(held[key])} (or without the "
                "flag when it was not given), or start a new study with --name NAME")
    if "max_failures" in held and held["max_failures"] != opts.max_failures:
        print(f"note: --max-failures {opts.max_failures} is ignored on --resume: Ray Tune continues with the "
              f"interrupted run's {held['max_failures']}", flush=True)
    parent = tracking.load_runs(where.local).get("parent")
    if parent:
        try:
            MlflowClient(tracking_uri).get_run(parent)
        except Exception:  # noqa: BLE001 - not in this store (or the store is unusable): cannot continue here
            raise StudyInputError(
                f"--resume: the MLflow store {redact(tracking_uri)} holds no run {parent}, the study's parent run: "
                f"the study was tracked in another store; rerun with the --tracking-uri it started with ({command})"
            ) from None
    try:
        optuna.load_study(study_name=where.folder, storage=optuna_url)
    except KeyError:
        raise StudyInputError(f"--resume: the Optuna storage {redact(optuna_url)} holds no study {where.folder!r}; "
                              f"rerun with the --optuna-storage the study started with ({command})") from None


def _unloadable_state(file: Path, e: Exception, cache: str) -> str:
    """Why --resume cannot continue from Tune's state file `file`, and what to do instead."""
    why = (f"it names code this version of adbs_lab does not have ({type(e).__name__}: {e}): an earlier version "
           "saved it; finish the study with that version (its code version is the MLflow tag adbs.code_version), "
           "or run" if isinstance(e, (ImportError, AttributeError)) else
           f"it is damaged ({type(e).__name__}; written while the disk was full?); run")
    return (f"--resume: Ray Tune's saved state of this study ({file}) does not load, so it cannot be resumed: {why} "
            f"the study again without --resume: the earlier results are moved aside, and base sessions already "
            f"trained are reused from {cache}")


def _damaged_tune_state(where: StudyFolder) -> tuple[Path, Exception] | None:
    """The first of Tune's newest state files that is empty or does not load, and why (Tune's syncer writes them
    in place: a full disk leaves them truncated; a state pickled by an earlier version of this code names
    functions or modules that have moved; either way Tune's restore would fail with a traceback)."""
    import pickle

    import ray.cloudpickle as cloudpickle

    if where.remote:
        return None
    exp = Path(where.tune_experiment())
    for pattern, load in (("experiment_state-*.json", json.loads), ("search_gen_state-*.json", cloudpickle.loads),
                          ("searcher-state-*.pkl", pickle.loads), ("tuner.pkl", cloudpickle.loads)):
        files = sorted(exp.glob(pattern), key=lambda f: f.stat().st_mtime)
        if not files:
            continue
        try:
            load(files[-1].read_bytes())
        except Exception as e:  # noqa: BLE001 - any failure to load ends the resume
            return files[-1], e
    return None


# -- launch -----------------------------------------------------------------------------------------


@dataclass
class Launched:
    results: Any
    """Ray Tune's ResultGrid (every trial that started)."""
    tracker: tracking.MlflowTracker
    interrupted: str | None
    """Why the study stopped early (Ctrl-C, SIGTERM, a full disk, a locked store), None when it ran to the end."""


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
    with ray_session(p) as res:
        slots = _slots(p, res)
    _print_start(p, slots.max_concurrent)
    searcher, stopper = _search(p)
    tracker, progress = _tracking(p, searcher, slots)
    tuner = _tuner(p, slots, searcher, stopper, [tracker, progress])
    grid, interrupted = _fit(p, tuner)
    return Launched(grid, tracker, interrupted)


def _slots(p: Prepared, res: dict[str, float]) -> Slots:
    """Resources per trial (flags or packing), checked against the cluster (multi-node: cluster.preflight)."""
    from adbs_lab import cluster

    try:
        gpus, cpus = resources(p, res)
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


def _fit(p: Prepared, tuner) -> tuple[Any, str | None]:
    """(Tune's results, why the study stopped early or None); Ctrl-C, SIGTERM, a full disk or a failed MLflow
    store end it with the results so far instead of a traceback."""
    _, tune_fs = p.where.tune_location()
    interrupted = None
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
                interrupted = "the MLflow store failed: " + str(e).strip().splitlines()[-1].split("TrackingError: ")[-1]
            elif _disk_full(e):
                interrupted = f"no space left in {p.where} (or in the Optuna/MLflow store): free space, then --resume"
            else:
                raise
            grid = _results_so_far(p.where, tune_fs)
    return grid, interrupted


def resources(p: Prepared, res: dict[str, float]) -> tuple[float, float]:
    """(GPUs, CPUs) per trial: the flags when given; on a cluster with GPUs, packing (adbs_lab/packing.py: a probe
    of the study's kinds of trial, then one printed line); else 0 GPUs and 1 CPU, as on a CPU cluster."""
    from adbs_lab import packing

    gpus, cpus = p.gpus_per_trial, p.opts.cpus_per_trial
    if cpus is None and p.base.get("threads"):  # --set threads=N: the trial's CPUs follow
        cpus = float(p.base["threads"])
    if p.opts.gpus_per_trial is None and res.get("GPU", 0) >= 1 and any(c.device != "cpu" for c in p.configs):
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
        est = 35.0 if p.opts.smoke else p.plan.est_trial_s
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


def summarise(p: Prepared, launched: Launched, t0: float) -> Outcome:
    """Tables of every trial that ran, then (when it finished) figures, report, parent-run metrics; uploads."""
    plan, where, tracker = p.plan, p.where, launched.tracker
    recs, out = _tables(p, launched, t0)
    trials, counts = out.trials, _counts(out.trials)
    unfinished = sum(r.state == K.INTERRUPTED for r in recs) + (p.total - len(recs))
    stopped = launched.interrupted or (f"{unfinished} of {p.total} trials unfinished" if unfinished else None)
    metrics = {"study/trials_complete": counts.get(K.COMPLETE, 0), "study/trials_pruned": counts.get(K.PRUNED, 0),
               "study/trials_failed": counts.get(K.FAILED, 0), "study/trials_unfinished": unfinished,
               "study/wall_time_s": out.wall_s}
    if out.best:
        metrics["study/best_objective"] = out.best["mean_over_seeds"]
    if stopped:
        _stop(p, tracker, out.files, metrics, stopped, ended_count(recs))
    _upload(where)  # the tables are safe in the object store before figures and the report are drawn
    print(f"\n{plan.name}: test accuracy (%) per session, mean ± 95% CI over seeds "
          f"(selection used validation accuracy only)\n{out.table_text}")
    if out.best:
        print(f"best configuration by {K.OBJECTIVE}: {out.best['config_label']} ({out.best['mean_over_seeds']:.2f})")
    extra = _figures_and_report(p, tracker, out)
    tracker.finish("FINISHED", [*out.files, *extra], metrics)
    _upload(where)
    where.cleanup()
    print(f"\n{plan.name}: {len(trials)} trials ({counts.get(K.COMPLETE, 0)} complete, {counts.get(K.PRUNED, 0)} "
          f"pruned, {counts.get(K.FAILED, 0)} failed) in {out.wall_s:.0f} s")
    print(f"results: {where}  (sessions.parquet, trials.parquet, table.txt, best_config.json"
          + "".join(f", {Path(a).name}" for a in extra) + ")")
    print(f"MLflow: experiment '{plan.name}', parent run {tracker.parent_run_id}")
    print(f"open the MLflow UI: {tracking.ui_command(p.tracking_uri)}")
    return out


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


def _stop(p: Prepared, tracker, files: list[Path], metrics: dict, stopped: str, ended: int) -> None:
    """A study that stopped early: runs KILLED, files uploaded, the --resume command printed; exit 130."""
    try:
        tracker.close_open_runs()
        tracker.finish("KILLED", files, metrics)
    except tracking.TrackingError as e:  # the store itself is what stopped the study
        print(f"warning: the MLflow runs could not be marked KILLED ({e}); --resume reopens them", flush=True)
    _upload(p.where)
    print(f"\n{p.plan.name} stopped ({stopped}); the tables of the {ended} trial{'s' * (ended != 1)} that ended "
          f"are in {p.where}.\ncontinue with: {shlex.join(resume_command(p.opts))}", flush=True)
    raise SystemExit(130)


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
    """Trials that ran to their end (complete, pruned or failed): neither interrupted nor never started."""
    return sum(r.state in (K.COMPLETE, K.PRUNED, K.FAILED) for r in recs)


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


def dry_run(plan: Plan, opts: StudyOptions) -> None:
    """--dry-run: every check `prepare` makes before it claims the folder, then what would run; no side effects."""
    try:
        base, _, _ = validate(plan, opts)
        _, _, n, total = size(plan, opts)
    except (ConfigError, StudyInputError) as e:
        fail(str(e))
    cfg = from_dict(base)
    print(f"dry run: study {plan.name}, preset {opts.preset_name}, {n} configuration(s) x {len(opts.seeds)} seed(s) "
          f"= {total} trials on {cfg.dataset} ({cfg.base_epochs} base epochs each; search space "
          f"{plan.space_source}); flags, config, data and storage {opts.storage} checked; nothing was started and no "
          "result written", flush=True)


def run(plan: Plan, opts: StudyOptions) -> Outcome | None:
    """prepare -> launch -> summarise; bad input exits 2 before anything starts, an interrupted study 130."""
    _env_defaults()
    t0 = time.time()
    if opts.dry_run:
        dry_run(plan, opts)
        return None
    with _bad_input():
        p = prepare(plan, opts)
    with study_lock(p):
        with _bad_input():
            p.settings = claim(p)
        launched = launch(p)
        return _summarise(p, launched, t0)


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
