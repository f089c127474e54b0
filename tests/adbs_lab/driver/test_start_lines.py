"""What a study prints as it starts: a resumed run says what it resumes, and Ray Tune's own resume advice
(Tuner.restore) is not printed beside the study's --resume command (no Ray session here)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from adbs_lab.stores import tracking_store
from adbs_lab.driver.launch import resumed
from adbs_lab.driver.session import env_defaults


def test_a_resumed_run_says_how_many_trials_ended_and_how_many_are_to_go(tmp_path):
    runs = {"parent": "p", "trials": {f"t{i}": f"r{i}" for i in range(7)},
            "ended": {"t0": "COMPLETE", "t1": "PRUNED", "t2": "FAILED", "t3": "COMPLETE", "t4": "COMPLETE"}}
    (tmp_path / tracking_store.RUNS_FILE).write_text(json.dumps(runs))
    line = resumed(SimpleNamespace(dir=tmp_path, total=12))
    assert line == "resuming: 5 of 12 trials ended, 7 to go (2 continue from their last checkpoint)"


def test_tunes_own_restore_advice_is_dropped_and_its_other_warnings_kept():
    env_defaults()
    tune = logging.getLogger("ray.tune.tune")

    def shown(msg: str) -> bool:
        return all(f.filter(logging.LogRecord("ray.tune.tune", logging.WARNING, __file__, 1, msg, None, None))
                   for f in tune.filters)

    assert not shown('Experiment has been interrupted, but the most recent state was saved.\nResume experiment '
                     'with: Tuner.restore(path="/runs/alpha_sweep/tune", trainable=...)')
    assert not shown("Trials did not complete: [a, b]")
    assert shown("Total run time: 3.00 seconds")
