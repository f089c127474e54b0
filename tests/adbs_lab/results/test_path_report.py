"""`studies/report.py ablation_path` reports the path (adbs_lab/results/path_report.py: find, redraw): its table of
steps, figure and report as the path's own MLflow run logged them, not the table of one of its Tune runs, whose parent
runs share the experiment. The path here is a real one (adbs_lab/search/path.py on a known response, its files
written and logged by path_report into a real MLflow store); no training."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from adbs_lab.results import path_report
from adbs_lab.search.path import Memo, confirm, greedy
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stores import paths, tracking_store
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[3]
A = {"x1": 0, "x2": 0}


def _evaluate(shift: float):
    def evaluate(tag, configs, seeds):
        return {lab: {s: 50 + 5 * c["x1"] + 3 * c["x2"] + shift + 0.1 * s for s in seeds} for lab, c in configs.items()}
    return evaluate


def _tune_parent(client, exp_id: str, command: str, tag: str) -> str:
    """The parent run of one of a path's Tune runs (a race look, the confirmation), as the study's tracker makes it."""
    run = client.create_run(exp_id, run_name=f"ablation_path {tag} 2026-11-28 10:02",
                            tags={"adbs.role": "study", "adbs.study": "ablation_path", "adbs.command": command})
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _path(client, uri: str, folder: Path, command: str, shift: float) -> str:
    """One path: its Tune runs' parents, then its own run with its files (studies/ablation_path.py: _outputs)."""
    exp = client.get_experiment_by_name("ablation_path")
    exp_id = exp.experiment_id if exp else client.create_experiment(  # as the study's tracker makes it
        "ablation_path", artifact_location=paths.artifact_root(uri, str(folder.parent)))
    for tag in ("s1l1", "confirm"):
        _tune_parent(client, exp_id, command, tag)
    b = {"x1": 1, "x2": 1}
    memo = Memo(_evaluate(shift))
    steps = greedy(A, b, memo, [0, 1, 2], Looks.fixed(3), delta=1.0)
    start, confirmed = confirm(A, steps, memo, [5, 6, 7], 0.05, 1.0)
    files = path_report.write(folder, a_name="a.yaml", b_name="b.yaml", fields=["x1", "x2"], steps=steps, start=start,
                              confirmed=confirmed, objective="val_avg_acc", policy=VerdictPolicy(), seeds=[0, 1, 2],
                              confirm_seeds=[5, 6, 7], wall_s=1.0)
    return path_report.log_run(client, uri, str(folder.parent), files, steps, confirmed,
                               {"adbs.command": command, "adbs.from": "a.yaml", "adbs.to": "b.yaml"})


@pytest.fixture
def store(tmp_path, tracking_uri):
    client = tracking_store.client(tracking_uri)
    default = _path(client, tracking_uri, tmp_path / "runs" / "ablation_path", "studies/ablation_path.py --smoke", 0.0)
    named = _path(client, tracking_uri, tmp_path / "runs" / "ablation_path-try",
                  "studies/ablation_path.py --smoke --name try", 20.0)
    return tmp_path, tracking_uri, {"default": default, "try": named}


@pytest.mark.parametrize("ref, flags, which", [("ablation_path", [], "default"),
                                               ("ablation_path", ["--name", "try"], "try"),
                                               ("RUN", [], "try"), ("ablation_path", ["--format", "markdown"], "default")])
def test_report_of_a_path_is_the_paths_table(capsys, store, ref, flags, which):
    """It read the latest parent run of the experiment, one of the path's Tune runs, and drew that table."""
    tmp_path, uri, runs = store
    folder = tmp_path / "runs" / ("ablation_path" if which == "default" else "ablation_path-try")
    out = tmp_path / "report"
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), runs[which] if ref == "RUN" else ref,
                            *flags, "--tracking-uri", uri, "--out", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    table = (folder / ("table.md" if "markdown" in flags else "table.txt")).read_text()
    assert table in r.stdout and runs[which] in r.stdout and "a.yaml -> b.yaml" in r.stdout
    assert {f.name for f in out.iterdir()} == set(path_report.FILES)
    assert (out / "path.json").read_text() == (folder / "path.json").read_text()


@pytest.mark.parametrize("flags, said", [(["--name", "other"], "no path of --name other; its paths' names: "),
                                         (["--paper"], "--paper: an ablation path's report is its table of steps"),
                                         (["--format", "latex"], "--format: an ablation path's report")])
def test_what_a_path_report_cannot_do_is_refused(capsys, store, flags, said):
    tmp_path, uri, _ = store
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "ablation_path", *flags,
                            "--tracking-uri", uri, "--out", str(tmp_path / "report")])
    assert r.returncode == 2 and said in r.stderr, r.stdout + r.stderr
