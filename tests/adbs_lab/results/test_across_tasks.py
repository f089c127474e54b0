"""Comparisons across tasks (adbs_lab/results/across_tasks.py): what a task is for study runs, hosts and k-shot
cells, the IQM and paired probability of improvement of a comparison over two tasks against a hand computation, the
printed lines with n and the few-runs warning, and `studies/report.py A B` printing them (slow: an MLflow store)."""

from __future__ import annotations

import pytest

from adbs_lab.results import across_tasks as X
from tests.helpers.frames import study_frames


def test_what_a_task_is():
    # each study run is a task (two runs of one study: their rows carry the run id)
    assert X.task_of(("ablation (1a2b3c4d): adb+ic", "ablation (1a2b3c4d): baseline")) == (
        "ablation (1a2b3c4d)", ("adb+ic", "baseline"))
    # each host is a task: the row against itself without ADBS
    assert X.task_of(("hosts: SAVC+ADBS", "hosts: SAVC")) == ("hosts: SAVC", ("+ADBS", X.WITHOUT))
    # each k-shot cell is a task: the rows differ in one setting, the rest is the cell
    assert X.task_of(("kshot_grid: ways=5 shots=1 variant=adb+ic", "kshot_grid: ways=5 shots=1 variant=baseline")) == (
        "kshot_grid: ways=5 shots=1", ("variant=adb+ic", "variant=baseline"))
    # rows of two studies (--reference across studies): a task of its own
    pair = ("hosts: SAVC", "ablation: baseline")
    assert X.task_of(pair) == ("hosts: SAVC / ablation: baseline", pair)
    g = X.groups([("hosts: SAVC+ADBS", "hosts: SAVC"), ("hosts: ALICE+ADBS", "hosts: ALICE"), pair])
    assert [len(v) for v in g.values()] == [2, 1] and X.names(next(iter(g))) == ("with +ADBS", "without")


def _two_datasets():
    """adb+ic against baseline in two runs of the ablation (two datasets), three seeds each."""
    a, b = "ablation (aaaa1111)", "ablation (bbbb2222)"
    values = {f"{a}: adb+ic": [50.0, 52.0, 54.0], f"{a}: baseline": [49.0, 53.0, 50.0],
              f"{b}: adb+ic": [60.0, 61.0, 62.0], f"{b}: baseline": [60.0, 60.0, 63.0]}
    return values, [(f"{a}: adb+ic", f"{a}: baseline"), (f"{b}: adb+ic", f"{b}: baseline")]


def test_iqm_and_improvement_over_two_datasets_by_hand():
    values, pairs = _two_datasets()
    sessions, trials = study_frames(values)
    [r] = X.across(pairs, sessions, trials)
    assert r.key == ("adb+ic", "baseline") and r.tasks == ("ablation (aaaa1111)", "ablation (bbbb2222)")
    # adb+ic's 6 runs sorted 50 52 54 60 61 62: one cut from each end (int(0.25 * 6)), the mean of 52 54 60 61
    assert r.iqm_x.estimate == pytest.approx((52 + 54 + 60 + 61) / 4)
    assert r.iqm_y.estimate == pytest.approx((50 + 53 + 60 + 60) / 4)  # 49 50 53 60 60 63
    # task a: seeds won, lost, won (2/3); task b: tie, won, lost (1/2); the mean over tasks
    assert r.improvement.estimate == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert r.improvement.runs == (3, 3) and r.m == 1 and r.improvement.lo <= r.improvement.estimate
    text = "\n".join(X.lines([r]))
    assert "adb+ic vs baseline over 2 tasks (ablation (aaaa1111), ablation (bbbb2222))" in text
    assert "P(adb+ic > baseline) = 0.58 (95% CI" in text and "n=6: 3, 3 per task" in text
    assert "warning: fewer than 5 runs per task (the fewest: 3)" in text


def test_one_studys_k_shot_cells_are_its_tasks():
    """One kshot_grid study (its rows carry no study name): adb+ic against the baseline of its own cell, in two
    cells, is one comparison over two tasks, from the table's own family, as `report.py kshot_grid` prints it."""
    from adbs_lab.results import tables

    cells = ("ways=5 shots=1", "ways=5 shots=5")
    values = {f"{c} variant={v}": [base + 1.0 * (v == "adb+ic") + s for s in range(3)]
              for c, base in zip(cells, (50.0, 60.0)) for v in ("baseline", "adb+ic")}
    sessions, trials = study_frames(values)
    table = tables.paper_table(sessions, trials=trials, order=list(values),
                               baseline={f"{c} variant=adb+ic": f"{c} variant=baseline" for c in cells})
    text = "\n".join(X.table_lines(table, sessions, trials))
    assert f"variant=adb+ic vs variant=baseline over 2 tasks ({cells[0]}, {cells[1]})" in text
    assert "P(variant=adb+ic > variant=baseline) = 1.00 (95% CI 1.00 to 1.00; n=6: 3, 3 per task)" in text
    assert "warning: fewer than 5 runs per task (the fewest: 3)" in text
    one = tables.paper_table(sessions, trials=trials, order=list(values),  # one cell compared: one task, no lines
                             baseline={f"{cells[0]} variant=adb+ic": f"{cells[0]} variant=baseline"})
    assert X.table_lines(one, sessions, trials) == []


def test_a_diverged_seed_is_left_out_and_one_task_is_not_aggregated():
    values, pairs = _two_datasets()
    values[pairs[0][0]] = [50.0, None, 54.0]  # seed 1 of adb+ic diverged in the first task
    sessions, trials = study_frames(values)
    [r] = X.across(pairs, sessions, trials)
    assert r.iqm_x.runs == (2, 3) and r.improvement.runs == (2, 3)
    assert r.improvement.estimate == pytest.approx((1.0 + 0.5) / 2)  # task a: seeds 0 and 2 won
    assert X.across(pairs[:1], sessions, trials) == [] and X.lines([]) == []


def test_a_left_out_seed_is_named_under_its_comparison():
    """A diverged seed, a failed one and a complete trial without a finite last value were left out of the
    statistics with only a smaller n to show it; each is named (row, seed, task, why) under its comparison, and
    a side with no run in a task prints no NaN."""
    values, pairs = _two_datasets()
    values[pairs[0][0]] = [50.0, None, float("nan")]  # adb+ic: seed 1 diverged, seed 2 complete without a value
    values[pairs[1][1]] = [None, None, None]  # baseline failed on every seed in the second task
    states = {(pairs[1][1], s): "FAILED" for s in range(3)}
    sessions, trials = study_frames(values, states)
    text = "\n".join(X.lines(X.across(pairs, sessions, trials)))
    assert "    left out (no value to compare): adb+ic seed 1 (diverged), seed 2 (without a finite value) in " \
           "ablation (aaaa1111); baseline seeds 0, 1, 2 (failed) in ablation (bbbb2222)" in text, text
    assert "nan" not in text.lower()


def _hosts_store(tmp_path, datasets=("cifar100", "mini_imagenet")) -> str:
    """An MLflow store in the tracker's layout with a run of the hosts study per dataset (two by default), rows SAVC
    and ALICE without and with ADBS, three seeds each; ADBS adds 1 point to every seed."""
    import json

    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records import metrics_keys as K

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.create_experiment("hosts")
    rows = {"SAVC": 60.0, "SAVC+ADBS": 61.0, "ALICE": 55.0, "ALICE+ADBS": 56.0}
    for dataset in datasets:
        parent = c.create_run(exp, run_name=f"hosts {dataset}", tags={
            "adbs.role": "study", "adbs.study": "hosts", "adbs.order": json.dumps(list(rows)),
            "adbs.baseline": json.dumps({"SAVC+ADBS": "SAVC", "ALICE+ADBS": "ALICE"}),
            "adbs.command": f"python studies/hosts.py --dataset {dataset}"})
        for number, (label, seed) in enumerate((lab, s) for lab in rows for s in (0, 1, 2)):
            run = c.create_run(exp, run_name=f"{label} seed={seed}", tags={
                "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": "hosts",
                "adbs.trial_id": f"{dataset}{number}", "adbs.optuna_trial": str(number), "adbs.state": K.COMPLETE,
                "adbs.label": label})
            got = [80.0, rows[label] + seed]
            cfg = Config(seed=seed, dataset=dataset, keep_embeddings=False).to_dict()
            c.log_batch(run.info.run_id, metrics=[Metric("session/test_acc", a, 0, s) for s, a in enumerate(got)]
                        + [Metric("summary/val_avg_acc", sum(got) / 2, 0, 0)],
                        params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
            c.set_terminated(run.info.run_id)
        c.set_terminated(parent.info.run_id)
    return uri


@pytest.mark.slow
def test_report_over_two_datasets_prints_the_comparisons_across_hosts_and_datasets(tmp_path, capsys):
    """`studies/report.py ID1 ID2` over two runs of the hosts study: +ADBS vs without over 4 tasks (each host on each
    dataset), ADBS ahead on every seed (P = 1), in the printed lines and report.md. Slow: an MLflow store of 24 runs
    and the report's figures (about 10 s of CPU; over a minute on the busy 2-core machine)."""
    from mlflow.tracking import MlflowClient

    from studies import report

    uri = _hosts_store(tmp_path)
    ids = [r.info.run_id for r in MlflowClient(uri).search_runs(["1"], "tags.`adbs.role` = 'study'")]
    assert report.main([*ids, "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "with +ADBS vs without over 4 tasks (hosts (" in out and ": SAVC, hosts (" in out
    assert "P(with +ADBS > without) = 1.00 (95% CI 1.00 to 1.00; n=12: 3, 3, 3, 3 per task)" in out
    assert "warning: fewer than 5 runs per task (the fewest: 3)" in out
    assert "## Across tasks" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_report_of_one_hosts_study_prints_the_comparison_across_its_hosts(tmp_path, capsys):
    """`studies/report.py hosts` over one run of the hosts study: each host is a task, so +ADBS vs without ran in
    two (SAVC, ALICE), printed and in report.md as `report.py A B` prints it (a single study printed none).
    Slow: an MLflow store of 12 runs and the report's figures."""
    from studies import report

    uri = _hosts_store(tmp_path, datasets=("cifar100",))
    assert report.main(["hosts", "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "with +ADBS vs without over 2 tasks (SAVC, ALICE)" in out
    assert "P(with +ADBS > without) = 1.00 (95% CI 1.00 to 1.00; n=6: 3, 3 per task)" in out
    assert "warning: fewer than 5 runs per task (the fewest: 3)" in out
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert "## Across tasks" in report_md and "over 2 tasks (SAVC, ALICE)" in report_md
