"""A --smoke run never sits among a study's own runs (adbs_lab/stores/paths.py: SMOKE): the study as it starts
(preflight, then its MLflow tracker, in one SQLite MLflow store and a storage folder, no Ray)
puts a smoke run in MLflow experiment `<study>-smoke`, folder `<study>-smoke` and Optuna study `<study>-smoke`, and
says so in its start line; `studies/report.py NAME` then reads the study's own latest run, `--smoke` (or the
experiment's name) the smoke one. tests/e2e/test_study_with_fake_trials.py runs a whole smoke study (slow)."""

from __future__ import annotations

import shlex
import sys

import pytest
from mlflow.tracking import MlflowClient

from adbs_lab import study
from adbs_lab.driver import launch, options
from adbs_lab.driver.tracker import MlflowTracker
from adbs_lab.search import tune_staging
from adbs_lab.stores.paths import REPO_ROOT
from tests.helpers.scripts import in_process

PLAN = study.Plan(name="t", space={"variant": "adb+ic", "alpha": [0.01, 0.05]}, space_source="tests")


def _started(tmp_path, *flags: str):
    """The study object (Study) and its tracker once the parent run is made (no trial runs), the tracker made as
    adbs_lab/driver/launch.py makes it: the study's name, the experiment its options name."""
    opts = options.parse("t", argv=["--storage", str(tmp_path / "runs"), "--gpus-per-trial", "0",
                                    "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *flags])[0]
    p = study.preflight(PLAN, opts)
    p.where.local.mkdir(parents=True, exist_ok=True)
    tracker = MlflowTracker(uri=p.tracking_uri, study=p.plan.name, folder=p.folder, study_dir=p.dir, run_name="t",
                            tags={"adbs.command": shlex.join(["studies/t.py", *flags])}, varying=p.varying,
                            resume=False, experiment=p.experiment)
    tune_staging.release()  # the tracker holds Tune's start lock for a fit() that never comes here
    tracker.finish()
    return p, tracker


def test_a_smoke_run_has_its_own_experiment_folder_and_optuna_study(tmp_path, capsys):
    real, real_tracker = _started(tmp_path)
    smoke, smoke_tracker = _started(tmp_path, "--smoke")
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_experiment(real_tracker.experiment_id).name == "t"
    assert client.get_experiment(smoke_tracker.experiment_id).name == "t-smoke"
    assert smoke_tracker.experiment_id != real_tracker.experiment_id
    # the runs of the study's experiment are its own: no smoke run among them
    study_runs = client.search_runs([real_tracker.experiment_id])
    assert [r.info.run_id for r in study_runs] == [real_tracker.parent_run_id]
    assert client.get_run(smoke_tracker.parent_run_id).data.tags["adbs.study"] == "t"  # still study t's run
    # the folder, and the Optuna study named by it (launch gives the searcher study_name=p.folder) in its own optuna.db:
    # the dashboard of runs/t shows no smoke run, nor a shared --optuna-storage's study `t`
    assert (real.folder, smoke.folder) == ("t", "t-smoke") and real.dir != smoke.dir
    assert smoke.optuna_url == f"sqlite:///{tmp_path / 'runs' / 't-smoke' / 'optuna.db'}" != real.optuna_url
    named, _ = _started(tmp_path / "n", "--smoke", "--name", "try")
    assert named.where.folder == "t-smoke-try"

    launch.print_start(smoke, max_concurrent=2, load=0.0)
    said = capsys.readouterr().out
    assert (f"smoke run: its results go to {smoke.dir} and MLflow experiment 't-smoke', apart from the study's own; "
            "its report: python studies/report.py t --smoke") in said


def test_report_reads_the_studys_own_run_and_the_smoke_run_only_when_asked(tmp_path, capsys):
    from studies import report

    _, real = _started(tmp_path)
    _, smoke = _started(tmp_path, "--smoke")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def read(*argv: str) -> str:
        args = report._parser().parse_args([*argv, "--tracking-uri", uri])
        studies = report._read_store(args, uri)[3]  # (client, across, paper run, studies, path run)
        experiments[studies[0].parent.info.run_id] = studies[0].experiment  # what its report.md names
        return studies[0].parent.info.run_id

    experiments: dict[str, str | None] = {}
    assert read("t") == real.parent_run_id  # the smoke run started later, in its own experiment
    assert read("t", "--smoke") == read("t-smoke") == smoke.parent_run_id
    assert read(real.parent_run_id, "--smoke") == real.parent_run_id  # a run id is the run it names
    assert experiments == {real.parent_run_id: "t", smoke.parent_run_id: "t-smoke"}
    r = in_process(capsys, [sys.executable, str(REPO_ROOT / "studies" / "report.py"), "nope", "--smoke",
                            "--tracking-uri", uri])
    assert r.returncode == 2 and "no study or run 'nope-smoke' in this store; studies here: t, t-smoke" in r.stderr


@pytest.mark.parametrize("name", ["smoke", "smoke-try"])
def test_a_name_that_would_take_the_smoke_runs_folder_is_refused(tmp_path, name):
    opts = options.parse("t", argv=["--storage", str(tmp_path), "--name", name])[0]
    with pytest.raises(options.StudyInputError, match=f"--name '{name}': <study>-{name} is the folder of the study's "
                                                      "--smoke runs"):
        opts.check()
    options.parse("t", argv=["--storage", str(tmp_path), "--name", name, "--smoke"])[0].check()  # t-smoke-smoke
