"""`studies/alpha_sweep.py --smoke --objectives val_last_base_acc:max val_last_novel_acc:max --num-samples 4` end to
end on fresh storage: Optuna's study has two directions and every configuration two values, no trial is pruned,
pareto.json and the table's front column name the same configurations, best_config.json is the front's point best
on the first objective, the parent run carries adbs.objectives and studies/report.py redraws the front from the
store alone; --resume with other objectives is refused, the same under --dry-run."""

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest
from tests.helpers.scripts import in_process
from mlflow.tracking import MlflowClient

from adbs_lab.records import metrics_keys as K

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
OBJECTIVES = ["val_last_base_acc:max", "val_last_novel_acc:max"]


def test_two_objectives_end_to_end(study_cmd, storage, tracking_uri, tmp_path, capsys):
    cmd = study_cmd("alpha_sweep", "--smoke", "--objectives", *OBJECTIVES, "--num-samples", "4")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd="/")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    folder = storage / "alpha_sweep-smoke"
    pareto = json.loads((folder / "pareto.json").read_text())
    assert pareto["objectives"] == OBJECTIVES and pareto["configurations"] == 4 and pareto["front"]
    on = [p["config_label"] for p in pareto["front"]]
    assert all(set(p["params"]) == {"alpha"} and set(p["values"]) == {"val_last_base_acc", "val_last_novel_acc"}
               for p in pareto["front"])
    # the front as the study listed it last, and the table's front column: the same configurations
    listed = r.stdout.split("Pareto front of val_last_base_acc:max, val_last_novel_acc:max (validation")[1]
    listed = listed.splitlines()[1:]
    assert [line.split()[0] for line in listed[:len(on)]] == on and "val_last_base_acc" in listed[0]
    lines = (folder / "table.txt").read_text().splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("config")):]  # below the notes
    head = lines[0].split()
    assert head[-1] == "front"
    marked = [line.split()[0] for line in lines[2:6] if line.split()[-1] == "*"]
    assert sorted(marked) == sorted(on)
    # best_config.json: the front's point that is best on the first objective
    trials = pd.read_parquet(folder / "trials.parquet")
    assert (trials["state"] == K.COMPLETE).all() and len(trials) == 4  # nothing pruned
    best = json.loads((folder / "best_config.json").read_text())
    means = trials.groupby("label")["val_last_base_acc"].mean()
    assert best["config_label"] == on[0] and best["objective"] == "summary/val_last_base_acc"
    assert best["mean_over_seeds"] == means.loc[on].max()
    st = optuna.load_study(study_name="alpha_sweep-smoke", storage=f"sqlite:///{folder / 'optuna.db'}")
    assert len(st.directions) == 2 and all(len(t.values) == 2 for t in st.trials) and len(st.trials) == 4
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("alpha_sweep-smoke")
    parent = [x for x in client.search_runs([exp.experiment_id]) if x.data.tags.get("adbs.role") == "study"][0]
    assert json.loads(parent.data.tags["adbs.objectives"]) == OBJECTIVES
    # the report, from the store alone (in this process: no Ray), redraws the same front
    out = tmp_path / "report"
    rep = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "alpha_sweep", "--smoke", "--tracking-uri",
                              tracking_uri, "--out", str(out)], cwd="/")
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert json.loads((out / "pareto.json").read_text()) == pareto
    assert (out / "table.txt").read_text() == (folder / "table.txt").read_text()
    assert "Pareto front of" in rep.stdout and "## Pareto front" in (out / "report.md").read_text()
    # the study's Optuna directions are fixed: --resume with other objectives is refused, and so is its dry run
    at = cmd.index("--objectives")
    other = [*cmd[:at], "--objectives", "val_last_acc:max", *cmd[at + 3:], "--resume"]
    msgs = []
    for extra in ([], ["--dry-run"]):
        refused = in_process(capsys, other + extra, cwd="/")
        assert refused.returncode == 2 and "--objectives val_last_acc:max differs from the study's --objectives " \
            "val_last_base_acc:max val_last_novel_acc:max" in refused.stderr, refused.stderr[-2000:]
        msgs.append(refused.stderr)
    assert msgs[0] == msgs[1] and len(msgs[0].strip().splitlines()) == 1
    assert pd.read_parquet(folder / "trials.parquet").equals(trials)  # nothing changed
