"""studies/paper.py's parts: named by its --name, confined to --storage, checked by its dry run as each part's
run checks them (a shared Optuna storage that holds a part's name), and, when every part is refused, no report and
no paper run that would stand for a study that ran. No Ray: every case ends before a part trains."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
from tests.helpers.scripts import in_process
from mlflow.tracking import MlflowClient

from adbs_lab.driver import options
from adbs import exits
from adbs_lab.driver import compose

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
    optuna.create_study(study_name="ablation", storage=url)  # e.g. a paper study of another --storage
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--dry-run"])
    assert r.returncode == 2 and "paper, ablation: Optuna storage" in r.stderr, r.stderr
    assert "already holds a study named 'ablation'" in r.stderr and "--name NAME" in r.stderr
    r = in_process(capsys, [*PAPER, *_stores(tmp_path), "--optuna-storage", url, "--name", "b", "--dry-run"])
    assert r.returncode == 0 and "dry run: study paper (embedded)" in r.stdout, r.stderr  # parts ablation-b, ...
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["ablation"]


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
    assert not db.exists() or MlflowClient(f"sqlite:///{db}").get_experiment_by_name("paper") is None


def test_a_part_advises_the_command_of_its_composition():
    opts = options.parse("t", argv=["--smoke"])[0]
    assert options.resume_command(opts, lambda: "py")[-1] == "--resume"
    part = opts.replace(continue_argv=("studies/paper.py", "--smoke"))
    assert options.resume_command(part, lambda: "py") == ["py", "studies/paper.py", "--smoke"]
