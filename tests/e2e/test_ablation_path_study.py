"""studies/ablation_path.py --smoke end to end (Ray Tune trials, MLflow): the path between two small config files
that differ in two session knobs (one base session per seed, from the cache after the first), its table, figure,
report and MLflow run; then --resume reuses every finished Tune run and prints the same table."""

import json
import subprocess
import time

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow


def test_ablation_path_smoke_and_resume(study_cmd, storage, tracking_uri, tmp_path):
    (tmp_path / "a.yaml").write_text("new_boundary_init: abs_mean\nfinetune_epochs: 2\n")
    (tmp_path / "b.yaml").write_text("new_boundary_init: one\nfinetune_epochs: 0\n")
    cmd = study_cmd("ablation_path", "--smoke", "--from", str(tmp_path / "a.yaml"), "--to", str(tmp_path / "b.yaml"))
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd="/")
    wall = time.time() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    folder = storage / "ablation_path-smoke"
    record = json.loads((folder / "path.json").read_text())
    assert [s["field"] for s in record["steps"]] and len(record["steps"]) == 2
    assert {s["field"] for s in record["steps"]} == {"new_boundary_init", "finetune_epochs"}
    assert record["steps"][0]["race_trials"] == 2 and record["steps"][1]["race_trials"] == 0
    table = (folder / "table.txt").read_text()
    assert "(from)" in table and "(post-selection)" in table  # 1 seed: the confirmation is the selection seed
    assert "racing saved 0 of 2 selection trials" in r.stdout
    assert (folder / "path.png").stat().st_size > 5000 and "![path](path.png)" in (folder / "report.md").read_text()
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("ablation_path-smoke")
    runs = client.search_runs([exp.experiment_id])
    mine = [x for x in runs if x.data.tags.get("adbs.role") == "ablation_path"]
    assert len(mine) == 1 and "path/delta" in mine[0].data.metrics
    print(f"ablation_path --smoke: {wall:.0f} s")
    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600, cwd="/")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("finished earlier: reused") == 1  # one Tune run: the race beside A and B
    assert (folder / "table.txt").read_text() == table
