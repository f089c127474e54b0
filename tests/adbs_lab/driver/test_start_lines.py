"""What a study prints as it starts: a resumed run says what it resumes, and Ray Tune's own resume advice
(Tuner.restore) is not printed beside the study's --resume command (no Ray session here)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from adbs_lab.stores import tracking_store
from adbs_lab.driver.launch import resumed
from adbs_lab.driver.session import env_defaults
from adbs_lab.stores.study_folder import StudyFolder


def _resumable(tmp_path, ended: dict[str, str], begun: int):
    """A study folder as an interrupted run leaves it: study.json (adbs_lab/driver/claim.py) and the runs file."""
    where = StudyFolder(str(tmp_path / "runs"), "alpha_sweep")
    where.local.mkdir(parents=True)
    (where.local / "study.json").write_text(json.dumps({"study": "alpha_sweep", "started": "2026-11-28 10:02"}))
    runs = {"parent": "p", "trials": {f"t{i}": f"r{i}" for i in range(len(ended) + begun)}, "ended": ended}
    (where.local / tracking_store.RUNS_FILE).write_text(json.dumps(runs))
    return SimpleNamespace(where=where, dir=where.local, total=12)


def test_a_resumed_run_says_what_it_resumes(tmp_path):
    """The folder, when its study started, the trials ended and to go; not a fresh run's "12 trials" line."""
    ended = {"t0": "COMPLETE", "t1": "PRUNED", "t2": "FAILED", "t3": "COMPLETE", "t4": "COMPLETE"}
    line = resumed(_resumable(tmp_path, ended, begun=2))
    assert line == (f"resuming the study in {tmp_path / 'runs' / 'alpha_sweep'} started 2026-11-28 10:02: 5 of 12 "
                    "trials ended, 7 to go (2 continue from their last checkpoint)")
    assert resumed(_resumable(tmp_path / "one", {"t0": "COMPLETE"}, begun=1)).endswith(
        ": 1 of 12 trials ended, 11 to go (1 continues from its last checkpoint)")
    assert resumed(_resumable(tmp_path / "none", {}, begun=0)).endswith(": 0 of 12 trials ended, 12 to go")


def test_tunes_own_restore_advice_is_dropped_and_its_other_warnings_kept():
    env_defaults()
    tune = logging.getLogger("ray.tune.tune")

    def shown(msg: str) -> bool:
        return all(f.filter(logging.LogRecord("ray.tune.tune", logging.WARNING, __file__, 1, msg, None, None))
                   for f in tune.filters)

    assert not shown('Experiment has been interrupted, but the most recent state was saved.\nResume experiment '
                     'with: Tuner.restore(path="/runs/alpha_sweep/tune", trainable=...)')
    assert not shown("Trials did not complete: [a, b]")
    assert not shown('Training has been interrupted, but the most recent state was saved.\nResume training with: '
                     'Tuner.restore(path="/runs/alpha_sweep/tune", trainable=...)')
    assert shown("Total run time: 3.00 seconds")
