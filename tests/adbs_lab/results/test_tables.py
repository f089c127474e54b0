"""Tables: the paper-style table (mean ± 95% CI over seeds, Delta_last) worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbs_lab.records import metrics_keys as K
from adbs_lab.results.tables import best_config, format_table, paper_table


def _sessions(rows):
    out = []
    for label, trial, accs, state in rows:
        for s, a in enumerate(accs):
            out.append({"label": label, "trial_id": trial, "session": s, "test_acc": a, "state": state})
    return pd.DataFrame(out)


def test_paper_table_rows_sessions_avg_delta():
    s = _sessions([
        ("baseline", "t1", [70, 60, 50], K.COMPLETE),
        ("baseline", "t2", [72, 62, 52], K.COMPLETE),
        ("adb+ic", "t3", [80, 70, 58], K.COMPLETE),
        ("adb+ic", "t4", [80, 70, 60], K.COMPLETE),
        ("adb+ic", "t5", [10, 5, 1], K.PRUNED),  # never in the table
    ])
    t = paper_table(s, baseline="baseline", order=["baseline", "adb+ic"])
    assert list(t["config"]) == ["baseline", "adb+ic"]
    assert list(t["seeds"]) == [2, 2]
    assert t.loc[0, "0"][0] == 71.0 and t.loc[1, "2"][0] == 59.0
    assert t.loc[1, "avg"][0] == pytest.approx((208 / 3 + 210 / 3) / 2)
    assert t.loc[0, "delta_last"] == 0.0 and t.loc[1, "delta_last"] == pytest.approx(59.0 - 51.0)
    text = format_table(t)
    assert "Δlast" in text and "71.00 ± 12.71" in text and "+8.00" in text
    assert format_table(t, markdown=True).startswith("| config | seeds | s0")


def test_long_row_labels_are_numbered_with_a_legend_below_the_table():
    """A search of several knobs labels a row with every searched value (~150 characters): the table numbers its
    rows and names each below it, so its width is the numbers', not the labels'."""
    long_a = "alpha=0.01 boundary_lr_scale=0.1 boundary_weight_decay=True new_boundary_init=abs_mean finetune_lr=0.019"
    long_b = long_a.replace("alpha=0.01", "alpha=0.05")
    t = paper_table(_sessions([(long_a, "t1", [70, 60], K.COMPLETE), (long_b, "t2", [71, 61], K.COMPLETE)]))
    lines = format_table(t).splitlines()
    assert max(len(line) for line in lines[:4]) < 80 and lines[2].startswith("#1 ") and lines[3].startswith("#2 ")
    assert f"#1: {long_a}" in lines and f"#2: {long_b}" in lines
    assert list(t["config"]) == [long_a, long_b]  # the table itself keeps the labels (best_config, report.py)
    short = format_table(paper_table(_sessions([("baseline", "t1", [70, 60], K.COMPLETE)])))
    assert short.splitlines()[2].startswith("baseline") and "#1" not in short


def test_last_session_and_performance_drop_beside_the_average_and_the_ci_says_its_n():
    s = _sessions([("baseline", "t1", [70, 60, 50], K.COMPLETE), ("baseline", "t2", [72, 62, 50], K.COMPLETE),
                   ("ways=10", "t3", [80, 66], K.COMPLETE)])  # a row with fewer sessions: its own last one
    t = paper_table(s)
    assert list(t.columns[t.columns.get_loc("avg"):][:3]) == ["avg", "last", "pd"]
    assert t.loc[0, "last"] == (50.0, 0.0) and t.loc[0, "pd"][0] == pytest.approx(21.0)  # (20 + 22) / 2
    assert t.loc[0, "pd"][1] == pytest.approx(12.7062, abs=1e-3)  # sd sqrt(2) over n = 2
    assert t.loc[1, "last"][0] == 66.0 and t.loc[1, "pd"][0] == 14.0
    text = format_table(t)
    head = text.splitlines()[0].split()
    assert head[head.index("avg") + 1: head.index("avg") + 3] == ["last", "PD"]
    assert "95% confidence interval" in text and "n = seeds" in text  # the CI says over how many trials
    one_seed = format_table(paper_table(_sessions([("a", "t1", [70, 60], K.COMPLETE)])))
    assert "confidence interval" not in one_seed  # no ± anywhere, nothing to explain


def test_d_cs_column_from_the_trials_of_each_row():
    s = _sessions([("baseline", "t1", [70, 60], K.COMPLETE), ("baseline", "t2", [72, 62], K.COMPLETE),
                   ("adb+ic", "t3", [80, 70], K.COMPLETE)])
    trials = pd.DataFrame([{"label": "baseline", "trial_id": "t1", "state": K.COMPLETE, "d_cs": 0.80},
                           {"label": "baseline", "trial_id": "t2", "state": K.COMPLETE, "d_cs": 0.90},
                           {"label": "adb+ic", "trial_id": "t3", "state": K.COMPLETE, "d_cs": 0.95},
                           {"label": "adb+ic", "trial_id": "t4", "state": K.PRUNED, "d_cs": 0.10}])
    t = paper_table(s, baseline="baseline", trials=trials)
    assert t.loc[0, "d_cs"][0] == pytest.approx(0.85) and t.loc[0, "d_cs"][1] == pytest.approx(12.7062 * 0.05, abs=1e-4)
    assert t.loc[1, "d_cs"] == (0.95, 0.0)  # the pruned trial does not count
    text = format_table(t)
    assert "D_cs" in text.splitlines()[0] and "0.850 ± 0.635" in text and "0.950" in text
    assert "d_cs" not in paper_table(s, baseline="baseline")  # without trials: no column


def test_rows_with_fewer_sessions_average_their_own_sessions():
    s = _sessions([("ways=10", "a", [60, 50], K.COMPLETE), ("ways=5", "b", [60, 55, 50, 45], K.COMPLETE)])
    t = paper_table(s)
    assert t.loc[0, "avg"][0] == 55.0 and t.loc[1, "avg"][0] == 52.5
    assert math.isnan(t.loc[0, "3"][0]) and "-" in format_table(t)


def test_best_config_uses_validation_mean_over_seeds():
    trials = pd.DataFrame([
        {"label": "a", "state": K.COMPLETE, "val_avg_acc": 50.0, "test_avg_acc": 99.0},
        {"label": "b", "state": K.COMPLETE, "val_avg_acc": 60.0, "test_avg_acc": 10.0},
        {"label": "b", "state": K.COMPLETE, "val_avg_acc": 58.0, "test_avg_acc": 10.0},
        {"label": "c", "state": K.PRUNED, "val_avg_acc": 90.0, "test_avg_acc": 10.0},
    ])
    from adbs.config import Config

    for k, v in Config().to_dict().items():
        trials[k] = str(v) if isinstance(v, list) else v
    best = best_config(trials)
    assert best["config_label"] == "b" and best["mean_over_seeds"] == 59.0 and best["seeds"] == 2


def test_best_config_is_the_configuration_whichever_seed_ran_first():
    """best_config.json is a configuration, not a trial: no seed, the same file whatever the trials' order, and
    only the fields the configuration reads (no milestones/gamma under the cosine schedule)."""
    from adbs.config import Config

    def trials(seeds):
        rows = []
        for seed in seeds:
            row = {**Config(seed=seed, split_seed=seed).to_dict(), "label": "b", "state": K.COMPLETE,
                   "val_avg_acc": 50.0 + seed}
            row["milestones"] = str(row["milestones"])  # trials.parquet holds lists as JSON text
            rows.append(row)
        return pd.DataFrame(rows)

    one, other = best_config(trials([2, 0, 1])), best_config(trials([0, 1, 2]))
    assert one == other and one["trial_seeds"] == [0, 1, 2]
    assert not {"seed", "split_seed", "milestones", "gamma"} & set(one["config"])
    assert one["config"]["schedule"] == "cosine" and one["config"]["alpha"] == Config().alpha
    stepped = trials([0]).assign(schedule="milestones", variant="baseline")
    cfg = best_config(stepped)["config"]
    assert cfg["milestones"] == [40, 70, 100] and "alpha" not in cfg and "finetune_lr" not in cfg


def test_departures_above_and_warnings_below_the_table():
    from adbs_lab.results.tables import annotate, departure_lines, warning_lines

    trials = pd.DataFrame([
        {"label": "adb+ic", "seed": 1, "state": K.COMPLETE, "boundary_lr_scale": 0.1, "abs_base_boundary": False,
         K.WARNING: "novel accuracy 0.00 in every incremental session (8)"},
        {"label": "baseline", "seed": 0, "state": K.COMPLETE, "boundary_lr_scale": 0.1, "abs_base_boundary": False,
         K.WARNING: ""},
        {"label": "adb+ic", "seed": 0, "state": K.COMPLETE, "boundary_lr_scale": 0.1, "abs_base_boundary": False,
         K.WARNING: "3 of 100 seen classes never predicted (session 8)"},
        {"label": "adb", "seed": 0, "state": K.PRUNED, "boundary_lr_scale": 0.1, "abs_base_boundary": False,
         K.WARNING: ""},
    ])
    assert departure_lines(trials) == ["departs from the released code in every trial: boundary_lr_scale=0.1 "
                                       "(a boundary remedy; docs/boundary-dynamics.md, studies/boundary.py)"]
    assert warning_lines(trials, order=["baseline", "adb+ic"]) == [
        "WARNING adb+ic seed=0: 3 of 100 seen classes never predicted (session 8)",
        "WARNING adb+ic seed=1: novel accuracy 0.00 in every incremental session (8)"]
    text = annotate("TABLE", trials, order=["adb+ic"]).splitlines()
    assert text[0].startswith("departs from the released code") and text[1] == "TABLE" and len(text) == 4
    md = annotate("| t |", trials, markdown=True)
    assert "\n\n| t |\n\n- WARNING adb+ic seed=0" in md
    # rows that differ in a remedy (the boundary study) get no common header; released values none either
    mixed = trials.assign(boundary_lr_scale=[0.1, 1.0, 0.1, 0.1])
    assert departure_lines(mixed) == [] and departure_lines(trials.assign(boundary_lr_scale=1.0)) == []
    assert warning_lines(trials.assign(**{K.WARNING: ""})) == []


def test_delta_last_against_each_rows_own_reference():
    """The hosts study: every host with ADBS against the same host without (a {row: reference} mapping)."""
    s = _sessions([
        ("SAVC", "a", [70, 50], K.COMPLETE), ("SAVC+ADBS", "b", [75, 56], K.COMPLETE),
        ("ALICE", "c", [72, 40], K.COMPLETE), ("ALICE+ADBS", "d", [70, 43], K.COMPLETE),
        ("other", "e", [1, 1], K.COMPLETE),
    ])
    ref = {"SAVC": "SAVC", "SAVC+ADBS": "SAVC", "ALICE": "ALICE", "ALICE+ADBS": "ALICE"}
    t = paper_table(s, baseline=ref).set_index("config")
    assert t.loc["SAVC+ADBS", "delta_last"] == 6.0 and t.loc["ALICE+ADBS", "delta_last"] == 3.0
    assert t.loc["SAVC", "delta_last"] == 0.0 and math.isnan(t.loc["other", "delta_last"])
    assert "+6.00" in format_table(paper_table(s, baseline=ref))


def test_a_row_without_a_number_of_the_metric_is_left_out_not_a_crash():
    """A row whose complete trials have no number of the metric in any session (pivot_table leaves such trials
    out) is left out of the table as a row without complete trials is; the other rows are as without it."""
    nan = math.nan
    rows = [("baseline", "t1", [70, 60], K.COMPLETE), ("adb", "t2", [80, 62], K.COMPLETE)]
    t = paper_table(_sessions(rows + [("empty", "t3", [nan, nan], K.COMPLETE)]), baseline="baseline")
    assert list(t["config"]) == ["baseline", "adb"]
    assert format_table(t) == format_table(paper_table(_sessions(rows), baseline="baseline"))
