"""Ending a Ray cluster started on this machine stops only that cluster (adbs_lab/local_cluster.py), not every Ray
instance of the user as `ray stop` does: another local Ray (this test session's own) is still alive afterwards."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from adbs_lab import local_cluster

BIN = Path(sys.executable).parent


def test_the_shared_default_temp_dir_is_refused(capsys):
    assert local_cluster.main(["stop", "/tmp/ray"]) == 2
    assert "Ray's default temp dir" in capsys.readouterr().err


def test_a_folder_that_is_not_there_is_refused(tmp_path, capsys):
    assert local_cluster.main(["stop", str(tmp_path / "nope")]) == 2
    assert "--temp-dir your `ray start` was given" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopping_one_local_cluster_leaves_another_ray_running(ray_address):
    import ray

    temp = tempfile.mkdtemp(prefix="adbs-rt-")  # short: Ray's socket paths live under it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        r = subprocess.run([str(BIN / "ray"), "start", "--head", f"--port={port}", "--num-cpus=1",
                            f"--temp-dir={temp}", "--include-dashboard=false", "--object-store-memory=80000000"],
                           capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert local_cluster.processes(temp), "ray start left no process naming its temp dir"
        ours_before = set(local_cluster.processes("/tmp/ray"))  # this session's Ray (the default temp dir)

        r = subprocess.run([sys.executable, "-m", "adbs_lab.local_cluster", "stop", temp], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and "stopped" in r.stdout, r.stderr
        assert local_cluster.processes(temp) == []
        assert ours_before <= set(local_cluster.processes("/tmp/ray"))  # none of the other instance's processes ended

        @ray.remote
        def one() -> int:
            return 1

        assert ray.get(one.remote(), timeout=60) == 1  # the other Ray instance still runs tasks
    finally:
        local_cluster.stop([temp], grace_s=2)
        shutil.rmtree(temp, ignore_errors=True)
