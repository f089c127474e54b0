"""Preflight: every check a study makes before its first trial, and nothing written. `--dry-run` is this
preflight and one line of what would run; a run is this preflight, then `claim` and `launch` (adbs_lab/study.py),
so the dry run and the run refuse the same input with the same message and exit code 2:

- the flags, the search space, every configuration the study enumerates and its dataset (adbs.data.check_data),
  the devices;
- the storage (writable, or creatable where it does not exist yet), the MLflow store (reachable, and an MLflow
  store, not e.g. an Optuna database) and the Optuna storage (not already holding this study, unless --resume);
- a copy of the same study already running on that storage (its lock, probed without taking it);
- --resume: that there is an interrupted study of the same plan to continue, with the same settings and stores.

Stores that do not exist yet are judged by the folder they would be created in: `claim` and `launch` create
them once every check has passed. The one write is an object store's write check (a probe object, deleted).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adbs.config import Config, ConfigError
from adbs.overrides import from_dict
from adbs.renames import canonical
from adbs_lab import space as sp
from adbs_lab import tracking
from adbs_lab.options import StudyInputError, StudyOptions
from adbs_lab.paths import folder_problem
from adbs_lab.plan import Plan
from adbs_lab.study_folder import SNAPSHOT_DIR, StudyFolder

SEEDED = {"seed", "split_seed"}
"""Config fields a study sets from --seeds (adbs_lab/space.py: resolve): never typed, searched or fixed."""


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
    """What the study is launched with (study.json; `claim` writes it for a new study, --resume reads it back)."""
    owned: tuple[str, ...] = ()
    """Keys of the --config file that the study sets itself (`study_owned`; `note_owned` names them)."""

    @property
    def folder(self) -> str:
        return self.where.folder

    @property
    def dir(self) -> Path:
        return self.where.local


def fail(msg: str, code: int = 2) -> None:
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def check_config_and_data(cfg: Config, remember: bool = True) -> list[str]:
    """The config's checks (its host's against the dataset included), then the data's: the protocol (shots vs
    images per class, ways vs novel classes), every listed image decoded and each transform tried, a passed check
    remembered by the data's content (adbs/data/preflight.py); returns the data's warning lines."""
    from adbs.data import preflight_data

    cfg.validate()
    return preflight_data(cfg, remember=remember)


def check_storage_writable(location: str) -> None:
    """--storage: a writable folder (or one that can be created), or an object-store URL this machine can write to."""
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
    problem = folder_problem(Path(location).expanduser().resolve(), f"--storage {location}", create=False)
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
    if opts.optuna_storage:
        _check_optuna_storage(opts.optuna_storage)
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
    from contextlib import nullcontext

    from adbs import digests

    warnings: list[str] = []
    for cfg in configs:
        try:
            with digests.read_only() if opts.dry_run else nullcontext():  # a dry run records nothing
                warnings += check_config_and_data(cfg, remember=not opts.dry_run)
        except ValueError as e:
            what = " ".join(f"{k}={getattr(cfg, k)}" for k in sorted(searched | {"dataset", "ways", "shots"})
                            if k in cfg.to_dict())
            raise StudyInputError(f"configuration {what}: {e}") from None
    for w in dict.fromkeys(warnings):  # once each, however many configurations share the dataset
        print(f"warning: {w}", file=sys.stderr, flush=True)


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


def preflight(plan: Plan, opts: StudyOptions) -> Prepared:
    """Every check a run makes before its first trial (see the module's docstring); StudyInputError, ConfigError or
    TrackingError name what is wrong. Writes nothing: `claim` does, under `study_lock`."""
    base, configs, gpus = validate(plan, opts)
    uri = tracking.tracking_uri(opts.tracking_uri)
    tracking.tracking_problem(uri)
    seeds = list(opts.seeds)
    _, grid, dists = sp.split(plan.space)
    space, is_grid, n_configs, total = size(plan, opts)
    varying = ([sp.ROW_KEY] if plan.rows else []) + list(grid) + list(dists) + [sp.SEED_KEY]
    folder = plan.name + opts.folder
    where = StudyFolder(opts.storage, folder)
    optuna_url = opts.optuna_storage or f"sqlite:///{where.local / 'optuna.db'}"
    p = Prepared(plan, opts, base, configs, space, is_grid, n_configs, total, varying, gpus, uri, where,
                 optuna_url, _fingerprint(plan, base, seeds, total), shlex.join(_logged_argv(opts.argv)),
                 owned=study_owned(plan, opts))
    try:
        busy = where.running()
        if busy:
            raise StudyInputError(busy)
        p.settings = _check_resume(p) if opts.resume else _check_new(p)
    except BaseException:
        where.cleanup()  # an object store's staging folder, made to read
        raise
    return p


def note_owned(p: Prepared) -> None:
    """The one note of a study whose --config file sets keys the study sets itself (not an error: a
    best_config.json holds every field); printed by the dry run and the run alike."""
    if p.owned:
        print(f"note: --config {p.opts.config_file}: this study sets {', '.join(p.owned)} itself (its search space "
              f"{p.plan.space_source}, --seeds{', --cpus-per-trial' if 'threads' in p.owned else ''}); the file's "
              "values of those keys are not used", flush=True)


def _check_optuna_storage(url: str) -> None:
    """--optuna-storage: a SQLite file that Optuna may use (absent, empty, or an Optuna database), or a database
    server that answers."""
    from adbs_lab.stores import StoreError, optuna_studies, sqlite_path, sqlite_problem

    path = sqlite_path(url)
    if path is not None:
        problem = sqlite_problem(path, "optuna") or folder_problem(path.parent, f"the folder of {path}", create=False)
        if problem:  # Optuna would add its tables to another program's database
            raise StudyInputError(f"--optuna-storage {url}: {problem}")
    try:
        optuna_studies(url)
    except StoreError as e:
        raise StudyInputError(f"--optuna-storage {tracking.redact_uri(url)}: {e}") from None


def _check_new(p: Prepared) -> dict[str, Any]:
    """A new study: its Optuna storage must not hold a study of its name already (a shared --optuna-storage);
    returns the settings `claim` records in study.json."""
    from adbs_lab.stores import optuna_studies

    opts = p.opts
    if opts.optuna_storage and p.folder in optuna_studies(opts.optuna_storage):
        raise StudyInputError(
            f"Optuna storage {tracking.redact_uri(opts.optuna_storage)} already holds a study named {p.folder!r}; "
            "pass --resume to continue it, --name to start another, or delete it (optuna delete-study)")
    return {"max_concurrent": opts.max_concurrent, "cpus_per_trial": opts.cpus_per_trial,
            "gpus_per_trial": opts.gpus_per_trial, "pruner": opts.pruner, "sampler_seed": opts.sampler_seed,
            "max_failures": opts.max_failures}


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
    try:
        known = _json_object(ident, "study.json").get("fingerprint")
    except StudyInputError:  # a damaged study.json is not this study's record: the run says so (`_check_resume`)
        return None
    if known != _fingerprint(plan, base, list(opts.seeds), total):
        return None
    parent = _json_object(runs, where.display(tracking.RUNS_FILE)).get("parent")
    if not parent:
        return "unfinished"
    uri = tracking.tracking_uri(opts.tracking_uri)
    if not _mlflow_has_run(uri, parent):  # tracked in another store: not this study's record
        return None
    from mlflow.tracking import MlflowClient

    status = MlflowClient(uri).get_run(parent).info.status
    return "finished" if status == "FINISHED" else "unfinished"



RESUME_FIXED = {"pruner": "--pruner", "sampler_seed": "--sampler-seed", "cpus_per_trial": "--cpus-per-trial"}
"""Settings --resume cannot change: Tune restores the pruner (its stopper) and the sampler (its searcher) of the
interrupted run, and a trial's CPUs are its torch threads, which change CPU numbers (adbs/runtime.py)."""


def _check_resume(p: Prepared) -> dict[str, Any]:
    """--resume: an interrupted run of this very study to continue, with its record of the trials, the same
    settings and the same stores; returns its settings (study.json). Reads only."""
    from ray import tune

    opts, where = p.opts, p.where
    held = _json_object(where.read_text("study.json"), where.display("study.json"))
    if held and held.get("fingerprint") != p.fingerprint:
        raise StudyInputError(
            f"--resume: {where} holds a different study ({held.get('study')}: {held.get('command')}); rerun with "
            "the same arguments as that study, or drop --resume (or pass --name) to start a new one")
    if not held or not tune.Tuner.can_restore(where.tune_experiment(), storage_filesystem=where.tune_location()[1]):
        raise StudyInputError(f"--resume: no interrupted study to continue in {where}; run without --resume "
                              "to start one")
    missing = [name for name in (("optuna.db",) if not opts.optuna_storage else ()) + (tracking.RUNS_FILE,)
               if not _driver_file_exists(where, name)]
    if missing:
        raise StudyInputError(
            f"--resume: {', '.join(where.display(m) for m in missing)} is missing: the study cannot continue "
            f"without its record of the trials ({'Optuna' if 'optuna.db' in missing else 'MLflow runs'}); "
            "restore the file, or run without --resume to start the study again (earlier results are moved aside)")
    damaged = _damaged_tune_state(where)
    if damaged:
        raise StudyInputError(_unloadable_state(*damaged, cache=where.cache_location))
    settings = held.get("settings", {})
    command = held.get("command", "?")
    for key, flag in RESUME_FIXED.items():
        if key in settings and settings[key] != getattr(opts, key):
            def show(v):
                return "(not given)" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

            raise StudyInputError(
                f"--resume: {flag} {show(getattr(opts, key))} differs from the study's {flag} {show(settings[key])} "
                f"({command}); a study cannot change it midway: rerun with {flag} {show(settings[key])} (or without "
                "the flag when it was not given), or start a new study with --name NAME")
    parent = _json_object(_driver_file(where, tracking.RUNS_FILE), where.display(tracking.RUNS_FILE)).get("parent")
    if parent and not _mlflow_has_run(p.tracking_uri, parent):
        raise StudyInputError(
            f"--resume: the MLflow store {tracking.redact_uri(p.tracking_uri)} holds no run {parent}, the study's "
            f"parent run: the study was tracked in another store; rerun with the --tracking-uri it started with "
            f"({command})")
    if not where.remote or opts.optuna_storage:  # else optuna.db comes from the store's snapshot (claim)
        from adbs_lab.stores import optuna_studies

        if where.folder not in optuna_studies(p.optuna_url):
            raise StudyInputError(f"--resume: the Optuna storage {tracking.redact_uri(p.optuna_url)} holds no study "
                                  f"{where.folder!r}; rerun with the --optuna-storage the study started with "
                                  f"({command})")
    return settings


def resume_notes(p: Prepared) -> None:
    """What --resume keeps of the interrupted run although this command says otherwise (not an error)."""
    held = p.settings.get("max_failures")
    if p.opts.resume and held is not None and held != p.opts.max_failures:
        print(f"note: --max-failures {p.opts.max_failures} is ignored on --resume: Ray Tune continues with the "
              f"interrupted run's {held}", flush=True)


def _json_object(text: str | None, name: str) -> dict[str, Any]:
    """A JSON object the driver wrote (study.json, the runs file), {} when absent; damaged: StudyInputError naming
    it (a disk that filled while it was written, a hand edit), never a traceback."""
    if not text:
        return {}
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError(f"a JSON {type(value).__name__}, not an object")
    except ValueError as e:
        raise StudyInputError(f"{name} is damaged ({str(e)[:120]}): the study's record cannot be read; restore it "
                              "from a copy, or run without --resume to start the study again (earlier results are "
                              "moved aside)") from None
    return value


def _driver_file(where: StudyFolder, name: str) -> str | None:
    """A file the driver keeps (optuna.db, the runs file) as --resume would find it: in the folder, or for an
    object store in the snapshot uploaded with Tune's state (adbs_lab/study_folder.py: pull_for_resume)."""
    return where.read_text(f"tune/{SNAPSHOT_DIR}/{name}" if where.remote else name)


def _driver_file_exists(where: StudyFolder, name: str) -> bool:
    import pyarrow.fs as pafs

    path = f"{where.path}/tune/{SNAPSHOT_DIR}/{name}" if where.remote else f"{where.path}/{name}"
    return where.fs.get_file_info(path).type != pafs.FileType.NotFound


def _mlflow_has_run(uri: str, run_id: str) -> bool:
    """Whether the MLflow store at `uri` holds run `run_id`; a SQLite store that does not exist holds none (and is
    not created by asking)."""
    from mlflow.tracking import MlflowClient

    db = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    if db is not None and (not Path(db).is_file() or Path(db).stat().st_size == 0):
        return False
    try:
        MlflowClient(uri).get_run(run_id)
    except Exception:  # noqa: BLE001 - not in this store (or the store is unusable): cannot continue here
        return False
    return True


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
