"""One classification of trial state (adbs_lab.records.trial_records.classify), used by progress, tracker, Optuna and tables."""

from __future__ import annotations

import math

import pytest

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.trial_records import TrialRecord, classify, frames, objective

SUMMARY = {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: 61.5}
BASE = {K.REPORT_KIND: K.KIND_BASE, K.OBJECTIVE: math.nan, K.BASE_STEP: 2}
NAN_FAULT = {K.REPORT_KIND: K.KIND_FAILED, K.OBJECTIVE: math.nan, K.ERROR: "base training loss became NaN/inf"}


@pytest.mark.parametrize("result,kw,state", [
    (SUMMARY, {}, K.COMPLETE),
    ({**SUMMARY, K.OBJECTIVE: math.nan}, {}, K.FAILED),  # finished without a finite objective
    (NAN_FAULT, {}, K.DIVERGED),  # a NaN loss: DIVERGED (an outcome, not an error), never PRUNED
    (NAN_FAULT, {"pruned": True}, K.DIVERGED),
    (SUMMARY, {"error": True}, K.FAILED),  # an exception
    (BASE, {"pruned": True}, K.PRUNED),  # the stopper stopped it during the base session
    (BASE, {"pruned": False}, K.FAILED),  # it ended early for no reason the platform gave
    (BASE, {"pruned": False, "ended": False}, K.INTERRUPTED),  # the study stopped first
    (None, {"ended": False}, K.INTERRUPTED),
    (None, {}, K.FAILED),
])
def test_classify(result, kw, state):
    assert classify(result, **kw) == state


def test_objective_only_for_complete_trials():
    assert objective(SUMMARY) == 61.5
    assert objective(BASE) is None and objective(NAN_FAULT) is None


def test_frames_one_schema():
    rec = TrialRecord(trial_id="t1", state=K.COMPLETE, label="alpha=0.1", config={"alpha": 0.1, "milestones": (40, 70)},
                      summary={"val_avg_acc": 61.5}, sessions=[{"session": 0, "test_acc": 70.0}, {"session": 1,
                                                                                             "test_acc": 65.0}],
                      warning="3 of 65 seen classes never predicted (session 1)")
    pruned = TrialRecord(trial_id="t2", state=K.PRUNED, label="alpha=0.2", config={"alpha": 0.2},
                         summary={"val_avg_acc": 1.0}, warning="ignored")
    sessions, trials = frames([rec, pruned])
    assert list(sessions["session"]) == [0, 1] and set(sessions["label"]) == {"alpha=0.1"}
    assert trials.loc[0, "milestones"] == "[40, 70]"  # lists as JSON, as every table stores them
    assert trials.loc[0, "val_avg_acc"] == 61.5 and math.isnan(trials.loc[1, "val_avg_acc"])
    assert list(trials[K.WARNING]) == [rec.warning, ""]
    for col in ("trial_id", "state", "label", "optuna_trial", "mlflow_run_id", "base_epochs_run", "started_at",
                "finished_at", "error", "base_boundaries"):
        assert col in trials


def test_study_experiments_open_in_mlflows_model_training_view(tmp_path):
    from mlflow.tracking import MlflowClient

    from adbs_lab.driver.tracker import MlflowTracker
    from adbs_lab.stores.tracking_store import EXPERIMENT_KIND, MODEL_TRAINING

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    client.create_experiment("older")  # a study's experiment made before the tag existed

    def tracker(study):
        return MlflowTracker(uri=uri, study=study, folder=study, study_dir=tmp_path / study, run_name="r", tags={},
                             varying=[], resume=False)

    for study in ("new", "older"):
        tracker(study)
        assert client.get_experiment_by_name(study).tags.get(EXPERIMENT_KIND) == MODEL_TRAINING


def test_a_restored_trial_logs_each_step_once_even_after_the_driver_lost_its_record(tmp_path):
    """A driver killed with SIGKILL is restored with callback state pickled seconds earlier; the steps its
    trial logged after that are re-reported when the trial reruns and must not be logged twice."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records.tune_keys import CONFIG_KEY
    from adbs_lab.driver.tracker import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trial = SimpleNamespace(trial_id="t0", config={CONFIG_KEY: Config(), "seed": 0}, last_result=None)
    ends = SimpleNamespace(reopen=lambda trial_id: None)

    def tracker(resume):
        return MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                             varying=["seed"], resume=resume, ends=ends)

    def report_everything(t):
        for epoch in range(2):
            t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: epoch, "base/loss": 1.0 - epoch})
        for session in range(2):
            t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_SESSION, K.SESSION_STEP: session,
                                             "session/test_acc": 50.0 - session})
        t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_SUMMARY, "summary/avg_acc": 49.5})

    first = tracker(resume=False)
    first.on_trial_start(0, [], trial)
    report_everything(first)
    first.on_checkpoint(0, [], trial, None)  # its points reach the store before Tune records the checkpoint
    restored = tracker(resume=True)  # a new driver: its own step record is empty
    restored.setup()
    restored.on_trial_start(0, [], trial)
    report_everything(restored)
    restored.flush()

    client, run_id = MlflowClient(uri), first.trial_run_id("t0")
    assert restored.trial_run_id("t0") == run_id
    for key, steps in (("base/loss", [0, 1]), ("session/test_acc", [0, 1]), ("summary/avg_acc", [0])):
        assert sorted(m.step for m in client.get_metric_history(run_id, key)) == steps, key


def test_a_trials_points_wait_in_the_driver_until_its_checkpoint_its_end_or_flush_s(tmp_path, monkeypatch):
    """One log_batch (one store commit) per trial of fast reports, not one per report; a checkpoint, the trial's
    end or FLUSH_S seconds of waiting write them (the MLflow UI's curve of a real trial stays live)."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records.tune_keys import CONFIG_KEY
    from adbs_lab.driver.tracker import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trial = SimpleNamespace(trial_id="t0", config={CONFIG_KEY: Config(), "seed": 0}, last_result=None)
    t = MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                      varying=["seed"], resume=False, ends=None)
    t.on_trial_start(0, [], trial)
    client, run_id = MlflowClient(uri), t.trial_run_id("t0")

    def steps():
        return sorted(m.step for m in client.get_metric_history(run_id, "base/loss"))

    for epoch in range(3):
        t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: epoch, "base/loss": 1.0 - epoch})
    assert steps() == []
    t.on_checkpoint(0, [], trial, None)
    assert steps() == [0, 1, 2]
    monkeypatch.setattr(MlflowTracker, "FLUSH_S", 0.0)
    t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: 3, "base/loss": -2.0})
    assert steps() == [0, 1, 2, 3]
    assert "_pending" not in t.__getstate__()  # Tune pickles the callback; points in flight are not state


def test_a_point_waits_at_most_flush_s_even_when_its_trial_reports_nothing_more(tmp_path, monkeypatch):
    """A trial's point waited for that trial's next report (a base epoch away: minutes on a CPU), not FLUSH_S:
    Tune's loop (on_step_begin, many times a second) writes the points that have waited FLUSH_S."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records.tune_keys import CONFIG_KEY
    from adbs_lab.driver.tracker import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trial = SimpleNamespace(trial_id="t0", config={CONFIG_KEY: Config(), "seed": 0}, last_result=None)
    t = MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                      varying=["seed"], resume=False, ends=None)
    t.on_trial_start(0, [], trial)
    t.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: 0, "base/loss": 1.0})
    client, run_id = MlflowClient(uri), t.trial_run_id("t0")
    t.on_step_begin(0, [trial])
    assert client.get_metric_history(run_id, "base/loss") == []  # it has not waited FLUSH_S yet
    monkeypatch.setattr(MlflowTracker, "FLUSH_S", 0.0)  # now it has
    t.on_step_begin(0, [trial])
    assert [m.step for m in client.get_metric_history(run_id, "base/loss")] == [0]


def test_an_interrupted_resumed_study_flushes_the_tracker_tune_unpickled(tmp_path):
    """On --resume Tune runs the tracker it unpickled from tuner.pkl, not the one the driver made: a second Ctrl-C
    ends fit without on_experiment_end, and the driver's close_open_runs must write the points waiting in Tune's
    (MlflowTracker.in_tune) and close the runs of the trials it started."""
    import pickle
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records.tune_keys import CONFIG_KEY
    from adbs_lab.driver.tracker import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trial = SimpleNamespace(trial_id="t0", config={CONFIG_KEY: Config(), "seed": 0}, last_result=None)

    def tracker(resume):  # (no `ends`: the trial here starts once, and Tune pickles the tracker)
        return MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                             varying=["seed"], resume=resume, ends=None)

    pickled = pickle.dumps(tracker(resume=False))  # what Tune keeps in tuner.pkl
    made = tracker(resume=True)  # the resumed driver's own
    assert made.in_tune() is made  # before Tune set one up
    in_tune = pickle.loads(pickled)
    in_tune.setup()
    assert made.in_tune() is in_tune
    in_tune.on_trial_start(0, [], trial)
    in_tune.on_trial_result(0, [], trial, {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: 0, "base/loss": 1.0})
    client, run_id = MlflowClient(uri), in_tune.trial_run_id("t0")
    assert client.get_metric_history(run_id, "base/loss") == []  # waiting in the driver (FLUSH_S)
    assert made.close_open_runs() == 0  # the driver's own tracker neither holds the points nor knows the run
    assert made.in_tune().close_open_runs() == 1
    assert [m.step for m in client.get_metric_history(run_id, "base/loss")] == [0]
    assert client.get_run(run_id).info.status == "KILLED"


@pytest.mark.parametrize("text", ['{"parent": "abc", "tri', "[]", '{"trials": 5}'])
def test_a_damaged_runs_file_is_named_not_read_as_whatever_it_holds(tmp_path, text):
    """The study's map of trials to MLflow runs (read on --resume and for the tables) once ended in a
    JSONDecodeError traceback, or a KeyError, when damaged; now a TrackingError names it and what to do."""
    from adbs_lab.stores import tracking_store

    (tmp_path / tracking_store.RUNS_FILE).write_text(text)
    with pytest.raises(tracking_store.TrackingError) as e:
        tracking_store.load_runs(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / tracking_store.RUNS_FILE} is damaged") and "without --resume" in str(e.value)
    (tmp_path / tracking_store.RUNS_FILE).write_text('{"parent": "abc", "trials": {"t1": "r1"}}')
    assert tracking_store.load_runs(tmp_path)["trials"] == {"t1": "r1"}


def test_a_run_of_a_trial_tune_lost_with_the_killed_driver_is_closed_on_resume(tmp_path):
    """A trial started (its MLflow run made) just before the driver was SIGKILLed, and after Tune's last save:
    the resumed study runs its configuration as another trial, and the first run is closed, not left RUNNING."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records.tune_keys import CONFIG_KEY
    from adbs_lab.driver.tracker import MlflowTracker
    from adbs_lab.stores.tracking_store import load_runs

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ends = SimpleNamespace(reopen=lambda trial_id: None)
    saved, lost = (SimpleNamespace(trial_id=t, config={CONFIG_KEY: Config(alpha=a), "alpha": a}, last_result=None)
                   for t, a in (("t0", 0.01), ("t1", 0.02)))
    first = MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                          varying=["alpha"], resume=False, ends=ends)
    first.setup()
    first.on_trial_start(0, [], saved)
    first.on_trial_start(0, [], lost)
    lost_run = first.trial_run_id("t1")
    unrecorded = MlflowClient(uri).create_run(first.experiment_id, tags={  # made, then killed before recorded
        "mlflow.parentRunId": first.parent_run_id, "adbs.role": "trial", "adbs.trial_id": "t2"}).info.run_id
    restored = MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                             varying=["alpha"], resume=True, ends=ends)
    restored.setup()
    restored.on_step_begin(0, [saved])  # Tune restored t0 only
    run = MlflowClient(uri).get_run(lost_run)
    assert run.info.status == "KILLED" and run.data.tags["adbs.state"] == K.INTERRUPTED
    assert "adbs.orphaned" in run.data.tags
    runs = load_runs(tmp_path / "s")
    assert set(runs["trials"]) == {"t0"} and runs["orphaned"] == {"t1": lost_run, "t2": unrecorded}
    assert MlflowClient(uri).get_run(unrecorded).info.status == "KILLED"
    assert MlflowClient(uri).get_run(first.trial_run_id("t0")).info.status == "RUNNING"  # a restored trial goes on


def test_two_studies_of_one_name_creating_its_experiment_at_once_share_it(tmp_path, monkeypatch):
    """Two drivers of one study name (another --name each) start together: the second one's create_experiment
    fails with "already exists" after its look-up found none (bench/load.py found it); it takes the experiment."""
    from mlflow.tracking import MlflowClient

    from adbs_lab.driver.tracker import MlflowTracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    made = MlflowClient(uri).create_experiment("s")
    real = MlflowClient.get_experiment_by_name
    calls = []

    def late(self, name):  # the first look-up happens before the other driver made it
        calls.append(name)
        return None if len(calls) == 1 else real(self, name)

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", late)
    tracker = MlflowTracker(uri=uri, study="s", folder="s", study_dir=tmp_path / "s", run_name="r", tags={},
                            varying=["alpha"], resume=False)
    assert tracker.experiment_id == made


def test_a_trial_stopped_before_it_reported_has_no_record():
    """Tune's Result of a trial made but never started (the study stopped as its first trials started) has no
    config (Tune reads it back from the trial's result.json); before, the tables raised KeyError: 'adbs_config'."""
    from types import SimpleNamespace

    from adbs_lab.records.trial_records import from_results

    never = SimpleNamespace(config={}, metrics={}, metrics_dataframe=None, error=None, path="/x/adbs_trial_0")
    assert from_results([never], varying=["seed"], runs={"trials": {}, "ended": {}}) == []


def test_the_study_run_describes_the_study_and_ends_with_its_table(tmp_path):
    """The parent run's description (mlflow.note.content, the MLflow UI's Description): what the study searches
    from the start, and the study's table (table.md) after its first paragraph once the study ends."""
    from mlflow.tracking import MlflowClient

    from adbs_lab.driver.tracker import MlflowTracker
    from adbs_lab.stores.tracking_store import NOTE, NOTE_MAX, note_with_table

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    head, guide = "**alpha_sweep**: `alpha` in 0.01, 0.1", "Columns to add: `alpha`"
    t = MlflowTracker(uri=uri, study="alpha_sweep", folder="alpha_sweep", study_dir=tmp_path / "s", run_name="r",
                      tags={}, varying=["alpha"], resume=False, description=f"{head}\n\n{guide}")
    client = MlflowClient(uri)
    assert client.get_run(t.parent_run_id).data.tags[NOTE] == f"{head}\n\n{guide}"
    table = tmp_path / "table.md"
    table.write_text("| config | avg |\n|---|---|\n| alpha=0.01 | 1.91 |\n")
    t.finish(artifacts=[table])
    note = client.get_run(t.parent_run_id).data.tags[NOTE]
    assert note.startswith(head + "\n\n") and note.endswith(guide)
    assert note.index("| alpha=0.01 | 1.91 |") < note.index(guide)
    long = note_with_table(head, "| a |\n" + "| 1.00 |\n" * 3000)  # over a tag's 8000 characters: whole lines only
    assert len(long) <= NOTE_MAX and long.endswith("under this run's Artifacts)") and "| 1.00 |\n\n(the" in long


def test_a_trials_base_epochs_replayed_from_the_cache_are_counted_apart_from_those_trained():
    """A trial whose base session came from the cache replays its epochs with base/reused = 1 (adbs/trial.py):
    trials.parquet counts them as reused (report.md: "Base epochs trained ..., reused from the cache ...")."""
    from types import SimpleNamespace

    import pandas as pd

    from adbs.config import Config
    from adbs_lab.records.trial_records import from_results
    from adbs_lab.records.tune_keys import CONFIG_KEY

    def result(trial_id: str, reused: float):
        rows = pd.DataFrame({K.REPORT_KIND: [K.KIND_BASE] * 3, K.BASE_STEP: [1, 2, 3], K.REUSED: [reused] * 3})
        return SimpleNamespace(config={CONFIG_KEY: Config(seed=int(reused))}, metrics={**SUMMARY, "trial_id": trial_id},
                               metrics_dataframe=rows, error=None, path=f"/x/{trial_id}")

    recs = from_results([result("t1", 0.0), result("t2", 1.0)], varying=["seed"], runs={"trials": {}, "ended": {}})
    _, trials = frames(recs)
    assert list(trials["base_epochs_run"]) == [3, 3] and list(trials["base_epochs_reused"]) == [0, 3]
