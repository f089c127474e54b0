"""A rerun without --name moves the earlier study aside, and its line says first what is moved, where, and why
(adbs_lab/driver/claim.py); no Ray here."""

from __future__ import annotations

import json

from adbs_lab.stores import tracking_store
from adbs_lab.driver.claim import held_study
from adbs_lab.stores.study_folder import StudyFolder


def _folder(tmp_path, ident: dict | None, runs: dict | None) -> StudyFolder:
    d = tmp_path / "alpha_sweep"
    d.mkdir(parents=True)
    if ident is not None:
        (d / "study.json").write_text(json.dumps(ident))
    if runs is not None:
        (d / tracking_store.RUNS_FILE).write_text(json.dumps(runs))
    (d / "table.txt").write_text("TABLE")
    return StudyFolder(str(tmp_path), "alpha_sweep")


def _runs(started: int, ended: int) -> dict:
    """The runs file as the tracker writes it (adbs_lab/driver/tracker.py): trial id -> run id, trial id -> state."""
    return {"parent": "p", "trials": {f"t{i}": f"r{i}" for i in range(started)},
            "ended": {f"t{i}": "COMPLETE" for i in range(ended)}}


def test_the_line_names_a_finished_or_unfinished_study_its_trials_date_and_command(tmp_path):
    ident = {"study": "alpha_sweep", "command": "studies/alpha_sweep.py --shots 3", "trials": 12,
             "started": "2026-11-28 10:02"}
    finished = _folder(tmp_path / "a", ident, _runs(12, 12))
    assert held_study(finished) == ("a finished study (12 trials; started 2026-11-28 10:02; "
                                    "`studies/alpha_sweep.py --shots 3`)")
    unfinished = _folder(tmp_path / "b", ident, _runs(5, 4))
    assert held_study(unfinished).startswith("an unfinished study (4 of 12 trials ended; ")
    older = _folder(tmp_path / "c", {"study": "alpha_sweep", "command": "x.py"}, _runs(3, 3))
    assert held_study(older) == "a study (3 trials; `x.py`)"  # a study.json from before it recorded its trials
    assert held_study(_folder(tmp_path / "d", None, None)) == "earlier results"


def test_the_move_goes_where_the_line_said(tmp_path):
    where = _folder(tmp_path, {"study": "alpha_sweep"}, None)
    stamp = where.aside_stamp()
    said = where.aside(stamp)
    assert where.move_aside(stamp) == said and (tmp_path / f"alpha_sweep.{stamp}" / "table.txt").is_file()


def test_the_line_says_why_before_anything_moves_and_the_dry_run_says_it_as_what_a_run_would_do(tmp_path):
    """Another study's folder (another fingerprint: other settings) and the same study left unfinished each get their
    reason; with no stamp (the dry run) the line says what a run would do, and nothing moves."""
    from types import SimpleNamespace

    from adbs_lab.driver.claim import aside_line

    ident = {"study": "alpha_sweep", "command": "studies/alpha_sweep.py", "trials": 12, "fingerprint": "f1"}
    where = _folder(tmp_path, ident, {"trials": {"t0": "r0"}, "ended": {}})  # no parent run yet: unfinished
    other = SimpleNamespace(where=where, fingerprint="f2", tracking_uri=f"sqlite:///{tmp_path / 'none.db'}")
    line = aside_line(other, "20261129-080000")
    assert line.startswith(f"{where} holds an unfinished study (0 of 12 trials ended; `studies/alpha_sweep.py`): "
                           f"moving it to {where.aside('20261129-080000')}, since this run starts another study in "
                           "that folder (other settings than its own); pass --name NAME"), line
    same = SimpleNamespace(where=where, fingerprint="f1", tracking_uri=other.tracking_uri)
    dry = aside_line(same)  # no Ray Tune state: claimed, then stopped before its first trial; --resume cannot
    assert ": a run of this command would move it to " in dry and "alpha_sweep.<date-time>" in dry
    assert ("since it stopped before its first trial, with nothing saved to continue: this run starts it again; "
            "pass --name NAME") in dry, dry
    (tmp_path / "alpha_sweep" / "tune").mkdir()
    (tmp_path / "alpha_sweep" / "tune" / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    assert "since this run starts it again from scratch; --resume continues it instead" in aside_line(same)
    assert (tmp_path / "alpha_sweep" / "table.txt").is_file()  # nothing moved
