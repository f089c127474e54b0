"""What Optuna (and so optuna-dashboard) holds for a grid study over several seeds (adbs_lab/search/searcher.py: StudySearch):
one Optuna trial per configuration, whose only parameters are the searched settings, whose user attribute names the
seeds it ran over and whose value is the mean over them; the study's values are named after its objectives. Tune
still runs one trial per (configuration, seed), each with its own seed."""

from __future__ import annotations

import optuna

from adbs_lab.records import metrics_keys as K
from adbs_lab.search import space as sp
from adbs_lab.records import tune_keys
from adbs_lab.records.objectives import Objective
from adbs_lab.search.searcher import StudySearch
from adbs_lab.search.seeds.fixed import SeedList


def _grid_searcher(url: str, space: dict, seeds: list[int], **kw) -> StudySearch:
    s = StudySearch(sp.optuna_distributions(space), storage_url=url, study_name="s", policy=SeedList(tuple(seeds)),
                    sampler=optuna.samplers.GridSampler(sp.grid_points(space), seed=0), **kw)
    s.set_search_properties(None, None, {})
    return s


def _summary(value: float) -> dict:
    return {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: value}


def test_a_grid_over_seeds_is_one_optuna_trial_per_configuration(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    space = {"alpha": [0.01, 0.02]}
    s = _grid_searcher(url, space, [1, 2])
    configs = {f"t{i}": s.suggest(f"t{i}") for i in range(4)}
    runs = sorted((c["alpha"], c[tune_keys.SEED_KEY]) for c in configs.values())
    assert runs == [(0.01, 1), (0.01, 2), (0.02, 1), (0.02, 2)]  # Tune: every point over every seed
    assert all(tune_keys.trial_config(c).seed == c[tune_keys.SEED_KEY] for c in configs.values())
    for tid, c in configs.items():
        s.on_trial_complete(tid, _summary(c["alpha"] * 1000 + c[tune_keys.SEED_KEY]))
    study = optuna.load_study(study_name="s", storage=url)
    assert len(study.trials) == 2
    assert all(set(t.params) == {"alpha"} for t in study.trials)  # no trial_seed among the searched settings
    assert all(t.user_attrs[tune_keys.SEEDS_ATTR] == [1, 2] for t in study.trials)
    assert sorted(t.value for t in study.trials) == [11.5, 21.5]  # the mean over the seeds
    assert study.metric_names == ["val_avg_acc"]


def test_the_metrics_carry_the_objectives_names(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    objectives = (Objective("val_last_base_acc", "max"), Objective("d_cs", "min"))
    _grid_searcher(url, {"alpha": [0.01]}, [0], objectives=objectives)
    study = optuna.load_study(study_name="s", storage=url)
    assert study.metric_names == ["val_last_base_acc", "d_cs"]
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]


def test_the_study_grid_sampler_hands_out_optunas_points_and_reads_no_trials_when_told():
    """StudyGridSampler: the same grid points in the same order as Optuna's GridSampler, and telling a trial reads
    none of the study's trials (GridSampler.after_trial read them all to call study.stop(), which raises outside
    study.optimize)."""
    from adbs_lab.search.optuna_storage import tell
    from adbs_lab.search.searcher import StudyGridSampler

    grid = {"alpha": [0.01, 0.02, 0.05], "finetune_lr": [0.001, 0.01]}
    points = {}
    for cls in (optuna.samplers.GridSampler, StudyGridSampler):
        study = optuna.create_study(sampler=cls(grid, seed=0), storage=optuna.storages.InMemoryStorage())
        dists = {k: optuna.distributions.CategoricalDistribution(v) for k, v in grid.items()}
        asked = [study.ask(fixed_distributions=dists) for _ in range(6)]
        points[cls] = [t.params for t in asked]
        reads = []
        all_trials = study._storage.get_all_trials
        study._storage.get_all_trials = lambda *a, reads=reads, all_trials=all_trials, **kw: (
            reads.append(1) or all_trials(*a, **kw))
        for t in asked:
            tell(study, t.number, 1.0)
        assert (len(reads) == 0) == (cls is StudyGridSampler), (cls, len(reads))
        assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert points[StudyGridSampler] == points[optuna.samplers.GridSampler]
    assert sorted(tuple(p.values()) for p in points[StudyGridSampler]) == sorted(
        (a, lr) for a in grid["alpha"] for lr in grid["finetune_lr"])


def _attrs(url: str) -> tuple[optuna.trial.TrialState, dict]:
    (t,) = optuna.load_study(study_name="s", storage=url).trials
    return t.state, {k: v for k, v in t.user_attrs.items() if k != tune_keys.SEEDS_ATTR}


def test_a_rows_seeds_show_on_its_running_optuna_trial_as_they_end(tmp_path):
    """What optuna-dashboard shows of a grid's row while its seeds run (StudySearch._show_seed): each seed's value as
    it ends, how many ended and their mean, on the RUNNING trial; its value, told once every seed ended, is the mean
    as before. A seed run again (after a kill) writes its own attribute again: one per seed, the rerun's value."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    s = _grid_searcher(url, {"alpha": [0.01]}, [0, 1, 2])
    tids = {s.suggest(f"t{i}")[tune_keys.SEED_KEY]: f"t{i}" for i in range(3)}
    s.on_trial_complete(tids[1], _summary(61.0))
    state, attrs = _attrs(url)
    assert state == optuna.trial.TrialState.RUNNING
    assert attrs == {tune_keys.seed_attr(1): 61.0, tune_keys.SEEDS_DONE_ATTR: 1, tune_keys.SEEDS_MEAN_ATTR: 61.0}
    s.on_trial_complete(tids[0], _summary(60.0))
    s.reopen(tids[0])  # Tune runs it again (restored after a kill): its rerun's value replaces the first
    s.on_trial_complete(tids[0], _summary(59.0))
    state, attrs = _attrs(url)
    assert state == optuna.trial.TrialState.RUNNING
    assert attrs == {tune_keys.seed_attr(0): 59.0, tune_keys.seed_attr(1): 61.0, tune_keys.SEEDS_DONE_ATTR: 2,
                     tune_keys.SEEDS_MEAN_ATTR: 60.0}
    s.on_trial_complete(tids[2], _summary(63.0))
    (t,) = optuna.load_study(study_name="s", storage=url).trials
    assert t.state == optuna.trial.TrialState.COMPLETE and t.value == (59.0 + 61.0 + 63.0) / 3
    assert t.user_attrs[tune_keys.SEEDS_MEAN_ATTR] == t.value and t.user_attrs[tune_keys.SEEDS_DONE_ATTR] == 3
    assert t.user_attrs[tune_keys.seed_attr(2)] == 63.0 and t.user_attrs[tune_keys.SEEDS_ATTR] == [0, 1, 2]


def test_a_failed_seed_shows_its_state_and_the_mean_of_several_objectives_is_one_per_objective(tmp_path):
    """A seed that did not complete shows the state it ended in and stays out of the mean; with several objectives a
    seed's value and the mean are one number per objective (None where one was not measured: JSON has no NaN). The
    row is told FAIL at the end, as before."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    objectives = (Objective("val_avg_acc", "max"), Objective("d_cs", "min"))
    s = _grid_searcher(url, {"alpha": [0.01]}, [0, 1, 2], objectives=objectives)
    tids = {s.suggest(f"t{i}")[tune_keys.SEED_KEY]: f"t{i}" for i in range(3)}
    s.on_trial_complete(tids[0], {**_summary(60.0), "summary/d_cs": 0.5})
    s.on_trial_complete(tids[1], {K.REPORT_KIND: K.KIND_FAILED})
    state, attrs = _attrs(url)
    assert state == optuna.trial.TrialState.RUNNING
    assert attrs == {tune_keys.seed_attr(0): [60.0, 0.5], tune_keys.seed_attr(1): K.DIVERGED,
                     tune_keys.SEEDS_DONE_ATTR: 2, tune_keys.SEEDS_MEAN_ATTR: [60.0, 0.5]}
    s.on_trial_complete(tids[2], _summary(62.0))  # d_cs not measured
    (t,) = optuna.load_study(study_name="s", storage=url).trials
    assert t.state == optuna.trial.TrialState.FAIL and t.user_attrs[tune_keys.seed_attr(2)] == [62.0, None]
    assert t.user_attrs[tune_keys.SEEDS_MEAN_ATTR] == [61.0, None]
