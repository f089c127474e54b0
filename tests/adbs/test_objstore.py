"""Results in an object store: URL helpers, and the base-session cache over a real S3 API
(a local moto server, see conftest.s3): entries, checksums, and train-once through the lease."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time

import pytest
import torch

from adbs import objstore as st
from adbs.exits import Exit
from adbs.cache import BaseCache
from adbs.redaction import redact
from tests.helpers.fakes import base_session


@pytest.mark.parametrize("url, parts, expected", [
    ("s3://b/runs", ("alpha",), "s3://b/runs/alpha"),
    ("s3://b/runs/", ("alpha", "tune"), "s3://b/runs/alpha/tune"),
    ("s3://b?endpoint_override=h:9000&scheme=http", ("runs",), "s3://b/runs?endpoint_override=h:9000&scheme=http"),
    ("gs://b/p?x=1", ("base_cache",), "gs://b/p/base_cache?x=1"),
])
def test_join_keeps_the_query_string(url, parts, expected):
    assert st.join(url, *parts) == expected


def test_redact_drops_credentials_only():
    assert redact("s3://AKIA:hunter2@b/runs?endpoint_override=h:9000") == "s3://***@b/runs?endpoint_override=h:9000"
    assert redact("s3://b/runs?secret_key=hunter2&access_key=AKIA&region=eu") == \
        "s3://b/runs?secret_key=***&access_key=***&region=eu"
    assert redact("/shared/runs") == "/shared/runs"


def test_is_url():
    assert st.is_url("s3://b") and st.is_url("GS://b/x") and st.is_url("abfs://c@acct.dfs.core.windows.net/p")
    assert not st.is_url("/shared/runs") and not st.is_url("runs") and not st.is_url("ftp://h/x")


def test_unreachable_or_missing_bucket_is_a_clear_error(s3):
    with pytest.raises(st.ObjectStoreError, match="not writable from here.*bucket exists"):
        st.check_writable(s3.url("no-such-bucket", "runs"))
    s3.bucket("ok-bucket")
    st.check_writable(s3.url("ok-bucket", "runs"))  # and leaves nothing behind
    assert s3.keys("ok-bucket") == []


def test_cache_round_trip_and_corruption_over_s3(s3):
    s3.bucket("cache-rt")
    cache = BaseCache(s3.url("cache-rt", "base_cache"))
    cache.store("k", base_session(2.0))
    assert s3.keys("cache-rt") == ["base_cache/k.json", "base_cache/k.pt"]
    assert torch.equal(cache.load("k").backbone_state["w"], torch.full((3,), 2.0))
    fs = s3.fs()
    blob = bytearray(fs.open_input_stream("cache-rt/base_cache/k.pt").read())
    blob[len(blob) // 2] ^= 0xFF
    with fs.open_output_stream("cache-rt/base_cache/k.pt") as f:
        f.write(bytes(blob))
    assert cache.load("k") is None  # the manifest's SHA-256 caught it; the entry is deleted
    assert s3.keys("cache-rt") == []
    calls = []
    _, reused = cache.get_or_train("k", lambda: calls.append(1) or base_session(3.0))
    assert not reused and calls == [1] and cache.load("k").boundaries[0].item() == 3.0
    assert "base_cache/k.lease" not in s3.keys("cache-rt")  # released


def _worker(url, counter, out):
    def train():
        with open(counter, "a") as fh:
            fh.write("trained\n")
        time.sleep(4.0)  # longer than a waiter's poll, so the others see the lease
        return base_session(5.0)

    _, reused = BaseCache(url).get_or_train("shared", train)
    with open(out, "a") as fh:
        fh.write(f"{int(reused)}\n")


@pytest.mark.slow
def test_concurrent_trials_train_once_over_s3(s3, tmp_path):
    s3.bucket("cache-cc")
    url = s3.url("cache-cc", "base_cache")
    counter, out = tmp_path / "count.txt", tmp_path / "out.txt"
    ctx = mp.get_context("spawn")
    first = ctx.Process(target=_worker, args=(url, str(counter), str(out)))
    first.start()
    deadline = time.time() + 60
    while not counter.exists():  # the first has the lease and trains; two more arrive meanwhile
        assert time.time() < deadline
        time.sleep(0.1)
    later = [ctx.Process(target=_worker, args=(url, str(counter), str(out))) for _ in range(2)]
    for p in later:
        p.start()
    for p in [first, *later]:
        p.join(120)
    assert all(p.exitcode == 0 for p in [first, *later])
    assert counter.read_text().count("trained") == 1
    assert sorted(out.read_text().split()) == ["0", "1", "1"]


def test_expired_lease_of_a_dead_trainer_is_taken_over(s3):
    s3.bucket("cache-lease")
    cache = BaseCache(s3.url("cache-lease", "base_cache"))
    with s3.fs().open_output_stream("cache-lease/base_cache/k.lease") as f:  # a trainer that died long ago
        f.write(json.dumps({"owner": "gone:1:x", "expires": time.time() - 5}).encode())
    t0 = time.time()
    base, reused = cache.get_or_train("k", lambda: base_session(7.0))
    assert not reused and base.boundaries[0].item() == 7.0 and time.time() - t0 < 20
    assert s3.keys("cache-lease") == ["base_cache/k.json", "base_cache/k.pt"]


def test_study_folder_push_pull_move_aside(s3, tmp_path):
    import sqlite3

    from adbs_lab.stores.study_folder import SNAPSHOT_DIR, StudyFolder, snapshot_into

    bucket = s3.bucket("folder")
    where = StudyFolder(s3.url(bucket, "runs"), "alpha_sweep")
    assert where.remote and not where.in_use() and "endpoint_override" in str(where)
    assert where.cache_location == s3.url(bucket, "runs/base_cache")
    where.prepare()
    db = where.local / "optuna.db"
    with sqlite3.connect(db) as c:
        c.execute("create table t (x int)")
        c.execute("insert into t values (42)")
    c.close()
    (where.local / "study.json").write_text('{"study": "alpha_sweep"}')
    (where.local / "mlflow_runs.json").write_text('{"trials": {}}')
    where.push()
    assert where.in_use() and where.read_text("study.json") == '{"study": "alpha_sweep"}'
    assert sorted(s3.keys(bucket)) == ["runs/alpha_sweep/mlflow_runs.json", "runs/alpha_sweep/optuna.db",
                                       "runs/alpha_sweep/study.json"]
    # Tune's experiment folder carries the snapshot; a resume elsewhere pulls it into a new staging folder.
    tune_dir = tmp_path / "tune-staging"
    snapshot_into(str(tune_dir), {"optuna.db": str(db), "mlflow_runs.json": str(where.local / "mlflow_runs.json")})
    fs = s3.fs()
    for name in ("optuna.db", "mlflow_runs.json"):
        with fs.open_output_stream(f"{bucket}/runs/alpha_sweep/tune/{SNAPSHOT_DIR}/{name}") as f:
            f.write((tune_dir / SNAPSHOT_DIR / name).read_bytes())
    again = StudyFolder(s3.url(bucket, "runs"), "alpha_sweep")
    assert again.local != where.local
    assert sorted(again.pull_for_resume()) == ["mlflow_runs.json", "optuna.db", "study.json"]
    with sqlite3.connect(again.local / "optuna.db") as c:
        assert c.execute("select x from t").fetchall() == [(42,)]
    c.close()
    moved = again.move_aside()
    assert moved.startswith(f"s3://{bucket}/runs/alpha_sweep.") and "endpoint_override" in moved
    keys = s3.keys(bucket)
    assert not any(k.startswith("runs/alpha_sweep/") for k in keys)
    assert len([k for k in keys if k.startswith("runs/alpha_sweep.")]) == 5
    for f in (where, again):
        f.cleanup()
        assert not f.local.exists()


def test_failed_upload_says_where_the_files_are(s3, capsys):
    from adbs_lab.driver import summarise
    from adbs_lab.stores.study_folder import StudyFolder

    s3.bucket("upload-fail")
    where = StudyFolder(s3.url("upload-fail", "runs"), "ablation")
    where.prepare()
    (where.local / "trials.parquet").write_bytes(b"x")
    s3.fs().delete_dir("upload-fail")  # the bucket is gone by the time the study ends
    with pytest.raises(Exit) as e:
        summarise.upload(where)
    err = e.value.message or ""  # printed by the command's main (adbs/exits.py: status)
    assert e.value.code == 1 and "uploading the study's files to s3://upload-fail/runs/ablation" in err
    assert str(where.local) in err and (where.local / "trials.parquet").exists()
    where.cleanup()


def test_rebound_paths_replace_the_pickled_ones_only_for_their_study():
    from adbs_lab.stores.study_folder import rebind, rebound

    rebind("alpha_sweep-x", optuna_url="sqlite:////new/optuna.db", study_dir="/new")
    assert rebound("alpha_sweep-x", "optuna_url", "sqlite:////old/optuna.db") == "sqlite:////new/optuna.db"
    from pathlib import Path

    assert rebound("alpha_sweep-x", "study_dir", Path("/old")) == Path("/new")
    assert rebound("other", "optuna_url", "sqlite:////old/optuna.db") == "sqlite:////old/optuna.db"


def test_logged_command_has_no_credentials(monkeypatch):
    from adbs_lab.driver import preflight

    argv = ("studies/alpha_sweep.py", "--storage", "s3://AKIA:hunter2@b/runs",
            "--storage=s3://b/x?secret_key=hunter2&region=eu", "--seeds", "0")
    logged = " ".join(preflight.logged_argv(argv))
    assert "hunter2" not in logged and "AKIA" not in logged
    assert "s3://***@b/runs" in logged and "--storage=s3://b/x?secret_key=***&region=eu" in logged and "--seeds 0" in logged


def test_a_restarted_trial_takes_over_its_own_live_lease(s3):
    s3.bucket("cache-holder")
    url = s3.url("cache-holder", "base_cache")
    with s3.fs().open_output_stream("cache-holder/base_cache/k.lease") as f:  # its worker died a moment ago
        f.write(json.dumps({"owner": "node:123:ab", "holder": "trial_1", "expires": time.time() + 600}).encode())
    t0 = time.time()
    base, reused = BaseCache(url, holder="trial_1").get_or_train("k", lambda: base_session(4.0))
    assert not reused and base.boundaries[0].item() == 4.0 and time.time() - t0 < 15  # not the 600 s
    assert "base_cache/k.lease" not in s3.keys("cache-holder")


def test_study_lease_of_a_killed_driver_on_this_machine_is_taken_over_at_once(s3):
    """A SIGKILLed driver never deletes its lease; its --resume on the same machine must not wait out TTL_S,
    while a live driver's lease (here: this test's parent process) still refuses a second copy."""
    import socket
    import subprocess
    import sys

    from adbs_lab.stores.study_folder import StudyBusy, StudyFolder, StudyLock

    bucket = s3.bucket("study-lease")
    where = StudyFolder(s3.url(bucket, "runs"), "alpha_sweep")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lease = f"{bucket}/runs/alpha_sweep.lock"

    def held_by(pid, host):
        with s3.fs().open_output_stream(lease) as f:
            f.write(json.dumps({"pid": pid, "host": host, "started": "then", "command": "study",
                                "renewed": time.time()}).encode())

    held_by(os.getppid(), socket.gethostname())
    with pytest.raises(StudyBusy, match=f"PID {os.getppid()} on {socket.gethostname()}"):
        StudyLock(where, "second copy")
    held_by(int(gone.stdout), "another-machine")  # a pid we cannot check: wait for the lease to expire
    with pytest.raises(StudyBusy):
        StudyLock(where, "second copy")
    held_by(int(gone.stdout), socket.gethostname())
    lock = StudyLock(where, "resume")
    with s3.fs().open_input_stream(lease) as f:
        assert json.loads(f.read())["pid"] == os.getpid()
    lock.release()
    where.cleanup()
