"""One record per trial (adbs_lab/records/attempts.py): of a trial's attempts the last started stands, one a killed
driver left behind never does, and trials that only look alike (two samples of the same values, a contender's
screening seed and its race) all stand; the same rule over records and over the study's frames."""

from __future__ import annotations

import math

import pytest

from adbs_lab.records import attempts
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.trial_records import TrialRecord, frames


def _rec(tid: str, number: int | None, label: str, seed: int, start: float, state: str = K.COMPLETE, **kw):
    return TrialRecord(trial_id=tid, state=state, label=label, config={"seed": seed, "alpha": 0.1},
                       optuna_trial=number, mlflow_run_id=f"run-{tid}", started_at=start,
                       sessions=[{"session": 0, "test_acc": 50.0 + seed}], **kw)


# each: the attempts of a study in the order a reader meets them, and the trial ids that stand
SHAPES = {
    # a seed list: configuration 0 runs seeds 0, 1 under one Optuna trial; seed 1's first attempt a killed driver left
    # behind (no tag: a store written before adbs.orphaned), its rerun started later
    "seed_list": ([_rec("t0", 0, "ref", 0, 10), _rec("t1", 0, "ref", 1, 20, K.INTERRUPTED), _rec("t2", 0, "ref", 1, 30),
                   _rec("t3", 1, "a", 0, 40), _rec("t4", 1, "a", 1, 50)], ["t0", "t2", "t3", "t4"]),
    # --seeds auto: the seed a look added ran twice; the first attempt tagged orphaned and superseded by the rerun
    "seeds_auto": ([_rec("t0", 0, "ref", 3, 10, K.INTERRUPTED, orphaned=True, superseded_by="run-t5"),
                    _rec("t1", 0, "ref", 0, 1), _rec("t5", 0, "ref", 3, 60), _rec("t6", 1, "b", 3, 70)],
                   ["t1", "t5", "t6"]),
    # a race: the contender's screening seed (Optuna trial 0) and its race (trial 3) are trials of one label; race
    # seed 1 killed and rerun, and a second sample of the same value (trial 2) is a trial of its own
    "sampled_race": ([_rec("t0", 0, "alpha=0.05", 0, 1), _rec("t2", 2, "alpha=0.05", 0, 3),
                      _rec("t4", 3, "alpha=0.05", 1, 5, K.INTERRUPTED, orphaned=True),
                      _rec("t7", 3, "alpha=0.05", 1, 8), _rec("t8", 3, "alpha=0.05", 2, 9)],
                     ["t0", "t2", "t7", "t8"]),
    # a sample the searcher told Optuna before the kill: left behind, never run again, and no trial of the study
    "told_sample": ([_rec("t0", 0, "alpha=0.02", 0, 1), _rec("t1", 1, "alpha=0.07", 0, 2, K.INTERRUPTED, orphaned=True),
                     _rec("t2", 2, "alpha=0.04", 0, 3)], ["t0", "t2"]),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_attempt_stands_per_trial_in_records_and_in_the_studys_frames(shape):
    recs, expected = SHAPES[shape]
    assert [r.trial_id for r in attempts.standing(recs)] == expected
    sessions, trials = frames(recs)
    kept_sessions, kept = attempts.standing_frames(sessions, trials)
    # trials.parquet holds no tag column: the frames of a study (its own, one row per trial) go by the identity alone
    by_identity = [r.trial_id for r in attempts.standing([*(_untagged(r) for r in recs)])]
    assert list(kept["trial_id"]) == by_identity and list(kept_sessions["trial_id"]) == by_identity
    assert frames(attempts.standing(recs))[1]["trial_id"].tolist() == expected


def _untagged(r: TrialRecord) -> TrialRecord:
    from dataclasses import replace

    return replace(r, orphaned=False, superseded_by=None)


@pytest.mark.parametrize("starts,expected", [
    ((10, 20), "b"),  # the later start
    ((20, 10), "a"),  # in any order given
    ((math.nan, 5), "b"),  # an unknown start counts as earliest
    ((7, 7), "b"),  # a tie: the later one given
    ((math.nan, math.nan), "b"),
])
def test_of_two_attempts_of_one_trial_the_last_started_stands(starts, expected):
    pair = [_rec("a", 1, "ref", 0, starts[0]), _rec("b", 1, "ref", 0, starts[1])]
    assert [r.trial_id for r in attempts.standing(pair)] == [expected]


def test_an_attempt_left_behind_never_stands_even_started_last_or_alone():
    rerun, left = _rec("a", 1, "ref", 0, 1), _rec("b", 1, "ref", 0, 9, K.INTERRUPTED, superseded_by="run-a")
    assert attempts.standing([rerun, left]) == [rerun]
    assert attempts.standing([_rec("c", 1, "ref", 0, 1, K.INTERRUPTED, orphaned=True)]) == []


@pytest.mark.parametrize("raw,expected", [
    ((3, "ref", 1), (3, "ref", 1)),
    (("3", "ref", "1"), (3, "ref", 1)),  # an MLflow tag and param
    ((3.0, "ref", 1.0), (3, "ref", 1)),  # a parquet column with a gap is float
    ((math.nan, "ref", None), (None, "ref", None)),
    (("", "ref", "x"), (None, "ref", None)),  # no Optuna trial (the tag's empty value)
    ((True, "ref", 1.5), (None, "ref", None)),
])
def test_identity_reads_numbers_from_every_source_alike(raw, expected):
    assert attempts.identity(*raw) == expected


def test_a_runs_label_is_its_tag_or_its_name_without_the_seed():
    assert attempts.run_label({"adbs.label": "alpha=0.1"}, "alpha=0.1 seed=2") == "alpha=0.1"
    assert attempts.run_label({}, "alpha=0.1 shots=5 seed=2") == "alpha=0.1 shots=5"
    assert attempts.run_label({}, "seed=0") == "all"
