"""adbs_lab/stats/sequential.py: repeated looks do not inflate false verdicts (α spent across the looks, every
interval at every look covering together), resolved comparisons stay frozen, and which rows run next."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP, MORE, next_batch
from adbs_lab.stats.simulate import Noise, differences, false_verdicts, run
from adbs_lab.stats.verdicts import Label, replay

ALPHA = 0.05
N_STUDIES = 2000
BOUND = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / N_STUDIES)


@pytest.mark.parametrize("kind", ["normal", "t3_outliers"])
@pytest.mark.parametrize("looks", [Looks(), Looks(batch=1), Looks(spending="pocock"), Looks(spending="equal")],
                         ids=["default", "obf-b1", "pocock-b2", "equal-b2"])
def test_no_difference_gives_a_false_verdict_in_at_most_alpha_of_sequential_studies(looks, kind):
    r = run(np.random.default_rng(31), N_STUDIES, [0.0, 0.0, 0.0], 1.0, looks, kind=kind)
    family, each = r["false"].any(axis=1).mean(), r["false"].mean(axis=0)
    print(f"\n{looks.spending} b={looks.batch} {kind}: any false verdict {family:.2%}, per comparison "
          f"{np.round(each * 100, 2)}%, all intervals covering {r['covered'].all(axis=1).mean():.2%}")
    assert family <= BOUND and (each <= BOUND).all()
    assert r["covered"].all(axis=1).mean() >= 1 - BOUND  # the guarantee itself: every interval, every look


def test_mixed_true_differences_keep_every_verdict_true_in_1_minus_alpha():
    """Equivalence errors too: one comparison truly 0.9 δ (equivalent would be true, better by less than δ too), one
    truly 1.2 δ (equivalent would be false), one truly 0."""
    effects = [0.9, 1.2, 0.0]
    r = run(np.random.default_rng(32), N_STUDIES, effects, 0.5, Looks())
    assert r["false"].any(axis=1).mean() <= BOUND and r["covered"].all(axis=1).mean() >= 1 - BOUND


def test_the_error_check_catches_looks_that_spend_no_alpha():
    """Each look at the full α/m (looking repeatedly without spending) gives false verdicts in more than α."""

    class NoSpending(Looks):
        @property
        def alphas(self) -> tuple[float, ...]:
            return (self.alpha,) * len(self.sizes)

    looks: Noise = "normal"
    d = differences(np.random.default_rng(31), N_STUDIES, [0.0] * 3, 8, 1.0, looks)
    false = false_verdicts(replay(d, NoSpending(batch=1), 3, 1.0)["code"], [0.0] * 3, 1.0)
    assert false.any(axis=1).mean() > BOUND


PAIRS = {"A": ("A", "ref"), "B": ("B", "ref")}


def test_rows_of_unresolved_comparisons_and_their_reference_run_to_the_next_look():
    diffs = {"A": [3.0, 3.1, 2.9], "B": [0.5, -1.0, 2.0]}  # A clearly better at look 1, B open
    nb = next_batch(diffs, PAIRS)
    assert not nb.done and nb.reason == MORE and nb.seeds == {"B": 5, "ref": 5}
    assert nb.verdicts["A"].verdict is Label.BETTER and nb.verdicts["A"].look == 1
    assert next_batch({"A": [3.0, 3.1, 2.9, 3.0], "B": [0.5, -1.0, 2.0, 0.1]}, PAIRS).seeds == {"B": 5, "ref": 5}
    assert next_batch({"A": [3.0, 3.1], "B": [0.5, -1.0]}, PAIRS).seeds == {"A": 3, "B": 3, "ref": 3}


def test_a_resolved_comparison_is_frozen_and_a_resumed_study_agrees():
    first = next_batch({"A": [3.0, 3.1, 2.9], "B": [0.5, -1.0, 2.0]}, PAIRS)
    later = {"A": [3.0, 3.1, 2.9, -9.0, -9.0], "B": [0.5, -1.0, 2.0, 0.3, 0.2]}  # A's later seeds would say worse
    again = next_batch(later, PAIRS)
    assert again.verdicts["A"] == first.verdicts["A"] and again.verdicts["A"].n == 3
    assert next_batch(later, PAIRS) == again  # a pure function of the finished trials


def test_the_study_ends_when_all_are_resolved_or_at_the_cap():
    done = next_batch({"A": [3.0, 3.1, 2.9], "B": [-3.0, -3.1, -2.9]}, PAIRS)
    assert done.done and done.reason == ALL_RESOLVED and done.seeds == {}
    noisy = [5.0, -5.0, 4.0, -4.0, 6.0, -6.0, 5.0, -5.0]
    cap = next_batch({"A": noisy, "B": [3.0, 3.1, 2.9]}, PAIRS)
    assert cap.done and cap.reason == CAP and cap.verdicts["A"].verdict is Label.NOT_RESOLVED
    assert cap.verdicts["A"].look == 4 and cap.verdicts["A"].n_seeds == 8
