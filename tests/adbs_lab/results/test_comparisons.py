"""The comparisons a table makes and their verdicts (adbs_lab/results/comparisons.py): the family, the pairs left out,
the sentence, the planner's lines, and that every verdict agrees with the interval printed beside it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import format_table, paper_table
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.frames import study_frames as _frames


def test_the_family_is_each_row_against_its_reference_and_its_parent_once():
    labels = ["baseline", "adb", "adb+ic", "adb+ic -finetune"]
    parents = {"adb": "baseline", "adb+ic": "adb", "adb+ic -finetune": "adb+ic"}
    assert cmp.family(labels, "baseline", parents) == [
        ("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb"), ("adb+ic -finetune", "baseline"),
        ("adb+ic -finetune", "adb+ic")]
    # a reference per row (hosts), a parent that is not in the table, a row without a reference
    assert cmp.family(["A", "A+ADBS", "B"], {"A+ADBS": "A", "A": "A"}, {"B": "gone"}) == [("A+ADBS", "A")]
    assert cmp.family(["x", "y"], None) == []


def test_the_interval_and_its_adjustment_by_hand():
    # differences adb+ic - baseline: 6, 7, 5 (mean 6, sd 1); adb - baseline: 1, 3, 2 (mean 2, sd 1); m = 2
    s, t = _frames({"baseline": [50, 54, 47], "adb": [51, 57, 49], "adb+ic": [56, 61, 52]})
    got = {c.pair: c for c in cmp.compare_rows(s, [("adb+ic", "baseline"), ("adb", "baseline")], trials=t)}
    half = stats.t.ppf(1 - 0.05 / 2 / 2, 2) * 1 / math.sqrt(3)
    v = got[("adb+ic", "baseline")].verdict
    assert (v.estimate, v.n) == (6.0, 3) and v.lo == pytest.approx(6 - half) and v.hi == pytest.approx(6 + half)
    assert v.level == pytest.approx(1 - 0.025)
    assert got[("adb", "baseline")].verdict.verdict.value == "not resolved"  # 2 ± 3.58 holds 0 and passes ±1


def test_a_diverged_seed_leaves_its_pair_out_and_is_counted():
    s, t = _frames({"baseline": [50, 54, 47, 52], "adb+ic": [56, None, 52, 58]})
    (c,) = cmp.compare_rows(s, [("adb+ic", "baseline")], trials=t)
    assert c.verdict.n == 3 and c.verdict.n_left_out == 1 and c.left_out == {"diverged": 1}
    assert "paired, n=3, 1 diverged)" in cmp.sentence(c)
    # the same study with the seed run by one row only: "not run"
    s2, t2 = _frames({"baseline": [50, 54, 47, 52], "adb+ic": [56, 61, 52]})
    (c2,) = cmp.compare_rows(s2, [("adb+ic", "baseline")], trials=t2)
    assert c2.left_out == {"not run": 1} and c2.verdict.n == 3


def test_the_sentence_quotes_the_interval_the_verdict_read():
    s, t = _frames({"baseline": [50, 54, 47], "adb+ic": [56, 61, 52]})
    (c,) = cmp.compare_rows(s, [("adb+ic", "baseline")], trials=t)
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)
    lo, hi = math.floor((6 - half) * 100) / 100, math.ceil((6 + half) * 100) / 100  # rounded outward
    assert cmp.sentence(c) == (f"adb+ic vs baseline: +6.00 points in the last session (95% CI +{lo:.2f} to "
                               f"+{hi:.2f}; paired, n=3): better")


def test_no_printed_verdict_disagrees_with_its_printed_interval():
    """Random tables: the sentence's rounded interval and its verdict never contradict (better with an interval
    holding 0, equivalent with one passing ±δ, ...)."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        delta = float(rng.choice([0.5, 1.0, 2.0]))
        base = rng.normal(50, 2, 4)
        s, t = _frames({"ref": list(base), "row": list(base + rng.normal(rng.normal(0, 2), rng.uniform(0.05, 2), 4))})
        (c,) = cmp.compare_rows(s, [("row", "ref")], trials=t, policy=VerdictPolicy(delta=delta))
        lo, hi = c.verdict.lo, c.verdict.hi
        label = c.verdict.verdict.value
        assert {"better": lo > 0 and not (-delta < lo and hi < delta), "worse": hi < 0 and not (-delta < lo and hi < delta),
                "equivalent within ±δ": -delta < lo <= 0 <= hi < delta,
                "better, by less than δ": 0 < lo and hi < delta, "worse, by less than δ": -delta < lo and hi < 0,
                "not resolved": True}[label], (label, lo, hi, delta)
        m = re.search(r"CI ([+-][\d.]+) to ([+-][\d.]+)", cmp.sentence(c))
        assert m and lo - 0.01 <= float(m[1]) <= lo and hi <= float(m[2]) <= hi + 0.01  # rounded outward


def test_the_table_opens_with_the_verdicts_and_closes_with_the_plan():
    s, t = _frames({"baseline": [50, 54, 47], "adb": [51, 55.5, 47.5], "adb+ic": [56, 61, 52]})
    table = paper_table(s, baseline="baseline", order=["baseline", "adb", "adb+ic"], trials=t,
                        verdicts=VerdictPolicy(pairs=(("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb"))))
    text = format_table(table, seconds=cmp.row_seconds(t))
    lines = text.splitlines()
    assert lines[0] == ("verdicts, one family: the 3 comparisons of this table on the last session's test_acc, all "
                        "true together with probability at least 95%; a verdict of another table, or of this table on "
                        "another metric, is of another family (docs/statistics.md):")
    assert [line.split(":")[0] for line in lines[1:4]] == ["adb vs baseline", "adb+ic vs baseline", "adb+ic vs adb"]
    assert all("Bonferroni over 3 comparisons" in line for line in lines[1:4])
    assert "verdict" in lines[5] and "adjusted over the table's 3 comparisons" in text
    plan = text[text.index("where the sequential design would stop"):]
    assert re.search(r"adb vs baseline: stops at \d+ seeds \(90%: \d+ to [^)]+\); \d+ more trials, about", plan), plan
    # the row's cell is the adjusted interval of the row against its reference
    row = table.set_index("config").loc["adb+ic"]
    c = next(c for c in table.attrs["comparisons"] if c.pair == ("adb+ic", "baseline"))
    assert row["delta_paired"] == cmp.cell(c) and row["verdict"] == "better"


def test_row_seconds_is_the_mean_time_of_completed_trials():
    _, t = _frames({"ab": [1, 2], "abcd": [1, None]})
    assert cmp.row_seconds(t) == {"ab": 30.0, "abcd": 50.0}


def test_two_seeds_get_no_plan_and_say_why():
    s, t = _frames({"baseline": [50, 54], "adb": [51, 52]})
    (c,) = cmp.compare_rows(s, [("adb", "baseline")], trials=t)
    assert c.plan is not None and "adb vs baseline: fewer than 3 finite pairs: no forecast" in "\n".join(cmp.plan_lines([c]))


def test_with_looks_a_verdict_keeps_the_look_that_reached_it():
    """--seeds auto: a row resolved at the first look (3 seeds) runs no more seeds while its reference runs on for
    another comparison; its verdict, interval and n stay those of look 1, and the seeds it never ran are not
    counted as left out."""
    from adbs_lab.stats.looks import Looks

    looks = Looks(n0=3, batch=2, max_seeds=5)
    s, t = _frames({"baseline": [50, 54, 47, 52, 49], "big": [80, 85, 76], "small": [50.5, 53, 48.2, 52.4, 49.1]})
    got = {c.pair[0]: c for c in cmp.compare_rows(s, [("big", "baseline"), ("small", "baseline")], trials=t,
                                                    policy=VerdictPolicy(looks=looks))}
    big, small = got["big"], got["small"]
    assert big.resolved and big.verdict.look == 1 and big.verdict.n == 3 and big.left_out == {}
    assert "reached at look 1 of 2, 3 seeds" in cmp.sentence(big) and "α spent over 2 looks" in cmp.sentence(big)
    a1 = looks.alphas[0] / 2  # look 1's share of α, over the 2 comparisons
    half = stats.t.ppf(1 - a1 / 2, 2) * np.std([30, 31, 29], ddof=1) / math.sqrt(3)
    assert big.verdict.hi - big.verdict.lo == pytest.approx(2 * half)
    assert small.verdict.n_seeds == 5 and small.verdict.look == 2


def test_a_best_row_is_named_only_where_the_verdicts_resolve_it():
    # alpha_sweep-like: every alpha against alpha=0.01; 0.05 clearly better, 0.02 and 0.1 not resolved
    s, t = _frames({"alpha=0.01": [50, 54, 47, 52, 49], "alpha=0.02": [52, 53, 49.5, 51, 50],
                    "alpha=0.05": [60, 64.5, 56.5, 62, 59.5], "alpha=0.1": [52, 51, 50, 53, 48]})
    pairs = cmp.family(["alpha=0.01", "alpha=0.02", "alpha=0.05", "alpha=0.1"], "alpha=0.01")
    compared = cmp.compare_rows(s, pairs, trials=t)
    assert [c.verdict.verdict.value for c in compared] == ["not resolved", "better", "not resolved"]
    # 0.05 is not compared with 0.02 and 0.1, but through their shared reference: its interval against 0.01 lies
    # wholly above theirs, so best - row = (best - ref) - (row - ref) > 0 with the family's guarantee
    by = {c.pair[0]: c.verdict for c in compared}
    assert by["alpha=0.05"].lo > max(by["alpha=0.02"].hi, by["alpha=0.1"].hi)
    assert cmp.best_standing("alpha=0.05", compared) == (True, [])
    # 0.02 is not resolved against 0.01 or 0.1, and is resolved below 0.05 (through 0.01)
    assert cmp.best_standing("alpha=0.02", compared) == (False, ["alpha=0.01", "alpha=0.1"])
    # with every row compared against the best and worse than it: resolved
    direct = cmp.compare_rows(s, [(r, "alpha=0.05") for r in ("alpha=0.01", "alpha=0.02", "alpha=0.1")], trials=t)
    assert all(c.verdict.verdict.value == "worse" for c in direct) and cmp.best_standing("alpha=0.05", direct) == (True, [])
    assert cmp.best_standing("anything", []) == (True, [])


def test_two_rows_both_better_than_the_shared_reference_are_rivals():
    """A and B both better than R, their intervals against R overlapping: the verdicts do not tell A from B, so a
    best A is not resolved and B is named. f730cc9's best_standing named no rival ((False, []))."""
    from tests.helpers.old_f730cc9 import old_best_standing

    s, t = _frames({"R": [50, 54, 47, 52, 49], "A": [56, 60.5, 53, 58, 55.5], "B": [55.5, 60, 53.5, 57, 55]})
    compared = cmp.compare_rows(s, [("A", "R"), ("B", "R")], trials=t)
    assert [c.verdict.verdict.value for c in compared] == ["better", "better"]
    assert cmp.best_standing("A", compared) == (False, ["B"])
    assert old_best_standing("A", compared) == (False, [])
    # B worse than R while A is better: resolved below A through R (the old rule's case too)
    s, t = _frames({"R": [50, 54, 47, 52, 49], "A": [56, 60.5, 53, 58, 55.5], "B": [44, 48, 41.5, 46, 43]})
    compared = cmp.compare_rows(s, [("A", "R"), ("B", "R")], trials=t)
    assert cmp.best_standing("A", compared) == (True, [])


def test_a_comparisons_name_says_the_shared_settings_once():
    assert cmp.name(("ways=5 shots=1 variant=adb+ic", "ways=5 shots=1 variant=baseline")) == \
        "ways=5 shots=1: variant=adb+ic vs variant=baseline"
    assert cmp.name(("ablation: adb", "ablation: baseline")) == "ablation: adb vs ablation: baseline"
    assert cmp.name(("adb+ic", "adb")) == "adb+ic vs adb"
