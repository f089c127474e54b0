"""The verdict policy (adbs_lab/stats/policy.py): the level it prints derives from α, its MLflow tags round-trip, a
study recorded before the policy's tag is read from its old tags (δ, looks; α 0.05), and the rules of α and δ."""

from __future__ import annotations

import json
import math

import pytest

from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import LEGACY_MIN_PAIRS
from adbs_lab.stats.policy import PAIRS_TAG, TAG, VerdictPolicy, combined
from adbs_lab.stats.rules import alpha_problem, delta_problem
from adbs_lab.stats.verdicts import Label


@pytest.mark.parametrize("alpha,text", [(0.05, "95%"), (0.1, "90%"), (0.025, "97.5%"), (0.01, "99%"), (0.5, "50%")])
def test_the_printed_level_is_derived_from_alpha(alpha, text):
    assert VerdictPolicy(alpha=alpha).level_text == text


@pytest.mark.parametrize("alpha,text", [(1e-7, "99.9999%"), (4e-7, "99.9999%"), (1e-12, "99.9999%"),
                                        (0.05 / 6, "99.1666%")])
def test_the_printed_level_never_rounds_up_past_one_minus_alpha(alpha, text):
    """The lines say the verdicts hold "with probability at least" the level: round(, 6):g printed α = 1e-7 as 100%."""
    assert VerdictPolicy(alpha=alpha).level_text == text


@pytest.mark.xfail(strict=True, reason="1 - 1e-300 is 1.0 in floating point: every interval is infinite and the "
                                       "lines say 100%; adbs_lab/stats/rules.py: alpha_problem takes any α > 0, and "
                                       "a lower bound there (e.g. 1e-6) is the owner's choice")
def test_an_error_rate_the_arithmetic_cannot_hold_is_refused():
    assert alpha_problem(1e-300) is not None or VerdictPolicy(alpha=1e-300).level < 1


def test_the_tags_round_trip_every_field():
    p = VerdictPolicy(alpha=0.1, delta=0.5, pairs=(("a", "b"), ("c", "b")), looks=Looks(max_seeds=5, alpha=0.1),
                      m=3, metric="val_acc")
    tags = p.tags()
    assert set(tags) == {TAG, PAIRS_TAG} and json.loads(tags[PAIRS_TAG]) == [["a", "b"], ["c", "b"]]
    assert VerdictPolicy.from_tags(tags) == p
    assert VerdictPolicy.from_tags(VerdictPolicy().tags()) == VerdictPolicy(pairs=())


def test_a_study_recorded_before_the_tag_is_read_from_its_old_tags():
    looks = Looks(max_seeds=6)
    old = {"adbs.resolve": "0.5", "adbs.looks": json.dumps(looks.__dict__), PAIRS_TAG: '[["a", "b"]]'}
    legacy = LEGACY_MIN_PAIRS  # recorded before the rule of too few pairs: read by the rule it printed by
    assert VerdictPolicy.from_tags(old) == VerdictPolicy(delta=0.5, looks=looks, pairs=(("a", "b"),), min_pairs=legacy)
    assert VerdictPolicy.from_tags({"adbs.resolve": "2"}) == VerdictPolicy(delta=2.0, min_pairs=legacy)
    assert VerdictPolicy.from_tags({}) == VerdictPolicy(min_pairs=legacy)
    assert VerdictPolicy.from_tags({"adbs.resolve": "x", "adbs.looks": "{", TAG: "[1]"}) == VerdictPolicy(min_pairs=legacy)
    recorded_before = {TAG: json.dumps({"version": 1, "alpha": 0.05, "delta": 1.0, "looks": None, "m": None,
                                        "metric": "test_acc"})}
    assert VerdictPolicy.from_tags(recorded_before).min_pairs == legacy
    now = VerdictPolicy(pairs=(("a", "b"),))
    assert VerdictPolicy.from_tags(now.tags()) == now and now.min_pairs == 3  # this code's rule, recorded


def test_a_later_version_is_read_for_the_fields_this_code_knows():
    tags = {TAG: json.dumps({"version": 2, "alpha": 0.1, "delta": 2.0, "looks": None, "min_pairs": 3})}
    assert VerdictPolicy.from_tags(tags) == VerdictPolicy(alpha=0.1, delta=2.0)


@pytest.mark.parametrize("alpha,ok", [(0.0, False), (-0.1, False), (math.nan, False), (math.inf, False),
                                      (0.5, True), (0.5000001, False), (1e-9, True)])
def test_the_rule_of_alpha(alpha, ok):
    assert (alpha_problem(alpha) is None) is ok


@pytest.mark.parametrize("delta,ok", [(0.0, False), (math.nan, False), (math.inf, False), (100.0, True),
                                      (100.0001, False), (0.001, True)])
def test_the_rule_of_delta(delta, ok):
    assert (delta_problem(delta) is None) is ok


def test_one_alpha_for_the_family_and_the_wording_of_delta():
    with pytest.raises(ValueError, match="one alpha for the family"):
        VerdictPolicy(alpha=0.1, looks=Looks())
    assert VerdictPolicy(alpha=0.1).at_looks(Looks()).looks == Looks(alpha=0.1)
    assert VerdictPolicy().wording(Label.EQUIVALENT) == "equivalent within ±1 point"
    assert VerdictPolicy(delta=0.5).wording(Label.BETTER_SMALL) == "better, by less than 0.5 points"
    assert combined([VerdictPolicy(delta=2.0), VerdictPolicy(alpha=0.1, delta=0.5)]) == VerdictPolicy(delta=0.5)


def test_a_split_policy_gives_its_looks_the_primary_share_and_round_trips():
    from adbs_lab.stats.continuation import AlphaSplit, design

    split = AlphaSplit()
    p = VerdictPolicy(split=split, pairs=(("a", "b"),)).at_looks(design(1))
    assert p.alpha == 0.05 and p.primary_alpha == 0.04 and p.looks.alpha == 0.04 and p.level_text == "95%"
    assert VerdictPolicy.from_tags(p.tags()) == p
    assert VerdictPolicy.from_tags(VerdictPolicy(pairs=()).tags()).split is None  # a study without one reads none
    with pytest.raises(ValueError, match="one alpha for the family"):
        VerdictPolicy(split=split, looks=Looks())  # looks at 0.05 under a primary share of 0.04
    with pytest.raises(ValueError, match="split the family's alpha"):
        VerdictPolicy(alpha=0.1, split=split)
