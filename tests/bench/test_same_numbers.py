"""bench/same_numbers.py: the comparison of two sessions tables (fast), and a bad revision refused (fast)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import same_numbers  # noqa: E402


def _sessions(acc: list[float], label: str = "alpha=0.1") -> pd.DataFrame:
    return pd.DataFrame({"trial_id": [f"t{i}" for i in range(len(acc))], "label": label, "alpha": 0.1,
                         "seed": [0, 0, 1, 1][:len(acc)], "session": [0, 1, 0, 1][:len(acc)], "test_acc": acc})


def test_same_rows_and_values_under_other_labels_and_trial_ids_are_the_same_numbers():
    old, new = _sessions([80.0, 70.0, 81.0, 71.0]), _sessions([80.0, 70.0, 81.0, 71.0], label="a=0.1")
    new["trial_id"] = ["x", "y", "z", "w"]
    assert same_numbers.differences(old, new) == []


def test_a_moved_value_and_a_missing_row_are_each_named():
    old, new = _sessions([80.0, 70.0, 81.0, 71.0]), _sessions([80.0, 70.0, 81.0, 71.5])
    assert [d for d in same_numbers.differences(old, new) if d.startswith("test_acc")] == [
        "test_acc at ('0.1', '1', '1'): 71.0 -> 71.5"]
    found = same_numbers.differences(old, _sessions([80.0, 70.0, 81.0]))
    assert found == ["row ('0.1', '1', '1') only in OLD"]


def test_a_revision_that_is_not_a_commit_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        same_numbers.parse(["no-such-revision-xyz"])
    assert e.value.code == 2 and "is not a commit of this repository" in capsys.readouterr().err
