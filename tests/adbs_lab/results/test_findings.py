"""The findings: a comparison's verdicts on the deciding metric and the secondary ones, in one sentence each, where the
verdict policy splits α (adbs_lab/results/comparisons.py: finding, findings; adbs_lab/stats/continuation.py:
AlphaSplit), and the same lines as before where it does not."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import format_table, paper_table
from adbs_lab.stats.continuation import AlphaSplit
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.frames import split_frames

SPLIT = VerdictPolicy(split=AlphaSplit())


def _seed(acc: float, base: float, novel: float, h: float, h1: float | None = None) -> dict[str, float]:
    return {"test_acc": acc, "test_base_acc": base, "test_novel_acc": novel, "test_hmean": h,
            "h1": h if h1 is None else h1}


# adb+ic - baseline per seed: accuracy -2.4, -3.4, -4.4 (mean -3.4, sd 1); base -30, -22, -14 (sd 8); novel +23.1,
# +24.1, +25.1; H last +12, +13, +14; H of session 1 +10, +11, +12, so H averaged over sessions 1 and 2: +11, +12, +13
REF = [_seed(60, 69, 23, 34, 35)] * 3
ROW = [_seed(60 + a, 69 + b, 23 + n, 34 + h, 35 + h1) for a, b, n, h, h1 in
       ((-2.4, -30, 23.1, 12, 10), (-3.4, -22, 24.1, 13, 11), (-4.4, -14, 25.1, 14, 12))]


def _one(policy: VerdictPolicy = SPLIT, ref=REF, row=ROW) -> cmp.Compared:
    s, t = split_frames({"baseline": ref, "adb+ic": row})
    (c,) = cmp.compare_rows(s, [("adb+ic", "baseline")], trials=t, policy=policy)
    return c


def test_the_finding_says_every_metric_in_the_tables_words():
    assert cmp.finding(_one()) == (
        "adb+ic vs baseline (3 seeds): last-session accuracy worse by 3.40 points (95% CI -6.20 to -0.60); "
        "novel accuracy better by 24.10 points (95% CI +12.57 to +35.63); "
        "base accuracy not resolved (-22.00, 95% CI -114.21 to +70.21); "
        "H last better by 13.00 points (95% CI +1.47 to +24.53); "
        "H averaged better by 12.00 points (95% CI +0.47 to +23.53)")


def test_the_intervals_are_at_the_split_levels_by_hand():
    """The deciding metric at 0.04 / m, each secondary at 0.01 / (m · 4): m = 1 here, sd 1 over 3 seeds."""
    c = _one()
    half = stats.t.ppf(1 - 0.04 / 2, 2) / math.sqrt(3)
    assert c.verdict.level == pytest.approx(0.96)
    assert (c.verdict.lo, c.verdict.hi) == (pytest.approx(-3.4 - half), pytest.approx(-3.4 + half))
    half = stats.t.ppf(1 - 0.01 / 4 / 2, 2) / math.sqrt(3)
    novel = c.secondaries[0]
    assert (novel.name, novel.column, novel.m, novel.verdict.level) == ("novel accuracy", "test_novel_acc", 4,
                                                                         pytest.approx(1 - 0.01 / 4))
    assert (novel.verdict.lo, novel.verdict.hi) == (pytest.approx(24.1 - half), pytest.approx(24.1 + half))
    assert [x.verdict.estimate for x in c.secondaries] == [pytest.approx(v) for v in (24.1, -22.0, 13.0, 12.0)]


def test_without_a_split_no_secondary_and_the_lines_of_before():
    c = _one(VerdictPolicy())
    assert c.secondaries == () and cmp.findings([c]) == []
    assert c.verdict.level == pytest.approx(0.95)  # all of α on the deciding metric
    assert cmp.opening([c]) == [cmp.family_heading([c]), cmp.sentence(c), ""]


def test_the_table_opens_with_the_findings_and_names_the_split_once():
    s, t = split_frames({"baseline": REF, "adb+ic": ROW, "adb": ROW})
    table = paper_table(s, baseline="baseline", trials=t, verdicts=SPLIT)
    text = format_table(table)
    lines = text.splitlines()
    assert lines[0].startswith("findings, one family: the 2 comparisons of this table, each on the last session's "
                               "test_acc (which alone decides when seeds stop and which row is best) and on 4 "
                               "secondary metrics (novel accuracy, base accuracy, H last, H averaged), all true "
                               "together with probability at least 95%")
    assert lines[1].startswith("adb+ic vs baseline (3 seeds): last-session accuracy not resolved (-3.40, 95% CI")
    assert lines[2].startswith("adb vs baseline (3 seeds): ")
    assert text.count("α = 0.05 split 0.04 to the deciding metric (Bonferroni over 2 comparisons: each interval at "
                      "0.04 / 2) and 0.01 over 4 secondary metrics × 2 comparisons (Bonferroni: each interval at "
                      "0.01 / 8)") == 1
    assert "adb+ic vs baseline: -3.40 points in the last session (95% CI" in text  # the deciding metric in full
    assert "at the deciding metric's share of α, 0.04" in text  # the Δlast paired note
    md = format_table(table, markdown=True)
    assert "\n- adb+ic vs baseline (3 seeds): last-session accuracy not resolved" in md


def test_secondaries_are_read_at_the_look_the_primary_stopped_at():
    """With planned looks the deciding metric resolves at the first look (3 seeds); its secondaries are read over
    those 3 seeds at the first look's share of the secondaries' α, though 5 seeds ran."""
    looks = Looks(n0=3, batch=2, max_seeds=5, alpha=0.04, spending="equal")
    row = [{**r, "test_acc": 60 + d} for r, d in zip(ROW, (-3.3, -3.4, -3.5))]  # sd 0.1: resolved at 3 seeds
    row += [_seed(56.6, 47, 47, 47), _seed(56.6, 47, 47, 47)]
    c = _one(SPLIT.at_looks(looks), ref=REF + REF[:2], row=row)
    assert (c.verdict.look, c.verdict.n_seeds) == (1, 3)
    plan = AlphaSplit().secondary(looks)
    for sec in c.secondaries:
        assert (sec.verdict.look, sec.verdict.n_seeds, sec.verdict.n) == (1, 3, 3)
        assert sec.verdict.level == pytest.approx(1 - plan.alphas[0] / 4)
    assert c.verdict.level == pytest.approx(1 - looks.alphas[0])
    assert cmp.findings([c])[-1].startswith(
        "α = 0.05 split 0.04 to the deciding metric (Bonferroni over 1 comparison: each interval at α_k / 1, α_k the "
        "share of 0.04 its look spends) and 0.01 over 4 secondary metrics × 1 comparison (Bonferroni: each interval "
        "at α_k / 4, α_k the share of 0.01 at the look where its comparison's deciding metric stopped); ")


def test_nan_novel_accuracy_is_no_value_and_too_few_pairs_give_no_interval():
    """A trial whose last session has no novel classes has no novel accuracy nor H: its pair is left out of those
    metrics (not of accuracy and base), and with fewer than 3 finite pairs a secondary gets no interval."""
    row = [dict(r) for r in ROW]
    for r in row[:2]:
        r["test_novel_acc"] = r["test_hmean"] = r["h1"] = float("nan")
    c = _one(row=row)
    novel, base, h_last, h_avg = c.secondaries
    assert (c.verdict.n, base.verdict.n) == (3, 3)
    for sec in (novel, h_last, h_avg):
        assert sec.verdict.n == 1 and math.isnan(sec.verdict.lo) and sec.verdict.verdict.value == "not resolved"
    assert "novel accuracy not resolved (+25.10, n=1: fewer than 3 finite pairs, no interval)" in cmp.finding(c)


def test_h_averaged_is_over_the_sessions_with_novel_classes():
    """Session 0 (no novel classes, H NaN) is not a value of H averaged; a trial without incremental sessions has
    none."""
    s, _ = split_frames({"r": [_seed(50, 60, 40, 48, 44)]})
    got = {name: values for name, _, values in cmp.secondary_values(s, "test_acc")}
    assert got["H averaged"] == {"r": {0: 46.0}} and got["H last"] == {"r": {0: 48.0}}
    only_base = s[s["session"] == 0]
    got = {name: values for name, _, values in cmp.secondary_values(only_base, "test_acc")}
    assert math.isnan(got["H averaged"]["r"][0]) and math.isnan(got["novel accuracy"]["r"][0])
    assert got["base accuracy"]["r"][0] == 80.0
    assert cmp.secondary_values(s, "summary/test_avg_acc") == []  # a metric of no split: no secondaries


def test_a_best_row_is_never_decided_by_a_secondary():
    """best_standing reads the deciding metric alone: a row worse on accuracy stays below, however much better its
    novel accuracy is."""
    c = _one()
    assert c.secondaries[0].verdict.verdict.value == "better"
    assert cmp.best_standing("baseline", [c]) == (True, [])


def test_a_report_reads_the_same_findings_from_the_recorded_policy():
    """studies/report.py rebuilds the table from MLflow under VerdictPolicy.from_tags: the recorded split gives the
    same lines; a record from before the split (no "split" in the tag) gives none."""
    s, t = split_frames({"baseline": REF, "adb+ic": ROW})
    ran = SPLIT.with_pairs([("adb+ic", "baseline")])  # a study records its comparisons beside its policy
    recorded = VerdictPolicy.from_tags(ran.tags())
    assert recorded == ran
    text = format_table(paper_table(s, baseline="baseline", trials=t, verdicts=recorded))
    assert text.startswith("findings, one family") and text == format_table(
        paper_table(s, baseline="baseline", trials=t, verdicts=ran))
    old = VerdictPolicy().with_pairs([("adb+ic", "baseline")]).tags()
    assert cmp.findings(paper_table(s, baseline="baseline", trials=t,
                                    verdicts=VerdictPolicy.from_tags(old)).attrs["comparisons"]) == []


def test_a_table_across_studies_reads_the_split_where_every_study_has_one():
    """studies/report.py A B: the combined policy keeps the split of the study with the smallest α where every
    study has one (none where one was recorded before it); an unpaired comparison's secondaries are Welch's at the
    secondaries' share over 4 × m."""
    from adbs_lab.stats.policy import combined
    assert combined([SPLIT, SPLIT.with_delta(0.5)]).split == AlphaSplit()
    assert combined([SPLIT, VerdictPolicy()]).split is None
    s, t = split_frames({"baseline": REF, "adb+ic": ROW})
    t.loc[t["label"] == "adb+ic", "seed"] += 10  # other seeds: nothing pairs them
    s.loc[s["label"] == "adb+ic", "seed"] += 10
    (c,) = cmp.compare_rows(s, [("adb+ic", "baseline")], trials=t, policy=SPLIT, across=True)
    assert not c.paired and c.verdict.level == pytest.approx(0.96)
    assert [x.verdict.level for x in c.secondaries] == [pytest.approx(1 - 0.01 / 4)] * 4
    assert cmp.finding(c).startswith("adb+ic vs baseline (unpaired, n=3): last-session accuracy ")


def test_a_smoke_run_says_its_findings_under_the_smoke_banner_and_latex_keeps_them_to_quote():
    from adbs_lab.results import renderings
    from adbs_lab.stats.policy import SMOKE_BANNER
    s, t = split_frames({"baseline": REF, "adb+ic": ROW})
    table = paper_table(s, baseline="baseline", trials=t,
                        verdicts=VerdictPolicy(split=AlphaSplit(), smoke=True))
    first = format_table(table).splitlines()[0]
    assert first.startswith("findings, one family: ") and first.endswith(f", {SMOKE_BANNER} (docs/tables.md):")
    assert "95% CI" in cmp.finding(table.attrs["comparisons"][0])  # the level it was read at, even in a smoke run
    latex = renderings.to_latex(table, "")
    assert latex.startswith("% findings, one family: ") and "\n% adb+ic vs baseline (3 seeds): last-session" in latex
