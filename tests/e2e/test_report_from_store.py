"""Reports end to end: a smoke study writes a store; studies/report.py rebuilds its table from the
store alone (study folder hidden) and gets exactly the table the study printed and wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.helpers.smoke_store import REPO, printed_table, smoke_store
from mlflow.tracking import MlflowClient

from adbs_lab.results import from_store
from adbs_lab.records import metrics_keys
from adbs_lab.results import tables

# one worker under pytest -n: the smoke store (tests/helpers/smoke_store.py) is built once per process, shared by
# tests/e2e/test_report_from_store.py and tests/e2e/test_mlflow_ui_browser.py
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("smoke_store")]


@pytest.fixture(scope="module")
def store(ray_address, tmp_path_factory):
    return smoke_store(ray_address, tmp_path_factory)


def test_ablation_smoke_from_another_cwd(store):
    """The smoke study of the store, run from a folder of its own: nested runs with curves, tables, Δlast."""
    from tests.helpers.studies import check_nested_with_curves

    assert "Δlast" in store.stdout
    _, _, trials = check_nested_with_curves(store.uri, "ablation-smoke", 3, 3)
    assert sorted(t.info.run_name for t in trials) == ["adb seed=0", "adb+ic seed=0", "baseline seed=0"]
    sessions = pd.read_parquet(store.study_dir / "sessions.parquet")
    assert set(sessions["label"]) == {"baseline", "adb", "adb+ic"} and len(sessions) == 3 * 3
    table = (store.study_dir / "table.txt").read_text()
    assert "delta_last" not in table and "Δlast" in table  # rendered as Δlast


def test_report_rebuilds_the_printed_table_from_the_store_alone(store, tmp_path):
    study_table = (store.study_dir / "table.txt").read_text().rstrip("\n")
    study_md = (store.study_dir / "table.md").read_text().rstrip("\n")
    study_sessions = pd.read_parquet(store.study_dir / "sessions.parquet")
    assert printed_table(store.stdout) == study_table  # what the user saw is what the study wrote

    hidden = store.storage.with_name("runs.hidden")  # the store alone: no study folder to read
    store.storage.rename(hidden)
    try:
        out = tmp_path / "report"
        r = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "ablation", "--smoke", "--tracking-uri",
                            store.uri, "--out", str(out), "--paper"], capture_output=True, text=True, timeout=300,
                           cwd="/")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        study = from_store.load_study(MlflowClient(store.uri), "ablation-smoke")
    finally:
        hidden.rename(store.storage)

    assert (out / "table.txt").read_text().rstrip("\n") == study_table
    assert study_table in r.stdout  # printed as the study printed it
    assert "no paper table matches" in r.stdout  # smoke data is synthetic
    table = from_store.study_table(study)
    # table.md: the smoke banner above the table (adbs_lab/results/notes.py), the study's warnings under it (smoke
    # trials are at chance level)
    assert study_md.startswith("smoke run: numbers not meaningful") and study_md.endswith(tables.annotate(
        tables.format_table(table, markdown=True), study.trials, markdown=True, order=study.order))
    assert "WARNING" in study_md
    assert list(table["config"]) == ["baseline", "adb", "adb+ic"] and "delta_last" in table

    # The frames hold the same numbers as the study's parquet (metric histories stepped by session).
    key = ["trial_id", "session"]
    ours = study.sessions.set_index(key).sort_index()
    theirs = study_sessions.set_index(key).sort_index()
    assert list(ours.index) == list(theirs.index)
    for col in ("test_acc", "val_acc", "test_base_acc", "n_classes"):
        pd.testing.assert_series_equal(ours[col].astype(float), theirs[col].astype(float), check_names=False)
    for f in ("sessions.parquet", "trials.parquet", "report.md", "ablation_sessions.png", "tsne.png",
              "prototype_similarity.png"):
        assert (out / f).stat().st_size > 0, f  # the t-SNE and similarity figures too, from the store alone
        assert (store.study_dir / f).stat().st_size > 0, f  # and as the study drew them
    assert study.trials["embeddings"].notna().all()  # every trial's sample came back from its run


def test_trial_and_study_artifacts_on_the_runs(store, tmp_path):
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("ablation-smoke")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("adbs.role") == "study")
    parent_files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"sessions.parquet", "trials.parquet", "ablation_sessions.png", "report.md"} <= parent_files
    md = Path(client.download_artifacts(parent.info.run_id, "report.md", str(tmp_path))).read_text()
    table_md = (store.study_dir / "table.md").read_text()
    # report.md shows the table, and the notes above it (the smoke banner) in bold under its title
    assert table_md[table_md.index("| config"):].strip() in md and "**smoke run: numbers not meaningful" in md
    assert "## Pruning" in md
    for r in runs:
        if r.data.tags.get("adbs.role") != "trial":
            continue
        files = {a.path for a in client.list_artifacts(r.info.run_id)}
        assert {"config.json", "session_curve.png", "boundaries.csv", "embeddings.json"} <= files, (r.info.run_name,
                                                                                                     files)
        emb = metrics_keys.decode_embeddings(Path(client.download_artifacts(
            r.info.run_id, "embeddings.json", str(tmp_path / f"emb-{r.info.run_id}"))).read_text())
        assert len(emb["classes"]) == 10 and emb["features"].shape[0] == len(emb["labels"]) > 0
        assert emb["similarity"].shape == (emb["n_seen"], emb["n_seen"])
        csv = pd.read_csv(client.download_artifacts(r.info.run_id, "boundaries.csv", str(tmp_path / r.info.run_id)))
        n_sessions = len(client.get_metric_history(r.info.run_id, "session/test_acc"))
        assert [c for c in csv.columns if c.startswith("m_s")] == [f"m_s{t}" for t in range(n_sessions)]
        assert r.data.tags["adbs.label"] == r.info.run_name.replace(" seed=0", "")


def test_a_study_read_over_an_mlflow_server_gives_the_tables_read_from_its_database(store, tmp_path, monkeypatch):
    """The smoke study's store behind `mlflow/serve.py` (as a lab serves its database): read over HTTP in bulk (the
    server's get-history-bulk route), and run by run where a server lacks that route, the frames equal those read
    from the database itself; studies/report.py over HTTP writes the study's table and those frames."""
    from testing.procs import free_port, stop, wait_http

    port = free_port()
    log = tmp_path / "server.log"
    server = subprocess.Popen([sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", store.uri,
                               "--artifacts-destination", str(store.artifacts), "--port", str(port), "--workers", "1"],
                              stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", server, 240, "mlflow server", log)
        http = f"http://127.0.0.1:{port}"
        one_by_one = []
        real = from_store.histories_one_by_one
        monkeypatch.setattr(from_store, "histories_one_by_one", lambda c, pairs: one_by_one.append(len(pairs)) or real(c, pairs))
        ours = from_store.load_study(MlflowClient(store.uri), "ablation-smoke")  # the database: no HTTP
        bulk = from_store.load_study(MlflowClient(http), "ablation-smoke")
        assert one_by_one == [0]  # every history came in bulk
        monkeypatch.setattr(from_store, "HTTP_BULK", "/ajax-api/2.0/mlflow/metrics/no-such-route")  # a 404 from it
        single = from_store.load_study(MlflowClient(http), "ablation-smoke")
        trials = [r for r in from_store.all_runs(MlflowClient(store.uri), [ours.parent.info.experiment_id], "")
                  if r.data.tags.get("adbs.role") == "trial"]
        histories = sum(k.startswith(metrics_keys.SESSION) or k == metrics_keys.BASE_PRUNE_VALUE
                        for r in trials for k in r.data.metrics)
        assert len(trials) == 3 and one_by_one[1] == histories > 3 * 5  # every history of each trial, one by one
        for got in (bulk, single):
            pd.testing.assert_frame_equal(got.sessions, ours.sessions)
            pd.testing.assert_frame_equal(got.trials, ours.trials)

        out = tmp_path / "report"
        r = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "ablation", "--smoke", "--tracking-uri", http,
                            "--out", str(out)], capture_output=True, text=True, timeout=300, cwd="/")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    finally:
        stop(server)
    assert (out / "table.txt").read_text().rstrip("\n") == (store.study_dir / "table.txt").read_text().rstrip("\n")
    for name, frame in (("sessions", ours.sessions), ("trials", ours.trials)):
        frame.to_parquet(tmp_path / f"{name}.parquet", index=False)  # as report.py writes it (from_store.write)
        pd.testing.assert_frame_equal(pd.read_parquet(out / f"{name}.parquet"), pd.read_parquet(tmp_path / f"{name}.parquet"))
