"""The orchestration layer with a fake trial function (no training, a second a trial): searcher, pruner, tracking,
tables. They start a Ray instance, so they are in the slow tier.

End-to-end tests with the real adbs.trial.run_trial are in tests/e2e/test_studies.py.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import ray.cloudpickle as cloudpickle
import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import FloatDistribution

from adbs_lab import study
from adbs_lab.records import metrics_keys as K
from adbs_lab.driver import options
from adbs_lab.driver import launch
from adbs_lab.records import tune_keys
from adbs_lab.stores.tracking_store import NOTE, TABLE_CAPTION, VIEW_TAG

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import test modules


@dataclass
class FakeResult:
    summary: dict


def fake_trial(cfg, *, hooks):
    """Quality grows with base_lr; a tiny lr looks hopeless from the first base epoch."""
    q = min(1.0, cfg.base_lr * 10)
    for e in range(1, cfg.base_epochs + 1):
        hooks.on_base_epoch({"epoch": e, "train_loss": 1.0 / e, "train_acc": 50.0, "val_acc": 100 * q * e / cfg.base_epochs,
                             "lr": cfg.base_lr, "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        time.sleep(0.02)
    accs = []
    for s in range((cfg.sessions or 2) + 1):
        acc = 80 * q - 3 * s + cfg.seed
        accs.append(acc)
        hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc + 1, "val_base_acc": acc,
                          "val_novel_acc": float("nan") if s == 0 else acc - 10, "val_hmean": acc,
                          "test_acc": acc, "test_base_acc": acc, "test_novel_acc": acc - 10, "test_hmean": acc,
                          "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0,
                          "boundary_novel_mean": 1.0})
    return FakeResult({"val_avg_acc": sum(accs) / len(accs) + 1, "test_avg_acc": sum(accs) / len(accs),
                       "val_last_acc": accs[-1] + 1, "test_last_acc": accs[-1], "d_cs": 0.9, "wall_time_s": 0.1})


def _args(doc_flags: list[str], storage: Path, uri: str, address: str):
    return options.parse("t", options.Defaults(pruner="median", num_samples=3),
                         argv=[*doc_flags, "--storage", str(storage), "--tracking-uri", uri, "--address", address,
                               "--gpus-per-trial", "0"])[0]


@pytest.mark.slow
def test_pruning_seeds_tracking_tables(ray_address, storage, tracking_uri, capsys):
    plan = study.Plan(
        name="fake_sweep",
        space={"variant": "adb+ic", "base_lr": FloatDistribution(1e-4, 0.1, log=True)},
        space_source="tests:fake",
        points_to_evaluate=[{"base_lr": 0.1}, {"base_lr": 0.08}, {"base_lr": 1e-4}],
        trial_fn=fake_trial,
    )
    args = _args(["--smoke", "--set", "base_epochs=4", "--seeds", "1", "2", "--max-concurrent", "1"],
                 storage, tracking_uri, ray_address)
    out = study.run(plan, args)

    # Optuna: 3 configurations (2 seeds each); the tiny-lr one PRUNED, the others told their mean over seeds.
    st = optuna.load_study(study_name="fake_sweep-smoke", storage=f"sqlite:///{storage / 'fake_sweep-smoke' / 'optuna.db'}")
    states = {t.params["base_lr"]: t.state for t in st.trials}
    assert states[1e-4] == optuna.trial.TrialState.PRUNED
    assert states[0.1] == states[0.08] == optuna.trial.TrialState.COMPLETE
    complete = [t for t in st.trials if t.params["base_lr"] == 0.1][0]
    t = out.trials[(out.trials["base_lr"] == 0.1)]
    assert complete.value == pytest.approx(t["val_avg_acc"].mean())
    # the seed is no searched parameter (optuna-dashboard would rank it and draw contours on it): the trial's
    # seeds are its user attribute, the searched setting its one parameter, the value named after the objective
    assert all(set(t.distributions) == {"base_lr"} and t.user_attrs[tune_keys.SEEDS_ATTR] == [1, 2] for t in st.trials)
    assert st.metric_names == ["val_avg_acc"]

    # Tables: 6 Tune trials; sessions rows only for trials that ran their sessions.
    assert len(out.trials) == 6
    assert set(out.trials.loc[out.trials["base_lr"] == 1e-4, "state"]) == {K.PRUNED}
    n_complete = (out.trials["state"] == K.COMPLETE).sum()
    assert n_complete == 4
    sessions = pd.read_parquet(storage / "fake_sweep-smoke" / "sessions.parquet")
    assert len(sessions[sessions["state"] == K.COMPLETE]) == 4 * 3
    assert set(sessions["seed"]) == {1, 2} and (sessions["seed"] == sessions["split_seed"]).all()

    # MLflow: one parent, 6 nested trial runs with session curves; pruned runs tagged PRUNED.
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("fake_sweep-smoke")  # a --smoke run: never in the study's own experiment
    assert client.get_experiment_by_name("fake_sweep") is None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("adbs.role") == "study"]
    trials = [r for r in runs if r.data.tags.get("adbs.role") == "trial"]
    assert len(parents) == 1 and len(trials) == 6
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in trials)
    assert sorted(r.data.tags["adbs.state"] for r in trials).count(K.PRUNED) == 2
    done = [r for r in trials if r.data.tags["adbs.state"] == K.COMPLETE][0]
    hist = client.get_metric_history(done.info.run_id, "session/test_acc")
    assert [m.step for m in sorted(hist, key=lambda m: m.step)] == [0, 1, 2]
    assert len(client.get_metric_history(done.info.run_id, "base/val_acc")) == 4
    assert done.data.params["base_lr"] in ("0.1", "0.08") and "alpha" in done.data.params
    # run names say what differs, short; the experiment says what the study searched and opens with its columns
    assert sorted(r.info.run_name for r in trials) == sorted(f"base_lr={v} seed={s}" for v in ("0.0001", "0.08", "0.1")
                                                             for s in (1, 2))
    note = parents[0].data.tags[NOTE]
    assert note.startswith("**fake_sweep**: `base_lr` in 0.0001..0.1 (log); 6 trials over seeds 1, 2; objective "
                           "val_avg_acc (max)") and TABLE_CAPTION in note  # and, once it ended, the study's table
    assert exp.tags[NOTE].startswith(note.partition("\n\n")[0]) and TABLE_CAPTION not in exp.tags[NOTE]
    assert json.loads(exp.tags[VIEW_TAG])["selectedColumns"][:3] == ["metrics.`summary/val_avg_acc`",
                                                                    "params.`base_lr`", "params.`seed`"]
    # the parent run's study/* metrics: the experiment list shows the best value and what was pruned
    pm = parents[0].data.metrics
    assert pm["study/best_objective"] == pytest.approx(out.best["mean_over_seeds"])
    assert (pm["study/trials_complete"], pm["study/trials_pruned"], pm["study/trials_failed"]) == (4, 2, 0)
    assert pm["study/wall_time_s"] > 0
    arts = {a.path for a in client.list_artifacts(parents[0].info.run_id)}
    assert {"sessions.parquet", "trials.parquet", "table.txt", "best_config.json"} <= arts
    printed = capsys.readouterr().out
    # a sampled search without a reference row or a race makes no verdicts: its lines name no best (best.py)
    assert "pruned at base epoch" in printed and "| no reference row: no verdicts, no best named" in printed
    assert "best val avg acc" not in printed and "best configuration: none named (fake_sweep has no" in printed


@pytest.mark.slow
def test_a_shadow_runs_on_pruned_to_the_study_and_measures_the_premise(ray_address, storage, tracking_uri, capsys):
    """--shadow-share 1: the trial the pruner stops runs on to its end; Optuna holds it PRUNED, the tables and MLflow
    hold it PRUNED with its values marked shadow, no table of results counts it, and the premise is measured."""
    plan = study.Plan(name="shadowed", space={"variant": "adb+ic", "base_lr": FloatDistribution(1e-4, 0.1, log=True)},
                      space_source="tests:shadows", points_to_evaluate=[{"base_lr": 0.1}, {"base_lr": 0.08},
                                                                        {"base_lr": 1e-4}], trial_fn=fake_trial)
    args = _args(["--smoke", "--set", "base_epochs=4", "--seeds", "1", "--max-concurrent", "1", "--pruner", "median",
                  "--shadow-share", "1"], storage, tracking_uri, ray_address)
    out = study.run(plan, args)
    st = optuna.load_study(study_name="shadowed-smoke", storage=f"sqlite:///{storage / 'shadowed-smoke' / 'optuna.db'}")
    pruned = [t for t in st.trials if t.params["base_lr"] == 1e-4][0]
    assert pruned.state == optuna.trial.TrialState.PRUNED and "shadow" in pruned.user_attrs
    shadow = out.trials[out.trials["base_lr"] == 1e-4].iloc[0]
    assert shadow["state"] == K.PRUNED and bool(shadow["shadow"]) and shadow["base_epochs_run"] == 4
    assert np.isfinite(shadow["val_avg_acc"])  # its completed value is kept for the premise
    assert (out.trials["state"] == K.COMPLETE).sum() == 2 and not out.trials.loc[out.trials["state"] == K.COMPLETE,
                                                                                  "shadow"].any()
    assert len(out.table) == 2 and out.best["mean_over_seeds"] > shadow["val_avg_acc"]  # no result of the study
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("shadowed-smoke").experiment_id])
    parent = [r for r in runs if r.data.tags.get("adbs.role") == "study"][0]
    tagged = [r for r in runs if r.data.tags.get("adbs.shadow") == "true"]
    assert len(tagged) == 1 and tagged[0].data.tags["adbs.state"] == K.PRUNED
    assert "summary/val_avg_acc" in tagged[0].data.metrics
    assert parent.data.metrics["premise/shadows"] == 1 and parent.data.metrics["study/trials_complete"] == 2
    assert "adbs.premise" in parent.data.tags
    assert "## Pruning premise" in (storage / "shadowed-smoke" / "report.md").read_text()
    printed = capsys.readouterr().out
    assert "pruning premise (--pruner median)" in printed and "2 completed trials and 1 shadow " in printed


def burst_trial(cfg, *, hooks):
    """Every trial reports its sessions and summary at the same wall-clock moment (the next 3 s tick)."""
    hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": 50.0, "lr": 0.1,
                         "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
    time.sleep(3 - time.time() % 3)
    for s in range(3):
        hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": 50.0 + cfg.seed, "val_base_acc": 50.0,
                          "val_novel_acc": 40.0, "val_hmean": 44.0, "test_acc": 50.0 + cfg.seed + s,
                          "test_base_acc": 50.0, "test_novel_acc": 40.0, "test_hmean": 44.0, "boundary_mean": 1.0,
                          "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0, "boundary_novel_mean": 1.0})
    return FakeResult({"val_avg_acc": 50.0 + cfg.seed, "test_avg_acc": 50.0 + cfg.seed, "val_last_acc": 50.0,
                       "test_last_acc": 50.0, "d_cs": 0.9, "wall_time_s": 0.1})


@pytest.mark.slow
def test_eight_trials_finishing_together_lose_nothing(ray_address, storage, tracking_uri):
    """Many trials ending at once lose no metric and no run (one writer: the driver)."""
    plan = study.Plan(name="burst", space={"variant": "adb+ic"}, space_source="tests:burst", trial_fn=burst_trial)
    args = _args(["--smoke", "--seeds", *map(str, range(8)), "--max-concurrent", "8", "--cpus-per-trial", "0.25",
                  "--num-samples", "1", "--pruner", "none"], storage, tracking_uri, ray_address)
    out = study.run(plan, args)
    assert len(out.trials) == 8 and (out.trials["state"] == K.COMPLETE).all()
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("burst-smoke")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("adbs.role") == "trial"]
    assert len(runs) == 8
    for r in runs:
        seed = int(r.data.params["seed"])
        hist = client.get_metric_history(r.info.run_id, "session/test_acc")
        assert sorted((m.step, m.value) for m in hist) == [(s, 50.0 + seed + s) for s in range(3)]
        assert r.data.metrics["summary/val_avg_acc"] == 50.0 + seed
        assert r.info.status == "FINISHED"


@pytest.mark.slow
def test_a_trials_optuna_state_is_read_once_when_it_ends(ray_address, storage, tracking_uri, monkeypatch):
    """A trial ends once: StudySearch reads its Optuna state when Tune tells it the trial ended (before Tune's
    callbacks), classifies it, and the MLflow tracker, the progress line and the tables receive that record
    (adbs_lab/search/searcher.py). BaseEpochStopper's reads during base epochs are the pruner at work, not counted."""
    from collections import Counter

    from adbs_lab.search import optuna_storage
    from adbs_lab.search.searcher import StudySearch

    reads: Counter = Counter()
    # private (adbs_lab/search/optuna_storage.py): the one read of a trial's Optuna state, counted
    real = optuna_storage._LiveStudy._state

    def counted(self, number):
        if isinstance(self, StudySearch):
            reads[number] += 1
        return real(self, number)

    monkeypatch.setattr(optuna_storage._LiveStudy, "_state", counted)
    plan = study.Plan(name="reads", space={"variant": "adb+ic", "base_lr": FloatDistribution(1e-4, 0.1, log=True)},
                      space_source="tests:reads", points_to_evaluate=[{"base_lr": 0.1}, {"base_lr": 1e-4}],
                      trial_fn=fake_trial)
    args = _args(["--smoke", "--set", "base_epochs=2", "--seeds", "1", "2", "--num-samples", "2",
                  "--max-concurrent", "2"], storage, tracking_uri, ray_address)
    out = study.run(plan, args)
    assert len(out.trials) == 4
    assert reads == {0: 2, 1: 2}  # one read per Tune trial: 2 configurations x 2 seeds
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("reads-smoke")
    tags = {r.data.tags["adbs.trial_id"]: r.data.tags["adbs.state"] for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("adbs.role") == "trial"}
    assert tags == dict(zip(out.trials["trial_id"], out.trials["state"]))  # one record, the same everywhere


# Whatever Tune raises after the study started (Ray's memory monitor, a lost node) ends in the study's own summary,
# exit 1 with the --resume command, instead of a raw traceback out of the driver (adbs_lab/driver/launch.py: _fit).
# launch._fit and launch._results_so_far are private: the only way to make Tune's fit() raise what a memory monitor
# raises, without a study that fills the machine's memory.


class _Where:
    def tune_location(self):
        return "unused", None

    def tune_experiment(self):
        return "/nonexistent/experiment"


class _Tuner:
    def __init__(self, error: BaseException):
        self.error = error

    def fit(self):
        raise self.error


def test_an_unexpected_error_from_tune_is_a_failure_with_its_cause(capsys, monkeypatch):
    monkeypatch.setattr(launch, "_results_so_far", lambda where, fs: ["kept"])
    p = SimpleNamespace(where=_Where())
    got = launch._fit(p, _Tuner(RuntimeError("Task was killed due to the node running low on memory.")))
    assert got["results"] == ["kept"] and got["interrupted"] is None
    assert got["failed"] == "Ray Tune stopped: RuntimeError: Task was killed due to the node running low on memory."
    assert "Traceback" in capsys.readouterr().err  # the cause, once


def test_a_full_disk_is_still_named_as_one(monkeypatch):
    monkeypatch.setattr(launch, "_results_so_far", lambda where, fs: [])
    got = launch._fit(SimpleNamespace(where=_Where()), _Tuner(OSError(28, "No space left on device")))
    assert got["failed"].startswith("no space left in")
