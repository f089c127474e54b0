"""Claim: the study's folder taken, after every check has passed (adbs_lab/driver/preflight.py). Under
`study_lock` (another driver holding the folder: exit 2), a new study gets its folder, earlier results moved
aside, and study.json; --resume gets the interrupted run's files (an object store's snapshot)."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Iterator

from adbs_lab.driver import more_seeds
from adbs_lab.driver.prepared import Study, fail
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stores.paths import code_version
from adbs_lab.stores.study_folder import StudyBusy, StudyFolder

__all__ = ["study_lock", "claim", "held_study", "aside_line"]


@contextmanager
def study_lock(p: Study) -> Iterator[None]:
    """Hold the study folder's lock (StudyFolder.lock) for the block; another driver holding it: exit 2."""
    try:
        lock = p.where.lock(p.command)
    except StudyBusy as e:
        fail(str(e))
    try:
        yield
    finally:
        lock.release()


def claim(p: Study) -> None:
    """Under `study_lock`, after every check has passed (preflight, and Ray's in adbs_lab/driver/run.py): a new
    study takes its name in the Optuna storage (`own_name`), gets its folder (earlier results moved aside) and
    study.json; --resume gets the interrupted run's files (an object store's snapshot) and loads its Optuna study."""
    from adbs_lab.stores.study_folder import rebind

    # Tuner.restore unpickles the searcher, stopper and tracker of the driver that started the study, with its
    # paths and stores; it takes no new ones (ray/tune/tuner.py: restore), so they look this driver's up here: the
    # stores this command names, not the ones the interrupted run was started with.
    # A resumed study with a horizon also binds the restored searcher's pause (a continuation's next one, or the one
    # its interrupted run took): its seed policy takes the looks up to it, as this run's summary does.
    pause = getattr(p.seeding, "pause", None)
    rebind(p.where.folder, optuna_url=p.optuna_url, study_dir=str(p.where.local), tracking_uri=p.tracking_uri,
           **({"pause": pause} if p.run.resume and pause is not None else {}))
    where = p.where
    if p.run.resume:
        if where.remote:
            where.pull_for_resume()
        if p.run.more_seeds and isinstance(p.seeding, UntilResolved):  # its pause, for the next continuation
            ident_file = where.local / "study.json"
            held = json.loads(ident_file.read_text())
            ident_file.write_text(json.dumps({**held, more_seeds.PAUSE_KEY: p.seeding.stop, "trials": p.total},
                                             indent=1))
            where.push([ident_file])
        return
    if p.run.optuna_storage:  # a shared storage: the name first, so a run that does not own it moves nothing
        own_name(p)
    if where.in_use():
        stamp = where.aside_stamp()
        print(aside_line(p, stamp), flush=True)
        where.move_aside(stamp)
    where.prepare()
    if not p.run.optuna_storage:  # the folder's own optuna.db, new: the folder's lock makes the name this run's
        own_name(p)
    from adbs_lab.results import rereading

    ident_file = where.local / "study.json"
    # the verdict policy and reference as the study starts with them: what --plan reads its verdicts by, whatever
    # flags the command that reads them passes (adbs_lab/results/rereading.py)
    ident_file.write_text(json.dumps({"study": p.plan.name, "folder": where.folder, "fingerprint": p.fingerprint,
                                      "command": p.command, "settings": p.settings, "trials": p.total,
                                      rereading.RECORD_KEY: rereading.record(p.verdicts), "baseline": p.reference,
                                      **({more_seeds.PAUSE_KEY: p.seeding.stop} if isinstance(p.seeding, UntilResolved) else {}),
                                      "started": time.strftime("%Y-%m-%d %H:%M"),
                                      "code_version": code_version()}, indent=1))
    where.push([ident_file])


def aside_line(p: Study, stamp: str | None = None) -> str:
    """The line said before a new study moves what its folder holds aside (`claim`; the dry run says it with
    `stamp` None, as what a run would do): what is there, why it moves (this run's study is another, or the same
    one started again from scratch), where it goes, and how to keep both (--name) or continue it (--resume)."""
    from adbs_lab.driver.preflight import held

    where = p.where
    try:
        state = held(p)
    except Exception:  # noqa: BLE001 - a damaged runs file or an MLflow store that does not answer: no reason given
        state = "unknown"
    why = (_again(p) if state == "finished" else
           "this run starts it again from scratch; --resume continues it instead" if state == "unfinished" else
           "it stopped before its first trial, with nothing saved to continue: this run starts it again"
           if state == "claimed" else
           "this run starts another study in that folder (other settings than its own)" if state is None else
           "this run starts a new study in that folder")
    dest = where.aside(stamp) if stamp else where.aside("<date-time>")
    head = f"{where} holds {held_study(where)}: " + (f"moving it to {dest}" if stamp else
                                                     f"a run of this command would move it to {dest}")
    return f"{head}, since {why}; pass --name NAME to keep both side by side"


def _again(p: Study) -> str:
    """Why a finished run of this very study moves aside, and what a new start of it does to the guarantee."""
    more = isinstance(p.seeding, UntilResolved) and p.seeding.looks.horizon is not None
    return ("this run starts the same study (same settings) again from scratch, repeating its seeds: its verdicts "
            "are a new family, not covered together with the earlier run's"
            + ("; --more-seeds continues that run on new seeds instead" if more else ""))


def own_name(p: Study) -> None:
    """Create the study's Optuna study, once (adbs_lab/search/optuna_storage.py: create_study, atomic in the
    database): of two runs of one name started together on one Optuna storage exactly one gets it; the other is
    refused here, exit 2, before it writes anything (the preflight's check of the name, which both pass, only reads)."""
    from adbs_lab.driver.preflight import name_taken
    from adbs_lab.search.optuna_storage import StudyNameTaken, create_study

    try:
        create_study(p.optuna_url, p.folder, p.objectives)
    except StudyNameTaken:
        fail(name_taken(p.optuna_url, p.where, p.fingerprint))


def held_study(where: StudyFolder) -> str:
    """What a study folder holds, for the line that moves it aside: "a finished study (12 trials, started
    2026-11-28 10:02; `studies/alpha_sweep.py --shots 3`)", from its study.json and runs file (tracking_store.RUNS_FILE);
    "earlier results" when they do not say."""
    from adbs_lab.stores import tracking_store

    def read(name: str) -> dict:
        try:
            value = json.loads(where.read_text(name) or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    ident, runs = read("study.json"), read(tracking_store.RUNS_FILE)
    if not ident:
        return "earlier results"
    planned, ended, started = ident.get("trials"), _count(runs.get("ended")), _count(runs.get("trials"))
    what, counts = "a study", f"{started} trials" if started is not None else ""
    if isinstance(planned, int) and ended is not None:  # study.json records its trials from now on
        what, counts = (("a finished study", f"{planned} trials") if ended >= planned
                        else ("an unfinished study", f"{ended} of {planned} trials ended"))
    details = "; ".join(filter(None, [counts, f"started {ident['started']}" if ident.get("started") else "",
                                      f"`{ident['command']}`" if ident.get("command") else ""]))
    return f"{what} ({details})" if details else what


def _count(mapping: object) -> int | None:
    """How many trials a mapping of the runs file holds (trial id -> run id, or -> how it ended)."""
    return len(mapping) if isinstance(mapping, dict) else None
