"""studies/paper.py's parts: named by its --name, confined to --storage, checked by its dry run as each part's
run checks them (a shared Optuna storage that holds a part's name), and, when every part is refused, no report and
no paper run that would stand for a study that ran. No Ray: every case ends before a part trains."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
from tests.helpers.scripts import in_process
from mlflow.tracking import MlflowClient

from adbs_lab.driver import options
from adbs import exits
from adbs_lab.driver import compose
from adbs_lab.driver.prepared import RunSettings, resume_command

REPO = Path(__file__).resolve().parents[2]
PAPER = [sys.executable, str(REPO / "studies" / "paper.py"), "--smoke"]


def _stores(tmp: Path) -> list[str]:
    return ["--storage", str(tmp / "shared" / "runs"), "--tracking-uri", f"sqlite:///{tmp / 'm.db'}"]


def test_a_paper_name_out_of_its_storage_is_refused_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "shared").mkdir()
    for extra in (["--dry-run"], []):
        r = in_process(capsys, [*PAPER, "--name=/../../x", *_stores(tmp_path), *extra])
        assert r.returncode == 2 and "--name '/../../x': a study name is one folder name" in r.stderr, r.stderr
        assert list(tmp_path.rglob("*")) == [tmp_path / "shared"]


def test_the_dry_run_refuses_a_part_whose_name_the_optuna_storage_holds_and_another_name_is_free(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    optuna.create_study(study_name="ablation-smoke", storage=url)  # e.g. a paper study of another --storage
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--dry-run"])
    assert r.returncode == 2 and "paper, ablation: Optuna storage" in r.stderr, r.stderr
    assert "already holds a study named 'ablation-smoke'" in r.stderr and "--name NAME" in r.stderr
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--name", "b", "--dry-run"])
    assert r.returncode == 0 and "dry run: study paper (embedded)" in r.stdout, r.stderr  # parts ablation-smoke-b, ...
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["ablation-smoke"]


def test_every_part_refused_writes_no_report_and_no_paper_run(tmp_path, capsys, monkeypatch):
    """Each part refused by its own run (as when another run took its name after the paper's checks): the paper
    exits 2, as its parts did, with no report.md and no paper run in MLflow."""
    def refused(plan, opts):
        print(f"error: {plan.name}: refused", file=sys.stderr)
        raise SystemExit(exits.REFUSED)

    monkeypatch.setattr(compose, "run", refused)
    r = in_process(capsys, [*PAPER, *_stores(tmp_path)])
    assert r.returncode == 2 and "every part was refused" in r.stderr and "no report was written" in r.stderr
    assert not list(tmp_path.rglob("report.md"))
    db = tmp_path / "m.db"
    assert not db.exists() or MlflowClient(f"sqlite:///{db}").get_experiment_by_name("paper-smoke") is None


def test_a_part_advises_the_command_of_its_composition():
    opts = options.parse("t", argv=["--smoke"])[0]
    assert resume_command(RunSettings.of(opts), lambda: "py")[-1] == "--resume"
    part = opts.replace(continue_argv=("studies/paper.py", "--smoke"))
    assert resume_command(RunSettings.of(part), lambda: "py") == ["py", "studies/paper.py", "--smoke"]



def _claimed(tmp_path, capsys, monkeypatch, *extra: str) -> Path:
    """The ablation part's folder as a run left it when Ctrl-C came while it claimed it: study.json of the part's
    fingerprint (as its own preflight computes it), no Ray Tune state (no trial ran)."""
    from adbs_lab.driver.preflight import study

    prints = {}

    def run(plan, opts):  # each part's own preflight types it: its fingerprint; then refused, nothing written
        p = study(plan, opts)
        p.where.cleanup()
        prints[plan.name] = p.fingerprint
        raise SystemExit(exits.REFUSED)

    with monkeypatch.context() as m:
        m.setattr(compose, "run", run)
        assert in_process(capsys, [*PAPER, *_stores(tmp_path), *extra]).returncode == exits.REFUSED
    claimed = tmp_path / "shared" / "runs" / "paper_embedded-smoke" / "ablation-smoke"  # PAPER is --smoke
    assert not claimed.exists()
    claimed.mkdir(parents=True)
    (claimed / "study.json").write_text(json.dumps({"study": "ablation", "fingerprint": prints["ablation"]}))
    return claimed


def _doing(out: str, part: str) -> list[str]:
    """What the cost lines say the run does with `part` ("to run]", "finished earlier: reused]", ...)."""
    return [line.split("[")[-1] for line in out.splitlines() if line.split()[:1] == [part]]


def test_a_part_interrupted_while_claiming_its_folder_is_run_again_not_continued(tmp_path, capsys, monkeypatch):
    """Ctrl-C while a part claimed its folder (study.json of its fingerprint written, no Ray Tune state yet: no
    trial ran) left a part that the rerun's check called "interrupted earlier: continued", and then its run
    refused after the paper's start lines: 'no interrupted study to continue'. Such a part is to run, afresh; the
    part's own run (its real preflight, with the resume flag the paper passes) accepts it."""
    from adbs_lab.driver.options import StudyInputError
    from adbs_lab.driver.preflight import preflight

    _claimed(tmp_path, capsys, monkeypatch)
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--dry-run"])
    assert r.returncode == 0 and _doing(r.stdout, "ablation") == ["to run]"], r.stdout + r.stderr
    ran = {}

    def run(plan, opts):  # the part's own preflight, then refused: no part trains here
        try:
            preflight(plan, opts).where.cleanup()
            ran[plan.name] = f"resume={opts.resume}"
        except StudyInputError as e:
            ran[plan.name] = str(e)
        raise SystemExit(exits.REFUSED)

    monkeypatch.setattr(compose, "run", run)
    in_process(capsys, [*PAPER, *_stores(tmp_path)])
    assert ran == dict.fromkeys(["hosts", "ablation", "alpha_sweep", "kshot_grid"], "resume=False")


def test_a_part_interrupted_while_claiming_its_name_in_a_shared_optuna_storage_says_how_to_free_it(
        tmp_path, capsys, monkeypatch):
    """With --optuna-storage the claim takes the part's name there first: the name stays taken, so the check that
    a new study's name is free refuses the rerun (exit 2, before any part runs), saying that this study's own run
    took it and how to free it; once deleted, the part is to run."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    _claimed(tmp_path, capsys, monkeypatch, "--optuna-storage", url)
    optuna.create_study(study_name="ablation-smoke", storage=url)  # what the claim did before study.json
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--dry-run"])
    assert r.returncode == 2 and "paper, ablation: Optuna storage" in r.stderr, r.stderr
    assert "this study's run in" in r.stderr and "stopped before its first trial" in r.stderr, r.stderr
    assert "optuna delete-study --study-name ablation-smoke" in r.stderr
    optuna.delete_study(study_name="ablation-smoke", storage=url)
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--dry-run"])
    assert r.returncode == 0 and _doing(r.stdout, "ablation") == ["to run]"], r.stdout + r.stderr
