"""report.py NAME reads the default folder's latest run, `--name N` the latest run of that name, and every report
says which run it read (a --smoke run is named one)."""

import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.results import from_store
from adbs_lab.results import run_pick


@pytest.fixture()
def client(tmp_path):
    c = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = c.create_experiment("ablation")
    ids = {}
    for key, cmd, run_name in [("default", "python studies/ablation.py --seeds 0 1 2", "ablation 2026-01-01 00:00"),
                               ("try", "python studies/ablation.py --smoke --name try", "ablation try 2026-01-01 00:05")]:
        run = c.create_run(exp, run_name=run_name, tags={"adbs.role": "study", "adbs.study": "ablation",
                                                         "adbs.command": cmd})
        c.set_terminated(run.info.run_id)
        ids[key] = run.info.run_id
    return c, ids


def test_the_default_folder_unless_a_name_is_given(client):
    c, ids = client
    default = from_store.load_study(c, "ablation")
    assert default.parent.info.run_id == ids["default"]  # not the later smoke run
    assert run_pick.describe(default.parent) == "the default folder (no --name)"
    named = from_store.load_study(c, "ablation", "try")
    assert named.parent.info.run_id == ids["try"] and run_pick.describe(named.parent) == "--name try, a --smoke run"
    with pytest.raises(from_store.ReportError, match="no run of --name nope.*\\(default\\), try"):
        from_store.load_study(c, "ablation", "nope")


def test_a_store_from_before_smoke_runs_had_their_experiment_reports_the_real_run(tmp_path):
    """Stores written before --smoke runs went to experiment `<study>-smoke` hold them among the study's runs:
    report.py NAME takes the latest run without --smoke there, even when a smoke run came later; a store of smoke
    runs alone still gives its latest."""
    c = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = c.create_experiment("ablation")
    ids = []
    for cmd in ("python studies/ablation.py", "python studies/ablation.py --smoke"):
        run = c.create_run(exp, run_name="ablation", tags={"adbs.role": "study", "adbs.study": "ablation",
                                                          "adbs.command": cmd})
        c.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    assert from_store.find_parent(c, "ablation").info.run_id == ids[0]
    smoke_only = [r for r in from_store.all_runs(c, [exp], "tags.`adbs.role` = 'study'") if run_pick.is_smoke(r)]
    assert [r.info.run_id for r in run_pick.of_name(smoke_only, None)[0]] == [ids[1]]
