"""Ending a Ray cluster started on this machine stops only that cluster (adbs_lab/cluster/local_cluster.py), not every Ray
instance of the user as `ray stop` does: another local Ray (this test session's own) is still alive afterwards; and
only a folder that is one cluster's is taken, never a process that runs the command (a `timeout`/`srun` wrapper)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from testing.procs import free_port

from adbs_lab.cluster import local_cluster
from tests.helpers.deploy_recipe import one_machine_recipe, value

BIN = Path(sys.executable).parent


def test_the_shared_default_temp_dir_is_refused(capsys):
    assert local_cluster.main(["stop", "/tmp/ray"]) == 2
    assert "Ray's default temp dir" in capsys.readouterr().err


def test_a_folder_that_is_not_there_is_refused(tmp_path, capsys):
    assert local_cluster.main(["stop", str(tmp_path / "nope")]) == 2
    assert "--temp-dir your `ray start` was given" in capsys.readouterr().err


def _cluster_folder(folder: Path) -> Path:
    """A folder laid out as `ray start --temp-dir=folder` leaves it: a session folder and session_latest naming it."""
    session = folder / "session_2026-01-01_00-00-00_000000_1"
    session.mkdir(parents=True)
    (folder / "session_latest").symlink_to(session)
    return session


def test_a_folder_that_is_not_one_clusters_is_refused(tmp_path, capsys):
    """A parent of cluster folders (before: every cluster under it stopped), the system temp folder (every user's
    Ray and drivers naming a path in it), a session folder: exit 2, saying what a cluster folder is."""
    session = _cluster_folder(tmp_path / "a")
    _cluster_folder(tmp_path / "b")
    for folder in (tmp_path, Path(tempfile.gettempdir()), session):
        assert local_cluster.main(["stop", str(folder)]) == 2
        assert "is not a Ray cluster's folder (it has no session_latest)" in capsys.readouterr().err


def _flag(argv: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(name + "="))


def test_start_gives_every_node_its_own_free_ports_and_temp_dir(tmp_path):
    """Ray's fixed defaults (the client server's 10001, each node's dashboard agent's 52365) are what another Ray on
    the machine holds; every node gets free ones of its own, so the two nodes do not take each other's either."""
    head, worker = local_cluster.start_commands(tmp_path / "h", tmp_path / "w", port=6391, dashboard_port=8267)
    agents = [int(_flag(argv, "--dashboard-agent-listen-port")) for argv in (head, worker)]
    assert len(set(agents)) == 2 and 52365 not in agents
    assert int(_flag(head, "--ray-client-server-port")) != 10001
    assert _flag(head, "--port") == "6391" and _flag(head, "--dashboard-port") == "8267"
    assert _flag(worker, "--address") == "127.0.0.1:6391"
    assert {_flag(head, "--temp-dir"), _flag(worker, "--temp-dir")} == {str(tmp_path / "h"), str(tmp_path / "w")}


def test_the_one_machine_recipe_fits_together():
    """deploy/README.md's "Trying it on one machine" (tests/e2e/test_two_node_cluster.py runs it with ports and
    folders of its own): the job goes to the dashboard `local_cluster start` opens (its default port: the recipe
    gives none), the study to the MLflow server the recipe starts, and `stop` names the folders `start` was given."""
    recipe = one_machine_recipe()
    start, stop, submit = recipe["start"], recipe["stop"], recipe["submit"]
    folders = start[start.index("start") + 1:]
    assert len(folders) == 2 and stop[stop.index("stop") + 1:] == folders
    assert not any(a.startswith(("--port", "--dashboard-port")) for a in start)
    assert value(submit, "--address") == f"http://127.0.0.1:{local_cluster.DASHBOARD_PORT}"
    assert value(submit, "--tracking-uri") == f"http://127.0.0.1:{value(recipe['mlflow'], '--port')}"
    assert "RAY_AUTH_MODE=disabled" in recipe["export"]  # the cluster and the job agree on no token auth
    # the agent and client ports `start` chooses are free ones (the test above), not Ray's defaults another Ray holds
    for argv in local_cluster.start_commands(*folders):
        assert "--dashboard-agent-listen-port=52365" not in argv and "--ray-client-server-port=10001" not in argv


def test_start_refuses_a_taken_port_before_starting_anything(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        taken = s.getsockname()[1]
        assert local_cluster.main(["start", str(tmp_path / "h"), str(tmp_path / "w"), "--dashboard-port",
                                   str(taken)]) == 2
    assert f"--dashboard-port {taken} is in use" in capsys.readouterr().err
    assert not (tmp_path / "h").exists()


def _daemons(pids: list[int]) -> set[int]:
    """The ones of `pids` that are a Ray instance's own daemons (GCS server, raylet)."""
    found = set()
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "gcs_server" in cmd or "raylet" in cmd:
            found.add(pid)
    return found


def _naming(session_dir: str) -> list[int]:
    """This user's processes whose command line names `session_dir` (a Ray instance's daemons)."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and p.stat().st_uid == os.getuid() and session_dir in (p / "cmdline").read_bytes().decode(
                    errors="replace"):
                found.append(int(p.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_stop_takes_the_clusters_daemons_and_workers_never_its_own_wrapper_or_another_cluster(tmp_path):
    session, other = _cluster_folder(tmp_path / "a"), _cluster_folder(tmp_path / "b")
    sleeper = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    daemon = subprocess.Popen([sys.executable, "-c", sleeper, f"--session-dir={session}"])  # its child: a worker
    beside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--session-dir={other}"])
    try:
        deadline = time.time() + 30
        while len(local_cluster.processes(tmp_path / "a")) < 2:  # the daemon and its worker, once it started it
            assert time.time() < deadline, "the stand-in daemon did not start its worker"
            time.sleep(0.1)
        # the wrapper names the session folder too (a job script's argument): it must survive, and print
        wrapper = ["bash", "-c", f'"$0" -m adbs_lab.cluster.local_cluster stop {tmp_path / "a"}; echo "wrapper $?"',
                   sys.executable, str(session / "logs")]
        r = subprocess.run(wrapper, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(
            Path(local_cluster.__file__).resolve().parents[1])})
        assert r.returncode == 0 and "stopped 2 processes" in r.stdout and "wrapper 0" in r.stdout, r
        assert daemon.wait(timeout=30) is not None and local_cluster.processes(tmp_path / "a") == []
        assert beside.poll() is None  # another cluster's process runs on
    finally:
        for proc in (daemon, beside):
            proc.kill()
            proc.wait()
        local_cluster.stop([tmp_path / "a"], grace_s=1)


def _session_dir() -> str:
    """The session dir of the Ray instance this process is connected to (its daemons name it on their command lines)."""
    from ray._private.worker import global_worker

    return global_worker.node.get_session_dir_path()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopping_one_local_cluster_leaves_another_ray_running(ray_address):
    import ray

    temp = tempfile.mkdtemp(prefix="adbs-rt-")  # short: Ray's socket paths live under it
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        r = subprocess.run([str(BIN / "ray"), "start", "--head", f"--port={port}", "--num-cpus=1",
                            f"--temp-dir={temp}", "--include-dashboard=false", "--object-store-memory=80000000"],
                           capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert local_cluster.processes(temp), "ray start left no process naming its temp dir"
        # This test session's own Ray instance, by its session dir: other tests (the other pytest worker) start and
        # stop Ray instances of their own under the same default temp dir meanwhile. Only its daemons: its worker
        # processes come and go with the other tests' trials and Ray's idle-worker timeout.
        session_dir = _session_dir()
        ours_before = _daemons(_naming(session_dir))

        r = subprocess.run([sys.executable, "-m", "adbs_lab.cluster.local_cluster", "stop", temp], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and "stopped" in r.stdout, r.stderr
        assert local_cluster.processes(temp) == []
        assert ours_before and ours_before <= set(_naming(session_dir))  # the other one's daemons run

        @ray.remote
        def one() -> int:
            return 1

        assert ray.get(one.remote(), timeout=60) == 1  # the other Ray instance still runs tasks
    finally:
        local_cluster.stop([temp], grace_s=2)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize("given", ["link", "real"])
def test_a_cluster_started_through_a_link_is_found_by_either_path(tmp_path, monkeypatch, given):
    """`ray start --temp-dir=LINK` names its sessions under LINK, unresolved, on its daemons' command lines (and in
    session_latest); `stop` resolved the folder only, so it found none of them and said "stopped 0 processes"."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    (real / "session_2026-01-01_00-00-00_000000_1").mkdir()
    (real / "session_latest").symlink_to(link / "session_2026-01-01_00-00-00_000000_1")  # as Ray writes it
    daemon = ["raylet", f"--session_dir={link}/session_2026-01-01_00-00-00_000000_1"]
    table = {os.getpid(): (1, os.getuid(), ["pytest"]), 999001: (1, os.getuid(), daemon),
             999002: (999001, os.getuid(), ["ray::worker"]), 999003: (1, os.getuid(), ["sleep", str(tmp_path)])}
    # the private process table stands in for /proc: the rule under test is which pids it yields, not Ray's start
    monkeypatch.setattr(local_cluster, "_table", lambda: table)
    assert local_cluster.processes(tmp_path / given) == [999001, 999002]
