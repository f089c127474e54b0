"""Shadows and --pruner auto (adbs_lab/search/shadows.py), driven through the study's own searcher and stopper
(StudySearch, BaseEpochStopper) on fake base-epoch curves, one trial at a time: Optuna only, no Ray cluster, no
training. The studies live in Optuna's in-memory storage (the searcher's storage factory replaced for the module):
the same storage API as the study's SQLite file, without SQLAlchemy's cost on every one of the stopper's calls."""

from __future__ import annotations

import math
import pickle

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.trial_records import classify, is_shadow_report
from types import SimpleNamespace

from adbs_lab.search import optuna_storage as searcher
from adbs_lab.search import searcher as search_module
from adbs_lab.search import shadows
from adbs_lab.search.searcher import BaseEpochStopper, StudySearch
from adbs_lab.search.shadows import make_pruner
from adbs_lab.stats import premise as pm
from adbs_lab.search.seeds.fixed import SeedList

EPOCHS = 8
NOVEL = K.SUMMARY + shadows.NOVEL_KEY


def _curves(alpha: float, number: int, premise_holds: bool) -> tuple[list[float], float, float]:
    """(base val acc per epoch, objective, last-session novel acc) of a fake trial. premise_holds: the base accuracy
    rises with alpha as the objective does; else it falls (ADBS's trade: base for novel accuracy)."""
    noise = np.random.default_rng(number).normal(0, 0.3, EPOCHS)
    level = 60 + 300 * alpha if premise_holds else 80 - 300 * alpha
    base = [level * (1 - math.exp(-(e + 1) / 2)) + noise[e] for e in range(EPOCHS)]
    novel = 20 + 400 * alpha
    return base, 40 + 300 * alpha + noise[0], novel


def _study(name: str, *, pruner: str, share: float, premise_holds: bool, n: int = 24, seed: int = 1,
           resume_at: int | None = None):
    """Run n sampled trials through StudySearch and BaseEpochStopper; (params in order, states, optuna study).
    `resume_at`: before that trial the stopper is pickled and unpickled, as Tune restores it on --resume."""
    url = f"memory://{name}"
    s = StudySearch({"alpha": FloatDistribution(0.01, 0.1, log=True)}, storage_url=url, study_name=name,
                    sampler=optuna.samplers.TPESampler(seed=seed), policy=SeedList((0,)))
    s.set_search_properties(None, None, {})
    optuna.load_study(study_name=name, storage=searcher.optuna_storage(url)).set_user_attr(shadows.SHARE_ATTR, share)
    stopper = BaseEpochStopper(storage_url=url, study_name=name, pruner=make_pruner(pruner, EPOCHS),
                               shadow_share=share, shadow_seed=seed)
    params, states = [], []
    for i in range(n):
        if i == resume_at:
            stopper = pickle.loads(pickle.dumps(stopper))
        tid = f"t{i}"
        config = s.suggest(tid)
        assert isinstance(config, dict)
        base, objective, novel = _curves(config["alpha"], i, premise_holds)
        last: dict = {}
        for e, v in enumerate(base, start=1):
            last = {"config": config, K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: e, K.BASE_PRUNE_VALUE: v}
            if stopper(tid, last):
                break
        else:
            last = {"config": config, K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: objective, NOVEL: novel}
            assert stopper(tid, last) is False
        s.on_trial_complete(tid, last)
        params.append(config["alpha"])
        states.append(s.ended(SimpleNamespace(trial_id=tid, config=config, last_result=last)))
    return params, states, optuna.load_study(study_name=name, storage=searcher.optuna_storage(url))


@pytest.fixture(scope="module")
def runs():
    stores: dict[str, optuna.storages.BaseStorage] = {}
    with pytest.MonkeyPatch.context() as mp:
        memory = lambda url: stores.setdefault(url, optuna.storages.InMemoryStorage())  # noqa: E731
        for module in (searcher, search_module):  # the storage module's own name and the searcher's import of it
            mp.setattr(module, "optuna_storage", memory)
        out = {name: _study(name, pruner=pruner, share=share, premise_holds=holds, n=n)
               for name, pruner, share, holds, n in [("plain", "median", 0.0, False, 24),
                                                     ("shadowed", "median", 0.5, False, 24),
                                                     ("auto_misled", "auto", 0.2, False, 40),
                                                     ("auto_holds", "auto", 0.2, True, 40)]}
        yield {**out, "auto_resumed": _study("auto_resumed", pruner="auto", share=0.5, premise_holds=True, n=40,
                                             resume_at=20),
               "auto_shadowed": _study("auto_shadowed", pruner="auto", share=0.5, premise_holds=True, n=40)}


def test_shadows_leave_the_samplers_and_the_pruners_decisions_unchanged(runs):
    plain, plain_states, plain_study = runs["plain"]
    shadowed, states, study = runs["shadowed"]
    assert shadowed == plain  # the same configurations suggested, in the same order
    assert states == plain_states and states.count(K.PRUNED) >= 5  # the same trials pruned, shadows among them
    assert [t.state for t in study.trials] == [t.state for t in plain_study.trials]
    assert [t.intermediate_values for t in study.trials] == [t.intermediate_values for t in plain_study.trials]
    ran_on = [t for t in study.trials if shadows.SHADOW_ATTR in t.user_attrs]
    assert 1 <= len(ran_on) < states.count(K.PRUNED) and all(t.state == TrialState.PRUNED for t in ran_on)
    for t in ran_on:  # each ran to its end: every base epoch and its objective on the study's record
        rec = study.user_attrs[shadows.record_key(t.number)]
        assert len(rec["curve"]) == EPOCHS - rec["step"] + 1 and math.isfinite(rec["objective"])
        assert t.number in [n for n, ok in enumerate(shadows.chosen(1, k, 0.5) for k in range(len(states))) if ok]
    assert not any(shadows.SHADOW_ATTR in t.user_attrs for t in plain_study.trials)


def test_a_shadow_is_pruned_to_the_study_and_its_record_says_so():
    summary = {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: 50.0}
    assert classify(summary, pruned=True, shadow=True) == K.PRUNED
    assert classify(summary, pruned=True) == K.COMPLETE  # a seed that ended before its configuration was pruned
    assert is_shadow_report(K.PRUNED, summary) and not is_shadow_report(K.COMPLETE, summary)
    assert not is_shadow_report(K.PRUNED, {K.REPORT_KIND: K.KIND_BASE})


def test_the_premise_of_a_median_pruned_study_whose_base_accuracy_misleads(runs):
    _, states, study = runs["shadowed"]
    measured = shadows.measure(study, "median", EPOCHS)
    assert measured.steps == list(range(2, EPOCHS + 1)) and measured.shadows >= 1
    assert measured.complete == states.count(K.COMPLETE)
    late = measured.objective[EPOCHS]
    assert late.r < 0 and late.high < pm.PREMISE_LOWER and late.n == measured.complete + measured.shadows
    assert measured.novel[EPOCHS].r < 0
    lines = shadows.premise_lines(measured, "median")
    assert any("Spearman rho with the objective -" in line for line in lines)
    assert measured.regret is not None and measured.regret.share > 0  # the pruner stopped some of the best


def test_auto_does_not_prune_while_base_accuracy_misleads(runs):
    _, states, study = runs["auto_misled"]
    assert states.count(K.PRUNED) == 0 and all(t.state == TrialState.COMPLETE for t in study.trials)


def test_auto_prunes_once_base_accuracy_predicts_the_objective(runs):
    _, states, study = runs["auto_holds"]
    pruned = [i for i, st in enumerate(states) if st == K.PRUNED]
    assert pruned, states
    first = study.trials[pruned[0]]
    before = optuna.create_study(direction="maximize")  # the trials that had ended when it was pruned
    before.add_trials([t for t in study.trials[: pruned[0]] if t.state == TrialState.COMPLETE])
    holds = shadows.AutoPruner(optuna.pruners.MedianPruner()).holds(before, first.last_step)
    assert holds is not None and holds.at in pm.CHECKS  # it pruned only where a check held on what it knew then
    assert holds.correlation.low >= pm.PREMISE_LOWER and holds.correlation.n == holds.at  # over its first trials
    assert holds.correlation.n_eff >= pm.PREMISE_MIN_N and pruned[0] >= pm.CHECKS[0]  # it waited for the evidence
    assert shadows.measure(study, "auto", EPOCHS).switched.get(first.last_step) == holds.at  # the end says so


def test_a_resumed_auto_pruner_decides_as_the_uninterrupted_one(runs):
    """Its state is the Optuna storage: a stopper unpickled halfway (as --resume restores it) prunes the same trials
    and draws the same shadows."""
    _, states, study = runs["auto_shadowed"]
    _, resumed_states, resumed = runs["auto_resumed"]
    assert resumed_states == states and K.PRUNED in states[20:]
    drawn = [shadows.SHADOW_ATTR in t.user_attrs for t in study.trials]
    assert any(drawn) and [shadows.SHADOW_ATTR in t.user_attrs for t in resumed.trials] == drawn
