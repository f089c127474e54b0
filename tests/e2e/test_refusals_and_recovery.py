"""Bad input and failures mid-study, as a user would hit them: each ends in a clear error before compute or
in a correct recovery, with nothing lost or duplicated. Studies run in subprocesses on the session's Ray
instance with real Optuna and MLflow stores in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from testing.procs import free_port
from tests.helpers.scripts import in_process
from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
GRID = ["--smoke", "--grid", "--max-concurrent", "1", "--set", "sessions=1"]  # 2 trials, one at a time


def _run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/", **kw)


def _wait_for(proc: subprocess.Popen, text: str, timeout: float, seen: list[str]) -> None:
    deadline = time.time() + timeout
    for line in proc.stdout:
        seen.append(line)
        if text in line:
            return
        assert time.time() < deadline, f"no {text!r} before the deadline:\n{''.join(seen)[-3000:]}"
    raise AssertionError(f"the study ended before {text!r}:\n{''.join(seen)[-3000:]}")


def _kill_after_first_trial(cmd: list[str]) -> None:
    """Start the study, SIGKILL it once a trial has finished and Tune has saved its state: a study to resume."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    seen: list[str] = []
    _wait_for(proc, ": finished:", 600, seen)
    time.sleep(4)  # Tune saves its experiment state every 2 s
    proc.kill()
    proc.wait()


def _runs(uri: str, experiment: str = "alpha_sweep-smoke"):  # GRID is a --smoke run
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    return ([r for r in runs if r.data.tags.get("adbs.role") == "study"],
            [r for r in runs if r.data.tags.get("adbs.role") == "trial"])


def test_a_second_copy_of_a_running_study_is_refused(study_cmd, storage, tracking_uri, capsys):
    """Two copies on the same --storage: the second refuses, naming the first's PID; the first is untouched.
    Then, on the finished study: a copy under another --name runs, and --resume without its optuna.db is refused."""
    cmd = study_cmd("alpha_sweep", *GRID)
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    seen: list[str] = []
    _wait_for(first, ": started", 600, seen)
    second = _run(cmd)  # a process: the refusal names the other process's PID
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"is already running in {storage} (PID {first.pid}" in second.stderr and "--name" in second.stderr
    assert "started" not in second.stdout
    rest, _ = first.communicate(timeout=600)
    assert first.returncode == 0, "".join(seen) + rest
    trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
    assert len(trials) == 2 and (trials["state"] == K.COMPLETE).all()
    assert not list(storage.glob("alpha_sweep-smoke.2*")), "nothing was moved aside"
    # beside it, under another name, it runs
    other = _run(study_cmd("alpha_sweep", *GRID, "--name", "second"))
    assert other.returncode == 0 and (storage / "alpha_sweep-smoke-second" / "trials.parquet").exists()
    # --resume of a study whose optuna.db is gone: refused before Ray
    (storage / "alpha_sweep-smoke" / "optuna.db").unlink()
    r = in_process(capsys, cmd + ["--resume"], cwd="/")
    assert r.returncode == 2 and "optuna.db is missing" in r.stderr and "without --resume" in r.stderr
    assert "started" not in r.stdout


def test_an_address_with_no_cluster_fails_fast(storage, tracking_uri):
    port = free_port()
    t0 = time.time()
    r = _run([sys.executable, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--address", f"127.0.0.1:{port}",
              "--storage", str(storage), "--tracking-uri", tracking_uri, "--gpus-per-trial", "0"], timeout=120)
    assert r.returncode == 2 and f"--address 127.0.0.1:{port}: no Ray cluster answers there" in r.stderr
    assert "ray start --head" in r.stderr and time.time() - t0 < 60


def _stop_while_a_trial_runs(cmd: list[str], sig: int, after_finished: bool) -> str:
    """Start the study, send `sig` 2 s after a trial starts (after one finished first, if `after_finished`); its
    output, once it exited with 130 and the --resume command, and no traceback."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    seen: list[str] = []
    if after_finished:
        _wait_for(proc, ": finished:", 600, seen)
    _wait_for(proc, ": started", 300, seen)
    time.sleep(2)
    proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=600)
    out = "".join(seen) + rest
    assert proc.returncode == 130, out
    assert "continue with:" in out and "--resume" in out and "Traceback" not in out and "core dumped" not in out
    return out


def test_sigterm_and_ctrl_c_stop_cleanly_and_resume(study_cmd, storage, tracking_uri):
    """Stopped mid-study by SIGTERM, then its --resume stopped by Ctrl-C: each exits 130 with the --resume command,
    tables of what ended, no run left RUNNING; the last --resume finishes the rest without rerunning anything."""
    # trials of ~10-20 s, so that the signal lands while one runs
    cmd = study_cmd("alpha_sweep", *GRID, "--set", "base_epochs=8", "--set", "base_images_per_class=40")
    out = _stop_while_a_trial_runs(cmd, signal.SIGTERM, after_finished=True)  # the second trial is running
    assert "the tables of the 1 trial that ended are in" in out  # one finished, one stopped: counted right
    assert "Tuner.restore" not in out  # Ray Tune's own advice: the study's --resume command is the one to use
    started = json.loads((storage / "alpha_sweep-smoke" / "study.json").read_text())["started"]
    resuming = (f"alpha_sweep: resuming the study in {(storage / 'alpha_sweep-smoke').resolve()} started {started}: "
                "1 of 2 trials ended, 1 to go")
    trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
    assert (trials["state"] == K.COMPLETE).sum() == 1  # the table of what finished is there
    parents, runs = _runs(tracking_uri)
    assert parents[0].info.status == "KILLED" and parents[0].data.metrics["study/trials_complete"] == 1
    assert all(r.info.status != "RUNNING" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    finished = [r.info.run_name for r in runs if r.data.tags["adbs.state"] == K.COMPLETE]
    report = [sys.executable, str(REPO / "studies" / "report.py"), "alpha_sweep", "--smoke", "--tracking-uri", tracking_uri]
    rep = _run(report + ["--out", str(storage / "report")])
    assert rep.returncode == 0 and "this study did not finish (parent run KILLED)" in rep.stdout, rep.stderr
    bogus = _run(report + ["--metric", "bogus_acc"])
    assert bogus.returncode == 2 and "valid metrics: " in bogus.stderr and "test_acc" in bogus.stderr
    assert "Traceback" not in bogus.stderr

    out = _stop_while_a_trial_runs(cmd + ["--resume"], signal.SIGINT, after_finished=False)  # the second, again
    assert f"{finished[0]}: started" not in out and "the tables of the 1 trial that ended are in" in out
    assert resuming in out and "Tuner.restore" not in out, out[-3000:]
    assert ": started | done 1/2, running 1" in out  # the trial that ended before is counted
    parents, runs = _runs(tracking_uri)
    assert all(r.info.status != "RUNNING" for r in [*parents, *runs]), [(r.info.run_name, r.info.status) for r in runs]

    again = _run(cmd + ["--resume"])
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"{finished[0]}: started" not in again.stdout
    assert again.stdout.startswith(resuming), again.stdout[:1000]  # its first line says what it resumes
    trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
    assert len(trials) == 2 and (trials["state"] == K.COMPLETE).all()
    parents, runs = _runs(tracking_uri)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)  # no duplicated run


def test_a_locked_mlflow_store_is_waited_out(study_cmd, storage, tracking_uri):
    """Another process holds the SQLite store for 40 s while trials report (MLflow alone gave up after ~20 s,
    killing the study): the study waits it out and loses nothing."""
    cmd = study_cmd("alpha_sweep", *GRID)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    seen: list[str] = []
    _wait_for(proc, ": started", 600, seen)
    db = sqlite3.connect(tracking_uri[len("sqlite:///"):], timeout=30, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    time.sleep(40)  # twice as long as MLflow alone waits
    db.execute("COMMIT")
    db.close()
    rest, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, "".join(seen) + rest
    _, runs = _runs(tracking_uri)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    client = MlflowClient(tracking_uri)
    for r in runs:
        assert len(client.get_metric_history(r.info.run_id, "session/test_acc")) == 2


def test_a_full_disk_ends_in_a_message_and_resumes(study_cmd, tmp_path, tracking_uri):
    """--storage on a small filesystem that fills up mid-study: a message naming it, no traceback, runs not
    left RUNNING, and --resume finishes once there is space again."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64M", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        cmd = study_cmd("alpha_sweep", *GRID)
        cmd[cmd.index("--storage") + 1] = str(mnt / "runs")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
        seen: list[str] = []
        _wait_for(proc, ": started", 600, seen)
        filler = mnt / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)  # until it is full
        rest, _ = proc.communicate(timeout=600)
        out = "".join(seen) + rest
        assert proc.returncode == 1, out  # failed after it started: not an interruption (130)
        assert "no space left" in out.lower() and "--resume" in out, out[-3000:]
        parents, runs = _runs(tracking_uri)
        assert parents[0].info.status != "RUNNING"
        assert all(r.info.status != "RUNNING" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
        filler.unlink()
        again = _run(cmd + ["--resume"])
        if again.returncode == 2:  # Tune's own state files were truncated by the full disk: said, not a traceback
            assert "does not load, so it cannot be resumed: it is damaged" in again.stderr
            assert "Traceback" not in again.stderr
            return
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        trials = pd.read_parquet(mnt / "runs" / "alpha_sweep-smoke" / "trials.parquet")
        assert len(trials) == 2 and (trials["state"] == K.COMPLETE).all()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_study_saved_by_code_that_since_moved_is_refused_before_ray(study_cmd, storage, capsys):
    """A study interrupted, then its Tune state rewritten as the version before adbs_lab/ became packages saved it
    (adbs_lab.records.objectives -> adbs_lab.objectives, adbs_lab.search.searcher -> adbs_lab.search, pickle-aware:
    tests/helpers/pickles.py): --resume exits 2 in one line before Ray starts, naming the version that started it."""
    from tests.helpers.pickles import flattened, renamed

    cmd = study_cmd("alpha_sweep", *GRID)
    _kill_after_first_trial(cmd)
    tune_dir = storage / "alpha_sweep-smoke" / "tune"
    pickles = [*tune_dir.glob("*.pkl")]
    assert pickles, sorted(p.name for p in tune_dir.iterdir())
    for file in pickles:
        file.write_bytes(renamed(file.read_bytes(), flattened))
    version = json.loads((storage / "alpha_sweep-smoke" / "study.json").read_text())["code_version"]
    r = in_process(capsys, cmd + ["--resume"], cwd="/")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "which this version of the code does not have" in lines[0], r.stderr
    assert f"git checkout {version.removesuffix('-dirty')}" in lines[0] or version == "unknown", lines[0]
    assert "Traceback" not in r.stderr and ": started" not in r.stdout and "Ray" not in r.stdout


def _sessions(path: Path, alpha: float) -> list[float]:
    s = pd.read_parquet(path)
    return s[s["alpha"] == alpha].sort_values("session")["test_acc"].tolist()


def test_replaced_data_or_more_cpus_miss_the_cache_and_a_trial_is_what_adbs_run_gives(study_cmd, storage, tmp_path):
    """The same study on the same storage after the CIFAR-100 pickles were replaced in place, then with
    --cpus-per-trial 2: no trial reuses a base session trained on other data or with other threads, and each
    trial's numbers are exactly those of `python -m adbs.run` with the trial's config (its threads included)."""
    from tests.helpers.datasets import write_synthetic_cifar

    data = write_synthetic_cifar(tmp_path / "data", seed=0)
    flags = ["--smoke", "--grid", "--max-concurrent", "1", "--set", "sessions=1", "--dataset", "cifar100",
             "--data-root", str(data)]
    cmd = study_cmd("alpha_sweep", *flags)
    first = _run(cmd)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    old = _sessions(storage / "alpha_sweep-smoke" / "sessions.parquet", 0.01)
    write_synthetic_cifar(data, seed=1)  # other images under the same names and sizes

    def single(*extra: str) -> list[float]:
        out = tmp_path / f"run{len(extra)}.json"
        r = _run([sys.executable, "-m", "adbs.run", "--preset", "smoke", "--dataset", "cifar100", "--data-root",
                  str(data), "--sessions", "1", "--variant", "adb+ic", "--alpha", "0.01", "--out", str(out), *extra],
                 env={**os.environ, "PYTHONPATH": str(REPO)})
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return [row["test_acc"] for row in json.loads(out.read_text())["sessions"]]

    for run, extra, threads in ((2, [], 1), (3, ["--cpus-per-trial", "2"], 2)):
        r = _run(cmd + extra)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
        assert (trials["base_reused"] == 0).all(), f"run {run}: a base session of other data or threads was reused"
        assert (trials["threads"] == threads).all()
        got = _sessions(storage / "alpha_sweep-smoke" / "sessions.parquet", 0.01)
        assert got == single(*(["--threads", str(threads)] if threads != 1 else [])), f"run {run}"
        assert got != old


def test_resume_keeps_the_stores_pruner_sampler_and_data_of_the_study(study_cmd, storage, tmp_path, capsys):
    """--resume with another --tracking-uri, --pruner or --sampler-seed: one line before Ray, and nothing written
    into the other store; with the data root typed with a trailing '/' it is the same study and continues, saying
    which of its settings (--max-concurrent, --max-failures) it keeps from the first run."""
    from tests.helpers.datasets import write_synthetic_cifar

    data = write_synthetic_cifar(tmp_path / "data")
    cmd = study_cmd("alpha_sweep", *GRID, "--dataset", "cifar100", "--data-root", str(data))
    _kill_after_first_trial(cmd)
    resume = [*cmd[:cmd.index(str(data))], f"{data}/", *cmd[cmd.index(str(data)) + 1:], "--resume"]
    other = tmp_path / "other" / "mlflow.db"
    at = resume.index("--tracking-uri") + 1
    moved = [*resume[:at], f"sqlite:///{other}", *resume[at + 1:]]
    for argv, msg in ((moved, f"the MLflow store sqlite:///{other} holds no run"),
                      (resume + ["--pruner", "hyperband"],
                       "--pruner hyperband differs from the study's --pruner none"),
                      (resume + ["--sampler-seed", "3"],
                       "--sampler-seed 3 differs from the study's --sampler-seed 0"),
                      (resume + ["--cpus-per-trial", "2"],
                       "--cpus-per-trial 2 differs from the study's --cpus-per-trial (not given)"),
                      (resume + ["--optuna-storage", f"sqlite:///{tmp_path / 'other.db'}"], "holds no study")):
        r = in_process(capsys, argv, cwd="/")  # refused before Ray: in this process (the --resume below is one)
        assert r.returncode == 2 and msg in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
        assert "Traceback" not in r.stderr and ": started" not in r.stdout
    if other.exists():  # the other store got no experiment of this study
        assert MlflowClient(f"sqlite:///{other}").get_experiment_by_name("alpha_sweep-smoke") is None
    # a --shadow-share: refused, as on a new run, since this study (--pruner none) stops no trial to run on
    r = in_process(capsys, resume + ["--shadow-share", "0.5", "--dry-run"], cwd="/")
    assert r.returncode == 2 and "this run prunes no trial" in r.stderr, r.stderr[-2000:]
    # settings a resumed study keeps from its first run: said, and ignored
    at = resume.index("--max-concurrent")
    again = _run([*resume[:at], *resume[at + 2:], "--max-concurrent", "2", "--max-failures", "3"])
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "--max-failures 3 is ignored on --resume" in again.stdout
    assert "--max-concurrent 2 is ignored on --resume" in again.stdout and "1 at a time" in again.stdout
    trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
    assert len(trials) == 2 and (trials["state"] == K.COMPLETE).all()
