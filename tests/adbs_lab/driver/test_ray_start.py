"""Ray that does not start (its node timed out on a loaded machine, a process of it died): one line, exit 2, the
command to run again (--resume's where an earlier run claimed the study), Ray's half-started processes shut down and
the study's lock let go; nothing claimed. ray.init is replaced by one that raises as Ray's own start does
(ray/_private/node.py, ray/_private/services.py), so no Ray session starts here."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray

from adbs.exits import REFUSED, Exit
from adbs_lab.driver import options, session
from adbs_lab.driver.prepared import RunSettings
from adbs_lab.stores.study_folder import StudyFolder, StudyLock
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[3]
RAISED = [Exception("The current node timed out during startup. This could happen because some of the raylet failed "
                    "to startup or the GCS has become overloaded."),
          TimeoutError("Timed out after 30 seconds while waiting for node to startup. Did not find socket name x"),
          RuntimeError("Failed to start the GCS server.\nits log: /tmp/ray/session_latest/logs/gcs_server.err")]


@pytest.fixture
def ray_fails(monkeypatch):
    calls = []

    def fail_with(e: BaseException):
        def init(*args, **kwargs):
            raise e

        monkeypatch.setattr(ray, "init", init)
        monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
        return calls

    return fail_with


@pytest.mark.parametrize("raised", RAISED, ids=["node timed out", "TimeoutError", "GCS failed"])
def test_a_study_whose_ray_does_not_start_ends_in_one_line(capsys, tmp_path, ray_fails, raised):
    """It printed Ray's 30-line traceback and exited 1, without the command to run again."""
    calls = ray_fails(raised)
    storage = tmp_path / "runs"
    cmd = [sys.executable, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--gpus-per-trial", "0",
           "--storage", str(storage), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    r = in_process(capsys, cmd)
    assert r.returncode == REFUSED, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Ray did not start" in errors[0], r.stderr
    assert str(raised).splitlines()[0][:40] in errors[0]
    assert "nothing of this run was written" in errors[0] and "start it again with: " in errors[0]
    assert "--resume" not in errors[0]  # nothing of the study was claimed: it starts again
    assert calls == ["shutdown"]  # what Ray started of itself is stopped
    where = StudyFolder(str(storage), "alpha_sweep-smoke")  # a --smoke run's folder (adbs_lab/stores/paths.py: SMOKE)
    assert StudyLock.held_by(where) is None  # the lock is let go: the next run is not refused as running
    assert not where.local.exists()  # nothing claimed


@pytest.mark.parametrize("resume, address, said", [
    (False, None, "start it again with: "), (True, None, "continue with: "),
    (True, "10.0.0.1:6379", "joining the Ray cluster at --address 10.0.0.1:6379 failed"),
])
def test_the_line_says_how_to_run_again(monkeypatch, ray_fails, resume, address, said):
    """--resume (the study claimed by an earlier run): the continue line with --resume; --address: the cluster."""
    ray_fails(RAISED[0])
    opts = options.parse("t", argv=["--smoke"] + (["--resume"] if resume else []))[0].replace(
        argv=("studies/alpha_sweep.py", "--smoke", *(["--resume"] if resume else [])), address=address)
    p = SimpleNamespace(run=RunSettings.of(opts), plan=SimpleNamespace(name="alpha_sweep"), total=2)
    monkeypatch.setattr(session, "_probe_ray", lambda a: None)  # no cluster to probe here
    with pytest.raises(Exit) as e:
        with session.ray_session(p):
            pass
    assert e.value.code == REFUSED and said in e.value.message, e.value.message
    assert ("--resume" in e.value.message.split("with: ", 1)[-1]) == resume
