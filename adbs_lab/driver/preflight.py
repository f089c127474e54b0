"""Preflight: every check a study makes before its first trial, and nothing written. `--dry-run` is this
preflight and one line of what would run; a run is this preflight, then `claim` and `launch` (claim.py, launch.py),
so the dry run and the run refuse the same input with the same message and exit code 2:

- the flags, the search space, every configuration the study enumerates and its dataset (adbs.data.check_data),
  the devices;
- the storage (writable, or creatable where it does not exist yet), the MLflow store (reachable, and an MLflow
  store, not e.g. an Optuna database) and the Optuna storage (not already holding this study, unless --resume);
- a copy of the same study already running on that storage (its lock, probed without taking it);
- --resume (resume.py): that there is an interrupted study of the same plan to continue, with the same settings
  and stores.

Stores that do not exist yet are judged by the folder they would be created in: `claim` and `launch` create
them once every check has passed. The one write is an object store's write check (a probe object, deleted).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from adbs.config import Config, canonical, from_dict
from adbs.redaction import redact
from adbs_lab.search import space as sp
from adbs_lab.records import objectives, tune_keys
from adbs_lab.results import comparisons, notes
from adbs_lab.stores import tracking_store
from adbs_lab.driver.prepared import Study, RunSettings
from adbs_lab.driver.resume import check_resume, json_object, mlflow_has_run, restorable, settings_now
from adbs_lab.driver.options import DEFAULT_MAX_SEEDS, StudyInputError, StudyOptions
from adbs_lab.stats.continuation import CAP_FOR_FAMILY, AlphaSplit, design
from adbs_lab.stats.looks import Looks, continuable
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.policy import SeedPolicy
from adbs_lab.search.seeds.race import DEFAULT_TOP, SampledRace, pairs_m
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.policy import VerdictPolicy
from adbs.writable import folder_problem
from adbs_lab.driver import flags, more_seeds
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder

__all__ = ["validate", "size", "held", "study", "preflight", "deciding", "note_owned", "note_repeats", "row_points",
           "logged_argv", "check_config_and_data", "check_storage_writable", "check_name_free", "name_taken",
           "seed_policy"]

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

    form = flags.storage_form_problem(location)  # its form, checked with the flags too: credentials, a bad scheme
    if form:
        raise StudyInputError(form)
    if st.is_url(location):
        try:
            st.check_writable(location)
        except st.ObjectStoreError as e:
            raise StudyInputError(f"--storage: {e}") from None
        return
    problem = folder_problem(Path(location).expanduser().resolve(), f"--storage {location}", create=False)
    if problem:
        raise StudyInputError(problem)


def _cuda() -> bool:
    """Whether this machine has a CUDA GPU. torch is imported here, not above: the flags refused before this check
    (a searched key set, a bad --set key) answer without the seconds torch takes to load."""
    import torch

    return torch.cuda.is_available()


def validate(plan: Plan, opts: StudyOptions) -> tuple[dict[str, Any], list[Config], float]:
    """(base config's values, configurations to run, GPUs per trial) or StudyInputError/ConfigError: no side
    effects."""
    base = flags.check(plan, opts)  # the light checks, which adbs_lab/study.py also runs before it loads the driver
    searched = flags.searched(plan)
    set_keys = [canonical(k) for k in opts.config_overrides()]  # --host, --dataset, --data-root and --set
    fixed, _, _ = sp.split(plan.space)
    base = {**base, **{k: v for k, v in fixed.items() if k not in set_keys}}
    # None: decided in launch from the Ray cluster's resources (packing on GPU clusters, adbs_lab/cluster/packing.py)
    gpus = opts.gpus_per_trial if opts.gpus_per_trial is not None else 0.0
    if gpus > 0 and opts.address is None and not _cuda():
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
    configs = sp.configs_to_check(sp.TrialMaker(from_dict(base), plan.rows), plan.space, list(opts.seeds))
    _check_configs(opts, configs, searched)
    return base, configs, gpus


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


def _fingerprint(plan: Plan, base: dict, seeds: list[int], total: int, identity: str | None = None) -> str:
    """What makes two runs the same study (study.json; --resume checks it): the plan's name, space and rows, the base
    config, the seeds checked, the trials, and the seed policy's part (adbs_lab/search/seeds/policy.py: identity)."""
    parts: tuple = (plan.name, sorted((k, repr(v)) for k, v in plan.space.items()), plan.rows,
                    sorted((k, repr(v)) for k, v in base.items()), seeds, total)
    ident = repr(parts + ((identity,) if identity else ()))  # a study of a seed list keeps its fingerprint
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def logged_argv(argv: tuple[str, ...]) -> list[str]:
    """The command for study.json and MLflow, with credentials cut out of object-store URLs."""

    def one(a: str) -> str:
        opt, eq, value = a.partition("=")
        return f"{opt}={redact(value)}" if a.startswith("--") and eq else redact(a)

    return [one(a) for a in argv]



def study(plan: Plan, opts: StudyOptions, legacy: bool = False) -> Study:
    """The study typed once, from `validate`'s checks alone (a part of studies/paper.py before any part runs:
    adbs_lab/driver/compose.py); `preflight` adds the checks of the stores, the folder and --resume. Writes nothing;
    for an object store, the caller cleans `where` up. `legacy`: a grid's --seeds auto by the plan it had before plans
    had a horizon (`seed_policy`), as --resume takes it for a study started then."""
    base, configs, gpus = validate(plan, opts)
    return _typed(plan, opts, base, configs, gpus, tracking_store.tracking_uri(opts.tracking_uri), legacy)


def _typed(plan: Plan, opts: StudyOptions, base: dict[str, Any], configs: list[Config], gpus: float,
           uri: str, legacy: bool = False) -> Study:
    """The one place the options become the study's facts (Study): --objectives parsed, the base made a Config, the
    space split and sized, the seed and verdict policies, the trial maker, the run's settings (RunSettings.of); a new
    study flag is read here and nowhere after (tests/repo/test_study_typed_once.py)."""
    space, is_grid, n_configs = size(plan, opts)
    fixed, grid, dists = sp.split(plan.space)
    varying = ([tune_keys.ROW_KEY] if plan.rows else []) + list(grid) + list(dists) + [tune_keys.SEED_KEY]
    folder = plan.name + opts.folder
    where = StudyFolder(opts.storage, folder)
    optuna_url = opts.optuna_storage or f"sqlite:///{where.local / 'optuna.db'}"
    base_config = from_dict(base)
    reference, pairs = _comparisons(plan, opts, base_config, space, varying)
    labels = [tune_keys.describe(pt, [k for k in varying if k != tune_keys.SEED_KEY]) for pt in row_points(space, varying)]
    if opts.seeds_auto and is_grid and not pairs and not opts.seeds_default:
        raise StudyInputError(f"--seeds auto adds seeds until the table's comparisons are resolved, and this run of "
                              f"{plan.name} compares no rows (no reference row among them); pass --seeds with a list "
                              "of seeds, or --reference ROW")
    table_policy = VerdictPolicy(alpha=opts.error_rate, delta=opts.resolve, pairs=tuple(pairs), smoke=opts.smoke)
    seeding = seed_policy(opts, is_grid, table_policy, tuple(labels), tuple(k for k in varying if k != tune_keys.SEED_KEY),
                          legacy)
    verdicts = getattr(seeding, "verdicts", table_policy)
    total = seeding.trials(n_configs)[1]
    return Study(plan=plan, run=RunSettings.of(opts), smoke=opts.smoke, preset=opts.preset_name, base=base_config,
                    base_values=base, notes=tuple(notes.lines(plan, opts, base)),
                    trial=sp.TrialMaker(base_config, plan.rows),
                    objectives=objectives.effective(opts.objectives),  # the one read of --objectives after options.py
                    sampler="GridSampler" if is_grid else "TrialSeededTPE", sampler_seed=opts.sampler_seed,
                    pruner=opts.pruner, threads=base_config.threads, seeding=seeding, rows=plan.rows,
                    fixed=fixed, grid=grid, dists=dists, configs=configs, space=space, is_grid=is_grid,
                    n_configs=n_configs, total=total, varying=varying, gpus_per_trial=gpus, tracking_uri=uri,
                    where=where, optuna_url=optuna_url,
                    fingerprint=_fingerprint(plan, base, seeding.checked_seeds(), total, seeding.identity()),
                    command=shlex.join(logged_argv(opts.argv)), owned=flags.study_owned(plan, opts),
                    reference=reference, verdicts=verdicts, row_labels=tuple(labels))


def deciding(verdicts: VerdictPolicy, cap: int | None = None) -> VerdictPolicy:
    """The table's policy under the design that decides (adbs_lab/stats/continuation.py: design): α split between
    last-session accuracy and the secondary metrics, the primary's share spent over looks of 3, 5, ... seeds up to the
    cap its family size needs (or `cap`, --max-seeds), a quarter of it kept for continuations up to twice the cap."""
    share = verdicts.alpha / AlphaSplit().alpha  # 1.0 at the default α: the split as simulated, to the bit
    split = AlphaSplit(AlphaSplit().primary_alpha * share, AlphaSplit().secondary_alpha * share)
    m = len(verdicts.pairs or ())
    if cap is None and m <= CAP_FOR_FAMILY[-1][0]:
        looks = design(max(m, 1), split)
    else:  # --max-seeds, or a family larger than the simulated ones: the largest simulated cap
        looks = continuable(cap=cap or CAP_FOR_FAMILY[-1][1], alpha=split.primary_alpha)
    return dataclasses.replace(verdicts, split=split).at_looks(looks)


def seed_policy(opts: StudyOptions, is_grid: bool, verdicts: VerdictPolicy, rows: tuple[str, ...],
                label_keys: tuple[str, ...], legacy: bool = False) -> SeedPolicy:
    """The study's seed policy (adbs_lab/search/seeds/): a fixed list (--seeds), or --seeds auto's looks (a first
    batch of 3 seeds, 2 more at a time, up to --max-seeds, the family's α) over a grid's rows, or the race of a
    sampled search on its first objective; `verdicts`: the table's (its comparisons, δ). A grid's --seeds auto (and
    the default of a study that decides) is the design of `deciding`; `legacy`: the plan --seeds auto had before it
    (one α, no horizon: cap 8 or --max-seeds), for a study started then that --resume continues."""
    if not opts.seeds_auto or (opts.seeds_default and not (is_grid and verdicts.pairs)):
        return SeedList(tuple(opts.seeds))  # a fixed list, or the default of a run that compares no rows
    if is_grid and not legacy:
        return UntilResolved(deciding(verdicts, opts.max_seeds), rows, label_keys)
    looks = Looks(max_seeds=opts.max_seeds or DEFAULT_MAX_SEEDS, alpha=verdicts.alpha)
    if is_grid:
        return UntilResolved(verdicts.at_looks(looks), rows, label_keys)
    top = min(opts.race_top or DEFAULT_TOP, int(opts.num_samples or 0))
    first = objectives.effective(opts.objectives)[0]
    return SampledRace(verdicts.at_looks(looks).with_pairs((), m=pairs_m(top)), top, int(opts.num_samples or 0),
                       label_keys, 1.0 if first.direction == "max" else -1.0)


def row_points(space: dict[str, Any], varying: list[str]) -> list[dict[str, Any]]:
    """The points of a grid's rows (the row axis and the grid axes, without the seed), in the order the table
    names them; none for a sampled space, whose configurations are not known before it runs."""
    _, grid, dists = sp.split(space)
    if dists:
        return []
    keys = [k for k in varying if k != tune_keys.SEED_KEY]
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def _comparisons(plan: Plan, opts: StudyOptions, base: Config, space: dict[str, Any],
                 varying: list[str]) -> tuple[str | dict[str, str] | None, list[tuple[str, str]]]:
    """The study's reference (--reference, its baseline, or each row's point with its reference axis at the
    reference value) and the comparisons its table makes (adbs_lab/results/comparisons.py: family)."""
    keys = [k for k in varying if k != tune_keys.SEED_KEY]
    points = row_points(space, varying)
    labels = [tune_keys.describe(pt, keys) for pt in points]
    reference: str | dict[str, str] | None = plan.baseline
    if opts.reference is not None:
        if not labels:
            raise StudyInputError(f"--reference {opts.reference}: study {plan.name} samples its configurations, so "
                                  "it has no rows to compare before it runs; drop --reference")
        if opts.reference not in labels:
            raise StudyInputError(f"--reference {opts.reference!r} is not a row of this study; its rows: "
                                  f"{', '.join(repr(lab) for lab in labels)}")
        reference = opts.reference
    elif plan.reference_axis and labels:
        axis = plan.reference_axis
        value = plan.reference_value if plan.reference_value is not None else getattr(base, axis)
        own = {lab: tune_keys.describe({**pt, axis: value}, keys) for lab, pt in zip(labels, points)}
        refs = {lab: ref for lab, ref in own.items() if ref in own}  # a value no row has: nothing to compare
        one = set(refs.values())
        reference = one.pop() if len(one) == 1 else refs or None  # one reference row: its label, as a baseline
    return reference, comparisons.family(labels, reference, plan.parents)


def preflight(plan: Plan, opts: StudyOptions) -> Study:
    """Every check a run makes before its first trial (see the module's docstring); StudyInputError, ConfigError or
    TrackingError name what is wrong. Writes nothing: `claim` does, under `study_lock`."""
    base, configs, gpus = validate(plan, opts)
    uri = tracking_store.tracking_uri(opts.tracking_uri)
    tracking_store.tracking_problem(uri)
    p = _typed(plan, opts, base, configs, gpus, uri)
    if opts.resume and opts.seeds_auto and p.is_grid and _recorded_fingerprint(p.where) not in (None, p.fingerprint):
        # a study started when a grid's --seeds auto had one α and no horizon continues by the plan it started with
        old = _typed(plan, opts, base, configs, gpus, uri, legacy=True)
        p = old if _recorded_fingerprint(p.where) == old.fingerprint else p
    where = p.where
    try:
        busy = where.running() or (where.cache_problem() if opts.cache else None)
        if busy:
            raise StudyInputError(busy)
        try:
            p = dataclasses.replace(p, settings=check_resume(p) if opts.resume else _check_new(p, opts.objectives))
        except StudyInputError as e:  # --resume's checks, said for the flag this command gave
            said = str(e).replace("no interrupted study to continue", "no study to continue").replace("--resume",
                                                                                                      "--more-seeds")
            raise (StudyInputError(said) if opts.more_seeds else e) from None
        if opts.resume:
            p = more_seeds.resumed(p)
    except BaseException:
        where.cleanup()  # an object store's staging folder, made to read
        raise
    return p


def note_owned(p: Study) -> None:
    """The one note of a study whose --config file sets keys the study sets itself (not an error: a
    best_config.json holds every field); printed by the dry run and the run alike."""
    if p.owned:
        print(f"note: --config {p.run.config_file}: this study sets {', '.join(p.owned)} itself (its search space "
              f"{p.plan.space_source}, --seeds{', --cpus-per-trial' if 'threads' in p.owned else ''}); the file's "
              "values of those keys are not used", flush=True)


def same_study_elsewhere(p: Study) -> list[str]:
    """Other folders of a local --storage that hold a run of this very study (study.json of the same fingerprint: the
    same rows, base config, seeds and design) under another name: a new run repeats their seeds (a seed fixes the
    data draw and the initialisation), so its verdicts are a second family, which neither guarantee covers together
    with the other's. Reads study.json files only; none for an object store or a resumed run."""
    if p.where.remote or p.run.resume:
        return []
    mine = p.where.local.resolve()
    found = []
    for ident in sorted(p.where.local.parent.glob("*/study.json")):
        try:
            held = json.loads(ident.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(held, dict) and held.get("fingerprint") == p.fingerprint and ident.parent.resolve() != mine:
            found.append(ident.parent.name)
    return found


def note_repeats(p: Study) -> None:
    """The note of a new run that repeats the seeds of a run of the same study under another name; printed by the
    dry run and the run alike."""
    others = same_study_elsewhere(p)
    if others:
        more = (" (`--more-seeds` with that run's --name continues it on new seeds within its guarantee)"
                if isinstance(p.seeding, UntilResolved) and p.seeding.looks.horizon is not None else "")
        print(f"note: {', '.join(others)} in {p.where.local.parent} already ran this very study (the same rows, seeds "
              f"and design); this run repeats those seeds, so its verdicts are a second family: each is true with "
              f"{p.verdicts.level_text} on its own, and nothing covers the two together{more}", flush=True)


def _check_optuna_storage(url: str) -> None:
    """--optuna-storage: a SQLite file that Optuna may use (absent, empty, or an Optuna database), or a database
    server that answers."""
    from adbs_lab.stores.sqlite_kind import StoreError, optuna_studies, sqlite_path, sqlite_problem

    path = sqlite_path(url)
    if path is not None:
        problem = sqlite_problem(path, "optuna") or folder_problem(path.parent, f"the folder of {path}", create=False)
        if problem:  # Optuna would add its tables to another program's database
            raise StudyInputError(f"--optuna-storage {redact(url)}: {problem}")
    try:
        optuna_studies(url)
    except StoreError as e:
        raise StudyInputError(f"--optuna-storage {tracking_store.redact_uri(url)}: {e}") from None


def _check_new(p: Study, given: tuple[str, ...]) -> dict[str, Any]:
    """A new study: its Optuna storage must not hold a study of its name already (a shared --optuna-storage);
    returns the settings `claim` records in study.json (--objectives as `given`: none for the default)."""
    check_name_free(p.run.optuna_storage, p.where, p.fingerprint)
    return {**settings_now(p), "objectives": list(given)}


def check_name_free(optuna_storage: str | None, where: StudyFolder, fingerprint: str) -> None:
    """A new study's name must be free in a shared --optuna-storage (a study's own optuna.db is in its folder, which
    `claim` takes under the folder's lock); StudyInputError naming what to do otherwise. Reads only: the name is
    taken for good when `claim` creates the study (adbs_lab/search/optuna_storage.py: create_study, atomic)."""
    from adbs_lab.stores.sqlite_kind import optuna_studies

    if optuna_storage and where.folder in optuna_studies(optuna_storage):
        raise StudyInputError(name_taken(optuna_storage, where, fingerprint))


def name_taken(url: str, where: StudyFolder, fingerprint: str) -> str:
    """Why a new study cannot take its name in Optuna storage `url`, and the advice that works: --resume only where
    --storage holds an interrupted run of this very study (what --resume continues: adbs_lab/driver/resume.py);
    where it holds this study's run stopped before Tune saved anything (it took the name, then wrote study.json),
    deleting the name's study, or another --name; else the study lives in the storage alone (another --storage's
    run, perhaps running now, or a run stopped before it wrote anything), and another --name, or deleting that study
    once no run uses it, is what works."""
    shown = tracking_store.redact_uri(url)
    head = f"Optuna storage {shown} already holds a study named {where.folder!r}"
    mine = _this_study(where, fingerprint)
    if mine and restorable(where):
        return f"{head}: {where} holds its interrupted run; pass --resume to continue it, or --name NAME to start another"
    if mine:  # `claim` takes a shared storage's name before it writes study.json (adbs_lab/driver/claim.py)
        return (f"{head}: this study's run in {where} took it and stopped before its first trial, with nothing saved "
                f"to continue (--resume cannot); once no run uses the name, delete it: optuna delete-study "
                f"--study-name {where.folder} --storage URL (the --optuna-storage URL you passed), then rerun; or "
                f"pass --name NAME to run this study beside it")
    return (f"{head}, and {where} holds no interrupted run of it to continue (another run owns the name: a study of "
            f"another --storage, maybe running now, or one stopped before it saved anything); pass --name NAME to run "
            f"this study beside it, or, once no run uses it, delete it: optuna delete-study --study-name "
            f"{where.folder} --storage URL (the --optuna-storage URL you passed)")


def _this_study(where: StudyFolder, fingerprint: str) -> bool:
    """Whether `where` holds a run of this very study (study.json of the same fingerprint): with Ray Tune's saved
    state (resume.restorable), one --resume continues; reads only."""
    try:
        held = json_object(where.read_text("study.json"), where.display("study.json"))
    except StudyInputError:
        return False
    return bool(held) and held.get("fingerprint") == fingerprint


def size(plan: Plan, opts: StudyOptions) -> tuple[dict[str, Any], bool, int]:
    """(search space with the row axis, is it a grid, configurations) or StudyInputError; no side effects."""
    _, grid, _ = sp.split(plan.space)
    is_grid = bool(grid) or bool(plan.rows)
    space = dict(plan.space)
    if plan.rows:
        space[tune_keys.ROW_KEY] = list(plan.rows)
    if not is_grid and opts.num_samples is None:
        raise StudyInputError(f"study {plan.name} samples its space: it needs --num-samples >= 1")
    _check_race(plan, opts, is_grid)
    if is_grid and any(a == "--num-samples" or a.startswith("--num-samples=") for a in opts.argv[1:]):
        raise StudyInputError(f"--num-samples: this run of {plan.name} is a grid, which runs every point "
                              f"({sp.grid_size(space, None)} configurations x {len(opts.seeds)} seeds); drop "
                              "--num-samples (it sizes sampled studies only)")
    if is_grid:
        return space, is_grid, sp.grid_size(space, None)
    assert opts.num_samples is not None, "a sampled study without --num-samples was refused above"
    return space, is_grid, int(opts.num_samples)


def _check_race(plan: Plan, opts: StudyOptions, is_grid: bool) -> None:
    """The combinations --seeds auto refuses on a sampled search (a race) and --race-top on a grid."""
    if is_grid and opts.race_top is not None:
        raise StudyInputError(f"--race-top {opts.race_top}: this run of {plan.name} is a grid, whose rows all run "
                              "--seeds auto's looks; --race-top sizes the race of a sampled search (--num-samples)")
    if is_grid or not opts.seeds_auto:
        return
    if len(opts.objectives) > 1:
        raise StudyInputError(f"--seeds auto: this run of {plan.name} searches {len(opts.objectives)} objectives, and "
                              "a race ranks configurations on one; pass one --objectives, or --seeds with a list")
    if int(opts.num_samples or 0) < 2:
        raise StudyInputError(f"--seeds auto: --num-samples {opts.num_samples} gives the race one configuration; "
                              "pass --num-samples 2 or more, or --seeds with a list of seeds")


def _recorded_fingerprint(where: StudyFolder) -> str | None:
    """The fingerprint study.json records in `where`, or None (none there, or damaged: check_resume says so)."""
    try:
        return json_object(where.read_text("study.json"), "study.json").get("fingerprint")
    except StudyInputError:
        return None


def held(p: Study) -> str | None:
    """What the study's folder holds of this very study (same fingerprint: plan, base config, seeds, size):
    "finished" (its MLflow parent run FINISHED), "unfinished" (Ray Tune's saved state: --resume continues it,
    adbs_lab/driver/resume.py: check_resume), "claimed" (a run stopped after `claim` wrote study.json and before
    Tune saved anything, with or without its parent run: no trial ran and nothing is there to continue, so a run
    starts it again), or None (nothing, or another study). Reads study.json, the runs file, the parent run and
    whether Tune's state is there; writes nothing."""
    where = p.where
    ident, runs = where.read_text("study.json"), where.read_text(tracking_store.RUNS_FILE)
    try:
        known = json_object(ident, "study.json").get("fingerprint")
    except StudyInputError:  # a damaged study.json is not this study's record: the run says so (check_resume)
        return None
    if known != p.fingerprint:
        return None
    parent = json_object(runs, where.display(tracking_store.RUNS_FILE)).get("parent")
    uri = p.tracking_uri
    if parent and not mlflow_has_run(uri, parent):  # tracked in another store: not this study's record
        return None
    if parent and tracking_store.client(uri).get_run(parent).info.status == "FINISHED":
        return "finished"
    return "unfinished" if restorable(where) else "claimed"


