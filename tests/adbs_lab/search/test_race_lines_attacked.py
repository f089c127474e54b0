"""Attacks on the race's printed verdicts (adbs_lab/search/seeds/race.py: SampledRace.verdict_lines): the interval
printed beside a verdict says that verdict, as the table's sentences guarantee (adbs_lab/results/comparisons.py:
ends)."""

from __future__ import annotations

import re

import pytest

from adbs_lab.search.seeds.policy import Standing
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import Label, Verdict, label
from tests.helpers.seeds import race

DELTA = 1.0


def _line(lo: float, hi: float, top: int = 2) -> tuple[str, Label]:
    plan = race(Looks(max_seeds=8, alpha=0.05), top=top, samples=5, delta=DELTA)
    v = label(lo, hi, DELTA)
    verdict = Verdict(estimate=(lo + hi) / 2, lo=lo, hi=hi, n=3, n_left_out=0, level=0.99, verdict=v, look=1,
                      n_seeds=3)
    standing = Standing({"a": 3, "b": 3}, (), True, "all resolved", {}, {"b": verdict}, "a", ("a", "b"))
    (line,) = plan.verdict_lines(standing, "val_avg_acc") or []
    return line, v


@pytest.mark.parametrize("lo, hi", [(-1.2, -0.004), (0.004, 1.5), (-0.996, 0.5), (-1.5, -1.004), (-0.5, 0.996)])
def test_the_printed_interval_of_a_race_verdict_says_that_verdict(lo, hi):
    line, v = _line(lo, hi)
    assert v is not Label.NOT_RESOLVED, "the attack needs a resolved verdict"
    m = re.search(r"CI ([+-]\d+\.\d+) to ([+-]\d+\.\d+)", line)
    assert m, line
    printed = label(float(m[1]), float(m[2]), DELTA)
    assert printed is v, f"{line!r}: the printed interval reads {printed.value}, the verdict is {v.value}"

