"""Files a study writes beside its folder in a storage others may write to (`<study>.lock`, `<study>.lock.json`)
are never written through a symbolic link (adbs/writable.py: write_no_follow, link_problem): a link there is
refused with a clear error (exit 2, before anything is written), and one made after the check is replaced, its
target never touched."""

from __future__ import annotations

import json
import sys

import pytest

from adbs import writable
from adbs_lab.stores.paths import REPO_ROOT
from adbs_lab.stores.study_folder import StudyBusy, StudyFolder, StudyLock


@pytest.fixture
def target(tmp_path):
    t = tmp_path / "someone_elses_file"
    t.write_text("precious")
    return t


def test_write_no_follow_replaces_a_link_and_leaves_its_target(tmp_path, target):
    link = tmp_path / "x.json"
    link.symlink_to(target)
    writable.write_no_follow(link, b"{}")
    assert target.read_text() == "precious" and not link.is_symlink() and link.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("name", ["s.lock.json", "s.lock"])
def test_a_linked_lock_file_is_refused_with_what_to_do(tmp_path, target, name):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / name).symlink_to(target)
    where = StudyFolder(str(tmp_path / "runs"), "s")
    msg = where.running()  # the preflight's probe: a refusal, exit 2 before anything is written
    assert msg is not None and "is a symbolic link" in msg and f"rm {tmp_path / 'runs' / name}" in msg
    with pytest.raises(StudyBusy, match="is a symbolic link"):  # before: the target overwritten, or raw ELOOP
        StudyLock(where, "cmd")
    assert target.read_text() == "precious"


def test_a_holder_link_made_after_the_check_is_not_written_through(tmp_path, target):
    (tmp_path / "runs").mkdir()
    lock = StudyLock(StudyFolder(str(tmp_path / "runs"), "s"), "cmd")
    try:
        holder = tmp_path / "runs" / "s.lock.json"
        holder.unlink()
        holder.symlink_to(target)  # made while the study runs: its next write replaces the link
        lock._write_holder()
        assert target.read_text() == "precious" and json.loads(holder.read_text())["command"] == "cmd"
    finally:
        lock.release()


def test_a_study_refuses_a_linked_lock_with_exit_2(tmp_path, target, capsys):
    from tests.helpers.scripts import in_process

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "alpha_sweep-smoke.lock").symlink_to(target)  # a --smoke run's lock
    r = in_process(capsys, [sys.executable, str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--storage",
                            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])
    assert r.returncode == 2 and "error: the study's lock file" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert target.read_text() == "precious" and not (tmp_path / "runs" / "alpha_sweep-smoke").exists()


@pytest.mark.parametrize("dangling", [False, True])
def test_a_linked_study_folder_is_refused(tmp_path, dangling):
    """The study folder itself a link (to an empty folder elsewhere, or to none): before, study.json, optuna.db and
    Ray's files went into the link's target (or the run stopped on a raw FileExistsError)."""
    elsewhere = tmp_path / "elsewhere"
    if not dangling:
        elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "s").symlink_to(elsewhere, target_is_directory=True)
    where = StudyFolder(str(tmp_path / "runs"), "s")
    msg = where.running()
    assert msg is not None and "the study's folder" in msg and f"rm {tmp_path / 'runs' / 's'}" in msg, msg
    with pytest.raises(StudyBusy, match="the study's folder .* is a symbolic link"):
        StudyLock(where, "cmd")
    assert dangling or list(elsewhere.iterdir()) == []


def test_a_study_refuses_a_linked_base_cache_with_exit_2(tmp_path, capsys):
    """<storage>/base_cache a link: before, every base session of the study was written into the link's target."""
    from tests.helpers.scripts import in_process

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "base_cache").symlink_to(elsewhere, target_is_directory=True)
    argv = [sys.executable, str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke", "--storage",
            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--dry-run"]
    r = in_process(capsys, argv)
    assert r.returncode == 2 and "error: the storage's base-session cache folder" in r.stderr, r.stderr
    assert f"rm {tmp_path / 'runs' / 'base_cache'}" in r.stderr and list(elsewhere.iterdir()) == []
    assert in_process(capsys, [*argv, "--no-cache"]).returncode == 0  # a run that never writes the cache
