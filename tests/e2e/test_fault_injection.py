"""Fault injection through the real platform: a killed trial worker resumes from its
checkpoint to the same numbers with one MLflow run; a NaN ends one trial as FAILED with its reason
while the others finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K
from adbs_lab.search.trainable import FAULT_ENV

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

ONE_TRIAL = ["--smoke", "--num-samples", "1", "--pruner", "none", "--set", "base_epochs=4", "--checkpoint-every", "1",
             "--no-cache"]


def _run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=800, cwd="/", env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def _start(cmd: list[str], out: Path) -> tuple[subprocess.Popen, Path]:
    """The study started in the background, its output to `out`; `_finish` waits for it."""
    with open(out, "w") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, cwd="/"), out


def _finish(started: tuple[subprocess.Popen, Path]) -> None:
    proc, out = started
    proc.wait(800)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out.read_text()[-8000:]}"


def _trial_runs(uri):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("alpha_sweep-smoke")  # --smoke runs
    return client, [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("adbs.role") == "trial"]


def test_killed_worker_resumes_to_identical_results(study_cmd, storage, tracking_uri, tmp_path):
    marker = tmp_path / "markers"
    marker.mkdir()
    fault = {FAULT_ENV: json.dumps({"kill_at_base_epoch": 3, "marker_dir": str(marker)})}
    clean_storage = tmp_path / "clean"
    cmd = study_cmd("alpha_sweep", *ONE_TRIAL, "--seeds", "0")
    cmd[cmd.index("--storage") + 1] = str(clean_storage)
    cmd[cmd.index("--tracking-uri") + 1] = f"sqlite:///{tmp_path / 'clean.db'}"
    # The clean run beside the crashed one, not after it: its own folder and MLflow store, one trial (1 CPU) each on
    # the session's 2-CPU Ray cluster; the fault reaches only the crashed run's trial (its driver forwards its own
    # environment to its own job's workers), and the crashed run's restart (a new worker) is time the clean one trains.
    clean_run = _start(cmd, tmp_path / "clean.out")
    _run(study_cmd("alpha_sweep", *ONE_TRIAL, "--seeds", "0"), env=fault)
    _finish(clean_run)
    assert (marker / "killed-seed0").exists(), "the fault was not injected"
    crashed = pd.read_parquet(storage / "alpha_sweep-smoke" / "sessions.parquet")
    clean = pd.read_parquet(clean_storage / "alpha_sweep-smoke" / "sessions.parquet")

    cols = ["session", "val_acc", "test_acc", "test_base_acc", "boundary_mean"]
    assert crashed["state"].eq(K.COMPLETE).all()
    pd.testing.assert_frame_equal(crashed[cols].reset_index(drop=True), clean[cols].reset_index(drop=True))

    client, runs = _trial_runs(tracking_uri)
    assert len(runs) == 1, "a restarted trial must continue its MLflow run, not open a new one"
    hist = client.get_metric_history(runs[0].info.run_id, "base/val_acc")
    assert sorted(m.step for m in hist) == [1, 2, 3, 4], "each base epoch logged exactly once"
    assert runs[0].info.status == "FINISHED" and runs[0].data.tags["adbs.state"] == K.COMPLETE


def test_nan_diverges_one_trial_with_reason_others_finish(study_cmd, storage, tracking_uri):
    """A NaN is DIVERGED everywhere (Optuna: FAIL, MLflow status FAILED): progress line, MLflow state,
    trials.parquet, the report's counts; an outcome of the search, so the study exits 0. The configuration is
    reported as missing a seed, never ranked: the table's seeds cell, best_config.json, pareto.json and report.md
    (the study's and the one rebuilt from the store) count the diverged seed."""
    import optuna

    fault = {FAULT_ENV: json.dumps({"nan_seed": 1})}
    r = _run(study_cmd("alpha_sweep", "--smoke", "--num-samples", "1", "--pruner", "none", "--seeds", "0", "1",
                       "--objectives", "val_last_base_acc:max", "val_avg_acc:max"), env=fault)
    assert "seed=1: DIVERGED: base training loss became NaN/inf" in r.stdout and "diverged 1" in r.stdout
    assert "pruned 1" not in r.stdout
    trials = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet").set_index("seed")
    assert trials.loc[0, "state"] == K.COMPLETE
    assert trials.loc[1, "state"] == K.DIVERGED and "NaN" in trials.loc[1, "error"]
    client, runs = _trial_runs(tracking_uri)
    by_seed = {int(r.data.params["seed"]): r for r in runs}
    assert by_seed[1].info.status == "FAILED" and "base epoch 1" in by_seed[1].data.tags["adbs.error"]
    assert by_seed[1].data.tags["adbs.state"] == K.DIVERGED
    assert by_seed[0].info.status == "FINISHED"
    st = optuna.load_study(study_name="alpha_sweep-smoke", storage=f"sqlite:///{storage / 'alpha_sweep-smoke' / 'optuna.db'}")
    assert [t.state for t in st.trials] == [optuna.trial.TrialState.FAIL]  # a configuration with a failed seed
    parent = next(p for p in client.search_runs([runs[0].info.experiment_id]) if p.data.tags.get("adbs.role") == "study")
    assert parent.data.metrics["study/trials_diverged"] == 1 and parent.data.metrics["study/trials_complete"] == 1
    assert parent.data.metrics["study/trials_failed"] == 0 and parent.info.status == "FINISHED"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "alpha_sweep", "--smoke", "--tracking-uri",
                          tracking_uri, "--out", str(storage / "report")], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0 and "1 complete, 1 diverged" in rep.stdout, rep.stdout + rep.stderr
    _counts_the_diverged_seed(storage / "alpha_sweep-smoke", trials.loc[0, "label"])
    _counts_the_diverged_seed(storage / "report", trials.loc[0, "label"])
    assert " 1 of 2, 1 diverged " in rep.stdout


def _counts_the_diverged_seed(folder: Path, label: str) -> None:
    """The study's files (or report.py's) say the configuration ran 2 seeds, 1 diverged, and rank it nowhere."""
    seeds = "1 of 2, 1 diverged"
    assert f" {seeds} " in (folder / "table.txt").read_text()
    report = (folder / "report.md").read_text()
    assert f"| {label} | {seeds} |" in report and f"- `{label}`: {seeds}" in report
    pareto = json.loads((folder / "pareto.json").read_text())
    assert pareto["front"] == [] and [(p["config_label"], p["seeds"]) for p in pareto["not_ranked"]] == [(label, seeds)]
    if (folder / "best_config.json").exists():  # the study's (report.py writes report.md, not best_config.json)
        best = json.loads((folder / "best_config.json").read_text())
        assert best["config_label"] is None and best["not_ranked"][0]["seed_states"] == {"complete": 1, "diverged": 1}
