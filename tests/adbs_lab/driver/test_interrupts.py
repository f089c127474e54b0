"""One handler for SIGINT and SIGTERM for a study's whole run (adbs_lab/driver/interrupts.py): what it does at
each kind of step, that Ray's start cannot replace it, and, on real study processes, exit 130 for a signal in the
preflight and between Ray's start and Tune's fit (before, 143 and Ray's own exits: 15, 1 or an abort, 134)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adbs_lab.driver import interrupts
from adbs_lab.stores.paths import REPO_ROOT
from adbs_lab.search.trainable import FAULT_ENV


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.5)  # Python runs the handler at the next bytecode: here


def test_outside_a_deferred_step_a_signal_interrupts_where_the_study_is():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.handling() as ints:
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGTERM)
        assert ints.signal == "SIGTERM" and ints.name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler again


def test_a_deferred_step_ends_whole_then_the_signal_acts_and_a_second_one_at_once():
    with interrupts.handling() as ints:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with ints.during("defer"):
                _signal_self(signal.SIGINT)
                done.append("the step's end")
        assert done == ["the step's end"] and ints.name == "Ctrl-C"
        with pytest.raises(KeyboardInterrupt):
            with ints.during("defer"):
                _signal_self(signal.SIGTERM)  # the step's first: waits
                done.append("the second step goes on")
                _signal_self(signal.SIGTERM)  # a second one: no more waiting
                done.append("not reached")
        assert done == ["the step's end", "the second step goes on"]


def test_in_tunes_fit_a_signal_is_tunes_graceful_stop_once_tune_listens():
    got: list[int] = []
    with interrupts.handling() as ints:
        old = signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))  # what tuner.fit installs
        try:
            with ints.during("tune"):
                _signal_self(signal.SIGTERM)
        finally:
            signal.signal(signal.SIGUSR1, old)
    assert got == [signal.SIGUSR1] and ints.signal == "SIGTERM"


def test_ray_starting_keeps_ours_against_rays_sigterm_handler():
    import ray._private.utils as ray_utils

    with interrupts.handling() as ints:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.ray_starting():
                ray_utils.set_sigterm_handler(lambda s, f: sys.exit(s))  # what ray.init does (exit 15)
                _signal_self(signal.SIGTERM)  # noted, acted on once Ray is up
        assert signal.getsignal(signal.SIGTERM) == ints.handler
    assert ray_utils.set_sigterm_handler.__module__ == "ray._private.utils"  # Ray's own again


def test_a_composition_interrupted_outside_its_parts_exits_130_with_one_line(capsys):
    """studies/paper.py's main runs in compose.interruptible: SIGTERM while it checks its parts (before: death by
    the signal, 143) or draws its report is 130 and one line; a part's own 130 stops it (test_compose.py)."""
    from adbs_lab.driver import compose

    def main() -> int:
        _signal_self(signal.SIGTERM)
        return 0

    assert compose.interruptible("paper", main) == 130
    assert "paper: interrupted (SIGTERM); rerun the same command to continue" in capsys.readouterr().err


def _stopped_at(point: str, sig: int, tmp_path: Path, cmd: list[str]) -> tuple[int, str]:
    """Study `cmd` paused at `point` (fault injection), sent `sig` there: its exit code and output."""
    env = {**os.environ, FAULT_ENV: json.dumps({"pause_at": point, "marker_dir": str(tmp_path)})}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd="/")
    deadline = time.time() + 240
    while not (tmp_path / f"paused-{point}").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0] if proc.poll() is not None else ""
        time.sleep(0.1)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


@pytest.mark.slow
def test_sigterm_in_the_preflight_exits_130_with_nothing_written(tmp_path):
    cmd = [sys.executable, str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--storage",
           str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]
    code, out = _stopped_at("preflight", signal.SIGTERM, tmp_path, cmd)
    assert code == 130, out  # before: 143, death by the signal
    assert "interrupted (SIGTERM) while checking the study (nothing was written)" in out
    assert not (tmp_path / "runs").exists() and "Traceback" not in out


@pytest.mark.slow
@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_a_signal_between_rays_start_and_fit_exits_130_with_the_command_to_start_again(tmp_path, study_cmd, sig,
                                                                                       name):
    # ray.init set Ray's SIGTERM handler (exit 15) and its core worker a C++ one (an abort, 134) in the driver, and
    # Ctrl-C there was lost: the study ran to its end and exited 0
    code, out = _stopped_at("ray_started", sig, tmp_path, study_cmd("alpha_sweep", "--smoke"))
    assert code == 130, out
    assert f"alpha_sweep interrupted ({name}) while preparing the first trials; no trial ran; start it again " \
           "with:" in out
    assert "Traceback" not in out and "SIGTERM received" not in out, out  # neither Python's nor Ray's C++ handler


@pytest.mark.slow
def test_ctrl_c_as_the_first_trial_starts_exits_130_with_the_resume_line(study_cmd):
    # 2 trials of 2 CPUs each on the session's 2-CPU Ray: the second is made but waits, and never reports
    cmd = study_cmd("alpha_sweep", "--smoke", "--cpus-per-trial", "2", "--max-concurrent", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if ": started" in line:
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=300)
    out = "".join(seen) + rest
    assert proc.returncode == 130, out  # before: KeyError: 'adbs_config' and exit 1
    assert "continue with:" in out and "--resume" in out and "Traceback" not in out


@pytest.mark.parametrize("url", ["postgresql://me:pa ss/w@db/mlflow", "http://me:T0kZq@mlflow:5000",
                                 "s3://bucket/runs?secret_key=sekrit#token=Xq9zz"])
@pytest.mark.parametrize("resume", [False, True])
def test_the_line_of_a_study_stopped_before_its_trials_never_prints_a_secret(capsys, url, resume):
    # the "start it again" branch printed the argv as typed (only the --resume branch redacted it)
    from types import SimpleNamespace

    from adbs.exits import Exit
    from adbs_lab.driver.session import interrupted

    argv = ["studies/ablation.py", "--tracking-uri", url] + (["--resume"] if resume else [])
    p = SimpleNamespace(run=SimpleNamespace(resume=resume, argv=argv, continue_argv=None), plan=SimpleNamespace(name="ablation"))
    with pytest.raises(Exit):
        interrupted("preparing the first trials", p)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "ablation interrupted" in err
    for secret in ("pa ss/w", "T0kZq", "sekrit", "Xq9zz"):
        assert secret not in err.split("with:")[1], err
