"""studies/paper.py: bad input ends before any compute; --smoke writes every table and figure of the paper in one
folder with one report, a rerun reuses every part, and studies/report.py redraws the report from the store."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from adbs_lab import paper

REPO = Path(__file__).resolve().parents[1]
PAPER = [sys.executable, str(REPO / "studies" / "paper.py")]


@pytest.mark.slow
@pytest.mark.parametrize("flags, message", [
    (["--dataset", "cifar10"], "the paper's datasets are cifar100, mini_imagenet, cub200"),
    (["--dataset", "cub200"], "--dataset cub200 needs --data-root DIR"),
    (["--smoke", "--host", "savc"], "--host: the paper study runs every host"),
    (["--smoke", "--set", "alhpa=1"], "unknown config key 'alhpa'"),
    (["--smoke", "--set", "shots=100000"], "shots=100000"),
])
def test_bad_input_fails_before_any_compute(tmp_path, flags, message):
    storage = tmp_path / "runs"
    r = subprocess.run([*PAPER, *flags, "--storage", str(storage), "--tracking-uri",
                        f"sqlite:///{tmp_path / 'mlflow.db'}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "error:" in r.stderr
    assert "trials" not in r.stdout  # nothing planned, nothing ran
    assert not storage.exists()  # nothing written


def test_dcs_table_pairs_each_host_without_and_with_adbs_beside_the_paper():
    def row(config, d):
        return {"config": config, "seeds": 1, "0": (70.0, math.nan), "avg": (70.0, math.nan), "d_cs": (d, math.nan)}

    hosts = pd.DataFrame([row("baseline", 0.8), row("baseline+ADBS", 0.9), row("SAVC", 0.7), row("SAVC+ADBS", 0.75)])
    ablation = pd.DataFrame([row("baseline", 0.81), row("adb", 0.85), row("adb+ic", 0.95)])
    t = paper.dcs_table({"hosts": hosts, "ablation": ablation}, "cifar100").set_index("row")
    assert list(t.index) == ["baseline", "SAVC", "baseline vs adb+ic"]
    assert t.loc["baseline", "ours without"] == 0.8 and t.loc["baseline", "ours with ADBS"] == 0.9
    assert t.loc["baseline", "paper without"] == 0.8846 and t.loc["baseline", "paper with ADBS"] == 0.9497
    assert pd.isna(t.loc["SAVC", "paper without"])  # the paper's Table 4 has no SAVC row
    assert t.loc["baseline vs adb+ic", "ours with ADBS"] == 0.95
    assert "| cifar100 | hosts | SAVC | 0.7000 | 0.7500 | - | - |" in paper.render_dcs(t.reset_index()[
        ["dataset", "study", "row", "ours without", "ours with ADBS", "paper without", "paper with ADBS"]])


@pytest.mark.slow
def test_paper_smoke_every_table_and_figure_then_rerun_reuses_and_report_redraws(study_cmd, storage, tracking_uri,
                                                                                  tmp_path):
    # the main table with the baseline host only: SAVC, ALICE and OrCo are 10 of --smoke's 14 min on a busy 2-core
    # machine, and the hosts study's own test runs them (test_studies_e2e.py)
    cmd = study_cmd("paper", "--smoke", "--set", "sessions=1", "--hosts", "baseline")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd="/")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    out = r.stdout
    # the plan, with its trial count and time, comes before any training
    assert out.index("4 studies, 11 trials, 11 to run") < out.index("base epoch")
    folder = storage / "paper_embedded"
    for part in ("hosts", "ablation", "alpha_sweep", "kshot_grid"):
        assert (folder / part / "trials.parquet").exists(), part
    figures = {f.relative_to(folder).as_posix() for f in folder.glob("figures/*/*.png")}
    assert {"figures/hosts/hosts_sessions.png", "figures/ablation/tsne.png",
            "figures/ablation/prototype_similarity.png", "figures/alpha_sweep/alpha_sensitivity.png",
            "figures/kshot_grid/kshot_5way.png", "figures/kshot_grid/kshot_10way.png"} <= figures
    text = (folder / "report.md").read_text()
    for title in paper.PARTS.values():
        assert f"## {title}" in text
    assert "## Class separation D_cs" in text and "baseline+ADBS" in text and "![tsne.png](figures/ablation/tsne.png)" in text
    dcs = pd.read_csv(folder / "dcs.csv")
    assert list(dcs["row"]) == ["baseline", "baseline vs adb+ic"]
    assert dcs[["ours without", "ours with ADBS"]].notna().all().all()

    # the same command again: every part reused, nothing trains, a second paper run in MLflow
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "11 trials, 0 to run" in again.stdout and again.stdout.count("; reused") == 4
    assert "base epoch" not in again.stdout
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("paper").experiment_id])
    assert len(runs) == 2 and {r.data.tags["adbs.parts"] for r in runs} == {runs[0].data.tags["adbs.parts"]}
    # its artifacts sit beside the store's others, not in a ./mlruns of whatever folder the command ran in
    assert client.get_experiment_by_name("paper").artifact_location.endswith("/artifacts")

    # studies/report.py redraws it from the store alone
    redrawn = tmp_path / "redrawn"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "paper", "--tracking-uri", tracking_uri,
                          "--out", str(redrawn)], capture_output=True, text=True, timeout=300, cwd="/")
    assert rep.returncode == 0, rep.stdout[-4000:] + rep.stderr[-4000:]
    assert (redrawn / "dcs.md").read_text() == (folder / "dcs.md").read_text()
    assert (redrawn / "figures" / "ablation" / "tsne.png").stat().st_size > 0
    assert (redrawn / "figures" / "hosts" / "table.txt").read_text() == (folder / "hosts" / "table.txt").read_text()
