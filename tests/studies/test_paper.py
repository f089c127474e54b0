"""studies/paper.py: bad input ends before any compute; --smoke writes every table and figure of the paper in one
folder (here on an object store) with one report, a rerun reuses every part, and studies/report.py redraws the
report from the store; the D_cs table across datasets on a hand-made store."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.scripts import in_process
from mlflow.tracking import MlflowClient

from adbs_lab.results import from_store
from adbs_lab.results import paper

REPO = Path(__file__).resolve().parents[2]
PAPER = [sys.executable, str(REPO / "studies" / "paper.py")]


BAD_INPUT = [
    (["--dataset", "cifar10"], "the paper's datasets are cifar100, mini_imagenet, cub200"),
    (["--dataset", "cub200"], "--dataset cub200 needs --data-root DIR"),
    (["--smoke", "--host", "savc"], "--host: the paper study runs every host"),
    (["--smoke", "--set", "alhpa=1"], "unknown config key 'alhpa'"),
    (["--smoke", "--set", "shots=100000"], "shots=100000"),
]


@pytest.mark.parametrize("flags, message", BAD_INPUT)
def test_bad_input_fails_before_any_compute(tmp_path, capsys, flags, message):
    """In this process, as `python studies/paper.py` runs it (test_bad_input_exits_2_from_the_shell: as a process)."""
    storage = tmp_path / "runs"
    r = in_process(capsys, [*PAPER, *flags, "--storage", str(storage), "--tracking-uri",
                            f"sqlite:///{tmp_path / 'mlflow.db'}"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "error:" in r.stderr
    assert "trials" not in r.stdout  # nothing planned, nothing ran
    assert not storage.exists()  # nothing written


def test_a_config_file_of_the_embedded_benchmark_is_the_embedded_run_and_its_dry_run_writes_nothing(tmp_path, capsys):
    """A best_config.json of a CPU study says dataset: synthetic (the embedded benchmark, paper.py's default); a file
    naming a dataset the paper does not use is refused naming the file, not a --dataset nobody typed."""
    good, bad = tmp_path / "best.yaml", tmp_path / "other.yaml"
    good.write_text("dataset: synthetic\nalpha: 0.02\n")
    bad.write_text("dataset: cifar10\n")
    flags = ["--smoke", "--storage", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm' / 'm.db'}"]
    r = in_process(capsys, [*PAPER, "--config", str(good), *flags, "--dry-run"])
    assert r.returncode == 0 and "dry run: study paper (embedded)" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.yaml", "other.yaml"]  # no storage, no MLflow store
    r = in_process(capsys, [*PAPER, "--config", str(bad), *flags, "--dry-run"])
    assert r.returncode == 2 and f"--config {bad}: its dataset: 'cifar10'" in r.stderr and "--dataset" not in r.stderr


def test_seeds_auto_prints_a_range_of_trials_and_time(tmp_path, capsys):
    """paper.py --seeds auto: each part from its first batch (3 seeds) to the cap (--max-seeds), and the k-shot grid
    runs the baseline beside ADBS so that it has comparisons to resolve."""
    flags = ["--smoke", "--storage", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm' / 'm.db'}"]
    r = in_process(capsys, [*PAPER, *flags, "--seeds", "auto", "--max-seeds", "5", "--dry-run"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("  ")}
    assert "9-15 trials" in lines["ablation"]
    assert "24-40 trials" in lines["kshot_grid"]  # 2 ways x 2 shots x 2 variants, 3 to 5 seeds
    assert re.search(r"~[\d.]+-[\d.]+ min", lines["ablation"]) and "dry run: study paper (embedded), " in r.stdout


@pytest.mark.slow
def test_bad_input_exits_2_from_the_shell(tmp_path):
    flags, message = BAD_INPUT[3]
    storage = tmp_path / "runs"
    r = subprocess.run([*PAPER, *flags, "--storage", str(storage), "--tracking-uri",
                        f"sqlite:///{tmp_path / 'mlflow.db'}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "error:" in r.stderr and "Traceback" not in r.stderr
    assert "trials" not in r.stdout and not storage.exists()


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


def _paper_store(uri: str, studies: dict[str, dict[str, dict[str, float]]]) -> dict[str, str]:
    """Paper runs in the tracker's layout (as studies/paper.py logs them): per dataset label, a hosts and an ablation
    study with one seed per row ({row: D_cs}), and a paper run naming both; {label: paper run id}."""
    from mlflow.entities import Metric, Param

    from adbs.config import Config
    from adbs_lab.records import metrics_keys as K

    c = MlflowClient(uri)
    ids = {}
    for label, rows in studies.items():
        parents = {}
        for name, names in {"hosts": [r for r in rows if r[0].isupper() or r.startswith("baseline")],
                            "ablation": [r for r in rows if r in ("baseline", "adb+ic")]}.items():
            exp = c.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp else c.create_experiment(name)
            parent = c.create_run(exp_id, run_name=f"{name} {label}", tags={
                "adbs.role": "study", "adbs.study": name, "adbs.order": json.dumps(names)})
            for number, row in enumerate(names):
                run = c.create_run(exp_id, run_name=f"{row} seed=0", tags={
                    "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": name,
                    "adbs.trial_id": f"{label}{name}{number}", "adbs.optuna_trial": str(number),
                    "adbs.state": K.COMPLETE, "adbs.label": row})
                cfg = Config(dataset="synthetic" if label == "embedded" else label, keep_embeddings=False).to_dict()
                c.log_batch(run.info.run_id, metrics=[Metric("session/test_acc", 70.0 - s, 0, s) for s in range(3)]
                            + [Metric("summary/val_avg_acc", 69.0, 0, 0), Metric("summary/d_cs", rows[row], 0, 0)],
                            params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
                c.set_terminated(run.info.run_id, "FINISHED")
            c.set_terminated(parent.info.run_id)
            parents[name] = parent.info.run_id
        exp = c.get_experiment_by_name(paper.EXPERIMENT)
        run = c.create_run(exp.experiment_id if exp else c.create_experiment(paper.EXPERIMENT),
                           run_name=f"paper {label}", tags={
                               "adbs.role": paper.ROLE, "adbs.dataset": "" if label == "embedded" else label,
                               "adbs.command": "python studies/paper.py", "adbs.parts": json.dumps(parents)})
        c.set_terminated(run.info.run_id, "FINISHED")
        ids[label] = run.info.run_id
    return ids


def test_dcs_across_datasets_one_row_per_method_ours_beside_the_papers_table_4():
    def dcs(dataset, rows):
        return pd.DataFrame([{"dataset": dataset, "study": study, "row": row, "ours without": a, "ours with ADBS": b,
                              "paper without": pa, "paper with ADBS": pb} for study, row, a, b, pa, pb in rows])

    t = paper.dcs_across({
        "embedded": dcs("embedded", [("hosts", "baseline", 0.86, 0.9, None, None),
                                     ("ablation", "baseline vs adb+ic", 0.85, 0.91, None, None)]),
        "cifar100": dcs("cifar100", [("hosts", "baseline", 0.8, 0.95, 0.8846, 0.9497),
                                     ("hosts", "SAVC", 0.7, 0.75, None, None),
                                     ("ablation", "baseline vs adb+ic", 0.81, 0.96, 0.8846, 0.9497)])})
    assert list(t.columns) == ["study", "row", "embedded: ours without", "embedded: ours with ADBS",
                               "cifar100: ours without", "cifar100: ours with ADBS", "cifar100: paper without",
                               "cifar100: paper with ADBS"]  # the paper reports nothing on the embedded benchmark
    # the hosts' rows first, a host only one dataset ran included, then the ablation's
    assert list(t["row"]) == ["baseline", "SAVC", "baseline vs adb+ic"]
    t = t.set_index("row")
    assert t.loc["baseline", "embedded: ours with ADBS"] == 0.9
    assert t.loc["baseline", "cifar100: paper without"] == 0.8846
    assert pd.isna(t.loc["SAVC", "embedded: ours without"]) and t.loc["SAVC", "cifar100: ours with ADBS"] == 0.75
    md = paper.render_dcs(t.reset_index()[["study", "row", *t.columns[1:]]])
    assert "| hosts | SAVC | - | - | 0.7000 | 0.7500 | - | - |" in md
    assert "| ablation | baseline vs adb+ic | 0.8500 | 0.9100 | 0.8100 | 0.9600 | 0.8846 | 0.9497 |" in md


def test_the_latest_paper_run_of_each_dataset_gives_each_report_and_one_dcs_table_across(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    old = client.create_run(client.create_experiment(paper.EXPERIMENT), run_name="paper cifar100 earlier", tags={
        "adbs.role": paper.ROLE, "adbs.dataset": "cifar100", "adbs.parts": "{}"}).info.run_id
    client.set_terminated(old, "FINISHED")
    ids = _paper_store(uri, {"embedded": {"baseline": 0.86, "baseline+ADBS": 0.9, "adb+ic": 0.91},
                             "cifar100": {"baseline": 0.8, "baseline+ADBS": 0.95, "SAVC": 0.7, "SAVC+ADBS": 0.75,
                                          "adb+ic": 0.96}})
    runs = paper.latest_by_dataset(client, ["all"])
    assert {k: v.info.run_id for k, v in runs.items()} == {"cifar100": ids["cifar100"], "embedded": ids["embedded"]}
    assert list(runs) == ["cifar100", "embedded"]  # the paper's datasets first, then the embedded benchmark
    assert list(paper.latest_by_dataset(client, ["embedded", "cifar100"])) == ["embedded", "cifar100"]
    with pytest.raises(from_store.ReportError, match="no finished paper study of cub200 .* here: cifar100, embedded"):
        paper.latest_by_dataset(client, ["cub200"])
    # paper runs named by id (report.py ID ID): one per dataset
    assert list(paper.by_dataset([runs["embedded"], runs["cifar100"]])) == ["embedded", "cifar100"]
    with pytest.raises(from_store.ReportError, match="both of cifar100"):
        paper.by_dataset([client.get_run(old), runs["cifar100"]])

    out = tmp_path / "across"
    files = paper.write_across(client, runs, out, uri=uri)
    dcs = pd.read_csv(out / "dcs.csv").set_index("row")
    assert list(dcs.index) == ["baseline", "SAVC", "baseline vs adb+ic"]
    assert dcs.loc["baseline", "cifar100: ours with ADBS"] == 0.95
    assert dcs.loc["baseline", "embedded: ours without"] == 0.86
    assert dcs.loc["baseline vs adb+ic", "cifar100: paper with ADBS"] == 0.9497
    text = files[0].read_text()
    assert "[its report](cifar100/report.md)" in text and "| hosts | SAVC | 0.7000 | 0.7500 | - | - | - | - |" in text
    for name in ("cifar100", "embedded"):  # each dataset's report, as `report.py paper` draws one
        assert "## Class separation D_cs" in (out / name / "report.md").read_text()
        assert (out / name / "figures" / "hosts" / "table.md") in files


@pytest.mark.slow
def test_paper_smoke_on_an_object_store_then_rerun_reuses_and_report_redraws(s3, ray_address, tracking_uri, tmp_path):
    # On the local S3 server (conftest.s3): each study's own e2e test covers a local --storage
    # (tests/e2e/test_studies.py), and paper.py draws its report in a local folder either way, uploading it here.
    # The hosts table with the baseline host only: SAVC, ALICE and OrCo are 10 of --smoke's 14 min on a busy 2-core
    # machine, and the hosts study's own test runs them.
    bucket = s3.bucket("e2e-paper")
    url = s3.url(bucket, "runs")
    cmd = [*PAPER, "--smoke", "--set", "sessions=1", "--hosts", "baseline", "--max-concurrent", "1", "--storage", url,
           "--tracking-uri", tracking_uri, "--address", ray_address, "--gpus-per-trial", "0"]
    staging = tmp_path / "tmp"
    staging.mkdir()
    env = {**os.environ, "TMPDIR": str(staging)}  # the studies' and the report's staging folders go here
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd="/", env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    out = r.stdout
    # the plan, with its trial count and time, comes before any training
    assert out.index("4 studies, 11 trials, 11 to run") < out.index("base epoch")
    assert "report: s3://e2e-paper/runs/paper_embedded-smoke/report.md?endpoint_override=" in out
    keys = set(s3.keys(bucket))
    for part in ("hosts", "ablation", "alpha_sweep", "kshot_grid"):
        assert f"runs/paper_embedded-smoke/{part}-smoke/trials.parquet" in keys, part
    assert {f"runs/paper_embedded-smoke/{f}" for f in (
        "figures/hosts/hosts_sessions.png", "figures/ablation/tsne.png", "figures/ablation/prototype_similarity.png",
        "figures/alpha_sweep/alpha_sensitivity.png", "figures/kshot_grid/kshot_5way.png",
        "figures/kshot_grid/kshot_10way.png", "report.md", "dcs.md", "dcs.csv")} <= keys
    assert any(k.startswith("runs/paper_embedded-smoke/base_cache/") for k in keys)  # base sessions shared in the bucket

    def read(key: str) -> bytes:
        with s3.fs().open_input_stream(f"{bucket}/runs/paper_embedded-smoke/{key}") as f:
            return f.read()

    text = read("report.md").decode()
    for title in paper.PARTS.values():
        assert f"## {title}" in text
    assert "## Class separation D_cs" in text and "baseline+ADBS" in text and "![tsne.png](figures/ablation/tsne.png)" in text
    dcs = pd.read_csv(io.BytesIO(read("dcs.csv")))
    assert list(dcs["row"]) == ["baseline", "baseline vs adb+ic"]
    assert dcs[["ours without", "ours with ADBS"]].notna().all().all()
    # no staging folder left behind (the machine's Tune start lock, adbs_lab/search/tune_staging.py, stays by design)
    assert not [f for f in staging.glob("adbs-*") if not f.name.startswith("adbs-tune-start-")]

    # the same command again: every part reused from the bucket, nothing trains, a second paper run in MLflow
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/", env=env)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "11 trials, 0 to run" in again.stdout and again.stdout.count("; reused") == 4
    assert "base epoch" not in again.stdout
    client = MlflowClient(tracking_uri)
    assert client.get_experiment_by_name("paper") is None  # a --smoke paper study: experiment paper-smoke
    runs = client.search_runs([client.get_experiment_by_name("paper-smoke").experiment_id])
    assert len(runs) == 2 and {r.data.tags["adbs.parts"] for r in runs} == {runs[0].data.tags["adbs.parts"]}
    assert runs[0].data.tags["adbs.storage"].startswith("s3://e2e-paper/runs/paper_embedded-smoke?endpoint_override=")
    # its artifacts sit beside the store's others, not in a ./mlruns of whatever folder the command ran in
    assert client.get_experiment_by_name("paper-smoke").artifact_location.endswith("/artifacts")

    # studies/report.py redraws it from the store alone: here the form across datasets (one dataset in this store),
    # which draws each dataset's report as `report.py paper` does
    redrawn = tmp_path / "redrawn"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "paper", "--datasets", "all",
                          "--smoke", "--tracking-uri", tracking_uri, "--out", str(redrawn)],
                         capture_output=True, text=True, timeout=300, cwd="/")
    assert rep.returncode == 0, rep.stdout[-4000:] + rep.stderr[-4000:]
    assert (redrawn / "embedded" / "dcs.md").read_text() == read("dcs.md").decode()
    assert "| hosts | baseline |" in (redrawn / "dcs.md").read_text()
    assert list(pd.read_csv(redrawn / "dcs.csv").columns) == ["study", "row", "embedded: ours without",
                                                              "embedded: ours with ADBS"]
    assert (redrawn / "embedded" / "figures" / "ablation" / "tsne.png").stat().st_size > 0
    assert (redrawn / "embedded" / "figures" / "hosts" / "table.txt").read_bytes() == read("hosts-smoke/table.txt")
