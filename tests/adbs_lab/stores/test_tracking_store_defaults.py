"""What this project relies on of MLflow's stores, checked against the MLflow installed (its tested range:
pyproject.toml), so an upgrade that moves a default or a folder fails here rather than in a study: MLflow's own
default store and artifact root follow the working folder, which inside a Ray trial is the trial's folder, so the
project never leaves either to MLflow (adbs_lab/stores/tracking_store.py: tracking_uri; adbs_lab/stores/paths.py:
artifact_root); and a run's artifacts land in the folder its artifact URI names, which studies/report.py reads
directly (adbs_lab/results/from_store.py)."""

from __future__ import annotations

import json

import mlflow
import mlflow.tracking._tracking_service.utils as tracking_utils
from mlflow.tracking import MlflowClient

from adbs_lab.stores import paths, tracking_store


def test_mlflows_default_store_is_the_working_folders_and_ours_never_is(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)  # as in a process that never called set_tracking_uri
    monkeypatch.chdir(tmp_path)
    assert mlflow.get_tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"  # MLflow 3.7 on: mlflow.db, here
    ours = tracking_store.tracking_uri(None)
    assert str(ours) == paths.DEFAULT_TRACKING_URI and ours.startswith("sqlite:////")  # absolute, the project's
    assert str(ours) != mlflow.get_tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/mlflow.db")
    assert str(tracking_store.tracking_uri(None)) == "sqlite:////elsewhere/mlflow.db"  # the variable, as MLflow reads it
    assert str(tracking_store.tracking_uri("http://127.0.0.1:5000")) == "http://127.0.0.1:5000"  # the flag first


def test_artifacts_land_under_the_root_the_tracker_gives_never_the_working_folder(tmp_path, monkeypatch):
    work = tmp_path / "a_trial_folder"
    work.mkdir()
    monkeypatch.chdir(work)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    client = MlflowClient(uri)
    # without a root, MLflow puts an experiment's artifacts under ./mlruns of whatever folder the process is in
    bare = client.get_experiment(client.create_experiment("bare")).artifact_location
    assert bare == str(work / "mlruns" / client.get_experiment_by_name("bare").experiment_id)
    # the root the tracker passes (adbs_lab/driver/tracker.py: _create_experiment): beside the SQLite store
    root = paths.artifact_root(uri)
    assert root == (tmp_path / "store" / "artifacts").as_uri()
    exp = client.create_experiment("study", artifact_location=root)
    run = client.create_run(exp)
    client.log_text(run.info.run_id, json.dumps({"seed": 0}), "config.json")
    folder = tmp_path / "store" / "artifacts" / run.info.run_id / "artifacts"  # <root>/<run id>/artifacts
    assert run.info.artifact_uri == folder.as_uri()
    assert json.loads((folder / "config.json").read_text()) == {"seed": 0}
    # a file:// URI of a folder on this machine: studies/report.py reads the files there, not through a download
    # (adbs_lab/results/from_store.py reads embeddings.json so)
    assert not (work / "mlruns").exists()
