"""Adversarial checks on the verdicts of a table: each test below failed before the fixes that followed it (printed
ends rounded outward with as many decimals as the verdict needs; a trial's last session only; within one study rows
always pair by seed; the cell prints the sentence's ends).

Fast, no Ray: tables and comparisons built from hand-made sessions/trials frames."""

from __future__ import annotations

import math
import re

import pytest
from scipy import stats

from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import format_table, paper_table
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.seeds import auto_standing
from tests.helpers.frames import study_frames as _frames

HALF3 = stats.t.ppf(0.975, 2) / math.sqrt(3)  # half-width of a 3-seed 95% interval over differences of sd 1


def _printed_interval(sentence: str) -> tuple[float, float]:
    m = re.search(r"CI ([+-][\d.]+) to ([+-][\d.]+)", sentence)
    assert m, sentence
    return float(m[1]), float(m[2])


def _agrees(label: str, lo: float, hi: float, delta: float) -> bool:
    """Whether a verdict holds for the interval [lo, hi] as it is printed."""
    return {"better": lo > 0, "worse": hi < 0,
            "equivalent within ±δ": -delta < lo <= 0 <= hi < delta,
            "better, by less than δ": 0 < lo and hi < delta, "worse, by less than δ": -delta < lo and hi < 0,
            "not resolved": True}[label]


@pytest.mark.parametrize("diffs, delta", [
    ([HALF3 + 0.004 - 1, HALF3 + 0.004, HALF3 + 0.004 + 1], 1.0),  # lo = +0.004: printed "+0.00", verdict better
    ([-0.996 / HALF3, 0.0, 0.996 / HALF3], 1.0),  # hi = 0.996: printed "+1.00", verdict equivalent within ±1
])
def test_a_printed_verdict_agrees_with_its_printed_interval(diffs, delta):
    """The sentence rounds the interval's ends to 2 decimals but reads the verdict from the unrounded ends, so
    'better' can stand beside 'CI +0.00 to ...' and 'equivalent within ±1 point' beside 'CI -1.00 to +1.00'."""
    s, t = _frames({"ref": [50.0] * 3, "row": [50.0 + d for d in diffs]})
    (c,) = cmp.compare_rows(s, [("row", "ref")], trials=t, policy=VerdictPolicy(delta=delta))
    lo, hi = _printed_interval(cmp.sentence(c))
    assert _agrees(c.verdict.verdict.value, lo, hi, delta), cmp.sentence(c)


def test_a_nan_last_session_is_not_replaced_by_an_earlier_session():
    """A COMPLETE trial whose last session's accuracy is NaN: the table's `last` and `Δlast` leave it out, but the
    paired comparison silently takes its session-0 accuracy (80) as its last-session value (n=3, +10.67)."""
    s, t = _frames({"ref": [50.0, 51.0, 52.0], "row": [52.0, math.nan, 53.0]}, {("row", 1): "COMPLETE"})
    (c,) = cmp.compare_rows(s, [("row", "ref")], trials=t)
    assert c.verdict.n == 2 and c.verdict.n_left_out == 1, cmp.sentence(c)


def test_a_seed_that_ran_is_never_counted_as_not_run():
    """A COMPLETE trial with a non-finite last-session value (inf) is left out of the pairs, but counted as
    'not run' though it ran."""
    s, t = _frames({"ref": [50.0, 51.0, 52.0], "row": [52.0, math.inf, 53.0]}, {("row", 1): "COMPLETE"})
    (c,) = cmp.compare_rows(s, [("row", "ref")], trials=t)
    assert c.verdict.n_left_out == 1 and "not run" not in c.left_out, cmp.sentence(c)


R5, R10 = "ways=5 shots=1 variant=baseline", "ways=10 shots=1 variant=adb+ic"


def _cross_data():
    """A 10-way row against a 5-way reference (kshot_grid --reference 'ways=5 shots=1 variant=baseline'): rows of
    different data, which the table compares unpaired (Welch)."""
    ref = [50.0, 60.0, 40.0, 55.0, 45.0, 52.0, 48.0, 50.0]
    row = [v + 3 + d for v, d in zip(ref, [0.1, -0.1, 0.2, 0.0, -0.2, 0.1, 0.0, -0.1])]
    s, t = _frames({R5: ref, R10: row})
    t["ways"] = [5 if lab == R5 else 10 for lab in t["label"]]
    t["shots"] = 1
    return s, t


def test_the_searcher_and_the_table_read_a_cross_data_comparison_alike():
    """--seeds auto: the searcher's looks (adbs_lab/search/seeds/until_resolved.py) pair every comparison seed by seed,
    while the table compares rows of different data unpaired (Welch); the searcher stops at look 1 'all resolved'
    on a comparison the table prints as 'not resolved'."""
    s, t = _cross_data()
    looks = Looks(max_seeds=8, alpha=0.05)
    (c,) = cmp.compare_rows(s, [(R10, R5)], trials=t, policy=VerdictPolicy(looks=looks))
    values, states = cmp.seed_values(s, t, "test_acc", "label")
    searcher = auto_standing([R5, R10], values, states, [(R10, R5)], looks, 1.0)
    assert (searcher.looks[0].resolved == 1) == c.resolved, (searcher.looks, cmp.sentence(c))


def test_an_unpaired_interval_of_a_sequential_study_spends_alpha_over_the_looks():
    """With looks, the sentence says 'α spent over 4 looks', but the Welch interval is taken at the full α / m
    (level 0.95 with one comparison) over all 8 seeds, and calls itself 'look 1 of 4'."""
    s, t = _cross_data()
    looks = Looks(max_seeds=8, alpha=0.05)
    (c,) = cmp.compare_rows(s, [(R10, R5)], trials=t, policy=VerdictPolicy(looks=looks))
    assert c.verdict.level >= 1 - max(looks.alphas) - 1e-12, (c.verdict, cmp.sentence(c))


def test_the_table_cell_and_the_sentence_show_the_same_interval():
    """The Δlast paired cell prints estimate ± half-width, the sentence prints lo to hi, each rounded on its own:
    they disagree in the last digit (cell +0.01 ± 0.99 = [-0.98, +1.00]; sentence -0.99 to +1.00)."""
    s_ = 0.995 / HALF3
    s, t = _frames({"ref": [50.0] * 3, "row": [50.005 - s_, 50.005, 50.005 + s_]})
    table = paper_table(s, baseline="ref", trials=t)
    text = format_table(table)
    (c,) = table.attrs["comparisons"]
    lo, hi = _printed_interval(cmp.sentence(c))
    m = re.search(r"[+-][\d.]+ \(([+-][\d.]+) to ([+-][\d.]+), n=3\)", text)  # the cell prints the ends
    assert m, text
    assert (float(m[1]), float(m[2])) == (lo, hi), text
