"""The checks of --resume (an interrupted run of this very study to continue, with the same settings and stores)
and what --resume keeps of the interrupted run; part of the preflight (adbs_lab/driver/preflight.py): they read,
and write nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from adbs_lab.records import objectives
from adbs_lab.stores import tracking_store
from adbs_lab.driver.prepared import Study
from adbs_lab.driver.options import StudyInputError
from adbs.redaction import redact, reveal
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.rules import shown
from adbs_lab.stores.study_folder import SNAPSHOT_DIR, StudyFolder, rebind

__all__ = ["RESUME_FIXED", "settings_now", "changed_setting", "check_resume", "restorable", "resume_notes", "mlflow_has_run",
           "json_object", "pickled_globals",
           "missing_code", "moved_code", "moved_message"]


_VERDICT_FIXED = [f for f in dataclasses.fields(VerdictPolicy) if f.metadata.get("resume") == "fixed" and "flag" in f.metadata]
"""The verdict policy's settings --resume cannot change that a flag sets (adbs_lab/stats/policy.py: its fields'
metadata), read off the policy: a new one is recorded and checked without a line here."""
RESUME_FIXED = {"objectives": "--objectives", "pruner": "--pruner", "sampler_seed": "--sampler-seed",
                "cpus_per_trial": "--cpus-per-trial", "shadow_share": "--shadow-share",
                **{f.metadata["setting"]: f.metadata["flag"] for f in _VERDICT_FIXED}, "reference": "--reference"}
"""Settings --resume cannot change: an Optuna study's directions (one per objective) are fixed when it is created,
Tune restores the pruner (its stopper) and the sampler (its searcher) of the interrupted run, and a trial's CPUs are
its torch threads, which change CPU numbers (adbs/runtime.py); the shadows' share where the study can prune
(changed_setting); α, δ and the reference, since the restored searcher of a --seeds auto study or a race took its
looks at the α, δ and comparisons it started with (adbs_lab/search/seeds/), while the summary would replay them at the new
ones (a study.json written before they were recorded is not checked for them). Checked in this order: the objectives first, since
the default pruner follows them (adbs_lab/driver/options.py: parse), so other objectives are named as what changed."""


def _held(key: str, settings: dict[str, Any]) -> Any:
    """A RESUME_FIXED setting as the interrupted run recorded it (study.json). --objectives: the objectives in effect
    (a study.json from before the flag, or a run without it, optimised the default objective)."""
    if key == "objectives":
        given = settings.get(key)
        try:
            return objectives.texts(objectives.effective(given or ()))
        except objectives.ObjectiveError:  # a hand-edited study.json: shown as it is, so it differs
            assert given is not None, "no objectives recorded means the default, which parses"
            return list(given)
    return settings[key]


def settings_now(p: Study) -> dict[str, Any]:
    """This run's settings, read off the study and its run's settings: what study.json records for a new study
    (adbs_lab/driver/preflight.py: _check_new) and what --resume compares with the recorded ones (RESUME_FIXED)."""
    run = p.run
    return {"max_concurrent": run.max_concurrent, "cpus_per_trial": run.cpus_per_trial,
            "gpus_per_trial": run.gpus_per_trial, "pruner": p.pruner, "sampler_seed": p.sampler_seed,
            "max_failures": run.max_failures, "objectives": objectives.texts(p.objectives),
            "shadow_share": run.shadow_share, **{f.metadata["setting"]: getattr(p.verdicts, f.name) for f in _VERDICT_FIXED},
            "reference": run.reference}


def changed_setting(settings: dict[str, Any], now: dict[str, Any], command: str) -> str | None:
    """The refusal when this run's RESUME_FIXED settings (`now`) differ from the study's (`settings`, study.json;
    `command`, the command that started it), else None. --shadow-share is compared only where the study as saved
    can prune: with --pruner none no trial is stopped, so none runs on as a shadow and the share decides nothing
    (adbs_lab/search/shadows.py); where it can, the share already decided which stopped trials ran on."""
    def show(v):
        return ("(not given)" if v is None else shown(v) if isinstance(v, float) else
                " ".join(v) if isinstance(v, list) else str(v))

    for key, flag in RESUME_FIXED.items():
        if not (key in settings or key == "objectives") or _held(key, settings) == now[key]:
            continue
        if key == "shadow_share" and settings.get("pruner") == "none":
            continue
        held_value = show(_held(key, settings))
        why = (f"the share already decided which of the trials its pruner (--pruner {settings.get('pruner')}) "
               "stopped ran on as shadows, and the pruning premise weighs each shadow by it; "
               if key == "shadow_share" else "")
        return (f"--resume: {flag} {show(now[key])} differs from the study's {flag} {held_value} ({command}); {why}a "
                f"study cannot change it midway: rerun with {flag} {held_value} (or without the flag when it was not "
                "given), or start a new study with --name NAME")
    return None


def restorable(where: StudyFolder) -> bool:
    """Whether `where` holds Ray Tune's saved experiment state, which --resume continues (a run interrupted while it
    claimed its folder has study.json and none); reads only."""
    from ray import tune

    return tune.Tuner.can_restore(where.tune_experiment(), storage_filesystem=where.tune_location()[1])


def check_resume(p: Study) -> dict[str, Any]:
    """--resume: an interrupted run of this very study to continue, with its record of the trials, the same
    settings and the same stores; returns its settings (study.json). Reads only."""
    where = p.where
    held = json_object(where.read_text("study.json"), where.display("study.json"))
    if held and held.get("fingerprint") != p.fingerprint:
        raise StudyInputError(
            f"--resume: {where} holds a different study ({held.get('study')}: {held.get('command')}); rerun with "
            "the same arguments as that study, or drop --resume (or pass --name) to start a new one")
    if not held or not restorable(where):
        raise StudyInputError(f"--resume: no interrupted study to continue in {where}; run without --resume "
                              "to start one")
    missing = [name for name in (("optuna.db",) if not p.run.optuna_storage else ()) + (tracking_store.RUNS_FILE,)
               if not _driver_file_exists(where, name)]
    if missing:
        raise StudyInputError(
            f"--resume: {', '.join(where.display(m) for m in missing)} is missing: the study cannot continue "
            f"without its record of the trials ({'Optuna' if 'optuna.db' in missing else 'MLflow runs'}); "
            "restore the file, or run without --resume to start the study again (earlier results are moved aside)")
    moved = moved_code(where)
    if moved:
        raise StudyInputError(moved_message(*moved, held=held))
    # Loading the state unpickles the searcher, which opens the Optuna storage: the one this command names, as
    # claim binds it for the run (the pickled URL is redacted, adbs/redaction.py; with a password it would not open)
    rebind(where.folder, optuna_url=p.optuna_url, study_dir=str(where.local), tracking_uri=p.tracking_uri)
    damaged = _damaged_tune_state(where)
    if damaged:
        raise StudyInputError(_unloadable_state(*damaged, cache=redact(where.cache_location)))
    settings = held.get("settings", {})
    command = held.get("command", "?")
    now = settings_now(p)
    changed = changed_setting(settings, {key: now[key] for key in RESUME_FIXED}, command)
    if changed:
        raise StudyInputError(changed)
    parent = json_object(_driver_file(where, tracking_store.RUNS_FILE), where.display(tracking_store.RUNS_FILE)).get("parent")
    if parent and not mlflow_has_run(p.tracking_uri, parent):
        raise StudyInputError(
            f"--resume: the MLflow store {tracking_store.redact_uri(p.tracking_uri)} holds no run {parent}, the study's "
            f"parent run: the study was tracked in another store; rerun with the --tracking-uri it started with "
            f"({command})")
    if not where.remote or p.run.optuna_storage:  # else optuna.db comes from the store's snapshot (claim)
        from adbs_lab.stores.sqlite_kind import optuna_studies

        if where.folder not in optuna_studies(p.optuna_url):
            raise StudyInputError(f"--resume: the Optuna storage {tracking_store.redact_uri(p.optuna_url)} holds no study "
                                  f"{where.folder!r}; rerun with the --optuna-storage the study started with "
                                  f"({command})")
    return settings


def resume_notes(p: Study) -> None:
    """What --resume keeps of the interrupted run although this command says otherwise (not an error)."""
    held = p.settings.get("max_failures")
    if p.run.resume and held is not None and held != p.run.max_failures:
        print(f"note: --max-failures {p.run.max_failures} is ignored on --resume: Ray Tune continues with the "
              f"interrupted run's {held}", flush=True)


def json_object(text: str | None, name: str) -> dict[str, Any]:
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
    object store in the snapshot uploaded with Tune's state (adbs_lab/stores/study_folder.py: pull_for_resume)."""
    return where.read_text(f"tune/{SNAPSHOT_DIR}/{name}" if where.remote else name)


def _driver_file_exists(where: StudyFolder, name: str) -> bool:
    import pyarrow.fs as pafs

    path = f"{where.path}/tune/{SNAPSHOT_DIR}/{name}" if where.remote else f"{where.path}/{name}"
    return where.fs.get_file_info(path).type != pafs.FileType.NotFound


def mlflow_has_run(uri: str, run_id: str) -> bool:
    """Whether the MLflow store at `uri` holds run `run_id`; a SQLite store that does not exist holds none (and is
    not created by asking)."""
    from mlflow.tracking import MlflowClient

    db = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    if db is not None and (not Path(db).is_file() or Path(db).stat().st_size == 0):
        return False
    try:
        MlflowClient(reveal(uri)).get_run(run_id)
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


OWN_PACKAGES = ("adbs", "adbs_lab")
"""The packages whose classes and functions Ray Tune pickles by module path in a study's state (the searcher, the
stopper, the callbacks, the trainable): the code a later version may move."""

_STRINGS = {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}
_QUIET = {"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "FRAME", "PROTO", "MARK"}  # push nothing STACK_GLOBAL reads


def pickled_globals(data: bytes) -> list[tuple[str, str]]:
    """The (module, name) of every global a pickle names (GLOBAL, STACK_GLOBAL, and cloudpickle's subimport of a
    module), read with pickletools.genops: nothing is unpickled, so nothing is imported or run. STACK_GLOBAL takes
    its two names from the stack: the strings pushed before it, directly or from the memo."""
    import pickletools

    found: list[tuple[str, str]] = []
    pushed: list[str | None] = []
    memo: dict[int, str | None] = {}
    subimport = False
    for op, arg, _pos in pickletools.genops(data):
        if op.name in _STRINGS:
            value = arg.decode("latin-1") if isinstance(arg, bytes) else str(arg)
            if subimport:  # cloudpickle.cloudpickle.subimport("adbs_lab.x"): a module by name
                found.append((value, ""))
                subimport = False
            pushed.append(value)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(str(arg))] = pushed[-1] if pushed else None
        elif op.name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(str(arg))))
        elif op.name in ("GLOBAL", "STACK_GLOBAL"):
            module, name = (str(arg).split(" ", 1) if op.name == "GLOBAL" else
                            (pushed[-2] if len(pushed) > 1 else None, pushed[-1] if pushed else None))
            if module is not None and name is not None:
                found.append((module, name))
                subimport = name == "subimport" and module.startswith("cloudpickle")
            pushed.append(None)
        elif op.name not in _QUIET:
            pushed.append(None)
    return found


def missing_code(module: str, name: str) -> bool:
    """Whether `module`:`name` (a global a pickle names; name "" for a module alone) is code of adbs/adbs_lab this
    version lacks: the module is not found (importlib.util.find_spec, which runs only the packages' __init__ faces,
    adbs_lab/__init__.py) or does not define the name's first part at its top level (read from its source with
    ast, without importing it; a module without source is imported)."""
    import ast
    import importlib
    import importlib.util

    if module.split(".")[0] not in OWN_PACKAGES:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent that is not a package, or is gone
        return True
    if spec is None:
        return True
    first = name.split(".")[0]
    if not first:
        return False
    origin = spec.origin or ""
    if not origin.endswith(".py"):
        return not hasattr(importlib.import_module(module), first)
    tree = ast.parse(Path(origin).read_text())
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return first not in defined and "__getattr__" not in defined


def _json_pickles(value: Any) -> list[bytes]:
    """The pickles inside Tune's JSON state (experiment_state-*.json): objects JSON cannot hold are kept as
    hex-encoded cloudpickles ({"_type": "CLOUDPICKLE_FALLBACK", "value": ...}), some inside JSON strings nested
    in the JSON (a trial's state)."""
    if isinstance(value, dict):
        if value.get("_type") == "CLOUDPICKLE_FALLBACK" and isinstance(value.get("value"), str):
            try:
                return [bytes.fromhex(value["value"])]
            except ValueError:
                return []
        return [b for v in value.values() for b in _json_pickles(v)]
    if isinstance(value, list):
        return [b for v in value for b in _json_pickles(v)]
    if isinstance(value, str) and value[:1] in "{[" and len(value) > 1:
        try:
            return _json_pickles(json.loads(value))
        except ValueError:
            return []
    return []


def moved_code(where: StudyFolder) -> tuple[Path, str] | None:
    """The first of Tune's state files of the study (tuner.pkl, experiment_state-*.json, searcher-state-*.pkl,
    search_gen_state-*.json) naming code of adbs/adbs_lab this version lacks, and that code as module.name: a
    study saved by a version before a move (the searcher was adbs_lab.search.StudySearch before
    adbs_lab/search/searcher.py, the tracker adbs_lab.tracking.MlflowTracker before adbs_lab/driver/tracker.py).
    Read with pickletools, never unpickled: Tune would fail on it later, with a traceback, once Ray has started.
    A damaged file is left to _damaged_tune_state."""
    if where.remote:
        return None
    exp = Path(where.tune_experiment())
    for pattern in ("tuner.pkl", "searcher-state-*.pkl", "search_gen_state-*.json", "experiment_state-*.json"):
        for file in sorted(exp.glob(pattern), key=lambda f: f.stat().st_mtime)[-1:]:
            data = file.read_bytes()
            try:
                pickles = _json_pickles(json.loads(data)) if pattern.startswith("experiment_") else [data]
                names = [g for blob in pickles for g in pickled_globals(blob)]
            except Exception:  # noqa: BLE001 - damaged: _damaged_tune_state names it
                continue
            for module, name in names:
                if missing_code(module, name):
                    return file, f"{module}.{name}" if name else module
    return None


def moved_message(file: Path, code: str, held: dict[str, Any]) -> str:
    """Why --resume refuses a study saved by another version of the code, and what to do: resume it with that
    version (study.json records it: adbs_lab/driver/claim.py), or start it again."""
    version = held.get("code_version")
    with_it = (f"resume it with the version that started it: git checkout {version.removesuffix('-dirty')}"
               f"{' (its changes were not committed)' if version.endswith('-dirty') else ''}, then the same command "
               "with --resume" if isinstance(version, str) and version != "unknown" else
               "resume it with the version that started it (its MLflow tag adbs.code_version), then the same command "
               "with --resume")
    return (f"--resume: Ray Tune's saved state of this study ({file}) names {code}, which this version of the code "
            f"does not have (it moved or was removed since the study started); {with_it}; or run the study again "
            "without --resume (earlier results are moved aside)")
