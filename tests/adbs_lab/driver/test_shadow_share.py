"""--shadow-share is the share of the trials the pruner stops that run on as shadows (adbs_lab/search/shadows.py):
typed where the run prunes nothing (--pruner none given, the study's default, set by --objectives, or a study that
takes no pruner), it would change nothing, and the run and its dry run refuse it before anything starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[3]


def _dry(capsys, tmp_path, script: str, *flags: str):
    return in_process(capsys, [sys.executable, str(REPO / "studies" / script), "--smoke", "--dry-run",
                               "--gpus-per-trial", "0", "--storage", str(tmp_path / "runs"), "--tracking-uri",
                               f"sqlite:///{tmp_path / 'mlflow.db'}", *flags])


@pytest.mark.parametrize("script, flags", [
    ("alpha_sweep.py", ("--pruner", "none", "--shadow-share", "0.5")),  # as typed in the check
    ("alpha_sweep.py", ("--shadow-share=0.3",)),  # its grid's default pruner: none
    ("ablation.py", ("--shadow-share", "0")),  # no pruner by default: even 0 says nothing
    ("alpha_sweep.py", ("--num-samples", "2", "--objectives", "val_last_base_acc:max", "val_last_novel_acc:max",
                        "--shadow-share", "0.5")),  # two objectives: Optuna prunes none
    ("kshot_grid.py", ("--shadow-share", "0.5")),  # a study that takes no pruner
])
def test_a_shadow_share_without_a_pruner_is_refused(capsys, tmp_path, script, flags):
    """`--pruner none --shadow-share 0.5` was accepted without a word."""
    r = _dry(capsys, tmp_path, script, *flags)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--shadow-share" in r.stderr and "this run prunes no trial" in r.stderr and "Traceback" not in r.stderr
    assert "dry run:" not in r.stdout


def test_a_shadow_share_with_a_pruner_is_taken(capsys, tmp_path):
    r = _dry(capsys, tmp_path, "alpha_sweep.py", "--num-samples", "2", "--pruner", "median", "--shadow-share", "0.5")
    assert r.returncode == 0, r.stderr
