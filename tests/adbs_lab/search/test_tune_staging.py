"""Two studies on one Ray cluster must not start Tune in the same second (adbs_lab/search/tune_staging.py): Tune names its
local staging folder after that second, and two studies sharing it get each other's trials and experiment state."""

from __future__ import annotations

import subprocess
import sys
import time

from adbs_lab.search import tune_staging

HOLD = ("import sys, time; sys.path.insert(0, {repo!r}); from adbs_lab.search import tune_staging as t; t.hold(); "
        "print(time.time(), flush=True); t.release(); print(time.time(), flush=True)")


def test_a_second_driver_starts_only_after_the_first_ones_second_has_passed():
    """The first holds the lock until after its release; the second's hold returns only then, in a later second."""
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[3])
    tune_staging.hold()
    try:
        other = subprocess.Popen([sys.executable, "-c", HOLD.format(repo=repo)], stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)  # the other process is waiting: it cannot have printed yet
        assert other.poll() is None
        started_first = int(time.time())
    finally:
        tune_staging.release()
    out, _ = other.communicate(timeout=60)
    got_it = float(out.split()[0])
    assert int(got_it) > started_first  # a later second than anything before our release


def test_a_hold_that_never_reaches_tune_is_let_go(monkeypatch):
    monkeypatch.setattr(tune_staging, "MAX_HOLD_S", 0.2)
    tune_staging.hold()
    assert tune_staging.LOCK.is_locked
    time.sleep(0.6)
    assert not tune_staging.LOCK.is_locked
