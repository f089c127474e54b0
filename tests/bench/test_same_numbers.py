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


def test_the_decision_lines_are_kept_and_made_alike(tmp_path):
    out = (f"[ablation] trial 3 ended: row=adb seed=1 in 41 s\n"
           f"ablation: 9 trials (3 configurations x 3 seeds), 2 at a time; on this CPU roughly 3.4 min of training at "
           f"its load now (load average 7.2 on 2 CPUs: x1.9 the time measured at 2)\n"
           f"verdicts, one family: the 3 comparisons of this table\n"
           f"adb vs baseline: +1.20 points in the last session (95% CI -0.10 to +2.50; paired, n=3): not resolved\n"
           f"ablation: wrote {tmp_path}/runs/ablation (run 0123456789abcdef0123456789abcdef) 2026-11-28 10:02\n")
    said = same_numbers.said_lines(out, tmp_path)
    assert said == ["ablation: 9 trials (3 configurations x 3 seeds), 2 at a time; on this CPU roughly <time> of "
                    "training at its load now (load average <load> on 2 CPUs: x<f> the time measured at 2)",
                    "verdicts, one family: the 3 comparisons of this table",
                    "adb vs baseline: +1.20 points in the last session (95% CI -0.10 to +2.50; paired, n=3): not "
                    "resolved"]
    assert same_numbers.said_lines(out, tmp_path, keep_all=True)[-1] == (
        "ablation: wrote <scratch>/runs/ablation (run <run id>) <date>")


def test_variants_name_a_study_and_the_path_writes_its_two_ends(tmp_path):
    args = same_numbers.parse(["HEAD", "--studies", "--with", "ablation:--smoke --seeds auto", "--path"])
    runs = same_numbers.runs(args, tmp_path)
    assert runs[0] == ("ablation:--smoke --seeds auto", "ablation", ["--smoke", "--seeds", "auto"])
    assert runs[1][1] == "ablation_path" and (tmp_path / "a.yaml").read_text().startswith("new_boundary_init")
    with pytest.raises(SystemExit):
        same_numbers.parse(["HEAD", "--with", "nosuch:--smoke"])
