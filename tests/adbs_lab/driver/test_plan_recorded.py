"""--plan reads a finished study by what it recorded (adbs_lab/driver/run.py: seed_plan; adbs_lab/results/rereading.py):
its verdicts are those of the verdict policy it ran under (study.json, else its MLflow parent run's tags), never the
command's flags; another --resolve is printed apart as a re-reading, another --reference as a new family, and a
command of another seed design is refused. Each test failed before: --plan printed the verdicts of the command's
flags under the heading of the run's own. Fast: no Ray, the study's files written by hand, MLflow a SQLite file."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from adbs_lab.driver import options, preflight
from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.run import seed_plan
from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import paper_table
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stores import tracking_store
from studies import ablation
from tests.helpers.frames import study_frames
from tests.helpers.recorded import write_record

BASE = [50.0, 54.0, 47.0]
VALUES = {"baseline": BASE, "adb": [b + d for b, d in zip(BASE, [0.5, -0.3, 0.2])],
          "adb+ic": [b + d for b, d in zip(BASE, [6.0, 7.0, 5.0])]}
PAIRS = (("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb"))


def _prepared(tmp_path, *flags: str):
    opts = options.parse("t", argv=["--smoke", "--storage", str(tmp_path), "--gpus-per-trial", "0",
                                    "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *flags])[0]
    return preflight.study(*ablation.plan(opts))


def _finished(tmp_path, *flags: str, policy: bool = True):
    """A finished run of `ablation.py --smoke FLAGS` in tmp_path: its files and study.json."""
    p = _prepared(tmp_path, *flags)
    s, t = study_frames(VALUES)
    p.dir.mkdir(parents=True)
    s.to_parquet(p.dir / "sessions.parquet")
    t.to_parquet(p.dir / "trials.parquet")
    write_record(p, policy)
    return p


def _sentences(policy: VerdictPolicy) -> list[str]:
    s, t = study_frames(VALUES)
    return cmp.sentences(paper_table(s, baseline="baseline", trials=t, verdicts=policy).attrs["comparisons"])


def _parts(out: str, heading: str) -> tuple[str, str]:
    assert heading in out, out
    return out[:out.index(heading)], out[out.index(heading):]


def test_another_resolve_is_a_re_reading_under_its_own_heading(tmp_path, capsys):
    _finished(tmp_path)  # the run: δ = 1
    seed_plan(_prepared(tmp_path, "--plan", "--resolve", "3"))
    run, again = _parts(capsys.readouterr().out, "re-read with δ = 3 points")
    assert "the verdicts of its last run" in run and "adb vs baseline" in run
    assert all(line in run for line in _sentences(VerdictPolicy(pairs=PAIRS)))  # the run's own, at δ = 1
    assert "±3 points" not in run.split("where the sequential design")[0]
    assert "smoke run: verdicts not meaningful" in again.splitlines()[0]
    assert all(line in again for line in _sentences(VerdictPolicy(pairs=PAIRS, delta=3.0)))
    assert "adb vs baseline" in again and "equivalent within ±3 points" in again


def test_the_re_reading_keeps_the_runs_guarantee_and_says_so():
    from adbs_lab.results import rereading

    said = rereading.lines(VerdictPolicy(pairs=PAIRS), VerdictPolicy(pairs=PAIRS, delta=3.0), lambda v: [])
    assert said[1].startswith("re-read with δ = 3 points (the run's δ is 1 point): the same intervals, at the same "
                              "looks and levels, read against ±3 points; these and the run's verdicts above are all "
                              "true together with probability at least 95%, since the family's intervals cover "
                              "together whatever δ they are read against")
    assert rereading.lines(VerdictPolicy(pairs=PAIRS), VerdictPolicy(pairs=PAIRS), lambda v: []) == []


def test_another_reference_is_a_new_family_that_guarantees_nothing_with_the_runs(tmp_path, capsys):
    _finished(tmp_path)
    seed_plan(_prepared(tmp_path, "--plan", "--reference", "adb"))
    run, again = _parts(capsys.readouterr().out, "a new family, not the run's (other comparisons (another reference))")
    assert all(line in run for line in _sentences(VerdictPolicy(pairs=PAIRS)))
    assert "guarantees nothing jointly with the run's verdicts" in again and "baseline vs adb" in again


def test_a_command_of_another_seed_design_is_refused_naming_the_runs(tmp_path):
    _finished(tmp_path, "--seeds", "auto", "--max-seeds", "5")
    with pytest.raises(StudyInputError, match="holds a run of other seeds, looks or settings") as e:
        seed_plan(_prepared(tmp_path, "--plan"))
    assert "--seeds auto --max-seeds 5" in str(e.value)


def test_an_older_record_is_read_from_the_parent_runs_tags(tmp_path, capsys):
    """study.json from before it recorded the policy: the parent run's tags in the MLflow store decide (here δ = 2,
    which the command does not pass)."""
    p = _finished(tmp_path, policy=False)
    c = MlflowClient(p.tracking_uri)
    parent = c.create_run(c.create_experiment("ablation-smoke"), tags=VerdictPolicy(pairs=PAIRS, delta=2.0).tags())
    (p.dir / tracking_store.RUNS_FILE).write_text(json.dumps({"parent": parent.info.run_id}))
    seed_plan(_prepared(tmp_path, "--plan"))
    run, again = _parts(capsys.readouterr().out, "re-read with δ = 1 point (the run's δ is 2 points)")
    assert all(line in run for line in _sentences(VerdictPolicy(pairs=PAIRS, delta=2.0)))
    assert all(line in again for line in _sentences(VerdictPolicy(pairs=PAIRS)))


def test_without_a_record_of_the_policy_it_says_so(tmp_path):
    _finished(tmp_path, policy=False)
    with pytest.raises(StudyInputError, match="is recorded neither in its study.json nor in the MLflow store"):
        seed_plan(_prepared(tmp_path, "--plan"))
