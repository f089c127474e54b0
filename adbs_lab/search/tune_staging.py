"""Studies started at once on one Ray cluster must not share Ray Tune's local staging folder.

Tune stages an experiment's files on the driver's node in `<Ray session>/artifacts/<timestamp>/<experiment name>/`
(ray/train/_internal/storage.py: StorageContext._get_session_path), the timestamp to the second, taken when `fit()`
starts, and syncs that whole folder to the experiment's storage. Every study's experiment is named `tune` (its folder
`<storage>/<study>/tune`, adbs_lab/study.py), so two studies whose `fit()` starts in the same second on one Ray
cluster share the staging folder: each study's folder gets the other's trial folders and experiment-state files, and
a `--resume` may restore the other study's trials (found by bench/load.py, 2 studies started together).

So a driver holds a lock on this machine from just before its `fit()` (`hold`, when the study's MLflow tracker is
made) until Tune has taken the timestamp (`release`, from the tracker's `setup`, which Tune calls after creating the
experiment) and the clock has moved on to the next second: the next study's timestamp differs. Drivers on other
nodes stage on their own disks. A driver that waits longer than WAIT_S goes on (with a warning) rather than hang, and
a lock whose holder never reaches fit() (a tracker made outside a study, a study that failed on the way) is let go
after MAX_HOLD_S.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

from filelock import FileLock, Timeout

from adbs import env

WAIT_S = env.seconds("ADBS_TUNE_START_WAIT_S")
MAX_HOLD_S = 30.0
# not thread-local: the timer thread of `hold` may let it go
LOCK = FileLock(os.path.join(tempfile.gettempdir(), f"adbs-tune-start-{os.getuid()}.lock"), thread_local=False)


def hold() -> None:
    """Before the study's fit(): wait for any other study on this machine to get past its timestamp."""
    if LOCK.is_locked:  # this process holds it already (an earlier study in it stopped before its fit)
        return
    try:
        LOCK.acquire(timeout=WAIT_S)
    except Timeout:
        print(f"warning: another study has been starting on this machine for {WAIT_S:.0f} s; going on (if both "
              "start within one second, their Ray Tune staging folders are shared)", file=sys.stderr, flush=True)
        return
    _holds.append(object())
    timer = threading.Timer(MAX_HOLD_S, _let_go, args=(_holds[-1],))
    timer.daemon = True
    timer.start()


_holds: list[object] = []  # the latest hold last: an earlier hold's timer must not end a later one


def _let_go(which: object) -> None:
    if LOCK.is_locked and _holds and _holds[-1] is which:
        LOCK.release(force=True)


def release() -> None:
    """Once Tune has taken its timestamp: after the wall clock reaches the next whole second, let the next study go."""
    if not LOCK.is_locked:
        return
    wait = 1.0 - (time.time() % 1.0) + 0.01
    time.sleep(wait)
    LOCK.release(force=True)
