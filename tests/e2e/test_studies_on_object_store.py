"""End to end on an object store: studies with `--storage s3://...` against a local
S3-compatible server (moto, conftest.s3), as a user types them. Trials write results,
checkpoints and base sessions to the bucket from their Ray workers; the driver's files (optuna.db,
tables, figures, report) are staged locally and uploaded; `--resume` continues from the bucket
alone, after the driver was killed and its staging folder is gone."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K
from tests.helpers.studies import first_finished

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _cmd(name: str, url: str, tracking_uri: str, ray_address: str, *flags: str) -> list[str]:
    return [sys.executable, str(REPO / "studies" / f"{name}.py"), *flags, "--storage", url,
            "--tracking-uri", tracking_uri, "--address", ray_address, "--gpus-per-trial", "0"]


def _env(tmp: Path) -> dict[str, str]:
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}  # the driver's staging folder goes here


def _run(cmd, env, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/", env=env)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-12000:]}"
    return r


def _read(s3, path: str) -> bytes:
    with s3.fs().open_input_stream(path) as f:
        return f.read()


def test_kshot_grid_on_s3_keeps_results_checkpoints_and_base_cache_in_the_bucket(s3, tmp_path, ray_address,
                                                                                  tracking_uri):
    bucket = s3.bucket("e2e-kshot")
    url = s3.url(bucket, "runs")
    r = _run(_cmd("kshot_grid", url, tracking_uri, ray_address, "--smoke"), _env(tmp_path / "tmp"))
    assert f"results: {url}/kshot_grid-smoke" not in r.stdout  # the query string stays at the end of the URL
    assert "results: s3://e2e-kshot/runs/kshot_grid-smoke?endpoint_override=" in r.stdout
    keys = s3.keys(bucket)
    for name in ("trials.parquet", "sessions.parquet", "table.txt", "best_config.json", "report.md", "optuna.db",
                 "study.json", "mlflow_runs.json"):
        assert f"runs/kshot_grid-smoke/{name}" in keys, (name, keys)
    assert any(k.startswith("runs/kshot_grid-smoke/tune/") and k.endswith("/result.json") for k in keys)
    assert any("/checkpoint_" in k for k in keys)  # trial checkpoints, written by the workers
    # The shared base session trained once, stored in the bucket's cache beside the study.
    bases = [k for k in keys if k.startswith("runs/base_cache/") and k.endswith(".pt") and ".features-" not in k]
    assert len(bases) == 1, bases
    trials = pd.read_parquet(io.BytesIO(_read(s3, f"{bucket}/runs/kshot_grid-smoke/trials.parquet")))
    assert len(trials) == 4 and (trials["state"] == K.COMPLETE).all()
    assert sorted(trials["base_reused"]) == [0, 1, 1, 1]
    # The uploaded Optuna database is a whole, readable SQLite file.
    db = tmp_path / "optuna.db"
    db.write_bytes(_read(s3, f"{bucket}/runs/kshot_grid-smoke/optuna.db"))
    st = optuna.load_study(study_name="kshot_grid-smoke", storage=f"sqlite:///{db}")
    assert len(st.trials) == 4
    # MLflow names the study's storage (without credentials); no staging folder is left behind.
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("kshot_grid-smoke")
    parent = [x for x in client.search_runs([exp.experiment_id]) if x.data.tags.get("adbs.role") == "study"][0]
    assert parent.data.tags["adbs.storage"].startswith("s3://e2e-kshot/runs/kshot_grid-smoke?endpoint_override=")
    assert parent.data.tags["adbs.optuna_storage"].startswith("s3://e2e-kshot/runs/kshot_grid-smoke/optuna.db?endpoint_override=")
    assert not list((tmp_path / "tmp").glob("adbs-kshot_grid-smoke-*"))


def test_resume_from_the_bucket_alone_then_a_new_run_moves_old_results_aside(s3, tmp_path, ray_address,
                                                                             tracking_uri):
    bucket = s3.bucket("e2e-resume")
    url = s3.url(bucket, "runs")
    cmd = _cmd("alpha_sweep", url, tracking_uri, ray_address, "--smoke", "--grid", "--max-concurrent", "1",
               "--set", "sessions=1")
    env = _env(tmp_path / "tmp")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/", env=env)
    finished = first_finished(proc, 600)
    time.sleep(5)  # Tune saves (and uploads) its experiment state every 2 s
    os.kill(proc.pid, signal.SIGKILL)  # the driver dies: nothing of it survives but the bucket
    proc.wait()
    staged = list((tmp_path / "tmp").glob("adbs-alpha_sweep-smoke-*"))
    assert len(staged) == 1 and (staged[0] / "optuna.db").exists()
    shutil.rmtree(staged[0])  # as if resumed from another machine
    assert "runs/alpha_sweep-smoke/tune/study_files/optuna.db" in s3.keys(bucket)

    r = _run(cmd + ["--resume"], env)
    assert f"{finished}: started" not in r.stdout, r.stdout  # the finished trial was not run again
    trials = pd.read_parquet(io.BytesIO(_read(s3, f"{bucket}/runs/alpha_sweep-smoke/trials.parquet")))
    assert len(trials) == 2 and (trials["state"] == K.COMPLETE).all(), \
        "\n".join(map(str, trials["error"])) + "\n" + r.stdout[-3000:] + r.stderr[-3000:]
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("alpha_sweep-smoke")
    runs = [x for x in client.search_runs([exp.experiment_id]) if x.data.tags.get("adbs.role") == "trial"]
    assert sorted(x.info.run_name for x in runs) == ["alpha=0.01 seed=0", "alpha=0.1 seed=0"]  # no duplicates
    first = [x for x in runs if x.info.run_name == finished][0]
    assert len(client.get_metric_history(first.info.run_id, "session/test_acc")) == 2  # logged once

    # A new run of the same study never overwrites: the old results move to alpha_sweep-smoke.<timestamp>.
    r = _run(_cmd("alpha_sweep", url, tracking_uri, ray_address, "--smoke", "--set", "sessions=1",
                  "--num-samples", "1"), env)
    # the folder as the storage names it (this local server's endpoint in its query), then what it holds
    assert re.search(r"s3://e2e-resume/runs/alpha_sweep-smoke(\?\S*)? holds a finished study \(2 trials; started ", r.stdout)
    assert ": moving it to s3://e2e-resume/runs/alpha_sweep-smoke." in r.stdout
    keys = s3.keys(bucket)
    moved = {k.split("/")[1] for k in keys if k.startswith("runs/alpha_sweep-smoke.")}
    assert len(moved) == 1
    old = pd.read_parquet(io.BytesIO(_read(s3, f"{bucket}/runs/{moved.pop()}/trials.parquet")))
    assert len(old) == 2 and (old["state"] == K.COMPLETE).all()
    new = pd.read_parquet(io.BytesIO(_read(s3, f"{bucket}/runs/alpha_sweep-smoke/trials.parquet")))
    assert len(new) == 1
    json.loads(_read(s3, f"{bucket}/runs/alpha_sweep-smoke/study.json"))


def test_bad_object_store_fails_before_any_trial(s3, tmp_path, ray_address, tracking_uri):
    r = subprocess.run(_cmd("alpha_sweep", s3.url("missing-bucket", "runs"), tracking_uri, ray_address, "--smoke"),
                       capture_output=True, text=True, timeout=120, cwd="/", env=_env(tmp_path / "tmp"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error: --storage: s3://missing-bucket/runs" in r.stderr and "bucket exists" in r.stderr
    assert "trials (" not in r.stdout  # stopped before planning any trial


def test_killed_worker_resumes_from_its_checkpoint_in_the_bucket(s3, tmp_path, ray_address, tracking_uri):
    """A trial worker killed mid-base-session (a preempted node) restarts from its checkpoint in the
    bucket, with its base session referenced in the bucket's cache, to the numbers of a clean run."""
    from adbs_lab.search.trainable import FAULT_ENV

    bucket = s3.bucket("e2e-fault")
    marker = tmp_path / "markers"
    marker.mkdir()
    one = ["--smoke", "--num-samples", "1", "--pruner", "none", "--set", "base_epochs=4", "--checkpoint-every", "1",
           "--seeds", "0"]
    env = {**_env(tmp_path / "tmp"), FAULT_ENV: json.dumps({"kill_at_base_epoch": 3, "marker_dir": str(marker)})}
    clean_dir = tmp_path / "clean"
    # The clean run beside the crashed one, not after it: its own folder and MLflow store, one trial (1 CPU) each on
    # the session's 2-CPU Ray cluster; the fault reaches only the crashed run's trial (its driver forwards its own
    # environment to its own job's workers), and the crashed run's restart (a new worker) is time the clean one trains.
    with open(tmp_path / "clean.out", "w+") as log:
        clean_run = subprocess.Popen(_cmd("alpha_sweep", str(clean_dir), f"sqlite:///{tmp_path / 'clean.db'}",
                                          ray_address, *one, "--no-cache"),
                                     stdout=log, stderr=subprocess.STDOUT, text=True, cwd="/", env=_env(tmp_path / "tmp"))
        try:
            _run(_cmd("alpha_sweep", s3.url(bucket, "runs"), tracking_uri, ray_address, *one), env)
        finally:
            clean_run.wait(600)
        log.seek(0)
        assert clean_run.returncode == 0, f"exit {clean_run.returncode}\n{log.read()[-8000:]}"
    assert (marker / "killed-seed0").exists(), "the fault was not injected"
    crashed = pd.read_parquet(io.BytesIO(_read(s3, f"{bucket}/runs/alpha_sweep-smoke/sessions.parquet")))
    clean = pd.read_parquet(clean_dir / "alpha_sweep-smoke" / "sessions.parquet")
    cols = ["session", "val_acc", "test_acc", "test_base_acc", "boundary_mean"]
    assert crashed["state"].eq(K.COMPLETE).all()
    pd.testing.assert_frame_equal(crashed[cols].reset_index(drop=True), clean[cols].reset_index(drop=True))
