"""Acceptance: a real two-node Ray cluster on this machine, started beside another Ray by deploy/README.md's recipe
"Trying it on one machine", its commands read from the document (tests/helpers/deploy_recipe.py)
(`python -m adbs_lab.cluster.local_cluster start`: `ray start --head` plus a second `ray start --address` node process
with its own resources, temp dir and free ports), an MLflow server on
127.0.0.1, and the recipe's `--smoke` study submitted with `studies/submit.py --wait` as a Ray Job.

Checks: the job succeeded, its trials ran on both nodes (the Ray node id each trial reports in its
result.json), the results are in the shared
storage folder, the MLflow runs are on the server, the secret passed with --env appears nowhere,
and a file tracking store is refused on this multi-node cluster. The same cluster also runs a
study with `--storage s3://...` (a local S3-compatible server, conftest.s3). Only the processes this test
started are stopped (by the temp dirs in their command lines; `ray stop` would stop every Ray
instance on the machine), also when the test fails. About 5 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from testing.procs import free_port, wait_http
from tests.helpers.deploy_recipe import one_machine_recipe, replace, value

from adbs_lab.cluster import local_cluster
from adbs_lab.search.trainable import NODE_ID_KEY

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(480), pytest.mark.xdist_group("clusters")]
SECRET = "adbs-e2e-secret-5f1c9a"


def cluster_env() -> dict[str, str]:
    # Explicit auth mode (stack notes: Ray >= 2.59 turns token auth on depending on ~/.ray state);
    # the venv first on PATH, so the job's `python` entrypoint is this interpreter.
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
            "MLFLOW_DISABLE_TELEMETRY": "true", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def state_query(fn: str, address: str, filters: list) -> list[dict]:
    """Ray's state API, called in a child process: a GCS client left in the pytest process would
    exit it (code 1) about a minute after this test's cluster is stopped."""
    code = ("import json, sys, ray.util.state as s; "
            f"r = s.{fn}(address={address!r}, filters={filters!r}, detail=True, limit=100); "
            "print(json.dumps([x if isinstance(x, dict) else x.__dict__ for x in r], default=str))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=cluster_env())
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mlflow_server(request):
    """The cluster's tracking server: `mlflow server` on this session's PostgreSQL (conftest.postgres), as a lab runs
    it; on a SQLite file where PostgreSQL or its driver is missing (the rest of the test does not depend on it)."""
    root = Path(tempfile.mkdtemp(prefix="adbs-mlflow-"))
    port = free_port()
    try:
        store = request.getfixturevalue("postgres").new_database("cluster_mlflow")
    except pytest.skip.Exception:
        store = f"sqlite:///{root / 'mlflow.db'}"
    log = open(root / "server.log", "w")
    proc = subprocess.Popen([str(BIN / "mlflow"), "server", "--backend-store-uri", store,
                             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            stdout=log, stderr=subprocess.STDOUT, env=cluster_env(), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url, proc, root
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its workers only
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def another_ray_holds(ports: tuple[int, ...]):
    """Each of Ray's fixed default `ports` taken while the block runs: by the other Ray on this machine (this test
    session's, `ray_address`) where it holds it, else by a socket listening here, so that the conflict is real."""
    held = []
    try:
        for port in ports:
            s = socket.socket()
            try:
                s.bind(("", port))
                s.listen()
                held.append(s)
            except OSError:  # the other Ray holds it
                s.close()
        yield
    finally:
        for s in held:
            s.close()


def recipe_env() -> dict[str, str]:
    """cluster_env() with the recipe's `export` line applied."""
    return {**cluster_env(), **dict(a.split("=", 1) for a in one_machine_recipe()["export"][1:])}


@pytest.fixture(scope="module")
def two_nodes(mlflow_server, ray_address):
    """(GCS address, dashboard URL, {"head": node_id, "worker": node_id}) of a fresh two-node cluster started by
    deploy/README.md's "Trying it on one machine" commands (read from it: tests/helpers/deploy_recipe.py) while
    another Ray runs on the machine and holds Ray's default dashboard agent and client server ports (52365, 10001),
    the ports a node started without --dashboard-agent-listen-port / --ray-client-server-port would lose. The
    recipe's folders, and its GCS and dashboard ports (6390, 8266: free on a user's machine, but another test run may
    hold them here), are replaced with this test's own; the recipe's `stop` ends it."""
    root = tempfile.mkdtemp(prefix="adbs-ray-", dir="/tmp")  # short: Ray's unix sockets stay under ~107 characters
    gcs, dash = free_port(), free_port()
    recipe = one_machine_recipe()
    start = recipe["start"]
    folders = start[start.index("start") + 1:]
    ours = {".venv/bin/python": sys.executable, folders[0]: f"{root}/head", folders[1]: f"{root}/worker"}
    with another_ray_holds((52365, 10001)):
        try:
            r = subprocess.run(replace(start, ours) + ["--port", str(gcs), "--dashboard-port", str(dash)],
                               env=recipe_env(), capture_output=True, text=True, timeout=360, cwd=REPO)
            assert r.returncode == 0, f"local_cluster start failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            assert f"Jobs API http://127.0.0.1:{dash}" in r.stdout
            nodes = {}
            deadline = time.time() + 90
            while len(nodes) < 2 and time.time() < deadline:
                nodes = {("head" if "node_head" in n["resources_total"] else "worker"): n["node_id"]
                         for n in state_query("list_nodes", f"127.0.0.1:{gcs}", [("state", "=", "ALIVE")])}
                time.sleep(1)
            assert set(nodes) == {"head", "worker"}, nodes
            yield f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dash}", nodes
            stopped = subprocess.run(replace(recipe["stop"], ours), env=recipe_env(), capture_output=True, text=True,
                                     timeout=120, cwd=REPO)
            assert stopped.returncode == 0 and "stopped " in stopped.stdout, stopped.stdout + stopped.stderr
            assert not local_cluster.processes(f"{root}/head") and not local_cluster.processes(f"{root}/worker")
        finally:
            local_cluster.stop([root], grace_s=3)  # this cluster's processes only, not every Ray of the machine
            shutil.rmtree(root, ignore_errors=True)


def test_submitted_smoke_study_spreads_over_both_nodes(two_nodes, mlflow_server, tmp_path):
    _, dashboard, node_ids = two_nodes
    mlflow_url, mlflow_proc, mlflow_root = mlflow_server
    wait_http(mlflow_url + "/health", mlflow_proc, 120, "the MLflow server", mlflow_root / "server.log")
    storage = tmp_path / "shared"  # one machine: every path is shared, and the marker check proves it

    t0 = time.time()
    # The recipe's submit command (--deps installed: the nodes run this venv; the default, pyproject, would make Ray
    # clone the 6.5 GB venv for the job's pip environment, ~70 s, which tests nothing of ours), with this test's
    # dashboard, storage and MLflow server, and a secret passed with --env.
    submit = one_machine_recipe()["submit"]
    argv = replace(submit, {".venv/bin/python": sys.executable, value(submit, "--address"): dashboard,
                            value(submit, "--storage"): str(storage), value(submit, "--tracking-uri"): mlflow_url})
    argv[argv.index("--"):argv.index("--")] = ["--env", "ADBS_E2E_SECRET"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=360, cwd=REPO,
                       env={**recipe_env(), "ADBS_E2E_SECRET": SECRET})
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"exit {r.returncode} after {time.time() - t0:.0f} s\n{out[-6000:]}"
    job_id = out.split("submitted job ", 1)[1].split(":", 1)[0]
    assert f"ray job logs --address {dashboard} --follow {job_id}" in out
    assert f"ray job stop --address {dashboard} {job_id}" in out
    assert f"job {job_id}: SUCCEEDED" in out and SECRET not in out
    assert "job environment variables (values not shown): ADBS_E2E_SECRET" in out
    # The study's cluster checks ran in the job, against both nodes.
    assert "Ray cluster: 2 nodes" in out and "read and answered from all 2 nodes" in out and f"tracking: {mlflow_url}" in out

    from ray.job_submission import JobSubmissionClient

    info = JobSubmissionClient(dashboard).get_job_info(job_id)
    assert str(info.status) == "SUCCEEDED" and info.entrypoint.endswith("--address auto") and SECRET not in info.entrypoint

    # Results in the shared storage folder.
    study = storage / "alpha_sweep-smoke"  # a --smoke run's folder (adbs_lab/stores/paths.py: SMOKE)
    trials = pd.read_parquet(study / "trials.parquet")
    assert len(trials) == 2 and (trials["state"] == "COMPLETE").all()
    assert (study / "sessions.parquet").exists() and (study / "table.txt").exists()
    results = sorted((study / "tune").glob("*/result.json"))
    assert len(results) == 2
    # Trials ran on both nodes: each trial's last report names the Ray node it ran on. (Ray's state
    # API was used here before; it sometimes no longer lists a finished job's actors.)
    trial_nodes = {json.loads(f.read_text().splitlines()[-1])[NODE_ID_KEY] for f in results}
    assert trial_nodes == {node_ids["head"], node_ids["worker"]}, trial_nodes

    # MLflow runs on the tracking server: one parent run, one nested run per trial, no secret anywhere.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_url)
    exp = client.get_experiment_by_name("alpha_sweep-smoke")
    runs = client.search_runs([exp.experiment_id])
    parents = [x for x in runs if x.data.tags.get("adbs.role") == "study"]
    children = [x for x in runs if x.data.tags.get("adbs.role") == "trial"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED" and len(children) == 2
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert set(trials["mlflow_run_id"]) == {c.info.run_id for c in children}
    assert all("summary/val_avg_acc" in c.data.metrics for c in children)
    assert str(storage) in parents[0].data.tags["adbs.storage"]
    everything = json.dumps([{**x.data.params, **x.data.tags} for x in runs])
    assert SECRET not in everything
    from adbs_lab.stores.paths import code_version

    if code_version() != "unknown":  # the job's copy has no .git: submit.py passes the version along
        assert parents[0].data.tags["adbs.code_version"] == code_version()


def test_file_tracking_store_refused_on_the_two_node_cluster(two_nodes, tmp_path):
    """The run refuses a SQLite store on a two-node cluster before any trial, and its --dry-run (which connects to
    the cluster and makes the same checks) refuses it with the same message."""
    gcs, _, _ = two_nodes
    db = tmp_path / "mlflow.db"
    cmd = [sys.executable, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--address", gcs,
           "--storage", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{db}", "--gpus-per-trial", "0"]
    dry = subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True, timeout=180, cwd=tmp_path,
                         env=cluster_env())
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=cluster_env())
    assert r.returncode == 2, r.stdout[-3000:] + r.stderr[-3000:]
    assert "is a SQLite file on the driver's node, but this Ray cluster has 2 nodes" in r.stderr
    assert "mlflow server" in r.stderr
    assert not list((tmp_path / "runs").glob("alpha_sweep-smoke/tune"))  # no trial started
    assert dry.returncode == 2 and "dry run:" not in dry.stdout, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert [ln for ln in dry.stderr.splitlines() if ln.startswith("error:")] == \
        [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]


def test_study_on_an_object_store_spreads_over_both_nodes(two_nodes, mlflow_server, s3, tmp_path):
    """--storage s3://... on the two-node cluster: every node proves it can write the bucket before any
    trial starts; trials on both nodes write results, checkpoints and the shared base session there
    (trained once across nodes through the cache's lease); the driver uploads tables and optuna.db."""
    gcs, _, node_ids = two_nodes
    mlflow_url, mlflow_proc, mlflow_root = mlflow_server
    wait_http(mlflow_url + "/health", mlflow_proc, 120, "the MLflow server", mlflow_root / "server.log")
    bucket = s3.bucket("cluster-e2e")
    url = s3.url(bucket, "runs")
    r = subprocess.run([sys.executable, str(REPO / "studies" / "kshot_grid.py"), "--smoke", "--address", gcs,
                        "--storage", url, "--tracking-uri", mlflow_url, "--gpus-per-trial", "0",
                        "--cpus-per-trial", "1", "--name", "s3"],
                       capture_output=True, text=True, timeout=360, cwd=tmp_path, env=cluster_env())
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert "Ray cluster: 2 nodes" in out and "object store, an object written, read back and deleted from all 2 nodes" in out
    keys = s3.keys(bucket)
    assert "runs/kshot_grid-smoke-s3/trials.parquet" in keys and "runs/kshot_grid-smoke-s3/optuna.db" in keys
    results = [k for k in keys if k.startswith("runs/kshot_grid-smoke-s3/tune/") and k.endswith("/result.json")]
    assert len(results) == 4
    fs = s3.fs()
    trial_nodes = {json.loads(fs.open_input_stream(f"{bucket}/{k}").read().decode().splitlines()[-1])[NODE_ID_KEY]
                   for k in results}
    assert trial_nodes == {node_ids["head"], node_ids["worker"]}, trial_nodes
    import io

    trials = pd.read_parquet(io.BytesIO(fs.open_input_stream(f"{bucket}/runs/kshot_grid-smoke-s3/trials.parquet").read()))
    assert len(trials) == 4 and (trials["state"] == "COMPLETE").all()
    bases = [k for k in keys if k.startswith("runs/base_cache/") and k.endswith(".pt") and ".features-" not in k]
    assert len(bases) == 1 and int(trials["base_reused"].sum()) >= 2  # one entry; most cells reused it
