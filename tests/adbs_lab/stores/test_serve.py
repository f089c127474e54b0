"""The serve command (`python mlflow/serve.py` = `python -m adbs_lab.stores.serve`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from adbs_lab.stores import paths
from adbs_lab.stores import serve

REPO = Path(__file__).resolve().parents[3]


def _cmd(*argv: str) -> list[str]:
    return serve.command(serve.parser().parse_args(list(argv)))


def test_defaults_are_local_and_the_projects_store():
    cmd = _cmd()
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "5000"
    assert cmd[cmd.index("--backend-store-uri") + 1] == paths.DEFAULT_TRACKING_URI
    assert cmd[cmd.index("--artifacts-destination") + 1] == str(paths.DEFAULT_ARTIFACT_ROOT)
    assert "server" in cmd and cmd[cmd.index("--workers") + 1] == "2"


def test_other_backends_and_extra_flags_pass_through():
    cmd = _cmd("--host", "0.0.0.0", "--port", "5005", "--backend-store-uri", "postgresql://u:p@db/mlflow",
               "--artifacts-destination", "s3://bucket/mlflow", "--allowed-hosts", "box:5005", "--", "--workers", "2")
    assert "--backend-store-uri" not in cmd and "u:p@" not in " ".join(cmd)  # visible to every user in `ps`
    args = serve.parser().parse_args(["--backend-store-uri", "postgresql://u:p@db/mlflow"])
    assert serve.server_env(args) == {"MLFLOW_BACKEND_STORE_URI": "postgresql://u:p@db/mlflow",  # given by environment
                                      "MLFLOW_SQLALCHEMYSTORE_POOL_RECYCLE": "300"}  # db_server.POOL_RECYCLE_S
    assert cmd[cmd.index("--artifacts-destination") + 1] == "s3://bucket/mlflow"
    assert cmd[cmd.index("--allowed-hosts") + 1] == "box:5005"
    assert cmd[-2:] == ["--workers", "2"]


def test_bad_store_and_busy_port_fail_before_starting(tmp_path, capsys):
    assert serve.main(["--backend-store-uri", "sqlite:///relative.db"]) == 2
    assert "absolute path" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert serve.main(["--port", str(port), "--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}",
                           "--artifacts-destination", str(tmp_path / "a")]) == 2
    assert "pick another --port" in capsys.readouterr().err


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
@pytest.mark.parametrize("flags,fragment", [
    (["--port", "99999"], "--port 99999 is out of range; allowed: 1..65535"),  # once an OverflowError traceback
    (["--port", "-1"], "--port -1 is out of range; allowed: 1..65535"),
    (["--workers", "0"], "--workers 0 is out of range; allowed: >= 1"),
])
def test_port_and_workers_out_of_range_are_refused_dry_run_too(tmp_path, capsys, flags, fragment, dry):
    from tests.helpers.scripts import in_process

    r = in_process(capsys, [sys.executable, str(REPO / "mlflow" / "serve.py"), *flags, "--backend-store-uri",
                            f"sqlite:///{tmp_path / 'store' / 'm.db'}", *dry])
    assert r.returncode == 2 and r.stderr.startswith(f"error: {fragment}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == "" and not (tmp_path / "store").exists()


def test_dry_run_quotes_a_spaced_path_and_writes_nothing(tmp_path, capsys):
    import shlex

    from tests.helpers.scripts import in_process

    store, art = tmp_path / "my store" / "m.db", tmp_path / "my artifacts"
    with socket.socket() as s:  # a port free now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = in_process(capsys, [sys.executable, str(REPO / "mlflow" / "serve.py"), "--port", str(port),
                            "--backend-store-uri", f"sqlite:///{store}", "--artifacts-destination", str(art),
                            "--dry-run"])
    assert r.returncode == 0, r.stderr
    cmd = shlex.split(r.stdout)  # pastes back into a shell as the same arguments
    assert cmd[cmd.index("--backend-store-uri") + 1] == f"sqlite:///{store}"
    assert cmd[cmd.index("--artifacts-destination") + 1] == str(art)
    assert not store.parent.exists() and not art.exists()


def test_mlflow_folder_cannot_shadow_the_package():
    # `mlflow/` at the repo root holds the store; an __init__.py or mlflow.py there would shadow mlflow.
    assert not (REPO / "mlflow" / "__init__.py").exists() and not (REPO / "mlflow" / "mlflow.py").exists()


@pytest.mark.slow
def test_serve_starts_prints_the_url_and_stops(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    proc = subprocess.Popen([sys.executable, str(REPO / "mlflow" / "serve.py"), "--port", str(port),
                             "--backend-store-uri", uri, "--artifacts-destination", str(tmp_path / "art"), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/",
                            start_new_session=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith(f"MLflow UI: http://127.0.0.1:{port}"), first
        deadline = time.time() + 240  # ~20 s idle; minutes on 2 cores shared with training
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.time() < deadline, "server did not come up"
            time.sleep(0.5)
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        from mlflow.tracking import MlflowClient

        client = MlflowClient(f"http://127.0.0.1:{port}")  # studies log through it the same way
        exp = client.create_experiment("served")
        run = client.create_run(exp)
        client.log_metric(run.info.run_id, "session/test_acc", 50.0, step=1)
        assert (tmp_path / "store" / "mlflow.db").exists()
        proc.send_signal(signal.SIGTERM)  # to serve.py only: it stops the server's process group
        assert proc.wait(timeout=30) is not None
        time.sleep(1)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "the server outlived serve.py"
    finally:
        if proc.poll() is None:  # SIGTERM: serve.py then stops the server's own process group too
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_each_study_is_printed_with_its_runs_page_link(tracking_uri, capsys):
    """MLflow 3.17's UI opens an experiment in the view of a per-browser switch (GenAI in a fresh browser), not by
    the experiment's kind: the links serve.py prints carry the switch's model-training value, so they open runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    ids = {name: client.create_experiment(name) for name in ("ablation", "alpha_sweep", "gone")}
    client.delete_experiment(ids["gone"])
    assert serve.experiments(tracking_uri) == [(ids["alpha_sweep"], "alpha_sweep"), (ids["ablation"], "ablation")]
    assert serve.runs_page("http://h:5", "7") == "http://h:5/#/experiments/7/runs?workflowType=machine_learning"
    serve.print_studies(tracking_uri, "http://127.0.0.1:5000")
    out = capsys.readouterr().out.splitlines()
    assert "click Model training at the top of the sidebar once, then Experiments and a study" in out[0]
    assert out[1:] == [f"  alpha_sweep  http://127.0.0.1:5000/#/experiments/{ids['alpha_sweep']}/runs"
                       "?workflowType=machine_learning",
                       f"  ablation     http://127.0.0.1:5000/#/experiments/{ids['ablation']}/runs"
                       "?workflowType=machine_learning"]
    assert serve.experiments(tracking_uri.replace("mlflow.db", "new.db")) == []  # a new store: nothing to list


def test_a_study_s_link_opens_its_view(tracking_uri, capsys):
    """An experiment a study logged to carries the view MLflow's UI shares by key (tracking_store.VIEW_TAG, as its
    Share button stores one): the link opens it on its chart view, the session curves first; its runs table has the
    objective, the searched parameters, the seed and the paper's two test figures as columns and a Run Name column
    wide enough to read; an experiment without it gets the plain link. tests/e2e/test_mlflow_ui_browser.py checks what
    the UI makes of it."""
    from mlflow.tracking import MlflowClient

    from adbs_lab.stores.tracking_store import VIEW_TAG, runs_view

    client = MlflowClient(tracking_uri)
    study, other = client.create_experiment("alpha_sweep"), client.create_experiment("by_hand")
    client.set_experiment_tag(study, VIEW_TAG, runs_view(["alpha"], ["summary/val_avg_acc"], "p1"))
    assert serve.with_view(tracking_uri) == {study}
    serve.print_studies(tracking_uri, "http://h:5")
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [f"  by_hand      http://h:5/#/experiments/{other}/runs?workflowType=machine_learning",
                       f"  alpha_sweep  http://h:5/#/experiments/{study}/runs?workflowType=machine_learning"
                       "&viewStateShareKey=adbs&compareRunsMode=CHART"]
    view = json.loads(client.get_experiment(study).tags[VIEW_TAG])
    assert view["selectedColumns"] == ["metrics.`summary/val_avg_acc`", "params.`alpha`", "params.`seed`",
                                       "metrics.`summary/test_last_acc`", "metrics.`summary/test_avg_acc`",
                                       "attributes.`Description`"]
    # this invocation's trials, a line (a group row) per configuration, the session curves' section first
    assert view["searchFilter"] == "tags.`mlflow.parentRunId` = 'p1'"
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "adbs.label"}]
    assert [c["metricKey"] for c in view["compareRunCharts"]] == ["session/test_acc", "session/test_base_acc",
                                                                   "session/test_novel_acc", "session/val_acc"]
    assert {(c["type"], c["xAxisKey"], c["metricSectionId"]) for c in view["compareRunCharts"]} == {
        ("LINE", "step", view["compareRunSections"][0]["uuid"])}
    assert [(x["name"], x["display"]) for x in view["compareRunSections"]] == [
        ("Session curves", True), ("summary", True), ("session", False), ("base", False)]
    assert view["isAccordionReordered"] and view["runsHiddenMode"] == "SHOW_ALL"
    assert view["columnOrder"] == ["attributes.`Run Name`", *view["selectedColumns"]]
    assert view["columnWidths"]["attributes.`Run Name`"] >= 240
