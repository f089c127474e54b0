"""Tables that compare like with like: rows in the swept values' order, the paired Δlast with its interval worked
out by hand, the harmonic-mean column, the best configuration within rows of the same ways and sessions."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from adbs_lab.records import metrics_keys as K
from adbs_lab.results.tables import best_config, format_table, paper_table


def _sessions(rows, **extra):
    out = []
    for label, seed, accs in rows:
        for s, a in enumerate(accs):
            out.append({"label": label, "trial_id": f"{label}-{seed}", "seed": seed, "session": s, "test_acc": a,
                        "state": K.COMPLETE, **extra.get(label, {})})
    return pd.DataFrame(out)


def test_paired_delta_last_and_its_interval_by_hand():
    s = _sessions([("baseline", 0, [70, 50]), ("baseline", 1, [70, 54]), ("baseline", 2, [70, 47]),
                   ("adb+ic", 0, [80, 56]), ("adb+ic", 1, [80, 61]), ("adb+ic", 2, [80, 52]),
                   ("adb", 0, [80, 55])])
    t = paper_table(s, baseline="baseline", order=["baseline", "adb", "adb+ic"]).set_index("config")
    # per-seed differences 6, 7, 5: mean 6, sd 1; two comparisons (adb and adb+ic against the baseline), so
    # Bonferroni's 0.05 / 2: t_{1 - 0.0125, 2} = 6.205347 (scipy.stats.t.ppf(0.9875, 2)) -> half-width 6.205347 / sqrt(3)
    mean, half, n = t.loc["adb+ic", "delta_paired"]
    assert (mean, n) == (6.0, 3) and half == pytest.approx(6.205347 / math.sqrt(3), abs=1e-5)
    assert t.loc["adb+ic", "verdict"] == "better"  # 6 ± 3.58 lies above 0 and is not inside ±1
    # one shared seed (0): 55 - 50, no interval, so no verdict
    assert t.loc["adb", "delta_paired"][:1] == (5.0,) and t.loc["adb", "delta_paired"][2] == 1
    assert t.loc["adb", "verdict"] == "not resolved"
    text = format_table(paper_table(s, baseline="baseline", order=["baseline", "adb", "adb+ic"]))
    assert "+6.00 (+2.41 to +9.59, n=3)" in text and "+5.00 (n=1: fewer than 3 finite pairs)" in text and "Δlast paired" in text
    # the table opens with one sentence per comparison, its interval the one in the table
    # (the interval 2.4173 .. 9.5827 rounded outward)
    assert text.splitlines()[2] == ("adb+ic vs baseline: +6.00 points in the last session (95% CI +2.41 to +9.59, "
                                    "Bonferroni over 2 comparisons; paired, n=3): better")


def test_unpaired_rows_get_no_paired_column():
    s = _sessions([("baseline", 0, [70, 50]), ("adb+ic", 1, [80, 56])])
    t = paper_table(s, baseline="baseline")
    assert math.isnan(t.set_index("config").loc["adb+ic", "delta_paired"][0])
    assert "adb+ic" in format_table(t)


def test_rows_of_a_sweep_in_the_order_of_the_swept_value():
    alphas = {"alpha=0.1": 0.1, "alpha=0.01": 0.01, "alpha=0.05": 0.05, "alpha=0.02": 0.02}
    s = _sessions([(lab, 0, [70, 50]) for lab in alphas], **{lab: {"alpha": a} for lab, a in alphas.items()})
    assert list(paper_table(s)["config"]) == ["alpha=0.01", "alpha=0.02", "alpha=0.05", "alpha=0.1"]
    # a study's own order still wins
    assert list(paper_table(s, order=["alpha=0.1"])["config"])[0] == "alpha=0.1"


def test_harmonic_mean_of_the_last_sessions_base_and_novel():
    s = _sessions([("a", 0, [70, 50]), ("a", 1, [70, 52])])
    s["test_hmean"] = [math.nan, 40.0, math.nan, 44.0]
    t = paper_table(s)
    assert t.loc[0, "hmean"][0] == 42.0
    assert "H last" in format_table(t)


def test_best_within_rows_of_the_same_ways_and_sessions():
    from adbs.config import Config

    rows = [("ways=10 shots=5", 10, 70.0), ("ways=5 shots=5", 5, 60.0), ("ways=5 shots=1", 5, 55.0),
            ("ways=10 shots=1", 10, 65.0)]
    trials = pd.DataFrame([{"label": lab, "state": K.COMPLETE, "val_avg_acc": v} for lab, _, v in rows])
    for k, v in Config().to_dict().items():
        trials[k] = str(v) if isinstance(v, list) else v
    trials["ways"] = [w for _, w, _ in rows]
    best = best_config(trials)
    # 10-way rows average 4 sessions, 5-way rows 8: the standard 5 ways of the embedded benchmark decide
    assert best["config_label"] == "ways=5 shots=5" and best["compared_within"]["ways"] == 5
    assert {g["config_label"] for g in best["per_group"]} == {"ways=5 shots=5", "ways=10 shots=5"}


def test_paired_per_host_against_its_own_reference():
    s = _sessions([("SAVC", 0, [70, 50]), ("SAVC", 1, [70, 52]), ("SAVC+ADBS", 0, [75, 56]), ("SAVC+ADBS", 1, [75, 60]),
                   ("ALICE", 0, [72, 40]), ("ALICE", 1, [72, 41]), ("ALICE+ADBS", 0, [70, 43]),
                   ("ALICE+ADBS", 1, [70, 43])])
    ref = {"SAVC": "SAVC", "SAVC+ADBS": "SAVC", "ALICE": "ALICE", "ALICE+ADBS": "ALICE"}
    t = paper_table(s, baseline=ref).set_index("config")
    # SAVC: differences 6, 8 -> mean 7; two pairs are too few for a verdict (adbs_lab/stats/verdicts.py: MIN_PAIRS)
    mean, half, n = t.loc["SAVC+ADBS", "delta_paired"]
    assert (mean, n) == (7.0, 2) and math.isnan(half) and t.loc["SAVC+ADBS", "verdict"] == "not resolved"
    mean, half, n = t.loc["ALICE+ADBS", "delta_paired"]  # differences 3, 2: against its own reference
    assert (mean, n) == (2.5, 2) and math.isnan(half)
    assert math.isnan(t.loc["SAVC", "delta_paired"][0])  # a reference row is not compared with itself
