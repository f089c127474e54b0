"""How a study run ends, told by its exit code (adbs_lab/driver/outcome.py), and the one preflight that --dry-run and the
run share (adbs_lab/driver/preflight.py): what one refuses the other refuses, with the same message and code, and a
refused run leaves every store as it found it."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from adbs_lab.records import metrics_keys as K
from adbs import exits
from adbs_lab.driver import outcome
from adbs_lab.stores.paths import REPO_ROOT
from adbs_lab.records.trial_records import classify
from tests.helpers.scripts import in_process

PY = sys.executable


# -- the exit code from the trials' states -----------------------------------------------------------------------


@pytest.mark.parametrize("counts,unfinished,code", [
    ({K.COMPLETE: 3}, 0, exits.OK),
    ({K.COMPLETE: 1, K.PRUNED: 2}, 0, exits.OK),
    ({K.COMPLETE: 2, K.DIVERGED: 1}, 0, exits.OK),  # a NaN loss is an outcome of the search, not an error
    ({K.COMPLETE: 2, K.FAILED: 1}, 0, exits.FAILED),  # a trial raised
    ({K.PRUNED: 2, K.DIVERGED: 1}, 0, exits.FAILED),  # no trial completed
    ({}, 0, exits.FAILED),
    ({K.COMPLETE: 2}, 1, exits.FAILED),  # a trial never ended, and nobody stopped the study
])
def test_study_code(counts, unfinished, code):
    assert outcome.study_code(counts, unfinished=unfinished) == code


def test_why_failed_names_the_cause():
    assert outcome.why_failed({K.COMPLETE: 2, K.FAILED: 1}) == "1 trial raised an error"
    assert outcome.why_failed({K.PRUNED: 3}) == "no trial completed"


def test_worst_code_of_several_parts():
    assert outcome.worst([]) == exits.OK
    assert outcome.worst([0, 2, 0]) == 2
    assert outcome.worst([2, 1]) == 1  # a part that failed after it started outweighs one refused at its checks
    assert outcome.worst([1, 130, 2]) == 130


def test_a_nan_loss_is_diverged_and_an_exception_failed():
    nan = {K.REPORT_KIND: K.KIND_FAILED, K.ERROR: "base training loss became NaN/inf"}
    assert classify(nan) == K.DIVERGED and classify(nan, pruned=True) == K.DIVERGED
    assert classify(nan, error=True) == K.FAILED


def test_error_line_is_the_line_naming_the_error():
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: expected non-negative\n'
    assert outcome.error_line(tb) == "ValueError: expected non-negative"
    assert outcome.error_line(None) == "an error without a message"


# -- one preflight: the dry run refuses what the run refuses ----------------------------------------------------


def _optuna_db(path: Path, study: str) -> str:
    import optuna

    url = f"sqlite:///{path}"
    optuna.create_study(study_name=study, storage=url)
    return url


def _case(name: str, tmp: Path):
    """(script, flags) of a refusal; the set-up it needs is made here."""
    store = ["--storage", str(tmp / "runs"), "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}"]
    sweep = [str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--seeds", "0"]
    if name == "unreachable tracking server":
        return sweep + ["--storage", str(tmp / "runs"), "--tracking-uri", "http://127.0.0.1:1"], "unreachable"
    if name == "an Optuna database as the MLflow store":
        _optuna_db(tmp / "o.db", "other")
        return sweep + ["--storage", str(tmp / "runs"), "--tracking-uri", f"sqlite:///{tmp / 'o.db'}"], \
            "is an Optuna database, not an MLflow tracking store"
    if name == "--resume with nothing to resume":
        return sweep + store + ["--resume"], "no interrupted study to continue"
    if name == "an Optuna storage that holds the study":
        url = _optuna_db(tmp / "o.db", "alpha_sweep-smoke")  # a --smoke run's Optuna study
        return sweep + store + ["--optuna-storage", url], "already holds a study named 'alpha_sweep-smoke'"
    if name == "storage under a file":
        (tmp / "a-file").write_text("x")
        return sweep + ["--storage", str(tmp / "a-file" / "runs"), "--tracking-uri",
                        f"sqlite:///{tmp / 'mlflow.db'}"], "is a file, not a folder"
    if name == "another host's preset in the hosts study":
        return [str(REPO_ROOT / "studies" / "hosts.py"), "--preset", "alice_cpu", "--hosts", "baseline", "--seeds",
                "0", *store], "--preset alice_cpu is host alice's preset"
    if name == "another host's preset with --smoke":  # was refused with advice about a --host nobody typed
        return [str(REPO_ROOT / "studies" / "hosts.py"), "--smoke", "--preset", "orco_cpu", "--hosts", "savc",
                *store], "--preset orco_cpu is host orco's preset"
    raise KeyError(name)


REFUSALS = ["another host's preset with --smoke", "unreachable tracking server", "an Optuna database as the MLflow store",
            "--resume with nothing to resume",
            "an Optuna storage that holds the study", "storage under a file", "another host's preset in the hosts study"]


def _error_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "error:" in ln]


@pytest.mark.parametrize("name", REFUSALS)
def test_the_dry_run_refuses_what_the_run_refuses(name, tmp_path, capsys):
    argv, fragment = _case(name, tmp_path)
    dry = in_process(capsys, [PY, *argv, "--dry-run"])
    real = in_process(capsys, [PY, *argv])
    assert dry.returncode == real.returncode == 2, (dry.stderr, real.stderr)
    assert fragment in dry.stderr and "dry run:" not in dry.stdout
    assert _error_lines(dry.stderr) == _error_lines(real.stderr) != []
    assert not (tmp_path / "runs").exists()  # nothing created


def test_a_running_copy_is_refused_by_the_dry_run_and_the_run(tmp_path, capsys):
    from adbs_lab.stores.study_folder import StudyFolder

    argv, _ = _case("--resume with nothing to resume", tmp_path)
    argv = [a for a in argv if a != "--resume"]
    lock = StudyFolder(str(tmp_path / "runs"), "alpha_sweep-smoke").lock("studies/alpha_sweep.py (another copy)")
    try:
        dry = in_process(capsys, [PY, *argv, "--dry-run"])
        real = in_process(capsys, [PY, *argv])
    finally:
        lock.release()
    assert dry.returncode == real.returncode == 2
    assert "is already running" in dry.stderr and "(another copy)" in dry.stderr
    assert _error_lines(dry.stderr) == _error_lines(real.stderr)
    assert in_process(capsys, [PY, *argv, "--dry-run"]).returncode == 0  # released: the study may start


def test_a_dry_run_writes_nothing(tmp_path, capsys):
    argv, _ = _case("--resume with nothing to resume", tmp_path)
    argv = [a for a in argv if a != "--resume"]
    r = in_process(capsys, [PY, *argv, "--dry-run"])
    assert r.returncode == 0 and "dry run: study alpha_sweep" in r.stdout
    assert list(tmp_path.iterdir()) == []  # no storage folder, no MLflow store


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_refused_run_leaves_every_store_as_it_found_it(tmp_path, capsys):
    """An earlier study's folder, the base-session cache, the MLflow store and the Optuna database: a run refused
    at the preflight (here: the Optuna storage already holds the study) moves, creates and changes nothing."""
    from mlflow.tracking import MlflowClient

    runs = tmp_path / "runs"
    (runs / "alpha_sweep-smoke").mkdir(parents=True)
    (runs / "alpha_sweep-smoke" / "study.json").write_text(json.dumps({"study": "alpha_sweep", "fingerprint": "x"}))
    (runs / "alpha_sweep-smoke" / "table.txt").write_text("the earlier results\n")
    (runs / "base_cache").mkdir()
    (runs / "base_cache" / "entry.pt").write_bytes(b"\0" * 64)
    MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").create_experiment("alpha_sweep-smoke")
    url = _optuna_db(tmp_path / "o.db", "alpha_sweep-smoke")
    before = _snapshot(tmp_path)
    argv = [str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--seeds", "0", "--storage", str(runs),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--optuna-storage", url]
    for extra in (["--dry-run"], []):
        r = in_process(capsys, [PY, *argv, *extra])
        assert r.returncode == 2 and "already holds a study named 'alpha_sweep-smoke'" in r.stderr
        assert "moving it to" not in r.stdout
        assert _snapshot(tmp_path) == before


# -- a study whose trial raises: exit 1, the others' tables written, --resume runs it again ---------------------


@pytest.mark.slow
def test_a_failed_trial_exits_1_with_the_others_tables_and_resume_reruns_only_it(tmp_path, tracking_uri):
    import subprocess

    import pandas as pd
    from mlflow.tracking import MlflowClient

    uri = tracking_uri  # an empty store whose tables exist (conftest.py: empty_mlflow_db), not seconds of migrations
    cmd = [PY, str(REPO_ROOT / "studies" / "ablation.py"), "--smoke", "--seeds", "0", "--storage",
           str(tmp_path / "runs"), "--tracking-uri", uri, "--max-failures", "0"]
    env = {**__import__("os").environ, "ADBS_FAULT_INJECTION": json.dumps({"raise_if": {"variant": "adb"}})}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT, env=env)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stdout + r.stderr  # tracebacks go to error.txt and MLflow, not the terminal
    assert "error: ablation failed: 1 trial raised an error" in r.stderr
    assert "  adb seed=0: RuntimeError: injected error at base epoch 1" in r.stderr
    assert "--resume" in r.stderr
    trials = pd.read_parquet(tmp_path / "runs" / "ablation-smoke" / "trials.parquet").set_index("variant")
    assert trials.loc["adb", "state"] == K.FAILED and (trials.drop("adb")["state"] == K.COMPLETE).all()
    assert (tmp_path / "runs" / "ablation-smoke" / "report.md").exists()  # tables, figures and report of what ended
    client = MlflowClient(uri)
    parent = json.loads((tmp_path / "runs" / "ablation-smoke" / "mlflow_runs.json").read_text())["parent"]
    assert client.get_run(parent).info.status == "FAILED"
    failed = client.get_run(json.loads((tmp_path / "runs" / "ablation-smoke" / "mlflow_runs.json").read_text())
                            ["trials"][trials.loc["adb", "trial_id"]])
    assert "RuntimeError: injected error" in failed.data.tags["adbs.error"]

    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count(": started |") == 1  # only the failed trial ran again
    trials = pd.read_parquet(tmp_path / "runs" / "ablation-smoke" / "trials.parquet")
    assert (trials["state"] == K.COMPLETE).all() and len(trials) == 3
    assert client.get_run(parent).info.status == "FINISHED"


@pytest.mark.parametrize("flags,fragment", [
    (["--sampler-seed", "4294967296"], "--sampler-seed 4294967296 is out of range; allowed: 0..4294967295"),
    (["--sampler-seed", "-1"], "--sampler-seed -1 is out of range"),
    (["--cpus-per-trial", "1e23"], "--cpus-per-trial 1e+23 is out of range"),
])
def test_study_flags_out_of_what_optuna_or_torch_take_are_refused_by_the_dry_run(flags, fragment, tmp_path, capsys):
    argv = [str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--storage", str(tmp_path / "runs"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", *flags, "--dry-run"]
    r = in_process(capsys, [PY, *argv])
    assert r.returncode == 2 and fragment in r.stderr, r.stderr


@pytest.mark.parametrize("damaged", ["{not json", "[1, 2]"])
def test_a_damaged_study_record_is_named_not_a_traceback(damaged, tmp_path, capsys):
    """study.json is what --resume compares; damaged (a full disk, a hand edit), it is named in one line."""
    folder = tmp_path / "runs" / "alpha_sweep-smoke"
    folder.mkdir(parents=True)
    (folder / "study.json").write_text(damaged)
    argv = [str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--seeds", "0", "--storage",
            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--resume", "--dry-run"]
    r = in_process(capsys, [PY, *argv])
    assert r.returncode == 2 and f"{folder / 'study.json'} is damaged" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
