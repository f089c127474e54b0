"""--resume after the driver was killed between asking Optuna for a trial and Tune saving its state
(adbs_lab/search/searcher.py: StudySearch._requeue_orphans): the Optuna trial the dead driver asked for is run by the resumed
study, with its own number and values; no grid point is lost or run twice, and the sampler does not draw anew."""

from __future__ import annotations

import optuna
import pytest

from adbs_lab.search import space as sp
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY
from adbs_lab.search.searcher import StudySearch
from adbs_lab.records.tune_keys import SEED_KEY

GRID = {"alpha": [0.01, 0.02, 0.05, 0.08]}
SAMPLED = {"alpha": optuna.distributions.FloatDistribution(0.01, 0.1, log=True)}


def _searcher(url: str, space: dict, grid: bool) -> StudySearch:
    seeds = [0]
    sampler = (optuna.samplers.GridSampler(sp.grid_points(space), seed=0) if grid
               else optuna.samplers.TPESampler(seed=0))
    s = StudySearch(sp.optuna_distributions(space), storage_url=url, study_name="s",
                    sampler=sampler, seeds=seeds)
    s.set_search_properties(None, None, {})
    return s


def _point(config: dict) -> tuple:
    return config[OPTUNA_TRIAL_KEY], config["alpha"], config.get(SEED_KEY)


@pytest.mark.parametrize("space,grid", [(GRID, True), (SAMPLED, False)], ids=["grid", "tpe"])
def test_the_trial_a_killed_driver_asked_for_runs_after_resume(tmp_path, space, grid):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = _searcher(url, space, grid)
    first.suggest("tune-a")
    first.save(str(tmp_path / "searcher.pkl"))  # Tune's last saved state
    orphan = first.suggest("tune-b")  # asked for, then the driver is SIGKILLed before Tune saves again

    resumed = _searcher(url, space, grid)
    resumed.restore(str(tmp_path / "searcher.pkl"))
    again = resumed.suggest("tune-c")
    assert _point(again) == _point(orphan)  # the same Optuna trial, the same grid point or sampled value
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.RUNNING for t in trials)
    if grid:  # the rest of the grid, each point once
        rest = [resumed.suggest(f"tune-{i}") for i in range(2)]
        alphas = [orphan["alpha"]] + [c["alpha"] for c in rest] + [trials[0].params["alpha"]]
        assert sorted(alphas) == GRID["alpha"]
    else:  # the random start-up goes on: no value drawn before the kill is drawn again
        more = [resumed.suggest(f"tune-{i}")["alpha"] for i in range(3)]
        drawn = [trials[0].params["alpha"], orphan["alpha"], *more]
        assert len(set(drawn)) == len(drawn), drawn
