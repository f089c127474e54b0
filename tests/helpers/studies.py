"""Reading a study as its tests check it: the first trial a running study finishes, and its MLflow runs (one study
run, its trials nested under it with a session curve each). Used by tests/e2e/test_studies.py and the other e2e
tests of studies."""

from __future__ import annotations

import subprocess
import time

from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K


def first_finished(proc: subprocess.Popen, timeout: float) -> str:
    """Read a running study's progress lines until a trial finishes; its label ('alpha=0.1 seed=0')."""
    deadline = time.time() + timeout
    for line in proc.stdout:
        if ": finished:" in line:
            return line.split("]", 1)[1].split(":", 1)[0].strip()
        assert time.time() < deadline, "no trial finished before the deadline"
    raise AssertionError("the study ended before a trial finished")


def trial_runs(uri: str, experiment: str):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("adbs.role") == "study"]
    trials = [r for r in runs if r.data.tags.get("adbs.role") == "trial"]
    return client, parents, trials


def check_nested_with_curves(uri: str, experiment: str, n_trials: int, n_sessions: int):
    client, parents, trials = trial_runs(uri, experiment)
    assert len(parents) == 1, [p.info.run_name for p in parents]
    assert len(trials) == n_trials
    for r in trials:
        assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        if r.data.tags["adbs.state"] == K.COMPLETE:
            hist = client.get_metric_history(r.info.run_id, "session/test_acc")
            assert sorted(m.step for m in hist) == list(range(n_sessions))
            assert "summary/test_avg_acc" in r.data.metrics and "summary/val_avg_acc" in r.data.metrics
    return client, parents[0], trials
