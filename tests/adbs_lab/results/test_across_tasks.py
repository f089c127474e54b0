"""Comparisons across tasks (adbs_lab/results/across_tasks.py): what a task is for study runs, hosts and k-shot
cells, the per-seed differences' IQM and mean and the paired probability of improvement of a comparison over two
tasks against a hand computation, the printed lines with n, a task with fewer than 3 runs left out and named, and
`studies/report.py A B` printing them (slow: an MLflow store)."""

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


def test_the_differences_and_improvement_over_two_datasets_by_hand():
    values, pairs = _two_datasets()
    sessions, trials = study_frames(values)
    [r] = X.across(pairs, sessions, trials)
    assert r.key == ("adb+ic", "baseline") and r.tasks == ("ablation (aaaa1111)", "ablation (bbbb2222)")
    # per seed adb+ic - baseline: task a 1, -1, 4; task b 0, 1, -1; pooled -1 -1 0 1 1 4, one cut from each end
    assert r.iqm is not None and r.iqm.estimate == pytest.approx((-1 + 0 + 1 + 1) / 4)
    assert r.mean is not None and r.mean.estimate == pytest.approx((4 / 3 + 0) / 2)
    # task a: seeds won, lost, won (2/3); task b: tie, won, lost (1/2); the mean over tasks
    assert r.improvement is not None and r.improvement.estimate == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert r.improvement.runs == (3, 3) and r.m == 1 and r.ties == 1 and r.improvement.lo <= r.improvement.estimate
    text = "\n".join(X.lines([r]))
    assert "adb+ic vs baseline over 2 tasks (ablation (aaaa1111), ablation (bbbb2222))" in text
    assert ("adb+ic - baseline per seed, paired within its task: IQM +0.25 (95% CI -1.00 to +3.25, expanded percentile "
            "bootstrap)") in text
    assert "mean of the task means +0.67 (95% CI -2.05 to +3.38, Satterthwaite t); n=6: 3, 3 per task" in text
    assert ("paired P(adb+ic > baseline) per seed, averaged over tasks: 0.58 (95% CI 0.11 to 0.96, Clopper-Pearson on "
            "the wins pooled over tasks); n=6: 3, 3 per task; 1 tie: half a win in the estimate, a loss for the lower "
            "end and a win for the upper") in text


def test_one_studys_k_shot_cells_are_its_tasks():
    """One kshot_grid study (its rows carry no study name): adb+ic against the baseline of its own cell, in two
    cells, is one comparison over two tasks, from the table's own family, as `report.py kshot_grid` prints it; it
    wins every seed, and 6 wins of 6 give a lower end of 0.54 (Clopper-Pearson), not f730cc9's 1.00."""
    from adbs_lab.results import tables

    cells = ("ways=5 shots=1", "ways=5 shots=5")
    values = {f"{c} variant={v}": [base + (1.0 + 0.1 * s) * (v == "adb+ic") + s for s in range(3)]
              for c, base in zip(cells, (50.0, 60.0)) for v in ("baseline", "adb+ic")}
    sessions, trials = study_frames(values)
    table = tables.paper_table(sessions, trials=trials, order=list(values),
                               baseline={f"{c} variant=adb+ic": f"{c} variant=baseline" for c in cells})
    text = "\n".join(X.table_lines(table, sessions, trials))
    assert f"variant=adb+ic vs variant=baseline over 2 tasks ({cells[0]}, {cells[1]})" in text
    assert ("paired P(variant=adb+ic > variant=baseline) per seed, averaged over tasks: 1.00 (95% CI 0.54 to 1.00, "
            "Clopper-Pearson on the wins pooled over tasks); n=6: 3, 3 per task") in text, text
    one = tables.paper_table(sessions, trials=trials, order=list(values),  # one cell compared: one task, no lines
                             baseline={f"{cells[0]} variant=adb+ic": f"{cells[0]} variant=baseline"})
    assert X.table_lines(one, sessions, trials) == []


def test_a_diverged_seed_leaves_a_task_short_and_one_task_is_not_aggregated():
    """Seed 1 of adb+ic diverged in the first task: 2 paired runs there, fewer than 3, so that task is left out and
    named, and with one task left the comparison has no statistics across tasks (and counts in no family)."""
    values, pairs = _two_datasets()
    values[pairs[0][0]] = [50.0, None, 54.0]
    sessions, trials = study_frames(values)
    [r] = X.across(pairs, sessions, trials)
    assert r.tasks == ("ablation (bbbb2222)",) and r.short == (("ablation (aaaa1111)", 2),)
    assert r.iqm is None and r.improvement is None and r.m == 0
    text = "\n".join(X.lines([r]))
    assert ("adb+ic vs baseline: fewer than 2 tasks with at least 3 paired runs; no statistics across tasks (left "
            "out: ablation (aaaa1111) (2 runs))") in text
    assert "adb+ic seed 1 (diverged) in ablation (aaaa1111)" in text
    assert X.across(pairs[:1], sessions, trials) == [] and X.lines([]) == []


def test_a_one_run_task_is_left_out_and_named_and_narrows_nothing():
    """f730cc9 pooled a one-seed study into the IQM and switched the bootstrap's expansion off for every task,
    narrowing the intervals; now it is left out, named in one line, and the intervals are those without it."""
    values, pairs = _two_datasets()
    c = "ablation (cccc3333)"
    with_one = {**values, f"{c}: adb+ic": [70.0], f"{c}: baseline": [69.0]}
    [r] = X.across(pairs, *study_frames(values))
    [r1] = X.across(pairs + [(f"{c}: adb+ic", f"{c}: baseline")], *study_frames(with_one))
    assert (r1.iqm, r1.mean, r1.improvement) == (r.iqm, r.mean, r.improvement) and r1.short == ((c, 1),)
    assert f"    left out (fewer than 3 paired runs): {c} (1 run)" in X.lines([r1])


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
    assert ("paired P(with +ADBS > without) per seed, averaged over tasks: 1.00 (95% CI 0.73 to 1.00, "
            "Clopper-Pearson on the wins pooled over tasks); n=12: 3, 3, 3, 3 per task") in out
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
    assert ("paired P(with +ADBS > without) per seed, averaged over tasks: 1.00 (95% CI 0.54 to 1.00, "
            "Clopper-Pearson on the wins pooled over tasks); n=6: 3, 3 per task") in out
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert "## Across tasks" in report_md and "over 2 tasks (SAVC, ALICE)" in report_md


@pytest.mark.slow
def test_report_over_a_store_of_corners_prints_the_corner_lines(tmp_path, capsys):
    """`studies/report.py` over tests/helpers/corner_store.py's store: three hosts runs, one of a single seed (its
    tasks left out and named, the intervals those of the other two), ADBS ahead on every seed (a lower end of 0.73,
    not 1.00); then the ablation with the kshot_grid against the ablation's baseline (the family counts the 4
    comparisons that can have an interval, not the 2 one-seed cells; the 3-seed cell unpaired on conservative df).
    Slow: an MLflow store and two reports."""
    from studies import report
    from tests.helpers.corner_store import corner_store

    uri, ids = corner_store(tmp_path)
    hosts = [ids["hosts cifar100"], ids["hosts mini_imagenet"], ids["hosts cub200 (one seed)"]]
    assert report.main([*hosts, "--tracking-uri", uri, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "with +ADBS vs without over 4 tasks (" in out and "n=12: 3, 3, 3, 3 per task" in out
    assert "paired P(with +ADBS > without) per seed, averaged over tasks: 1.00 (95% CI 0.73 to 1.00" in out
    assert f"left out (fewer than 3 paired runs): hosts ({hosts[2][:8]}): SAVC (1 run); hosts ({hosts[2][:8]}): " \
           "ALICE (1 run)" in out
    assert report.main(["ablation", "kshot_grid", "--reference", "ablation: baseline", "--tracking-uri", uri,
                        "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "the 6 comparisons of this table (4 of which can have an interval: the Bonferroni family)" in out
    assert "Bonferroni over 4 comparisons; unpaired (Welch: the rows ran different seeds or data; conservative df = " \
           "2: a side has fewer than 8 runs), n=3)" in out
