"""The checks of a study's flags that need neither Ray, MLflow, pandas nor torch: the options themselves
(StudyOptions.check), the search space's form, --set or a config field flag that sets what the study sets itself
(its seeds, what it sweeps), the base config they make (an unknown key or host, a value of the wrong type), and
the stores' URLs by their form (`check_store_forms`).
adbs_lab/study.py runs them before it loads the driver, so such a refusal answers in well under a second; the
preflight (adbs_lab/driver/preflight.py: validate) runs them first too, so the dry run and the run refuse the same
input with the same message. The checks of each configuration against the Config's rules and its data stay in the
preflight (adbs_lab/driver/preflight.py: _check_configs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adbs import env
from adbs import objstore as st
from adbs.redaction import carries_secret, redact, reveal
from adbs.config import canonical, coerce
from adbs.fields import check_choice
from adbs.hosts import host_names
from adbs_lab.driver.options import StudyInputError, StudyOptions, check_name
from adbs_lab.driver.plan import Plan
from adbs_lab.search import space as sp
from adbs_lab.stores import paths, tracking_store

__all__ = ["SEEDED", "check", "check_store_forms", "optuna_form_problem", "searched", "storage_form_problem", "study_owned",
           "swept_values", "shipped_name"]

SEEDED = {"seed", "split_seed"}
"""Config fields a study sets from --seeds (adbs_lab/search/space.py: resolve_trial): never typed, searched or fixed."""


def searched(plan: Plan) -> set[str]:
    """The config keys the study varies itself: its grid axes, its sampled distributions and its rows' keys."""
    _, grid, dists = sp.split(plan.space)
    return set(grid) | set(dists) | {k for r in (plan.rows or {}).values() for k in r}


def check(plan: Plan, opts: StudyOptions) -> dict[str, Any]:
    """Every refusal of the flags that needs no heavy library; StudyInputError (or adbs.config's ConfigError).
    Returns the study's base config (preset < study defaults < --config < --set: every key known, every value
    typed), which the preflight goes on from."""
    opts.check()
    wrong = env.problems()  # a wait of the study's read from the environment (ADBS_*_S)
    if wrong:
        raise StudyInputError("; ".join(wrong))
    check_name(plan.name, "Plan(name")  # a study script's own plan: its folder, as --name's, stays in --storage
    check_folder(plan, opts)
    check_store_forms(opts)
    sp.check(plan.space, source=plan.space_source, rows=plan.rows)
    check_overrides(plan, opts, searched(plan), [canonical(k) for k in opts.config_overrides()])
    base = opts.base_config(plan.cpu_defaults, without=study_owned(plan, opts))
    # the host by its name, as Config.validate checks it in the preflight (its options against each configuration)
    if "host" in base:  # else the default host
        check_choice("host", base["host"], host_names())
    return base


def check_folder(plan: Plan, opts: StudyOptions) -> None:
    """The study's folder (`<storage>/<plan name>[-<--name>]`) is nothing else of the storage: not a folder every
    study of it shares (a run would move it aside as earlier results), nor another study's lock file. Checked for
    the folder of the run without --smoke too, so that a --smoke check refuses the name its real run would take."""
    named = "" if opts.name is None else f"-{opts.name}"
    for folder in dict.fromkeys((f"{plan.name}{opts.folder}", f"{plan.name}{named}")):
        _check_taken(plan, opts, folder)


def _check_taken(plan: Plan, opts: StudyOptions, folder: str) -> None:
    taken = paths.folder_taken(folder)
    if taken:
        given = f"--name {opts.name!r}" if opts.name else f"Plan(name={plan.name!r})"
        raise StudyInputError(f"{given}: the study's folder {folder!r} in --storage is the name of {taken}, which a "
                              "run would take as its own (moving it aside as earlier results); give the study another "
                              "name")


def check_store_forms(opts: StudyOptions) -> None:
    """--storage and the tracking URI (--tracking-uri, else $MLFLOW_TRACKING_URI) by their form alone, which needs no
    store: a URL scheme no storage or MLflow store has, credentials in the storage's URL, a relative SQLite path.
    Whether each store can be used is the preflight's (adbs_lab/driver/preflight.py)."""
    problem = (storage_form_problem(opts.storage)
               or tracking_store.form_problem(tracking_store.tracking_uri(opts.tracking_uri))
               or (optuna_form_problem(opts.optuna_storage) if opts.optuna_storage else None))
    if problem:
        raise StudyInputError(problem)


def storage_form_problem(location: str) -> str | None:
    """--storage by its form: a folder, or an object-store URL without credentials (Ray Tune would write the URL into
    the study's own files: tuner.pkl, the searcher's state, and Ray's logs)."""
    if st.is_url(location):
        if carries_secret(location):
            return (f"--storage {redact(location)}: the URL carries credentials, which the study would write into "
                    "its own files in the storage (Ray Tune's tuner.pkl and searcher state) and Ray's logs; drop them "
                    "from the URL and export them where the study and `ray start` run, e.g. AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (docs/clusters.md)")
        return None
    if "://" in location:
        return (f"--storage {redact(location)}: unsupported URL scheme {st.scheme(location)!r}; pass a folder or an "
                f"object-store URL ({', '.join(s + '://' for s in st.OBJECT_STORE_SCHEMES)})")
    return None


def optuna_form_problem(url: str) -> str | None:
    """--optuna-storage by its form: a URL SQLAlchemy has a dialect for (Optuna's RDBStorage opens it), a SQLite file
    by its absolute path (a relative one is the driver's working folder's: a --resume from another folder would open
    another database and find none of the study's trials)."""
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    url = str(reveal(url))
    usable = "pass sqlite:////ABS/PATH/optuna.db or a database server's URL (postgresql://USER@HOST/DB)"
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_absolute():
        return (f"--optuna-storage {redact(url)} is relative: the study's --resume from another folder would open "
                f"another database; {usable}")
    alias = paths.alias_problem(url)
    if alias:
        return f"--optuna-storage {redact(url)}: {alias}"
    try:
        make_url(url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError):
        return f"--optuna-storage {redact(url)}: not a database URL Optuna can open (SQLAlchemy has no dialect of it); {usable}"
    return None


def study_owned(plan: Plan, opts: StudyOptions) -> tuple[str, ...]:
    """Keys of the --config file that the study sets itself, so the file's values are not used: what it searches
    (grid axes, distributions, rows), what its space fixes, seed and split_seed (from --seeds), and threads when
    --cpus-per-trial is given (a trial's threads are its CPUs; the explicit flag wins over the file)."""
    fixed, grid, dists = sp.split(plan.space)
    own = set(grid) | set(dists) | {k for r in (plan.rows or {}).values() for k in r} | SEEDED
    own |= {k for k, v in opts.config_values if k in fixed and coerce(k, fixed[k]) != v}  # same value: no news
    if opts.cpus_per_trial is not None:
        own.add("threads")
    return tuple(k for k, _ in opts.config_values if k in own)


def shipped_name(plan: Plan, opts: StudyOptions) -> str | None:
    """The warning for a plan named as a study of the repository's studies/ (its script studies/<name>.py) and run
    by another command, or None: the two would share the study's folder (`claim` moves the other's results aside),
    its Optuna study and its MLflow experiment (`studies/report.py NAME` reads the latest run of either). A command
    of studies/ itself (the script, or studies/paper.py running it as a part) is that study."""
    script = paths.REPO_ROOT / "studies" / f"{plan.name}.py"
    ran = Path(opts.argv[0]).resolve() if opts.argv and opts.argv[0] not in ("", "-c", "-") else None
    if not script.is_file() or (ran is not None and ran.parent == script.parent):
        return None
    folder = f"{plan.name}{opts.folder}"
    smoke = " --smoke" if opts.smoke else ""  # a --smoke run's names (adbs_lab/stores/paths.py: SMOKE)
    return (f"this command's Plan(name={plan.name!r}) is the name of the study studies/{plan.name}.py: they share "
            f"the MLflow experiment {opts.experiment(plan.name)!r}" + (f" and the folder {folder} in --storage (a run "
            f"of either moves the other's results aside)" if not opts.name else "") + f", and `studies/report.py "
            f"{plan.name}{smoke}` reads the latest run of either; give the plan a name of its own to keep them apart")


def check_overrides(plan: Plan, opts: StudyOptions, swept: set[str], set_keys: list[str]) -> None:
    """--set and the config flags may not set what the study sets itself (seeds, what it sweeps)."""
    seeded = [(k, v) for k, v in opts.overrides if canonical(k) in SEEDED]
    if seeded:
        raise StudyInputError(
            f"--set {seeded[0][0]}={seeded[0][1]}: a study sets seed and split_seed from --seeds (each seed is one "
            f"repetition: the training seed and the few-shot draw together), so the --set would be overridden; use "
            f"--seeds {seeded[0][1]} instead")
    in_space = sorted(SEEDED & (swept | set(sp.split(plan.space)[0])))
    if in_space:
        raise StudyInputError(f"search space {plan.space_source} sets {', '.join(in_space)}, which a study sets from "
                              "--seeds; remove it from the space and pass --seeds")
    clash = [k for k in set_keys if k in swept]
    if clash:
        raise StudyInputError(_swept_message(plan, opts, clash))


def swept_values(plan: Plan, key: str) -> str:
    """What the study gives `key`: "0.01, 0.02, 0.05, 0.1", "0.01 to 0.1 (log scale), sampled", or its rows'."""
    value = plan.space.get(key)
    if value is None:  # a key of the study's named rows
        return ", ".join(f"{row}: {v[key]}" for row, v in (plan.rows or {}).items() if key in v)
    if sp.is_dist(value):
        choices = getattr(value, "choices", None)
        if choices is not None:
            return ", ".join(map(str, choices)) + ", sampled"
        return f"{value.low:g} to {value.high:g}" + (" (log scale)" if getattr(value, "log", False) else "") + ", sampled"
    return ", ".join(map(str, value))


def _swept_message(plan: Plan, opts: StudyOptions, clash: list[str]) -> str:
    """What was typed, that the study sweeps it (and its values there), and the ways to get what was meant."""
    typed = {canonical(k): v for k, v in opts.config_overrides().items()}
    flags = ", ".join(_as_typed(k, typed[k], opts) for k in clash)
    what = "; ".join(f"{k} {swept_values(plan, k)}" for k in clash)
    fixes = [f"to run part of its grid, {plan.axis_flags[k]} {typed[k]}" for k in clash if k in plan.axis_flags]
    alone = " ".join(f"--{k.replace('_', '-')} {typed[k]}" for k in clash)
    fixes += [f"to train that one configuration alone: python -m adbs.run {alone}",
              f"to sweep other values, edit {plan.space_source.split(':')[0]}"]
    it = "the flag" if len(clash) == 1 else "these flags"
    return (f"{flags}: this study sweeps {' and '.join(clash)} itself ({what}; {plan.space_source}), so every trial "
            f"sets it and {it} would be overridden (--set KEY=VALUE and the field flags set what a study does not "
            f"sweep). Drop {it}; " + "; ".join(fixes))


def _as_typed(key: str, value: Any, opts: StudyOptions) -> str:
    """A config value as the user gave it: its field flag (`--alpha 0.05`, typed as such on the command line),
    --set KEY=VALUE, or the flag of --host/--dataset/--data-root; a field flag and --set land in the same
    overrides (adbs/config/cli.py: _Pair), so the command line tells them apart."""
    flag = f"--{key.replace('_', '-')}"
    if any(a == flag or a.startswith(flag + "=") for a in opts.argv[1:]):
        return f"{flag} {value}"
    return f"--set {key}={value}"
