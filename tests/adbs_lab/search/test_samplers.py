"""TrialSeededTPE (adbs_lab/search/samplers.py): each trial's draws a pure function of (seed, trial number) and the
finished trials, through the random start-up and TPE's model after it, whatever a pickled copy of the sampler held."""

from __future__ import annotations

import pickle

import optuna
import pytest

from adbs_lab.search.samplers import TrialSeededTPE, trial_seed

SPACE = {"x": optuna.distributions.FloatDistribution(-5.0, 5.0),
         "k": optuna.distributions.CategoricalDistribution([None, 1, "a"])}


def _study(sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(sampler=sampler, direction="minimize")


def _run(study: optuna.Study, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        trial = study.ask(fixed_distributions=SPACE)
        study.tell(trial, (trial.params["x"] - 1.0) ** 2)
        out.append(trial.params)
    return out


def test_a_restored_sampler_draws_what_the_uninterrupted_one_draws_start_up_and_model_alike():
    whole = _run(_study(TrialSeededTPE(seed=3)), 14)  # 10 random start-up trials, then TPE's model
    sampler = TrialSeededTPE(seed=3)
    study = _study(sampler)
    head = _run(study, 6)
    saved = pickle.dumps(sampler)  # Tune saves the searcher with its sampler here
    _run(study, 3)  # drawn by the driver that is then killed: the storage keeps them
    study.sampler = pickle.loads(saved)  # the resumed driver's
    assert head + [t.params for t in study.trials[6:9]] + _run(study, 5) == whole
    xs = [p["x"] for p in whole]
    assert len(set(xs)) == len(xs)
    # another study seed, other draws; a TPESampler's single stream is what it replaces
    assert [p["x"] for p in _run(_study(TrialSeededTPE(seed=4)), 3)] != xs[:3]
    assert trial_seed(3, 1) != trial_seed(3, 2) != trial_seed(4, 1)


def test_a_tpe_sampler_restored_from_before_its_trials_draws_them_again():
    """Why TrialSeededTPE exists: Optuna's TPESampler keeps its stream in memory, pickled with the searcher."""
    sampler = optuna.samplers.TPESampler(seed=3)
    study = _study(sampler)
    _run(study, 2)
    saved = pickle.dumps(sampler)
    lost = _run(study, 1)
    study.sampler = pickle.loads(saved)
    assert _run(study, 1) == lost


@pytest.mark.parametrize("multi", [False, True], ids=["one objective", "two objectives"])
def test_it_samples_as_a_tpe_sampler_does(multi):
    """The same TPE (its defaults), one seed per trial: a study of both objectives runs, and the model after start-up
    moves the draws towards the optimum as TPE's does."""
    study = optuna.create_study(sampler=TrialSeededTPE(seed=0, n_objectives=2 if multi else 1),
                                directions=["minimize", "maximize"] if multi
                                else ["minimize"])
    for _ in range(40):
        trial = study.ask(fixed_distributions=SPACE)
        loss = (trial.params["x"] - 1.0) ** 2
        study.tell(trial, [loss, -loss] if multi else loss)
    late = [abs(t.params["x"] - 1.0) for t in study.trials[30:]]
    early = [abs(t.params["x"] - 1.0) for t in study.trials[:10]]
    assert sum(late) / len(late) < sum(early) / len(early)
