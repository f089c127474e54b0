"""Importance on a small hand-made study: configurations averaged over seeds first, collapsed trials kept with their
measured values and counted, diverged ones counted and shown in "Diverges when" (never imputed), the ranking with
its interval, the "too few" message, and the figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from adbs_lab.results import importance
from adbs_lab.records import metrics_keys as K
from tests.helpers.fakes import importance_trials


def test_seeds_are_averaged_collapsed_trials_kept_and_diverged_ones_counted_out():
    t = importance_trials()
    t.loc[0, K.WARNING] = "novel accuracy 0.00 in every incremental session (2)"
    t.loc[2, K.WARNING] = "1 of 90 seen classes never predicted (session 8)"  # not a collapse either
    t = pd.concat([t, pd.DataFrame([{**t.iloc[1].to_dict(), "state": K.DIVERGED, "val_avg_acc": np.nan},
                                    {**t.iloc[3].to_dict(), "state": K.PRUNED, "val_avg_acc": np.nan}])])
    assert importance.searched_params(t) == ["alpha", "temperature"]  # never the seed
    configs, counts = importance.configurations(t, ["alpha", "temperature"])
    assert counts == {"collapsed": 1, "diverged": 1, "pruned": 1, "failed": 0, "without a value": 0,
                      "without a parameter": 0}
    assert len(configs) == 12 and configs["seeds"].tolist()[0] == 2  # the collapsed seed keeps its value
    # a configuration with both seeds: its objective is their mean (the diverged copy of trial 1 is not imputed)
    hand = t[(t["alpha"] == configs.iloc[0]["alpha"]) & (t["temperature"] == configs.iloc[0]["temperature"])
             & (t["state"] == K.COMPLETE)]["val_avg_acc"].mean()
    assert configs.iloc[0]["objective"] == pytest.approx(hand) and configs.iloc[0]["seeds"] == 2
    a = importance.analyse(t, resamples=2)
    head = importance.markdown(a).splitlines()[0]
    assert head.startswith("12 complete configurations") and "from 24 trials, 1 of them collapsed" in head
    assert "1 diverged (no value, never imputed" in head and "1 pruned" in head


def test_a_knob_that_only_causes_collapse_is_ranked_first():
    """`abs_base_boundary=True` does nothing but collapse the novel classes (its trials' measured validation accuracy
    drops, as it does when novel accuracy is 0); alpha only adds noise. Left out, the collapsed trials would take
    the knob's whole effect with them; kept, it is ranked first, and the header counts them."""
    rng = np.random.default_rng(0)
    rows = []
    for a in np.linspace(0.01, 0.1, 6):
        for flag in (False, True):
            for seed in (0, 1):
                rows.append({"label": f"alpha={a:.4g} abs_base_boundary={flag}", "alpha": float(a),
                             "abs_base_boundary": flag, "seed": seed, "state": K.COMPLETE,
                             "val_avg_acc": (40.0 if flag else 55.0) + rng.normal(0, 0.3),
                             K.WARNING: importance.COLLAPSED + " (8)" if flag else ""})
    t = pd.DataFrame(rows)
    a = importance.analyse(t, resamples=10)
    ranked, _ = importance.resolved(a["importance"]["fANOVA"])
    assert ranked[:1] == ["abs_base_boundary"]
    assert a["counts"]["collapsed"] == 12 and "12 of them collapsed" in importance.markdown(a)


def test_diverged_trials_show_where_they_diverge(tmp_path):
    """Diverged trials: a "Diverges when" table at the end of importance.md, their settings beside the trials that
    ran to the end, value by value for a few values and as a range for many."""
    t = importance_trials(n_a=9, n_b=2, seeds=(0,))
    big = t["temperature"] == 16.0
    t.loc[big & (t["alpha"] > 0.06), ["state", "val_avg_acc"]] = [K.DIVERGED, np.nan]
    importance.write(t, tmp_path)
    md = (tmp_path / "importance.md").read_text()
    assert "### Diverges when" in md and "4 of 18 trials diverged" in md
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:4]] for line in md.splitlines()
            if line.startswith("| alpha") or line.startswith("| temperature")}
    assert rows["temperature"] == ["16.0: 4", "8.0: 9, 16.0: 5"]
    assert rows["alpha"][0] == "0.06625 to 0.1 (median 0.08313)" and rows["alpha"][1].startswith("0.01 to 0.1")
    assert importance.diverges_when(importance_trials(), ["alpha", "temperature"]) is None


def test_the_parameter_that_decides_is_ranked_first_with_an_interval(tmp_path):
    a = importance.analyse(importance_trials(n_a=6, n_b=3), resamples=10)
    imp = a["importance"]["fANOVA"]
    assert imp["alpha"][0] > 0.8 and 0.5 < imp["alpha"][1] <= imp["alpha"][2]
    ranked, unresolved = importance.resolved(imp)
    assert ranked[0] == "alpha"
    text = importance.markdown(a)
    assert "| alpha |" in text and "PED-ANOVA" in text
    files = importance.figures(a, tmp_path)
    assert {f.name for f in files} == {"importance.png", "parallel_coordinate.png", "contour.png", "slice.png"}
    assert all(f.stat().st_size > 1000 for f in files)


def test_too_few_configurations_say_so_instead_of_ranking(tmp_path):
    t = importance_trials(n_a=3, n_b=2, seeds=(0, 1, 2))  # 6 configurations, 18 trials
    a = importance.analyse(t)
    assert a["too_few"] and "importance" not in a
    assert "Too few complete configurations" in importance.markdown(a) and "6 complete configurations" in importance.markdown(a)
    assert importance.figures(a, tmp_path) == []


def test_a_study_of_named_rows_or_one_parameter_has_no_importance():
    rows = pd.DataFrame([{"label": lab, "variant": lab, "seed": 0, "state": K.COMPLETE, "val_avg_acc": 1.0}
                         for lab in ("baseline", "adb", "adb+ic")])
    assert importance.analyse(rows) is None
    assert importance.analyse(importance_trials(n_b=1)) is None  # alpha only


def test_report_redraws_importance_from_the_store_alone(tmp_path):
    """A searched study in an MLflow store: from_store rebuilds its trials from params and metrics, and its report
    has the importance section, table and figures."""
    import json
    import time

    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.results import from_store

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.create_experiment("alpha_sweep")
    parent = c.create_run(exp, run_name="alpha_sweep 2026-01-01 00:00",
                          tags={"adbs.role": "study", "adbs.study": "alpha_sweep",
                                "adbs.command": "python studies/alpha_sweep.py --num-samples 12"})
    t = importance_trials(n_a=6, n_b=2, seeds=(0,))
    for i, r in t.iterrows():
        cfg = Config(alpha=r["alpha"], temperature=r["temperature"], seed=0).to_dict()
        run = c.create_run(exp, run_name=r["label"], tags={"mlflow.parentRunId": parent.info.run_id,
                           "adbs.role": "trial", "adbs.trial_id": f"t{i}", "adbs.optuna_trial": str(i),
                           "adbs.state": K.COMPLETE, "adbs.label": r["label"]})
        metrics = [Metric("summary/val_avg_acc", r["val_avg_acc"], 0, 0)]
        for s, (b, n) in enumerate([(60.0, float("nan")), (50.0 + i, 20.0 - i)]):
            metrics += [Metric(f"session/{k}", v, 0, s) for k, v in
                        {"test_acc": b, "val_base_acc": b, "val_novel_acc": n, "test_base_acc": b,
                         "test_novel_acc": n}.items() if v == v]
        c.log_batch(run.info.run_id, metrics=metrics,
                    params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
        c.set_terminated(run.info.run_id)
    c.set_terminated(parent.info.run_id)
    study = from_store.load_study(c, "alpha_sweep")
    t0 = time.perf_counter()
    files = from_store.write(study, from_store.study_table(study), tmp_path / "out", fmt="text", uri=uri, paper=False)
    spent = time.perf_counter() - t0
    names = {f.name for f in files}
    assert {"importance.png", "parallel_coordinate.png", "contour.png", "slice.png", "tradeoff.png"} <= names
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Which parameters matter" in report and "| alpha |" in report and "12 complete configurations" in report
    print(f"report with importance: {spent:.1f} s")


def test_each_objective_of_a_multi_objective_study_gets_its_own_ranking_in_its_direction(tmp_path):
    """Two --objectives: alpha decides the first, temperature the second (to minimise); importance.md has a section
    per objective, each ranking its own parameter, and an importance figure each."""
    from adbs_lab.records.objectives import Objective

    t = importance_trials(n_a=6, n_b=3)
    rng = np.random.default_rng(1)
    t["val_last_novel_acc"] = t["temperature"] + rng.normal(0, 0.05, len(t))
    objs = (Objective("val_avg_acc", "max"), Objective("val_last_novel_acc", "min"))
    files = importance.write(t, tmp_path, objs)
    md = (tmp_path / "importance.md").read_text()
    first, second = md.split("### val_last_novel_acc:min")
    assert first.startswith("### val_avg_acc:max") and "validation average accuracy" in first
    assert "val_last_novel_acc, to minimise, summary/val_last_novel_acc" in second
    for text, top in ((first, "alpha"), (second, "temperature")):
        rows = [line for line in text.splitlines() if line.startswith("| ") and "parameter" not in line
                and "---" not in line]
        assert rows[0].startswith(f"| {top} ") and rows[0].rstrip(" |").endswith("| 1"), rows
    assert {f.name for f in files} == {"importance.png", "importance-val_last_novel_acc.png",
                                       "parallel_coordinate.png", "contour.png", "slice.png"}
    # PED-ANOVA looks at the best configurations: to minimise, those are the low temperatures
    a = importance.analyse(t, objective=objs[1], resamples=2)
    assert a["study"].direction.name == "MINIMIZE"
    assert a["configs"].sort_values("objective").iloc[0]["temperature"] == 8.0


def test_a_trial_without_a_value_of_a_searched_parameter_is_left_out_and_counted():
    """A trial lacking a searched parameter's value (NaN in a text or a number column; None would be a value:
    tests/adbs_lab/results/test_searched_values.py) cannot be placed in Optuna's distributions: configurations()
    leaves it out and counts it, the header says so, instead of crashing ('arange: cannot compute length') or
    dropping it unsaid."""
    obj = "val_avg_acc"  # the default objective (adbs_lab/records/objectives.py: DEFAULT)
    t = pd.DataFrame({"alpha": [0.1, 0.1, 0.2, np.nan], "loss": ["a", np.nan, "b", "b"], obj: [0.5, 0.6, 0.7, 0.8],
                      "state": [K.COMPLETE] * 4})
    configs, counts = importance.configurations(t, ["alpha", "loss"])
    assert configs[["alpha", "loss"]].values.tolist() == [[0.1, "a"], [0.2, "b"]] and counts["without a parameter"] == 2
    assert configs["objective"].tolist() == [0.5, 0.7] and configs["seeds"].tolist() == [1, 1]
    head = importance.markdown({"params": ["alpha", "loss"], "configs": configs, "counts": counts, "n": len(configs),
                                "too_few": True}).splitlines()[0]
    assert "2 complete without a value of a searched parameter" in head
    picked = importance.subsample(configs, ["alpha", "loss"], limit=1)
    assert picked.equals(importance.subsample(configs.iloc[::-1], ["alpha", "loss"], limit=1))


def test_the_ranking_uses_fanova_and_ped_anova_as_named_never_optunas_default(monkeypatch):
    """Every importance the analysis computes names its evaluator, with the settings the report was written for: an
    upgrade that changes the default evaluator (Optuna 5.0 made it PED-ANOVA; fANOVA before) or an evaluator's own
    defaults fails here instead of re-ranking a study's knobs."""
    import optuna
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    real, used = optuna.importance.get_param_importances, []

    def recording(study, *, evaluator=None, **kw):
        used.append(evaluator)
        return real(study, evaluator=evaluator, **kw)

    monkeypatch.setattr(optuna.importance, "get_param_importances", recording)
    a = importance.analyse(importance_trials(n_a=6, n_b=3), resamples=2)  # 18 configurations
    assert set(a["importance"]) == {"fANOVA", "PED-ANOVA"}
    assert used and None not in used and {type(e) for e in used} == {FanovaImportanceEvaluator, PedAnovaImportanceEvaluator}
    for e in used:
        if isinstance(e, FanovaImportanceEvaluator):
            forest = e._evaluator._forest  # Optuna's fANOVA fits a scikit-learn forest with these settings
            assert (forest.n_estimators, forest.max_depth, forest.random_state) == (importance.FANOVA_TREES, 64, 0)
            assert (forest.min_samples_split, forest.min_samples_leaf) == (2, 1)
        else:
            assert (e._target_quantile, e._region_quantile, e._evaluate_on_local) == (pytest.approx(5 / 18), 1.0, True)
