"""One study per name, every refusal before the claim, --resume to the stores the user names now
(adbs_lab/driver/claim.py, run.py): two runs of one name on one Optuna storage get one owner, the other refused
before it moves or writes anything; a cluster that is not there is refused before earlier results move; a resumed
tracker logs to this command's MLflow store. Real Optuna SQLite storages in tmp_path; no Ray (a refused --address
ends before Ray starts)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest

from adbs.exits import Exit
from testing.procs import free_port
from tests.helpers.scripts import in_process

from adbs_lab import study
from adbs_lab.driver import options
from adbs_lab.search import optuna_storage as search
from adbs_lab.driver import tracker
from adbs_lab.stores import paths
from adbs_lab.driver import claim
from adbs_lab.stores.paths import REPO_ROOT

PY = sys.executable
SWEEP = str(REPO_ROOT / "studies" / "alpha_sweep.py")
PLAN = study.Plan(name="t", space={"variant": "adb+ic", "shots": [1, 5]}, space_source="tests")


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _earlier(storage: Path, folder: str) -> dict[str, str]:
    """An earlier study's results in `storage`/`folder`, which a refused run must leave where they are."""
    (storage / folder).mkdir(parents=True)
    (storage / folder / "table.txt").write_text("the earlier results\n")
    return _files(storage)


def test_two_runs_of_one_name_on_one_optuna_storage_one_owns_it_the_other_moves_nothing(tmp_path, capsys):
    """Both pass the preflight (the name is free when each looks), as two runs started together do; the first to
    claim creates the Optuna study, the second is refused, exit 2, with its earlier results where they were and
    no study.json written."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"

    def prepared(storage: Path):
        opts = options.parse("t", argv=["--storage", str(storage), "--optuna-storage", url, "--gpus-per-trial", "0",
                                        "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])[0]
        return study.preflight(PLAN, opts)

    first, second = prepared(tmp_path / "a"), prepared(tmp_path / "b")
    before = _earlier(tmp_path / "b", "t")
    claim.claim(first)
    assert json.loads((tmp_path / "a" / "t" / "study.json").read_text())["study"] == "t"
    with pytest.raises(Exit) as e:
        claim.claim(second)
    err, message = capsys.readouterr(), e.value.message or ""  # the message: printed by the command's main
    assert e.value.code == 2 and "already holds a study named 't'" in message and "--name NAME" in message
    assert "moved to" not in err.out and _files(tmp_path / "b") == before
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["t"]


@pytest.mark.slow
def test_the_optuna_study_is_created_once_whoever_asks_at_the_same_time(tmp_path):
    """Two processes create one name on one new SQLite storage at the same moment: exactly one does, the other
    is told the name is taken (neither loads the other's study as its own)."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    go = time.time() + 6  # every process has imported Optuna by then
    code = textwrap.dedent(f"""
        import time
        from adbs_lab.search import optuna_storage as search
        search.optuna_storage({url!r})
        time.sleep(max(0.0, {go} - time.time()))
        try:
            search.create_study({url!r}, "s")
            print("created")
        except search.StudyNameTaken:
            print("taken")
        """)
    procs = [subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=REPO_ROOT) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    said = sorted(out.strip() for out, _ in outs)
    assert said == ["created", "taken"], outs
    with pytest.raises(search.StudyNameTaken):
        search.create_study(url, "s")


def test_a_study_only_in_the_optuna_storage_is_not_advised_to_resume(tmp_path, capsys):
    """The storage holds the name but --storage holds no run of it: --resume would be refused, so the advice is
    another --name or deleting that study (with the command that does)."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    optuna.create_study(study_name="alpha_sweep-smoke", storage=url)  # a --smoke run's name (adbs_lab/stores/paths.py)
    argv = [SWEEP, "--smoke", "--seeds", "0", "--storage", str(tmp_path / "runs"), "--tracking-uri",
            f"sqlite:///{tmp_path / 'm.db'}", "--optuna-storage", url, "--dry-run"]
    r = in_process(capsys, [PY, *argv])
    assert r.returncode == 2 and "already holds a study named 'alpha_sweep-smoke'" in r.stderr
    assert "--resume" not in r.stderr and "--name NAME" in r.stderr
    assert "optuna delete-study --study-name alpha_sweep-smoke" in r.stderr
    r = in_process(capsys, [PY, *argv, "--resume"])  # what the old advice said: refused
    assert r.returncode == 2


def test_no_cluster_at_address_is_refused_before_earlier_results_move_or_a_store_is_made(tmp_path, capsys):
    storage = tmp_path / "runs"
    before = _earlier(storage, "alpha_sweep-smoke")
    port = free_port()
    r = in_process(capsys, [PY, SWEEP, "--smoke", "--seeds", "0", "--address", f"127.0.0.1:{port}", "--storage",
                            str(storage), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--gpus-per-trial", "0"])
    assert r.returncode == 2 and f"--address 127.0.0.1:{port}: no Ray cluster answers there" in r.stderr
    assert "moved to" not in r.stdout
    assert {k: v for k, v in _files(storage).items() if ".lock" not in k} == before  # the lock: the run's own
    assert not (tmp_path / "m.db").exists()


def test_a_resumed_tracker_logs_to_the_store_this_command_names(tmp_path):
    """Ray Tune unpickles the tracker the study started with; --resume with another --tracking-uri (a copied store,
    a moved server) must log there, not to the URI in the pickle: `claim` binds this command's stores."""
    import dataclasses

    opts = options.parse("t", argv=["--storage", str(tmp_path / "runs"), "--gpus-per-trial", "0",
                                    "--tracking-uri", f"sqlite:///{tmp_path / 'old.db'}"])[0]
    p = study.preflight(PLAN, opts)
    saved_tracker = tracker.MlflowTracker.__new__(tracker.MlflowTracker)  # as Tune's pickle holds it (no store opened)
    saved_tracker.__dict__.update(uri=p.tracking_uri, folder=p.folder, study_dir=p.dir, _client=None)
    saved = pickle.dumps(saved_tracker)
    copied = f"sqlite:///{tmp_path / 'copy.db'}"
    resumed = dataclasses.replace(p, run=dataclasses.replace(p.run, resume=True), tracking_uri=copied)
    claim.claim(resumed)  # --resume: binds this command's stores, then Tuner.restore unpickles the tracker
    assert pickle.loads(saved).uri == copied


def test_a_database_stores_artifacts_under_the_storage_never_the_working_folder(tmp_path):
    root = paths.artifact_root("postgresql://u:p@db.example/mlflow", str(tmp_path / "runs"))
    assert root == (tmp_path / "runs" / "mlflow_artifacts").as_uri()
    assert paths.artifact_root("mysql://u:p@db/m", "s3://bucket/runs").startswith("file:///")
    assert paths.artifact_root("postgresql+psycopg://u@db/m") is not None  # never MLflow's ./mlruns
    assert paths.artifact_root("http://mlflow.example:5000") is None  # the server decides
