"""A study script of the user's own names its Plan: the name is checked as --name is (one folder name under
--storage, refused before anything is written, by the dry run as by the run), and a name of a study in studies/
is said to share that study's folder and MLflow experiment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.scripts import in_process

SCRIPT = '''
from adbs_lab import study
from adbs_lab.driver import options

opts, _ = options.parse("a user's own study")
study.main(study.Plan(name={name!r}, space={{"variant": "adb+ic", "alpha": [0.01, 0.05]}}, space_source="mine.py"),
           opts)
'''


def _own_study(capsys, tmp_path, name: str, *flags: str):
    """The user's own study script (outside studies/), run as they would: `python mine.py --smoke --dry-run`."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = work / "mine.py"
    script.write_text(SCRIPT.format(name=name))
    return in_process(capsys, [sys.executable, str(script), "--smoke", "--dry-run", "--gpus-per-trial", "0",
                               "--storage", str(work / "runs"), "--tracking-uri",
                               f"sqlite:///{tmp_path / 'mlflow.db'}", *flags])


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "/tmp/elsewhere", "x" * 101, "with space", ""])
def test_a_plan_name_that_is_not_one_folder_name_is_refused_before_anything(capsys, tmp_path, name):
    """Plan(name="../escape") put the study's folder beside --storage (<storage>/../escape), and its dry run said all
    was well; it is refused as --name is, exit 2, the plan's name shown, nothing written anywhere."""
    r = _own_study(capsys, tmp_path, name)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Plan(name=" in r.stderr and "dry run:" not in r.stdout, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["mine.py"]


@pytest.mark.parametrize("name, flags, shares_folder", [("ablation", (), True), ("alpha_sweep", (), True),
                                                         ("kshot_grid", ("--name", "mine"), False)])
def test_a_plan_named_as_a_study_of_the_repository_says_what_it_shares(capsys, tmp_path, name, flags, shares_folder):
    """A user's Plan(name="ablation") shared studies/ablation.py's folder and MLflow experiment without a word; the
    dry run (and the run) says so in one line, before anything is claimed."""
    r = _own_study(capsys, tmp_path, name, *flags)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.startswith("warning: ") and "Plan(name=" in line]
    assert len(warned) == 1, r.stderr
    assert f"studies/{name}.py" in warned[0] and f"the MLflow experiment {name + '-smoke'!r}" in warned[0]  # --smoke
    assert ("the folder" in warned[0]) == shares_folder, warned[0]


def test_a_plan_of_its_own_name_and_the_studies_themselves_say_nothing_of_it(capsys, tmp_path):
    r = _own_study(capsys, tmp_path, "my_sweep")
    assert r.returncode == 0 and "Plan(name=" not in r.stderr, r.stderr
    repo = Path(__file__).resolve().parents[3]
    r = in_process(capsys, [sys.executable, str(repo / "studies" / "ablation.py"), "--smoke", "--dry-run",
                            "--gpus-per-trial", "0", "--storage", str(tmp_path / "runs"), "--tracking-uri",
                            f"sqlite:///{tmp_path / 'mlflow.db'}"])
    assert r.returncode == 0 and "Plan(name=" not in r.stderr, r.stderr


@pytest.mark.parametrize("name, flags, why", [
    ("base_cache", (), "the base-session cache"),  # every study of the storage reads and writes it
    ("mlflow_artifacts", (), "the MLflow artifacts"),  # every study's runs' files, with a database server as store
    ("ablation.lock", (), "lock"),  # studies/ablation.py's lock file
    ("mine.lock.json", (), "lock"),  # the lock-holder file of a study named mine
    ("mine", ("--name", "x.lock"), "lock"),  # mine-x.lock: the lock file of `--name x`
])
def test_a_study_folder_named_as_what_the_storage_shares_is_refused(capsys, tmp_path, name, flags, why):
    """Plan(name="base_cache") made the storage's shared base-session cache its study folder: the dry run said
    that "earlier results" there would be moved aside (every study's cached base sessions, and, for
    "mlflow_artifacts", every earlier run's files), and a run moved them. A folder named as a study's lock file
    ("ablation.lock") takes the lock of that study. Refused as a name out of --storage is, nothing moved."""
    runs = tmp_path / "work" / "runs"
    for shared in ("base_cache", "mlflow_artifacts"):
        (runs / shared / "k").mkdir(parents=True)
        (runs / shared / "k" / "entry").write_text("kept")
    r = _own_study(capsys, tmp_path, name, *flags)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "dry run:" not in r.stdout and why in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["base_cache", "mlflow_artifacts"]
    assert all((runs / s / "k" / "entry").read_text() == "kept" for s in ("base_cache", "mlflow_artifacts"))
