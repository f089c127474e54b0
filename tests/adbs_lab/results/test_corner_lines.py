"""The printed lines of the corners (adbs_lab/results/comparisons.py): the family across studies counts only the
comparisons that can have an interval; an unpaired comparison with a side under 8 runs says "conservative df"; an
equivalence verdict says how strict its tests are; a table's verdicts open with the heading that names their family
(report.py --metric, studies/paper.py's parts). Hand-built frames (tests/helpers/frames.py): fast."""

from __future__ import annotations

import pytest
from scipy import stats

from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import format_table, paper_table
from adbs_lab.stats.verdicts import family_verdicts
from tests.helpers.frames import study_frames

BASE = "ablation: baseline"
CELLS = [f"kshot_grid: ways=5 shots={k} variant={v}" for k in (5, 10, 20) for v in ("baseline", "adb+ic")]


def _across():
    """An ablation (3 seeds) and a kshot_grid whose first cell ran 3 seeds and the others 1 (other shots: unpaired
    against the ablation's baseline), every row against `BASE`."""
    values = {BASE: [50.0, 52.5, 49.0], "ablation: adb": [47.0, 49.8, 45.5],
              "kshot_grid: ways=5 shots=1 variant=baseline": [40.0, 44.0, 41.5],
              **{c: [55.0 + i] for i, c in enumerate(CELLS)}}
    s, t = study_frames(values)
    t["ways"] = 5
    t["shots"] = [1 if "shots=1 " in lab or lab.startswith("ablation") else int(lab.split("shots=")[1].split()[0])
                  for lab in t["label"]]
    t.loc[t["label"].str.startswith("ablation"), "shots"] = 5
    return s, t, [(r, BASE) for r in values if r != BASE]


def test_the_family_across_studies_counts_only_the_comparisons_that_can_have_an_interval():
    """8 comparisons, 6 of them one-seed cells that can never have an interval: the Bonferroni family is the other 2
    (f730cc9 counted all 8, widening the two that can be resolved to the level of 8)."""
    s, t, pairs = _across()
    compared = {c.pair[0]: c for c in cmp.compare_rows(s, pairs, trials=t, across=True)}
    assert {c.m for c in compared.values()} == {2}
    adb = compared["ablation: adb"]
    ref = family_verdicts({"d": [-3.0, -2.7, -3.5]}, m=2)["d"]
    assert (adb.verdict.lo, adb.verdict.hi) == pytest.approx((ref.lo, ref.hi))
    assert "Bonferroni over 2 comparisons; paired, n=3" in cmp.sentence(adb)
    assert all(not compared[c].resolved for c in CELLS)
    heading = cmp.family_heading(list(compared.values()))
    assert "the 8 comparisons of this table (2 of which can have an interval: the Bonferroni family)" in heading
    # within one study the family is its planned comparisons, whatever ran
    assert {c.m for c in cmp.compare_rows(s, pairs, trials=t)} == {8}


def test_an_unpaired_comparison_with_a_side_under_5_runs_says_conservative_df():
    s, t, pairs = _across()
    c = next(c for c in cmp.compare_rows(s, pairs, trials=t, across=True) if not c.paired and c.verdict.n == 3)
    assert c.verdict.conservative_df
    assert "unpaired (Welch: the rows ran different seeds or data; conservative df = 2: a side has fewer than 8 runs)" \
        in cmp.sentence(c)
    a, b = [40.0, 44.0, 41.5], [50.0, 52.5, 49.0]
    half = stats.t.ppf(1 - 0.05 / 2 / 2, 2) * (stats.tvar(a) / 3 + stats.tvar(b) / 3) ** 0.5
    assert c.verdict.hi - c.verdict.lo == pytest.approx(2 * half)


def test_an_equivalence_verdict_says_its_tests_are_twice_as_strict_as_needed():
    """Read off the displayed 1 - α/m interval, the two one-sided tests are each at α/(2m): half what equivalence
    alone needs. Said in the sentence (the rule itself is unchanged)."""
    s, t = study_frames({"adb": [47.0, 49.8, 45.5], "adb+ic": [47.2, 50.1, 45.6], "baseline": [50.0, 52.5, 49.0]})
    compared = cmp.compare_rows(s, [("adb+ic", "adb"), ("baseline", "adb")], trials=t)
    eq = compared[0]
    assert eq.verdict.verdict.value == "equivalent within ±δ"
    assert cmp.sentence(eq).endswith("): equivalent within ±1 point (the two one-sided tests read off this interval "
                                      "are each at 1.25%: twice as strict as equivalence alone needs, 2.50%; "
                                      "docs/statistics.md)")
    assert "one-sided" not in cmp.sentence(compared[1])  # worse: no such clause


def test_each_tables_verdicts_open_with_the_heading_that_names_their_family():
    """The same rows on two metrics (report.py --metric) are two families; the heading says which one a table's
    verdicts belong to, and the sentences name the metric."""
    s, t = study_frames({"baseline": [50.0, 52.5, 49.0], "adb": [47.0, 49.8, 45.5]})
    s["test_novel_acc"] = s["test_acc"] / 2
    for metric in ("test_acc", "test_novel_acc"):
        text = format_table(paper_table(s, metric=metric, baseline="baseline", trials=t))
        first, second = text.splitlines()[:2]
        assert first == (f"verdicts, one family: the 1 comparison of this table on the last session's {metric}, all "
                         "true together with probability at least 95%; a verdict of another table, or of this table "
                         "on another metric, is of another family (docs/statistics.md):")
        assert second.startswith("adb vs baseline: ") and (f"({metric})" in second) == (metric != "test_acc")
    md = format_table(paper_table(s, baseline="baseline", trials=t), markdown=True).splitlines()
    assert md[0].startswith("verdicts, one family: ") and md[1].startswith("- adb vs baseline: ")
