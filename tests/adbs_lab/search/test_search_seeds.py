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
