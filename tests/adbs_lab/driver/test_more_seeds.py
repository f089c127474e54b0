"""--more-seeds refuses what it cannot continue before anything starts, and takes a paused study to its next pause
(adbs_lab/driver/more_seeds.py); the stub standings are the seed policy's own replay of trials that ended."""

from __future__ import annotations

import dataclasses
import json

import pytest

from adbs_lab.driver import more_seeds, options, preflight
from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.prepared import RunSettings, more_seeds_command
from adbs_lab.records import metrics_keys as K
from adbs_lab.search.seeds.policy import Ended
from studies import ablation

OPEN = [1.0 + x for x in (2.1, -1.7, 0.4, -2.6, 1.9, -0.8, 2.4, -1.2, 1.5, -2.2, 0.9, -1.4, 2.6, -0.3, -1.9, 0.3)]
"""Per-seed differences (mean about 1, SD about 1.8): open at every look of the design up to its horizon."""


def _prepared(tmp_path, *flags: str, pause: int | None = None):
    opts, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--storage", str(tmp_path), *flags])
    p = preflight.study(*ablation.plan(opts))
    p.where.local.mkdir(parents=True, exist_ok=True)
    record = {"fingerprint": p.fingerprint, **({more_seeds.PAUSE_KEY: pause} if pause is not None else {})}
    (p.where.local / "study.json").write_text(json.dumps(record))
    return more_seeds.resumed(p)


def _standing(diffs, seeds: int, resolved_too: bool = False):
    """The standing of trials where every row ran `seeds` seeds: adb - baseline = diffs, adb+ic - baseline = +10."""
    def of(p):
        rows = {"baseline": [50.0] * seeds, "adb": [50 + d for d in diffs[:seeds]],
                "adb+ic": [60.0 + 0.1 * (i % 2) for i in range(seeds)] if resolved_too else
                          [50 + d for d in diffs[:seeds]]}
        return p.seeding.standing([Ended(r, s, K.COMPLETE, v) for r, vs in rows.items() for s, v in enumerate(vs)])
    return of


def test_a_paused_study_takes_its_next_pause(tmp_path):
    p = _prepared(tmp_path)
    assert p.seeding.stop == 8
    more = more_seeds.continued(p, _standing(OPEN, 8))
    assert more.seeding.pause == 12 and more.fingerprint == p.fingerprint
    # at most the trials run and 4 more seeds for each row of an open comparison (here all three rows)
    assert more.total == 3 * 8 + 3 * 4
    c = _prepared(tmp_path / "c")
    standing = _standing(OPEN, 8, resolved_too=True)
    ran = sum(standing(c).targets.values())  # adb+ic's comparisons resolved early: it stopped adding seeds there
    assert ran < 24 and more_seeds.continued(c, standing).total == ran + 2 * 4  # adb vs baseline open: its two rows
    last = more_seeds.continued(_prepared(tmp_path / "b", pause=12), _standing(OPEN, 12))
    assert last.seeding.pause == 16


def test_a_resumed_continuation_keeps_the_pause_its_run_took(tmp_path):
    p = _prepared(tmp_path, "--resume", pause=12)
    assert p.seeding.stop == 12 and p.total == 36
    assert _prepared(tmp_path / "b", "--resume").seeding.stop == 8  # none recorded (a study started before): the cap


@pytest.mark.parametrize("case, fragment", [
    ("horizon", "inconclusive"), ("resolved", "every comparison was resolved"),
    ("interrupted", "finish it first with --resume"), ("seed list", "no planned looks after its last seeds")])
def test_what_cannot_be_continued_is_refused(tmp_path, case, fragment):
    if case == "seed list":
        p, standing = _prepared(tmp_path, "--seeds", "0", "1", "2"), _standing(OPEN, 3)
    elif case == "horizon":
        p, standing = _prepared(tmp_path, pause=16), _standing(OPEN, 16)
    elif case == "resolved":
        p, standing = _prepared(tmp_path), _standing([10.0 + 0.1 * (i % 3) for i in range(16)], 8, resolved_too=True)
    else:
        p, standing = _prepared(tmp_path, pause=12), _standing(OPEN, 9)  # its continuation stopped at 9 seeds of 12
    with pytest.raises(StudyInputError, match=fragment):
        more_seeds.continued(p, standing)


@pytest.mark.parametrize("pause", ["5", -1, 4, None, True, 10**9])
def test_a_hand_edited_pause_is_refused_with_the_plans_pauses(tmp_path, pause):
    opts, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--storage", str(tmp_path)])
    p = preflight.study(*ablation.plan(opts))
    p.where.local.mkdir(parents=True)
    (p.where.local / "study.json").write_text(json.dumps({"fingerprint": p.fingerprint, more_seeds.PAUSE_KEY: pause}))
    with pytest.raises(StudyInputError, match=r"not one of the plan's pauses \(8, 12, 16 seeds a row\)"):
        more_seeds.resumed(p)


def test_a_study_of_the_plan_before_horizons_is_refused(tmp_path):
    _prepared(tmp_path)
    opts, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--storage", str(tmp_path)])
    old = preflight.study(*ablation.plan(opts), legacy=True)
    assert old.seeding.looks.horizon is None
    with pytest.raises(StudyInputError, match="no planned looks after its last seeds"):
        more_seeds.continued(old, _standing(OPEN, 8))


def test_the_flag_needs_looks_and_the_printed_command_has_it_once():
    opts, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--more-seeds", "--seeds", "0", "1"])
    with pytest.raises(StudyInputError, match="--more-seeds continues a study whose seeds follow its looks"):
        opts.check()
    opts, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--more-seeds", "--resume"])
    assert opts.resume and opts.more_seeds
    opts = dataclasses.replace(opts, argv=("studies/ablation.py", "--resume", "--more-seeds", "--storage", "x"))
    assert more_seeds_command(RunSettings.of(opts), lambda: "py") == ["py", "studies/ablation.py", "--storage", "x",
                                                              "--more-seeds"]
    with pytest.raises(StudyInputError, match="drop --more-seeds"):
        dataclasses.replace(opts, plan_only=True).check()
    smoke, _ = options.parse(options.parser("t", ablation.DEFAULTS), argv=["--smoke", "--more-seeds"])
    with pytest.raises(StudyInputError, match=r"the study's default with --smoke\): pass --seeds auto"):
        smoke.check()


def test_a_restored_progress_line_counts_against_the_continuations_budget():
    from adbs_lab.driver.progress import Progress

    line = Progress(study="s", total=9, varying=[], ended=lambda t: "")
    line.setup(total_num_samples=13)  # Tune's sample budget, reopened by --more-seeds (launch.reopen_search)
    assert line.total == 13
    line.setup(total_num_samples=5)
    assert line.total == 13
