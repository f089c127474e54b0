"""End to end, as a user types it: each study script in a subprocess with --smoke, on the session's
Ray instance, real Optuna storage and a real MLflow SQLite store in tmp_path, the real run_trial."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from tests.helpers.scripts import in_process

from adbs_lab.records import metrics_keys as K
from tests.helpers.studies import check_nested_with_curves, first_finished, trial_runs

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(cmd: list[str], timeout: int = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or "/")
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    return r


def test_alpha_sweep_smoke(study_cmd, storage, tracking_uri):
    r = _run(study_cmd("alpha_sweep", "--smoke", "--num-samples", "2"))  # the TPE search (the grid: below)
    assert "mlflow/serve.py --backend-store-uri" in r.stdout and "alpha=" in r.stdout
    # each running trial reports its base epochs (first and last always), and one estimate follows the first
    assert r.stdout.count(": base epoch 1/2, val acc ") == 2 and r.stdout.count(": base epoch 2/2, val acc ") >= 1
    assert r.stdout.count("estimate from this epoch: base session ~") == 1
    _, parent, trials = check_nested_with_curves(tracking_uri, "alpha_sweep-smoke", 2, 3)
    assert parent.data.tags["adbs.search_space"].startswith("search_spaces/alpha_sweep.py:SPACE")
    assert {"adbs.code_version", "adbs.command"} <= set(parent.data.tags)
    folder = storage / "alpha_sweep-smoke"
    trials_df = pd.read_parquet(folder / "trials.parquet")
    sessions = pd.read_parquet(folder / "sessions.parquet")
    assert len(trials_df) == 2 and (trials_df["variant"] == "adb+ic").all()
    assert trials_df["alpha"].between(0.01, 0.1).all()
    assert len(sessions) == 3 * (trials_df["state"] == K.COMPLETE).sum()
    assert (folder / "alpha_sensitivity.png").stat().st_size > 0
    assert json.loads((folder / "best_config.json").read_text())["config"]["variant"] == "adb+ic"
    st = optuna.load_study(study_name="alpha_sweep-smoke", storage=f"sqlite:///{folder / 'optuna.db'}")
    assert len(st.trials) == 2
    # the written best_config.json is the configuration (no seed, no field it never reads); with one of its
    # trial_seeds it reruns that trial in the single run
    best = json.loads((folder / "best_config.json").read_text())
    assert not {"seed", "split_seed", "milestones"} & set(best["config"])
    seed = best["trial_seeds"][0]
    out = folder / "rerun.json"
    _run([sys.executable, "-m", "adbs.run", "--config", str(folder / "best_config.json"), "--seed", str(seed),
          "--split-seed", str(seed), "--out", str(out), "--quiet"], cwd=REPO)
    from adbs.config import from_dict

    row = trials_df[(trials_df["label"] == best["config_label"]) & (trials_df["seed"] == seed)]
    trial_cfg = {k: v for k, v in row.iloc[0].items() if k in best["config"] or k in ("seed", "split_seed")}
    trial_cfg = {k: (None if isinstance(v, float) and math.isnan(v) else v.item() if hasattr(v, "item") else v)
                 for k, v in trial_cfg.items()}
    rerun = json.loads(out.read_text())
    assert from_dict({k: rerun["config"][k] for k in trial_cfg}) == from_dict(trial_cfg)
    same = trials_df.loc[row.index[0]]
    assert abs(rerun["summary"]["val_avg_acc"] - same["val_avg_acc"]) < 1e-6  # same config, same numbers on CPU


def test_kshot_grid_smoke(study_cmd, storage, tracking_uri):
    r = _run(study_cmd("kshot_grid", "--smoke", "--set", "sessions=1", "--max-concurrent", "2"))
    # ways and shots are data conditions: no best across them, so far or at the end (adbs_lab/results/best.py)
    assert "best val avg acc" not in r.stdout and "| no best across ways, shots (data conditions" in r.stdout
    assert "best configuration: none (kshot_grid varies data conditions (ways, shots)" in r.stdout
    assert (storage / "kshot_grid-smoke" / "tradeoff.png").exists()
    client, _, runs = check_nested_with_curves(tracking_uri, "kshot_grid-smoke", 4, 2)
    trials = pd.read_parquet(storage / "kshot_grid-smoke" / "trials.parquet")
    assert sorted(zip(trials["ways"], trials["shots"])) == [(5, 1), (5, 5), (10, 1), (10, 5)]
    # the 4 cells share one base session, trained once while another trial ran beside it
    entries = [p for p in (storage / "base_cache").glob("*.json") if ".features-" not in p.name]
    assert len(entries) == 1
    assert sorted(trials["base_reused"]) == [0.0, 1.0, 1.0, 1.0]
    trainer = trials[trials["base_reused"] == 0].iloc[0]
    others = trials[trials["base_reused"] == 1]
    assert (others["started_at"] < trainer["finished_at"]).any()  # one waited for it, it did not train again
    for r in runs:
        reused = client.get_metric_history(r.info.run_id, "base/reused")
        assert reused and {m.value for m in reused} == {r.data.metrics["summary/base_reused"]}
    assert sorted(r.data.metrics["summary/base_reused"] for r in runs) == [0.0, 1.0, 1.0, 1.0]
    folder = storage / "kshot_grid-smoke"
    assert (folder / "kshot_5way.png").exists() and (folder / "kshot_10way.png").exists()


def test_alpha_sweep_grid_runs_every_point_over_every_seed(study_cmd, storage, tracking_uri):
    """--grid: no pruner by default, so every alpha ends with all its seeds."""
    _run(study_cmd("alpha_sweep", "--smoke", "--grid", "--seeds", "0", "1", "--set", "sessions=1"))
    folder = storage / "alpha_sweep-smoke"
    assert json.loads((folder / "study.json").read_text())["settings"]["pruner"] == "none"
    trials = pd.read_parquet(folder / "trials.parquet")
    assert (trials["state"] == K.COMPLETE).all()
    assert sorted(zip(trials["alpha"], trials["seed"])) == [(0.01, 0), (0.01, 1), (0.1, 0), (0.1, 1)]
    _, parent, _ = check_nested_with_curves(tracking_uri, "alpha_sweep-smoke", 4, 2)
    assert parent.data.params["study.pruner"] == "none"


def test_kshot_sub_grid_from_the_command_line_with_a_config_file(study_cmd, storage, tracking_uri, tmp_path):
    """--ways/--shots pick cells; a --config file sets values under them; the table marks the sessions per row."""
    cfg = tmp_path / "kshot.yaml"
    cfg.write_text("sessions: null   # every novel class: 8 sessions at 5-way, 4 at 10-way\nfinetune_epochs: 1\n"
                   "ways: 5          # the study's --ways decides\n")
    r = _run(study_cmd("kshot_grid", "--smoke", "--ways", "5", "10", "--shots", "1", "--config", str(cfg)))
    assert "note: --config" in r.stdout and "sets ways" in r.stdout
    trials = pd.read_parquet(storage / "kshot_grid-smoke" / "trials.parquet")
    assert sorted(zip(trials["ways"], trials["shots"])) == [(5, 1), (10, 1)] and (trials["finetune_epochs"] == 1).all()
    table = (storage / "kshot_grid-smoke" / "table.txt").read_text()
    # below the notes (the smoke banner, the settings changed, why no configuration is named best)
    table = table[re.search(r"^config +seeds", table, re.M).start():]
    assert table.splitlines()[0].split()[:3] == ["config", "seeds", "sessions"]
    # config (two words), seeds ("1 of 1": three), then sessions
    rows = {line.split()[0] + " " + line.split()[1]: line.split()[5] for line in table.splitlines()[2:4]}
    assert rows == {"ways=5 shots=1": "8", "ways=10 shots=1": "4"}
    assert "sessions: incremental sessions of each row" in r.stdout


def test_boundary_smoke_diagnostics_and_warnings(study_cmd, storage, tracking_uri, tmp_path):
    """The boundary study end to end: diagnostics per epoch and session, collapse warnings everywhere a user looks."""
    r = _run(study_cmd("boundary", "--smoke", "--set", "sessions=1", "--max-concurrent", "1"), timeout=800)
    folder = storage / "boundary-smoke"
    trials = pd.read_parquet(folder / "trials.parquet").set_index("label")
    assert sorted(trials.index) == sorted(["released", "abs_mean_init", "finetune_abs", "abs_base", "lr_scale=0.1",
                                           "warmup=2", "all_remedies", "baseline"])
    # the released recipe never predicts a novel class here; the baseline (m = 1) does
    assert trials.loc["released", K.WARNING].startswith("novel accuracy 0.00 in every incremental session (1)")
    assert "novel accuracy" not in trials.loc["baseline", K.WARNING]
    # its progress line, the table's footer and the MLflow tag say so too
    assert "released seed=0: finished:" in r.stdout and "| WARNING: novel accuracy 0.00" in r.stdout
    table = (folder / "table.txt").read_text()
    assert "WARNING released seed=0: novel accuracy 0.00 in every incremental session" in table
    assert "WARNING baseline seed=0: novel accuracy" not in table
    client, _, runs = check_nested_with_curves(tracking_uri, "boundary-smoke", 8, 2)
    by_name = {t.info.run_name: t for t in runs}
    assert by_name["released seed=0"].data.tags["adbs.warning"] == trials.loc["released", K.WARNING]
    # boundary diagnostics: per base epoch and per session, in MLflow and in sessions.parquet
    released = by_name["released seed=0"].info.run_id
    assert [m.step for m in client.get_metric_history(released, "base/boundary_negative")] == [1, 2]
    assert len(client.get_metric_history(released, "session/boundary_novel_abs_mean")) == 1  # session 1 only
    sessions = pd.read_parquet(folder / "sessions.parquet")
    rel = sessions[(sessions["label"] == "released") & (sessions["session"] == 1)].iloc[0]
    assert rel["test_pred_novel_share"] == 0.0 and rel["test_novel_acc"] == 0.0
    base_m = json.loads(trials.loc["released", "base_boundaries"])
    assert len(base_m) == 60 and rel["boundary_negative"] >= sum(m < 0 for m in base_m)
    assert set(json.loads(trials.loc["baseline", "base_boundaries"])) == {1.0}
    assert min(json.loads(trials.loc["abs_base", "base_boundaries"])) >= 0  # |m| before the sessions
    for png in ("boundary_histograms.png", "boundary_sessions.png"):
        assert (folder / png).stat().st_size > 0
    # the report rebuilt from the store alone prints the same table, warnings included
    out = tmp_path / "report"
    _run([sys.executable, str(REPO / "studies" / "report.py"), "boundary", "--smoke", "--tracking-uri", tracking_uri,
          "--out", str(out)])
    assert (out / "table.txt").read_text() == table
    assert (out / "boundary_histograms.png").stat().st_size > 0


def test_hosts_smoke_each_host_without_and_with_adbs(study_cmd, storage, tracking_uri, tmp_path):
    r = _run(study_cmd("hosts", "--smoke", "--set", "sessions=1", "--set", "savc.queue_size=256",
                       "--max-concurrent", "1"), timeout=800)
    rows = ["baseline", "baseline+ADBS", "SAVC", "SAVC+ADBS", "ALICE", "ALICE+ADBS", "OrCo", "OrCo+ADBS"]
    folder = storage / "hosts-smoke"
    trials = pd.read_parquet(folder / "trials.parquet").set_index("label")
    assert sorted(trials.index) == sorted(rows) and (trials["state"] == K.COMPLETE).all()
    assert trials.loc["SAVC+ADBS", "host"] == "savc" and trials.loc["SAVC+ADBS", "variant"] == "adb+ic"
    assert trials.loc["ALICE", "host"] == "alice" and trials.loc["ALICE", "variant"] == "baseline"
    assert json.loads(trials.loc["SAVC", "host_options"]) == {"queue_size": 256}  # --set reached the SAVC rows
    assert len(json.loads(trials.loc["SAVC", "base_boundaries"])) == 120  # one m per (class, rotation)
    table = (folder / "table.txt").read_text()
    for row in rows:
        assert f"\n{row} " in table, row
    assert "Δlast" in r.stdout and (folder / "hosts_sessions.png").stat().st_size > 0
    client, parent, runs = check_nested_with_curves(tracking_uri, "hosts-smoke", 8, 2)
    assert json.loads(parent.data.tags["adbs.baseline"])["SAVC+ADBS"] == "SAVC"
    out = tmp_path / "report"
    rep = _run([sys.executable, str(REPO / "studies" / "report.py"), "hosts", "--smoke", "--tracking-uri", tracking_uri,
                "--out", str(out), "--paper"])
    assert (out / "table.txt").read_text() == table and "no paper table matches" in rep.stdout


def test_ablation_accepts_host(study_cmd, storage, tracking_uri):
    _run(study_cmd("ablation", "--smoke", "--set", "sessions=1", "--host", "alice", "--max-concurrent", "1"),
         timeout=800)
    trials = pd.read_parquet(storage / "ablation-smoke" / "trials.parquet")
    assert set(trials["host"]) == {"alice"} and sorted(trials["label"]) == ["adb", "adb+ic", "baseline"]


PRUNE_SCRIPT = textwrap.dedent("""
    import sys
    from optuna.distributions import FloatDistribution
    from adbs_lab import study
    from adbs_lab.driver import options
    opts, _ = options.parse("prune test", options.Defaults(pruner="median", num_samples=3))
    plan = study.Plan(name="prune_test", space={"variant": "adb+ic", "base_lr": FloatDistribution(1e-6, 0.5, log=True)},
                      space_source="tests/e2e/test_studies.py",
                      # two healthy configurations first (the median pruner's startup trials), then a tiny lr
                      points_to_evaluate=[{"base_lr": 0.1}, {"base_lr": 0.1}, {"base_lr": 1e-6}])
    study.run(plan, opts)
""")


@pytest.mark.parametrize("host", ["baseline", "savc"])
def test_pruning_marks_a_tiny_lr_trial_pruned(study_cmd, storage, tracking_uri, tmp_path, host):
    script = tmp_path / "prune_study.py"
    script.write_text(PRUNE_SCRIPT)
    cmd = study_cmd("x", "--smoke", "--set", "base_epochs=3", "--set", "sessions=1", "--max-concurrent", "1",
                    "--host", host)
    cmd[1] = str(script)
    r = _run(cmd, cwd=REPO)
    st = optuna.load_study(study_name="prune_test-smoke", storage=f"sqlite:///{storage / 'prune_test-smoke' / 'optuna.db'}")
    states = {t.number: (t.params["base_lr"], t.state) for t in st.trials}
    assert states[2] == (1e-6, optuna.trial.TrialState.PRUNED), (states, r.stdout)
    assert sum(s == optuna.trial.TrialState.COMPLETE for _, s in states.values()) == 2
    pruned = [t for t in st.trials if t.state == optuna.trial.TrialState.PRUNED][0]
    assert max(pruned.intermediate_values) < 3  # stopped during the base session
    _, _, trials = trial_runs(tracking_uri, "prune_test-smoke")
    assert sorted(t.data.tags["adbs.state"] for t in trials) == [K.COMPLETE, K.COMPLETE, K.PRUNED]
    assert "pruned at base epoch" in r.stdout


def test_resume_after_sigkill_does_not_rerun_finished_trials(study_cmd, storage, tracking_uri):
    cmd = study_cmd("alpha_sweep", "--smoke", "--grid", "--max-concurrent", "1", "--set", "sessions=1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/")
    finished = first_finished(proc, 600)
    time.sleep(4)  # Tune saves its experiment state every 2 s in a study this small (session.checkpoint_period)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    r = _run(cmd + ["--resume"])
    assert f"{finished}: started" not in r.stdout, r.stdout
    client, parent, trials = check_nested_with_curves(tracking_uri, "alpha_sweep-smoke", 2, 2)
    assert sorted(t.info.run_name for t in trials) == ["alpha=0.01 seed=0", "alpha=0.1 seed=0"]
    assert all(t.info.status == "FINISHED" for t in trials)
    first = [t for t in trials if t.info.run_name == finished][0]
    assert len(client.get_metric_history(first.info.run_id, "session/test_acc")) == 2  # logged once
    trials_df = pd.read_parquet(storage / "alpha_sweep-smoke" / "trials.parquet")
    assert len(trials_df) == 2 and (trials_df["state"] == K.COMPLETE).all()


def test_resume_refuses_a_different_study(study_cmd, storage, capsys):
    (storage / "alpha_sweep-smoke").mkdir()
    (storage / "alpha_sweep-smoke" / "study.json").write_text(json.dumps({"study": "alpha_sweep", "fingerprint": "other",
                                                                     "command": "something else"}))
    r = in_process(capsys, study_cmd("alpha_sweep", "--smoke", "--resume"))  # refused before Ray
    assert r.returncode == 2
    assert "holds a different study" in r.stderr and "something else" in r.stderr


@pytest.mark.parametrize("flags, message", [
    (["--set", "shots=100000"], "shots=100000"),
    (["--set", "alhpa=1"], "unknown config key 'alhpa'"),
])
def test_bad_input_fails_before_any_trial(study_cmd, storage, flags, message, capsys):
    r = in_process(capsys, study_cmd("ablation", "--smoke", *flags))  # refused before Ray
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "error:" in r.stderr
    assert not any(storage.iterdir())  # nothing written, Ray never started


def test_gpu_request_on_cpu_machine_and_unreachable_tracking(ray_address, storage):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    base = [sys.executable, str(REPO / "studies" / "ablation.py"), "--smoke", "--storage", str(storage)]
    r = subprocess.run(base + ["--gpus-per-trial", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "asks for GPUs but this machine has none" in r.stderr
    r = subprocess.run(base + ["--gpus-per-trial", "0", "--tracking-uri", "http://127.0.0.1:9"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unreachable" in r.stderr
    assert not any(storage.iterdir())
