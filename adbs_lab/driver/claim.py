"""Claim: the study's folder taken, after every check has passed (adbs_lab/driver/preflight.py). Under
`study_lock` (another driver holding the folder: exit 2), a new study gets its folder, earlier results moved
aside, and study.json; --resume gets the interrupted run's files (an object store's snapshot)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

from adbs_lab.driver.prepared import Prepared, fail
from adbs_lab.study_folder import StudyBusy

__all__ = ["study_lock", "claim"]


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
    rebind(p.where.folder, optuna_url=p.optuna_url, tracking_uri=p.tracking_uri, study_dir=str(p.where.local))
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

