"""What a study prints as it starts: a resumed run says what it resumes, and Ray Tune's own resume advice
(Tuner.restore) is not printed beside the study's --resume command (no Ray session here)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from adbs_lab import study
from adbs_lab.driver import options, run
from adbs_lab.driver.preflight import study as typed
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
    return SimpleNamespace(where=where, dir=where.local, total=12, fingerprint="not its", tracking_uri="sqlite:///x",
                           run=SimpleNamespace(more_seeds=False))


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


def _held(p, uri: str, ended: int, begun: int, status: str) -> None:
    """`p`'s folder as a run of this very study left it: study.json of its fingerprint, the runs file, Ray Tune's
    state (what Tuner.can_restore looks for) and the parent run in the MLflow store, ended with `status`."""
    client = tracking_store.client(uri)
    parent = client.create_run(client.create_experiment("t")).info.run_id
    client.set_terminated(parent, status)
    where = p.where
    (where.local / "tune").mkdir(parents=True)
    (where.local / "tune" / "tuner.pkl").write_bytes(b"")
    (where.local / "study.json").write_text(json.dumps({"fingerprint": p.fingerprint, "started": "2026-11-28 10:02"}))
    runs = {"parent": parent, "trials": {f"t{i}": f"r{i}" for i in range(ended + begun)},
            "ended": {f"t{i}": "COMPLETE" for i in range(ended)}}
    (where.local / tracking_store.RUNS_FILE).write_text(json.dumps(runs))


@pytest.mark.parametrize("flags, ended, begun, status, said", [
    ((), 2, 0, "FINISHED", "finished (2 trials ended): nothing to continue, so it runs no trial"),
    # --seeds auto, stopped before its cap (every comparison resolved): its total is the cap, and none is to go
    (("--seeds", "auto", "--reference", "alpha=0.01"), 6, 0, "FINISHED", "finished (6 trials ended): nothing to continue"),
    ((), 1, 1, "KILLED", "resuming the study in"),
    ((), 0, 0, "KILLED", ": 0 of 2 trials ended, 2 to go"),
])
def test_a_resume_dry_run_says_what_the_run_would_do(capsys, tmp_path, tracking_uri, flags, ended, begun, status, said):
    """--resume --dry-run on a study that finished said it checked "what --resume continues" and nothing more, as if
    something were left; it says what the run would do: continue the trials left, or, finished, run none."""
    plan = study.Plan(name="t", space={"variant": "adb+ic", "alpha": [0.01, 0.05]}, space_source="tests")
    opts = options.parse("t", argv=["--smoke", "--dry-run", "--resume", *flags, "--gpus-per-trial", "0", "--storage",
                                    str(tmp_path / "runs"), "--tracking-uri", tracking_uri])[0]
    p = typed(plan, opts)
    _held(p, tracking_uri, ended, begun, status)
    capsys.readouterr()
    run.dry_run(p)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("a run of this command: "))
    assert said in line, out
    assert ("to go" in line) == (status != "FINISHED"), line
