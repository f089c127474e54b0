"""A --seeds auto study's driver SIGKILLed in a trial's base session (fault injection: ADBS_FAULT_INJECTION's
base_session point), then --resume'd, through the real driver (Ray Tune, Optuna, MLflow) with a fake trial function:
the attempts the killed driver left behind stay in MLflow, KILLED and marked superseded by their reruns, and
studies/report.py, reading the store alone, gives the study's own table, verdicts and best configuration, with one
record per trial. A sampled race's driver killed at its first look, its screening samples told to Optuna and Tune's
state saved before them: after --resume, the Optuna study (what optuna-dashboard shows) holds one trial per sample and
race the study ran, no value drawn twice (adbs_lab/search/orphans.py). The same moments and other shapes of study,
without Ray: tests/adbs_lab/driver/test_resumed_attempts.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K
from adbs_lab.records import objectives
from adbs_lab.results import from_store, tables
from adbs_lab.search.trainable import FAULT_ENV
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import time
    from dataclasses import dataclass
    from adbs_lab import study
    from adbs_lab.driver import options

    # last-session test accuracy by row (its alpha) and seed: a - ref is 10 +- 0.2, better at the first look
    LAST = {0.1: [50.0, 50.2, 49.8, 50.1, 49.9], 0.2: [60.0, 60.3, 59.9, 60.2, 60.0]}

    @dataclass
    class FakeResult:
        summary: dict

    def fake_trial(cfg, *, hooks):
        hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": 50.0, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        time.sleep(0.05)
        last = LAST[round(cfg.alpha, 2)][cfg.seed]
        for s in range(2):
            acc = last + 3 * (1 - s)
            hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc, "val_base_acc": acc,
                              "val_novel_acc": float("nan") if s == 0 else acc, "val_hmean": acc, "test_acc": acc,
                              "test_base_acc": acc, "test_novel_acc": acc, "test_hmean": acc, "boundary_mean": 1.0,
                              "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0,
                              "boundary_novel_mean": 1.0})
        return FakeResult({"val_avg_acc": last + 1.5, "test_avg_acc": last + 1.5, "val_last_acc": last,
                           "test_last_acc": last, "d_cs": 0.9, "wall_time_s": 0.1})

    opts, _ = options.parse("killed and reported", options.Defaults())
    plan = study.Plan(name="killed", space={"variant": "adb+ic", "keep_embeddings": False},
                      space_source="tests/e2e/test_sigkill_and_report.py",
                      rows={"ref": {"alpha": 0.1}, "a": {"alpha": 0.2}}, baseline="ref", order=["ref", "a"],
                      trial_fn=fake_trial)
    study.main(plan, opts)
""")


def _killed_then_resumed(cmd: list[str], tmp_path: Path, pause: dict) -> subprocess.CompletedProcess:
    """Run the study `cmd` one trial at a time, with Tune's experiment state saved once, as the study starts (its first
    trial made, not started), SIGKILL its driver where it pauses (`pause`: ADBS_FAULT_INJECTION), then --resume it."""
    marker = tmp_path / "markers"
    marker.mkdir()
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "3600", FAULT_ENV: json.dumps({**pause, "marker_dir": str(marker)})}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
    deadline = time.time() + 300
    while not (marker / f"paused-{pause['pause_at']}").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[0][-3000:] if proc.poll() else ""
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    return again


def _reported(capsys, tracking_uri: str, out: Path) -> subprocess.CompletedProcess:
    rep = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "killed", "--smoke", "--tracking-uri",
                              tracking_uri, "--out", str(out)], cwd=REPO)
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    return rep


def test_a_killed_and_resumed_study_is_reported_from_the_store_as_it_reported_itself(study_cmd, storage, tracking_uri,
                                                                                     tmp_path, capsys):
    script = tmp_path / "killed_study.py"
    script.write_text(SCRIPT)
    cmd = study_cmd("x", "--smoke", "--seeds", "auto", "--max-seeds", "5", "--max-concurrent", "1")
    cmd[1] = str(script)
    # the second and third trials are unknown to the resumed study, one ended, one in its base session
    again = _killed_then_resumed(cmd, tmp_path, {"pause_at": "base_session", "seed": 2})
    assert "6 trials in all" in again.stdout, again.stdout[-3000:]

    client = MlflowClient(tracking_uri)
    runs = from_store.trial_runs(client, from_store.find_parent(client, "killed-smoke"))
    left = [r for r in runs if "adbs.orphaned" in r.data.tags]
    assert sorted(r.data.params["seed"] for r in left) == ["1", "2"], [r.info.run_name for r in runs]
    counted = {r.info.run_id: r for r in runs if r not in left}
    for r in left:  # KILLED, INTERRUPTED, and the run of the same trial that ran it again named
        rerun = counted[r.data.tags["adbs.superseded_by"]]
        assert r.info.status == "KILLED" and r.data.tags["adbs.state"] == K.INTERRUPTED
        assert [rerun.data.tags[k] for k in ("adbs.optuna_trial", "adbs.label")] == \
            [r.data.tags[k] for k in ("adbs.optuna_trial", "adbs.label")]
        assert rerun.data.params["seed"] == r.data.params["seed"] and rerun.data.tags["adbs.state"] == K.COMPLETE
    assert not left[1].data.metrics  # killed in its base session: its points were still in the driver

    out = tmp_path / "report"
    rep = _reported(capsys, tracking_uri, out)
    assert "6 trials (6 complete)" in rep.stdout, rep.stdout[-3000:]  # before: 8 trials (6 complete, 2 interrupted)
    study_dir = storage / "killed-smoke"
    assert (out / "table.txt").read_text() == (study_dir / "table.txt").read_text()  # the rows, seeds and verdicts
    best = json.loads((study_dir / "best_config.json").read_text())
    ours = from_store.load_study(client, "killed-smoke")
    assert tables.best_config(ours.trials, objectives.DEFAULT)["config_label"] == best["config_label"] == "a"
    # the Optuna study, what the dashboard shows: one trial per row, its seeds once each
    trials = optuna.load_study(study_name="killed-smoke", storage=f"sqlite:///{study_dir / 'optuna.db'}").trials
    assert sorted(t.user_attrs["seeds"] for t in trials) == [[0, 1, 2], [0, 1, 2]]
    for t in trials:  # each seed's value as it ended (after the kill: its rerun's, in the same key), and their mean
        assert sorted(k for k in t.user_attrs if k.startswith("seed:")) == ["seed:0", "seed:1", "seed:2"], t.user_attrs
        assert t.user_attrs["seeds_done"] == 3 and t.user_attrs["seeds_mean"] == t.value, (t.user_attrs, t.value)
    plan = in_process(capsys, cmd + ["--plan"], cwd=REPO)  # --plan: the verdicts of the study's files
    said = [line for line in again.stdout.splitlines() if line.startswith("a vs ref: ")]
    assert plan.returncode == 0 and said and said[0] in plan.stdout, plan.stdout + plan.stderr


RACE = textwrap.dedent("""
    from dataclasses import dataclass
    from optuna.distributions import FloatDistribution
    from adbs_lab import study
    from adbs_lab.driver import options

    @dataclass
    class FakeResult:
        summary: dict

    def fake_trial(cfg, *, hooks):  # last-session accuracy rises with alpha
        last = 1000 * cfg.alpha + 0.1 * cfg.seed
        hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": last / 2, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        for s in range(2):
            acc = last + 3 * (1 - s)
            hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc, "val_base_acc": acc,
                              "val_novel_acc": float("nan") if s == 0 else acc, "val_hmean": acc, "test_acc": acc,
                              "test_base_acc": acc, "test_novel_acc": acc, "test_hmean": acc, "boundary_mean": 1.0,
                              "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0,
                              "boundary_novel_mean": 1.0})
        return FakeResult({"val_avg_acc": last + 1.5, "test_avg_acc": last + 1.5, "val_last_acc": last,
                           "test_last_acc": last, "d_cs": 0.9, "wall_time_s": 0.1})

    opts, _ = options.parse("a killed race", options.Defaults(num_samples=3, smoke_num_samples=3))
    plan = study.Plan(name="killed", space={"variant": "adb+ic", "keep_embeddings": False,
                                            "alpha": FloatDistribution(0.01, 0.1, log=True)},
                      space_source="tests/e2e/test_sigkill_and_report.py", trial_fn=fake_trial)
    study.main(plan, opts)
""")


def test_a_sampled_race_killed_at_its_first_look_holds_one_optuna_trial_per_sample_after_resume(
        study_cmd, storage, tracking_uri, tmp_path, capsys):
    script = tmp_path / "killed_study.py"
    script.write_text(RACE)
    cmd = study_cmd("x", "--smoke", "--seeds", "auto", "--max-seeds", "3", "--race-top", "2", "--max-concurrent", "1")
    cmd[1] = str(script)
    # the kill: the race's first look taken (screening samples 1 and 2 told to Optuna, the race's trials made), Tune's
    # state as it was at the start
    again = _killed_then_resumed(cmd, tmp_path, {"pause_at": "between_looks"})
    study_dir = storage / "killed-smoke"
    trials = optuna.load_study(study_name="killed-smoke", storage=f"sqlite:///{study_dir / 'optuna.db'}").trials
    screening = [t for t in trials if "race_of" not in t.user_attrs]
    raced = [t for t in trials if "race_of" in t.user_attrs]
    assert len(screening) == 3 and len(raced) == 2, [(t.number, t.params, t.user_attrs) for t in trials]
    assert len({t.params["alpha"] for t in screening}) == 3  # no sampled value drawn twice
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert sorted(t.user_attrs["seeds"] for t in raced) == [[1, 2, 3], [1, 2, 3]]
    ours = from_store.load_study(MlflowClient(tracking_uri), "killed-smoke")
    assert sorted(ours.trials["optuna_trial"].astype(int)) == [0, 1, 2, 3, 3, 3, 4, 4, 4]  # one record per trial
    for t in trials:  # Optuna's values are the study's: a screening sample's seed 0, a race's mean over its seeds
        rows = ours.trials[ours.trials["optuna_trial"] == t.number]
        assert t.value == pytest.approx(rows["val_avg_acc"].mean()), (t.number, t.value, rows["val_avg_acc"].tolist())
    out = tmp_path / "report"
    _reported(capsys, tracking_uri, out)
    assert (out / "table.txt").read_text() == (study_dir / "table.txt").read_text(), again.stdout[-3000:]
