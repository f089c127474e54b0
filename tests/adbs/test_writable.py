"""Writable paths have one check (in adbs/writable.py) for `python -m adbs.run --out`, a study's storage and stores and the
tools' --out folders judge a path that does not exist yet by the folder it would be made in, by trying (os.access
says yes to root even where nothing can be made), and write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from adbs import writable

NOWHERE = Path("/proc/adbs-no-such-folder/sub")  # exists as far as /proc, where nothing can be made, even by root


def test_a_run_refuses_an_out_nothing_can_be_made_in(tmp_path, capsys):
    from tests.helpers.scripts import in_process

    out = NOWHERE / "o.json"
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--dry-run", "--out", str(out)],
                   cwd=tmp_path)
    assert r.returncode == 2 and f"the folder of --out {out} cannot be created in /proc" in r.stderr, r.stderr


def test_the_tools_out_folder_is_tried_too():
    assert f"--out {NOWHERE} cannot be created in /proc" in writable.out_dir_problem(NOWHERE)


@pytest.mark.parametrize("make", ["file", "folder", "nothing"])
def test_one_answer_and_nothing_written(tmp_path, make):
    if make == "file":
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "sub"
    elif make == "folder":
        target = tmp_path / "new" / "sub"
    else:
        target = tmp_path
    before = sorted(tmp_path.rglob("*"))
    problem = writable.folder_problem(target, "--storage", create=False)
    assert (problem is None) == (make != "file") and sorted(tmp_path.rglob("*")) == before
    if make == "file":
        assert "is a file, not a folder" in problem
    assert writable.out_file_problem(tmp_path).startswith(f"--out {tmp_path} is a folder")
