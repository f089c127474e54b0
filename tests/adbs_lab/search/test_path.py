"""adbs_lab/search/path.py: the greedy ablation path with racing on a known response (a pure function of the config
plus seeded noise; no training): it finds the known order of changes, racing saves trials, the confirmation labels
post-selection Δs, and under no difference the race drops a candidate in no more than α + 2√(α(1-α)/N) of races."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.results.path_report import interval_text, saved_line, table_rows
from adbs_lab.search.path import Memo, confirm, end, differences, greedy, race, runs_saved, trial_counts
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.verdicts import label

A = {"x1": 0, "x2": 0, "x3": 0, "x4": 0, "seed": 0, "device": "cpu"}
B = {"x1": 1, "x2": 1, "x3": 1, "x4": 1, "seed": 7, "device": "cuda"}
SEEDS = list(range(8))
LOOKS = Looks(n0=3, batch=2, max_seeds=8)


def response(c: dict) -> float:
    """Known truth: x1 +5, x2 +3, x3 +1, x4 -2 alone from A, but x4 is worth +6 more once x2 is in (an interaction:
    the greedy path takes x4 before x3, against the order of their effects from A)."""
    return 50 + 5 * c["x1"] + 3 * c["x2"] + 1 * c["x3"] - 2 * c["x4"] + 6 * c["x2"] * c["x4"]


def noisy(sigma: float, calls: list | None = None):
    def evaluate(tag, configs, seeds):
        if calls is not None:
            calls.append((tag, sorted(configs), list(seeds)))
        out = {}
        for lab, c in configs.items():
            key = sum(v * 10 ** i for i, v in enumerate(c[k] for k in ("x1", "x2", "x3", "x4")))
            out[lab] = {s: response(c) + sigma * np.random.default_rng([s, key]).standard_normal() for s in seeds}
        return out
    return evaluate


def noiseless_order() -> list[str]:
    cur, left, order = dict(A), ["x1", "x2", "x3", "x4"], []
    while left:
        best = max(left, key=lambda f: response({**cur, f: 1}))
        order.append(best)
        cur[best] = 1
        left.remove(best)
    return order


def test_differences_skip_seeds_and_devices():
    assert differences(A, B) == ["x1", "x2", "x3", "x4"]
    assert differences(A, {**A, "seed": 3}) == []


def test_the_path_finds_the_known_order_and_racing_saves_trials():
    calls: list = []
    memo = Memo(noisy(0.1, calls))
    steps = greedy(A, B, memo, SEEDS, LOOKS, delta=1.0)
    assert [s.field for s in steps] == noiseless_order() == ["x1", "x2", "x4", "x3"]
    assert steps[-1].config == {**A, "x1": 1, "x2": 1, "x3": 1, "x4": 1}
    assert steps[-1].runs == 0 and steps[-1].full == 0  # one difference left: nothing to choose
    assert runs_saved(steps) > 0
    assert sum(s.runs for s in steps) == memo.trials < sum(s.full for s in steps)
    first = steps[0].looks[0]
    assert first.leader == "x1=1" and "x4=1" in first.dropped  # 7 points below, σ 0.1: gone at the first look
    assert "racing saved" in saved_line(steps)


def test_confirmation_on_fresh_seeds_is_not_post_selection_and_recovers_the_deltas():
    memo = Memo(noisy(0.1))
    steps = greedy(A, B, memo, SEEDS, LOOKS, delta=1.0)
    start, conf = confirm(A, steps, memo, [100, 101, 102, 103], 0.05, 1.0)
    assert start == pytest.approx(50, abs=0.5)
    truth = [5, 3, 4, 1]  # x1, x2, x4 (with x2 in), x3
    for c, t in zip(conf, truth):
        assert not c.post_selection
        assert c.verdict.lo <= t <= c.verdict.hi
    rows = table_rows(start, conf, VerdictPolicy())
    assert rows[1][4] == "better" and rows[3][4] == "better"


def test_confirmation_on_selection_seeds_is_labelled_post_selection_and_reuses_trials():
    calls: list = []
    memo = Memo(noisy(0.1, calls))
    steps = greedy(A, B, memo, SEEDS[:3], Looks.fixed(3), delta=1.0)
    before = memo.trials
    _, conf = confirm(A, steps, memo, SEEDS[:3], 0.05, 1.0)
    assert all(c.post_selection for c in conf)  # the last ran nothing, but the one before it won on those seeds
    assert memo.trials - before == 2 * 3  # only A and B were not measured on those seeds
    # prefetched, A and B run in the first race's call, and the confirmation runs nothing more
    calls.clear()
    memo = Memo(noisy(0.1, calls))
    memo.prefetch({"from": A, "to": end(A, B)})
    greedy(A, B, memo, SEEDS[:3], Looks.fixed(3), delta=1.0)
    assert calls[0][1] == sorted(["from", "to", "x1=1", "x2=1", "x3=1", "x4=1"])
    n = len(calls)
    confirm(A, steps, memo, SEEDS[:3], 0.05, 1.0)
    assert len(calls) == n
    assert "(post-selection)" in table_rows(0.0, conf, VerdictPolicy())[1][4]


@pytest.mark.parametrize("fields", [["x1", "x2"], ["x1", "x2", "x3"], ["x1", "x2", "x3", "x4"]])
@pytest.mark.parametrize("confirm_seeds, marked", [([0, 1, 2], True), ([2, 100, 101], True), ([100, 101, 102], False)])
def test_a_step_measured_against_a_configuration_its_seeds_chose_is_post_selection(fields, confirm_seeds, marked):
    """The last step races nothing (one candidate left), so its Δ was marked unbiased on the selection seeds; yet it is
    measured against the configuration the step before chose on them: every step's Δ is post-selection where the
    confirmation seeds include a seed that chose it or any step before it, and none where they include none."""
    b = {**A, **{f: 1 for f in fields}}
    memo = Memo(noisy(0.1))
    steps = greedy(A, b, memo, SEEDS[:3], Looks.fixed(3), delta=1.0)
    assert len(steps) == len(fields) and steps[-1].looks == ()  # the last step had one candidate: no race
    _, conf = confirm(A, steps, memo, confirm_seeds, 0.05, 1.0)
    assert [c.post_selection for c in conf] == [marked] * len(fields)


def test_printed_intervals_give_the_printed_verdict():
    memo = Memo(noisy(0.8))
    steps = greedy(A, B, memo, SEEDS[:3], Looks.fixed(3), delta=1.0)
    _, conf = confirm(A, steps, memo, [50, 51, 52], 0.05, 1.0)
    for c in conf:
        text = interval_text(c.verdict, 1.0)
        lo, hi = (float(x) for x in text.split("(")[1].rstrip(")").split(" to "))
        assert label(lo, hi, 1.0) is c.verdict.verdict


def test_trial_counts_are_the_candidates_times_the_seeds():
    assert trial_counts(4, LOOKS, 3) == ((4 + 3 + 2) * 3 + 5 * 3, (4 + 3 + 2) * 8 + 15)
    assert trial_counts(1, LOOKS, 3)[1] == 2 * 3


def _false_drop_rate(n: int) -> float:
    rng = np.random.default_rng(0)
    cands = {f"c{i}": {"i": i} for i in range(4)}
    false = 0
    for _ in range(n):
        draws = rng.standard_normal((4, 8))

        def evaluate(tag, configs, seeds, draws=draws):
            return {lab: {s: float(draws[c["i"], s]) for s in seeds} for lab, c in configs.items()}
        _, taken, _ = race("s1", cands, evaluate, SEEDS, LOOKS, 1.0)
        false += any(lk.dropped for lk in taken)
    return false / n


def test_under_no_difference_the_race_drops_a_candidate_rarely(monkeypatch):
    """500 races of 4 equal candidates, σ = 1: a drop is a false "worse"; at most α + 2√(α(1-α)/N) of races. The
    same check catches a race whose looks each spend 0.05 with no Bonferroni over the pairs."""
    from adbs_lab.search import path

    n, alpha = 500, 0.05
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / n)
    assert _false_drop_rate(n) <= bound
    monkeypatch.setattr(path, "bonferroni", lambda a, m: alpha)
    assert _false_drop_rate(n) > bound
