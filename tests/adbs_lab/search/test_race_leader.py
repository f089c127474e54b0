"""The race's leader (adbs_lab/search/seeds/race.py, adbs_lab/search/seeds/engine.py: LeaderPairs): its validation mean
over the race's seeds is the best of several noisy means, so every line that shows it says post-selection; and a
contender leads at a look only with every seed of that look finite (a failed or diverged seed is NaN), so no leader
stands on one finite seed of three. Constructed values, no study runs."""

from __future__ import annotations

import re
import types

import numpy as np
import pandas as pd
import pytest

from adbs_lab.driver import summarise
from adbs_lab.results import run_files
from adbs_lab.stats.looks import Looks
from tests.helpers.seeds import race, race_standing

SCREEN = {"a": 90.0, "b": 80.0, "c": 70.0}
ONE_LOOK = Looks(max_seeds=3, alpha=0.05)


def _standing(values: dict, looks: Looks = ONE_LOOK, screen=SCREEN):
    policy = race(looks, top=len(screen), samples=len(screen))
    states = {u: {s: ("complete" if s in values.get(u, {}) else "diverged") for s in range(1, looks.n0 + 1)}
              for u in screen}
    return policy, race_standing(screen, True, values, states, policy)


def test_the_best_of_several_noisy_validation_means_is_biased_up():
    """Why the label: three contenders of one true mean, σ = 1 per seed, 3 seeds: the leader's mean over the truth
    is E[max of 3 N(0, 1/3)] = 0.846 / √3 = 0.49 (the expected maximum of 3 standard normals, 0.846)."""
    rng = np.random.default_rng(7)
    means = rng.normal(0.0, 1.0, size=(4000, 3, 3)).mean(axis=2)
    bias = means.max(axis=1).mean()
    assert 0.40 < bias < 0.58, bias


def test_one_finite_seed_of_three_cannot_lead():
    # a has the best mean on its one finite seed; b has all three seeds finite
    values = {"a": {1: 99.0}, "b": {1: 60.0, 2: 60.2, 3: 59.8}, "c": {1: 50.0, 2: 50.1, 3: 49.9}}
    policy, s = _standing(values)
    assert s.leader == "b", f"{s.leader} leads on 1 finite seed of 3"
    (look,) = s.looks
    line = policy.look_line(look)
    assert "leader b" in line and "a: 1 of 3 seeds finite, cannot lead at this look" in line, line


def test_no_contender_with_every_seed_finite_means_no_leader_said():
    values = {"a": {1: 99.0}, "b": {1: 60.0, 3: 59.8}, "c": {}}
    policy, s = _standing(values)
    assert s.done and s.leader is None and not s.verdicts
    (look,) = s.looks
    line = policy.look_line(look)
    assert "no leader" in line and "b: 2 of 3 seeds finite, cannot lead at this look" in line, line
    end = policy.end_line(s) or ""
    assert "no leader" in end and "None" not in end, end
    chosen = policy.chosen(s)
    assert chosen.get("config_label") is None and "finite" in chosen.get("why", ""), chosen
    assert policy.notes(s, "val_avg_acc") == [] and policy.verdict_lines(s, "val_avg_acc") == []


def test_a_tie_leads_by_the_screening_order_and_both_may_lead():
    values = {"a": {1: 60.0, 2: 60.0, 3: 60.0}, "b": {1: 59.0, 2: 61.0, 3: 60.0}, "c": {1: 50.0, 2: 50.1, 3: 49.9}}
    _, s = _standing(values)
    assert s.leader == "a"  # equal means: the earlier contender (best on the screening seed)
    values["a"] = {1: 60.0, 3: 60.0}
    _, s = _standing(values)
    assert s.leader == "b"  # a no longer has every seed finite


def test_two_seeds_per_look():
    looks = Looks(n0=2, batch=2, max_seeds=4, alpha=0.05)
    values = {"a": {1: 99.0}, "b": {1: 60.0, 2: 60.2}}
    policy, s = _standing(values, looks, {"a": 90.0, "b": 80.0})
    assert s.looks[0].leader == "b" and s.looks[0].n == 2
    assert "a: 1 of 2 seeds finite, cannot lead at this look" in policy.look_line(s.looks[0])


def _best(resolved: bool) -> dict:
    race_keys = {"contenders": ["a", "b"], "fresh_seeds": 3}
    return {"config_label": "a", "objective": "val_avg_acc", "mean_over_seeds": 60.0, "trial_seeds": [1, 2, 3],
            "seeds": 3, "config": {}, "race": race_keys, "resolved_by_verdicts": resolved,
            **({} if resolved else {"indistinguishable_from": ["b"]})}


@pytest.mark.parametrize("resolved", [True, False])
def test_the_leaders_validation_mean_is_labelled_post_selection(resolved, capsys):
    summarise.print_best(types.SimpleNamespace(best=_best(resolved), trials=pd.DataFrame(), pareto=None,
                                               standing=None))
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "60.00" in x]
    assert re.search(r"\(60\.00[^)]*post-selection", line), line
    report = run_files.report_markdown(study="race", table_md="", best=_best(resolved),
                                       savings={"trials": 3, "pruned": 0, "base_epochs_run": 0, "base_epochs_planned": 0})
    (md,) = [x for x in report.splitlines() if "60.00" in x]
    assert "post-selection" in md, md


def test_best_config_json_marks_the_leaders_validation_mean():
    values = {"a": {1: 60.0, 2: 60.2, 3: 59.8}, "b": {1: 50.0, 2: 50.1, 3: 49.9}, "c": {1: 40.0, 2: 40.1, 3: 39.9}}
    policy, s = _standing(values)
    mark = policy.chosen(s)["validation_post_selection"]
    assert mark["seeds"] == [1, 2, 3] and mark["mean_over_seeds"] == "post-selection", mark
