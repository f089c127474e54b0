"""--resume after the driver was killed between asking Optuna for a trial and Tune saving its state
(adbs_lab/search/searcher.py: StudySearch._adopt_orphans, adbs_lab/search/orphans.py): the Optuna trial the dead driver
asked for, still RUNNING or already told, is run by the resumed study with its own number and values; Optuna gets no
trial for it again, no grid point is lost or run twice, and the sampler draws no value twice. With the sampler a study
starts with (adbs_lab/search/samplers.py: TrialSeededTPE, or the grid's), the resumed study draws what it would have
drawn uninterrupted; a study started with a TPESampler draws afresh."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY
from adbs_lab.records.tune_keys import SEED_KEY
from adbs_lab.search import space as sp
from adbs_lab.search.samplers import TrialSeededTPE
from adbs_lab.search.searcher import StudySearch
from adbs_lab.search.seeds.fixed import SeedList

GRID = {"alpha": [0.01, 0.02, 0.05, 0.08]}
SAMPLED = {"alpha": optuna.distributions.FloatDistribution(0.01, 0.1, log=True)}
SAMPLERS = {"grid": lambda: optuna.samplers.GridSampler(sp.grid_points(GRID), seed=0),
            "trial_seeded_tpe": lambda: TrialSeededTPE(seed=0),
            "tpe_of_an_earlier_study": lambda: optuna.samplers.TPESampler(seed=0)}


def _searcher(url: str, sampler: str) -> StudySearch:
    s = StudySearch(sp.optuna_distributions(GRID if sampler == "grid" else SAMPLED), storage_url=url, study_name="s",
                    sampler=SAMPLERS[sampler](), policy=SeedList((0,)))
    s.set_search_properties(None, None, {})
    return s


def _point(config: dict) -> tuple:
    return config[OPTUNA_TRIAL_KEY], config["alpha"], config.get(SEED_KEY)


def _done(s: StudySearch, tid: str, config: dict) -> None:
    s.on_trial_complete(tid, {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: 1000 * config["alpha"]})


def _uninterrupted(url: str, sampler: str, n: int) -> list[float]:
    s = _searcher(url, sampler)
    out = []
    for i in range(n):
        config = s.suggest(f"u{i}")
        _done(s, f"u{i}", config)
        out.append(config["alpha"])
    return out


@pytest.mark.parametrize("told", [False, True], ids=["running", "told"])
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_the_trial_a_killed_driver_asked_for_runs_after_resume(tmp_path, sampler, told):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = _searcher(url, sampler)
    _done(first, "tune-a", first.suggest("tune-a"))
    first.save(str(tmp_path / "searcher.pkl"))  # Tune's last saved state
    orphan = first.suggest("tune-b")  # asked for, then the driver is SIGKILLed before Tune saves again
    if told:  # ... after its trial ended and the searcher told Optuna its value
        _done(first, "tune-b", orphan)

    resumed = _searcher(url, sampler)
    resumed.restore(str(tmp_path / "searcher.pkl"))
    again = resumed.suggest("tune-c")
    assert _point(again) == _point(orphan)  # the same Optuna trial, the same grid point or sampled value
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE if told else TrialState.RUNNING]
    _done(resumed, "tune-c", again)
    held = optuna.load_study(study_name="s", storage=url).trials[1]
    assert held.state == TrialState.COMPLETE and held.value == pytest.approx(1000 * orphan["alpha"])  # told once
    rest = [resumed.suggest(f"tune-{i}") for i in range(2)]
    alphas = [t.params["alpha"] for t in trials] + [c["alpha"] for c in rest]
    assert [c[OPTUNA_TRIAL_KEY] for c in rest] == [2, 3]  # no Optuna trial asked for the orphan again
    if sampler == "grid":  # the rest of the grid, each point once
        assert sorted(alphas) == GRID["alpha"]
    else:  # no value drawn before the kill is drawn again
        assert len(set(alphas)) == len(alphas), alphas
    if sampler != "tpe_of_an_earlier_study":  # the kill changes no draw
        assert alphas == _uninterrupted(f"sqlite:///{tmp_path / 'clean.db'}", sampler, 4)
