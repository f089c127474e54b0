"""studies/report.py of a finished study: its table holds the verdicts the study recorded (its parent run's tags),
and another --resolve or --reference is printed below it as a re-reading or a new family under its own heading
(adbs_lab/results/rereading.py). Before, the flags replaced the study's verdicts under the heading of its own family.
Fast: a store in the tracker's layout built with MlflowClient (as tests/adbs_lab/results/test_from_store.py does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from adbs.config import Config
from adbs_lab.records import metrics_keys as K
from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import paper_table
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.frames import study_frames
from tests.helpers.scripts import in_process

BASE = [50.0, 54.0, 47.0]
VALUES = {"baseline": BASE, "adb": [b + d for b, d in zip(BASE, [0.5, -0.3, 0.2])],
          "adb+ic": [b + d for b, d in zip(BASE, [6.0, 7.0, 5.0])]}
PAIRS = (("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb"))
SCRIPT = Path(__file__).resolve().parents[3] / "studies" / "report.py"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """An ablation study of 3 seeds a row, recorded at δ = 1 with its comparisons."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.create_experiment("ablation")
    parent = c.create_run(exp, run_name="ablation 2026-01-01 00:00",
                          tags={"adbs.role": "study", "adbs.study": "ablation", "adbs.baseline": "baseline",
                                "adbs.order": json.dumps(list(VALUES)), **VerdictPolicy(pairs=PAIRS).tags()})
    number = 0
    for label, values in VALUES.items():
        for seed, v in enumerate(values):
            run = c.create_run(exp, run_name=f"{label} seed={seed}",
                               tags={"mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial",
                                     "adbs.study": "ablation", "adbs.trial_id": f"t{number}",
                                     "adbs.optuna_trial": str(number), "adbs.state": K.COMPLETE, "adbs.label": label})
            c.log_batch(run.info.run_id, metrics=[Metric("session/test_acc", a, 0, s) for s, a in enumerate((80.0, v))]
                        + [Metric("summary/val_avg_acc", v, 0, 0)],
                        params=[Param(k, json.dumps(x) if isinstance(x, list) else str(x))
                                for k, x in Config(variant=label, seed=seed).to_dict().items()])
            c.set_terminated(run.info.run_id, "FINISHED")
            number += 1
    c.set_terminated(parent.info.run_id)
    return uri


def _sentences(policy: VerdictPolicy, baseline: str = "baseline") -> list[str]:
    s, t = study_frames(VALUES)
    return cmp.sentences(paper_table(s, baseline=baseline, trials=t, verdicts=policy).attrs["comparisons"])


def _report(capsys, uri: str, out: Path, *flags: str) -> str:
    r = in_process(capsys, [sys.executable, str(SCRIPT), "ablation", "--tracking-uri", uri, "--out", str(out), *flags])
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_another_resolve_is_printed_as_a_re_reading_below_the_studys_own_verdicts(store, tmp_path, capsys):
    out = _report(capsys, store, tmp_path / "r", "--resolve", "3")
    heading = "re-read with δ = 3 points (the run's δ is 1 point)"
    assert heading in out, out
    run, again = out[:out.index(heading)], out[out.index(heading):]
    assert all(line in run for line in _sentences(VerdictPolicy(pairs=PAIRS))), run
    assert "equivalent within ±3 points" not in run and "equivalent within ±3 points" in again
    assert all(line in again for line in _sentences(VerdictPolicy(pairs=PAIRS, delta=3.0)))
    assert "±3 points" not in (tmp_path / "r" / "table.txt").read_text()  # its files: the study's own verdicts


def test_another_reference_is_a_new_family_below_the_studys_own_verdicts(store, tmp_path, capsys):
    out = _report(capsys, store, tmp_path / "r", "--reference", "adb")
    heading = "a new family, not the run's (other comparisons (another reference))"
    assert heading in out, out
    run, again = out[:out.index(heading)], out[out.index(heading):]
    assert all(line in run for line in _sentences(VerdictPolicy(pairs=PAIRS))), run
    assert "baseline vs adb" in again and "baseline vs adb" not in run
