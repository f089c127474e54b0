"""adbs_lab/search/seeds/race.py: the race of a sampled search's best configurations on fresh seeds. Its steps on
fixed values (contenders, leader, who runs the next batch, the cap, a resumed batch), the searcher's screening,
race and Optuna record (no Ray run), and simulated races against known truth: under no difference no false
verdict in more than α + 2√(α(1-α)/N) of races, a true best chosen and resolved at the rate docs/statistics.md
states, and the check failing for a race without Bonferroni over its pairs."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.tune_keys import RACE_OF, SEED_KEY, SEEDS_ATTR
from adbs_lab.search.searcher import BaseEpochStopper, StudySearch
from adbs_lab.search.seeds.policy import Standing
from adbs_lab.search.seeds.race import SCREEN_SEED, SampledRace, post_selection, resolved
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP
from adbs_lab.stats.simulate import false_verdicts
from adbs_lab.stats.verdicts import CODE, Label
from tests.helpers.seeds import race as race_policy
from tests.helpers.seeds import race_standing as replay

ALPHA = 0.05
N_RACES = 500
BOUND = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / N_RACES)
PLAN = race_policy(Looks(max_seeds=8), top=3, samples=6, delta=1.0)


def _race(true: dict[str, float], fresh: dict[str, list[float]], plan: SampledRace = PLAN) -> Standing:
    """A race whose every trial has ended: `true` the screening seed's value, `fresh` each label's fresh seeds."""
    values = {lab: {SCREEN_SEED + 1 + i: v for i, v in enumerate(xs)} for lab, xs in fresh.items()}
    states = {lab: {s: "complete" for s in seeds} for lab, seeds in values.items()}
    return replay(true, True, values, states, plan)


def test_the_top_three_on_the_screening_seed_race_and_a_clear_leader_is_resolved_at_the_first_look():
    screen = {"a": 60.0, "b": 59.0, "c": 58.0, "d": 10.0, "e": float("nan"), "f": 57.0}
    r = _race(screen, {"a": [60.0, 60.1, 59.9] + [60.0] * 5, "b": [55.0, 55.2, 54.8] + [55.0] * 5,
                       "c": [50.0, 50.1, 49.8] + [50.0] * 5})
    assert r.contenders == ("a", "b", "c") and r.leader == "a" and r.done and r.reason == ALL_RESOLVED
    assert resolved(r) and r.targets == {"a": 3, "b": 3, "c": 3} and len(r.looks) == 1
    assert {c: v.verdict for c, v in r.verdicts.items()} == {"b": Label.WORSE, "c": Label.WORSE}
    assert "race look 1 of at most 4 at 3 fresh seeds: leader a; 2 of 2 contenders resolved" in PLAN.look_line(r.looks[0])
    assert "n=3, reached at look 1 of 4, 3 seeds): worse" in (PLAN.verdict_lines(r, "val_avg_acc") or [""])[0]
    assert (post_selection(r) or {})["seeds"] == [0, 1, 2, 3]
    assert "race stopped after look 1: the leader a is resolved" in (PLAN.end_line(r) or "")


def test_an_unresolved_contender_and_the_leader_run_the_next_batch_and_a_resolved_one_does_not():
    fresh = {"a": [60.0, 60.1, 59.9, 60.0, 60.0], "b": [55.0, 55.11, 54.9], "c": [59.0, 61.0, 58.0, 60.5, 59.5]}
    partial = {lab: {1 + i: v for i, v in enumerate(xs)} for lab, xs in fresh.items()}
    states = {lab: {s: "complete" for s in d} for lab, d in partial.items()}
    first = replay({"a": 3.0, "b": 2.0, "c": 1.0}, True, {k: {s: v for s, v in d.items() if s <= 3}
                                                         for k, d in partial.items()},
                   {k: {s: v for s, v in d.items() if s <= 3} for k, d in states.items()}, PLAN)
    assert not first.done and first.looks[0].next == {"a": 5, "c": 5} and first.missing == {"a": [4, 5], "c": [4, 5]}
    assert first.final("b") and not first.final("a")
    second = replay({"a": 3.0, "b": 2.0, "c": 1.0}, True, partial, states, PLAN)
    assert len(second.looks) == 2 and second.targets == {"a": 7, "b": 3, "c": 7}  # the batch it asks for
    assert second.missing == {"a": [6, 7], "c": [6, 7]} and second.looks[1].n == 5


def test_a_new_leader_brings_back_a_contender_not_resolved_against_it_read_at_the_look_its_seeds_reached():
    fresh = {"a": [60.0] * 7, "b": [55.0, 65.0, 58.0, 70.0, 70.0, 70.0, 70.0], "c": [50.0, 50.1, 49.9, 50.0, 50.0]}
    r = _race({"a": 3.0, "b": 2.0, "c": 1.0}, {k: v[:5] if k != "c" else v[:3] for k, v in fresh.items()})
    assert [look.leader for look in r.looks] == ["a", "b"] and r.looks[0].next == {"a": 5, "b": 5}
    assert r.verdicts["c"].look == 1 and r.verdicts["c"].verdict is Label.NOT_RESOLVED  # c vs b over c's 3 seeds
    assert r.looks[1].next == {"c": 5, "a": 7, "b": 7} and r.missing == {"c": [4, 5], "a": [6, 7], "b": [6, 7]}
    assert "next: c to 5 fresh seeds; a, b to 7 fresh seeds" in PLAN.look_line(r.looks[1])


def test_the_cap_leaves_the_leader_unresolved_and_says_so():
    noisy = {"a": [60.0, 58.0, 62.0, 59.0, 61.0], "b": [61.0, 57.0, 60.0, 60.0, 59.5]}
    plan = race_policy(Looks(max_seeds=5), top=2, samples=2, delta=0.1)
    r = _race({"a": 1.0, "b": 0.5}, noisy, plan)
    assert r.done and r.reason == CAP and not resolved(r) and r.targets == {"a": 5, "b": 5}
    assert "the cap of 5 fresh seeds was reached with 1 of 1 contenders unresolved" in (plan.end_line(r) or "")


def test_before_the_screening_ends_there_is_no_race_and_one_contender_is_no_race():
    assert not replay({"a": 1.0}, False, {}, {}, PLAN).screened
    one = replay({"a": 1.0, "b": float("nan")}, True, {}, {}, PLAN)
    assert one.done and one.leader == "a" and resolved(one) and not one.looks


def _simulate(rng: np.random.Generator, means: list[float], sigma: float,
              plan: SampledRace) -> tuple[Standing, np.ndarray]:
    """One race among contenders of true means `means` (labels c0, c1, ...; the screening ranked them in order)."""
    draws = rng.standard_normal((len(means), plan.looks.max_seeds)) * sigma + np.asarray(means)[:, None]
    labels = [f"c{i}" for i in range(len(means))]
    race = _race({lab: -i for i, lab in enumerate(labels)}, {lab: list(d) for lab, d in zip(labels, draws)}, plan)
    return race, draws


def _false(race: Standing, means: list[float], delta: float) -> bool:
    """Whether any verdict of the race is false for the true means."""
    truth = {f"c{i}": m for i, m in enumerate(means)}
    assert race.leader is not None
    codes = np.array([CODE[v.verdict] for v in race.verdicts.values()])
    effects = [truth[c] - truth[race.leader] for c in race.verdicts]
    return bool(false_verdicts(codes, effects, delta).any())


def test_simulated_races_under_no_difference_give_a_false_verdict_in_at_most_alpha():
    means = [0.0, 0.0, 0.0]
    rng = np.random.default_rng(41)
    false = [_false(_simulate(rng, means, 1.0, PLAN)[0], means, PLAN.verdicts.delta) for _ in range(N_RACES)]
    print(f"\nrace {means}: any false verdict in {np.mean(false):.2%} of {N_RACES} races (bound {BOUND:.2%})")
    assert np.mean(false) <= BOUND


def test_a_true_best_by_two_deltas_is_the_resolved_leader_in_most_races_and_a_wrong_one_is_resolved_rarely():
    """σ = 0.5 per seed, the best 2 points above two others (δ = 1): the rate docs/statistics.md states (≥ 90%)."""
    rng = np.random.default_rng(42)
    means = [50.0, 52.0, 50.0]  # the screening ranked the best second
    races = [_simulate(rng, means, 0.5, PLAN)[0] for _ in range(N_RACES)]
    right = np.mean([resolved(r) and r.leader == "c1" for r in races])
    wrong = np.mean([resolved(r) and r.leader != "c1" for r in races])
    seeds = np.mean([max(r.targets.values()) for r in races])
    print(f"\ntrue best resolved as leader in {right:.1%}, a wrong leader resolved in {wrong:.2%}, "
          f"{seeds:.2f} fresh seeds on average")
    assert right >= 0.90 and wrong <= BOUND


def test_the_error_check_catches_a_race_without_bonferroni_over_its_pairs():
    """A race that gives every comparison the whole α at each look (m = 1, no spending) is caught by the same check."""

    class NoSpending(Looks):
        @property
        def alphas(self) -> tuple[float, ...]:
            return (self.alpha,) * len(self.sizes)

    plan = race_policy(NoSpending(max_seeds=8, batch=1), top=3, samples=3, delta=1.0, label_keys=(), m=1)
    rng = np.random.default_rng(43)
    means = [0.0, 0.0, 0.0]
    false = [_false(_simulate(rng, means, 1.0, plan)[0], means, 1.0) for _ in range(N_RACES)]
    assert np.mean(false) > BOUND


def _summary(value: float) -> dict:
    return {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: value}


def _batch(s: StudySearch, start: int) -> list[tuple[str, dict]]:
    out = []
    for i in range(start, start + 50):
        config = s.suggest(f"t{i}")
        if not isinstance(config, dict):
            return out
        out.append((f"t{i}", config))
    return out


def test_the_searcher_screens_then_races_and_each_told_value_covers_the_seeds_its_trial_names(tmp_path, capsys):
    from optuna.distributions import FloatDistribution
    from ray.tune.search import Searcher

    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    plan = race_policy(Looks(max_seeds=3), top=2, samples=3, delta=1.0)
    s = StudySearch({"alpha": FloatDistribution(0.01, 0.1, log=True)}, storage_url=url, study_name="s",
                    sampler=optuna.samplers.TPESampler(seed=0), policy=plan)
    s.set_search_properties(None, None, {})
    screening = _batch(s, 0)
    assert len(screening) == 3 and all(c[SEED_KEY] == 0 and RACE_OF not in c for _, c in screening)
    for tid, c in screening:
        s.on_trial_complete(tid, _summary(1000 * c["alpha"]))
    race = _batch(s, 100)
    alphas = sorted(c["alpha"] for _, c in screening)[1:]  # the best two on seed 0: the larger alphas
    assert sorted((c["alpha"], c[SEED_KEY]) for _, c in race) == [(a, n) for a in alphas for n in (1, 2, 3)]
    stopper = BaseEpochStopper(storage_url=url, study_name="s", pruner=optuna.pruners.MedianPruner())
    assert stopper(race[0][0], {"config": race[0][1], K.REPORT_KIND: K.KIND_BASE}) is False  # never pruned
    for tid, c in race:
        s.on_trial_complete(tid, _summary(1000 * c["alpha"] + 0.1 * c[SEED_KEY]))
    assert "race look 1 of at most 1 at 3 fresh seeds: leader " in capsys.readouterr().out
    assert s.suggest("more") == Searcher.FINISHED and s.standing().leader is not None
    study = optuna.load_study(study_name="s", storage=url)
    raced = sorted((t for t in study.trials if RACE_OF in t.user_attrs), key=lambda t: t.params["alpha"])
    assert len(study.trials) == 5 and [t.params["alpha"] for t in raced] == alphas
    for t in raced:  # told the mean over its fresh seeds, which its `seeds` names
        assert t.user_attrs[SEEDS_ATTR] == [1, 2, 3] and t.value == pytest.approx(1000 * t.params["alpha"] + 0.2)
    for t in study.trials:
        if t not in raced:  # a screening trial: seed 0's value, as without --seeds auto
            assert t.user_attrs[SEEDS_ATTR] == [0] and t.value == pytest.approx(1000 * t.params["alpha"])
