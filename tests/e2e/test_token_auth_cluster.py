"""Ray's token authentication on (every Ray cluster from Ray 2.61) on a one-node cluster of this machine, its head
started as `python -m adbs_lab.cluster.local_cluster start` starts one: `studies/submit.py` submits a smoke study's dry run
as a Ray Job and a study joins it with --address, each given the cluster's token alone (RAY_AUTH_TOKEN, which turns
RAY_AUTH_MODE=token on: adbs_lab/cluster/auth.py); without it both are refused in one line saying how to pass it
(exit 2). HOME is a temporary folder and the token travels in the environment, so nothing is written to ~/.ray,
where Ray (2.59 on) keeps a token that the local Ray of other tests would then use."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from adbs_lab.cluster import local_cluster
from testing.procs import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
TOKEN = secrets.token_hex(16)
AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _ray_home() -> list[str] | None:
    home = Path.home() / ".ray"
    return sorted(p.name for p in home.iterdir()) if home.is_dir() else None


@pytest.fixture(scope="module")
def cluster():
    before = _ray_home()
    root = Path(tempfile.mkdtemp(prefix="adbs-tok-"))  # short: Ray's socket paths live under it
    home = root / "home"
    home.mkdir()
    port, dashboard = free_port(), free_port()
    head = local_cluster.start_commands(root / "head", root / "no-worker", port=port, dashboard_port=dashboard)[0]
    env = {**_env(home, token=True), "RAY_AUTH_MODE": "token"}  # the cluster: authentication on, this token
    try:
        r = subprocess.run(head, capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        yield SimpleNamespace(root=root, home=home, address=f"127.0.0.1:{port}",
                              dashboard=f"http://127.0.0.1:{dashboard}")
    finally:
        local_cluster.stop([root / "head"], grace_s=5)
        shutil.rmtree(root, ignore_errors=True)
    assert _ray_home() == before  # no token left in ~/.ray for the other tests' Ray


def _env(home: Path, token: bool) -> dict[str, str]:
    """A shell of this machine's user with HOME `home` (no ~/.ray/auth_token) and no Ray auth setting of the test
    session's (tests/conftest.py sets RAY_AUTH_MODE=disabled); with `token`, the cluster's token alone."""
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(REPO))
    if token:
        env["RAY_AUTH_TOKEN"] = TOKEN
    return env


def _study(cluster) -> list[str]:
    return ["studies/alpha_sweep.py", "--smoke", "--num-samples", "1", "--pruner", "none", "--set", "sessions=1",
            "--storage", str(cluster.root / "runs"), "--tracking-uri", f"sqlite:///{cluster.root / 'mlflow.db'}",
            "--gpus-per-trial", "0"]


def test_a_study_submitted_with_the_clusters_token_runs_and_without_it_is_refused(cluster):
    submit = [PY, str(REPO / "studies" / "submit.py"), "--address", cluster.dashboard, "--deps", "installed"]
    r = subprocess.run([*submit, "--", *_study(cluster)], capture_output=True, text=True, timeout=120, cwd="/",
                       env=_env(cluster.home, token=False))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout[-2000:] + r.stderr[-3000:]
    assert "the cluster refused this client" in r.stderr and "RAY_AUTH_TOKEN=<the cluster's token>" in r.stderr
    assert TOKEN not in r.stdout + r.stderr

    # the job's study joins the cluster from its head (--address auto) and makes every check a run makes; its trials
    # would run as the cluster's own workers, which need no token of the driver's (a study that trains: the
    # two-node test, tests/e2e/test_two_node_cluster.py)
    r = subprocess.run([*submit, "--wait", "--", *_study(cluster), "--dry-run"], capture_output=True, text=True,
                       timeout=600, cwd="/", env=_env(cluster.home, token=True))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert ": SUCCEEDED" in r.stdout and "dry run: study alpha_sweep" in r.stdout, r.stdout[-3000:]
    assert TOKEN not in r.stdout + r.stderr


def test_a_study_joins_with_the_clusters_token_and_without_it_says_how_to_pass_it(cluster):
    study = [PY, str(REPO / _study(cluster)[0]), *_study(cluster)[1:], "--address", cluster.address, "--dry-run"]
    r = subprocess.run(study, capture_output=True, text=True, timeout=300, cwd="/", env=_env(cluster.home, token=True))
    assert r.returncode == 0 and "dry run: study alpha_sweep" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run(study, capture_output=True, text=True, timeout=300, cwd="/", env=_env(cluster.home, token=False))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout[-2000:] + r.stderr[-3000:]
    assert f"--address {cluster.address}: no Ray cluster there, or one that refused this driver" in r.stderr
    assert "RAY_AUTH_TOKEN=<the cluster's token>" in r.stderr and 'docs/clusters.md, "Token authentication"' in r.stderr
