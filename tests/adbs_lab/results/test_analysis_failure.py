"""An analysis drawn after the trials never sinks a study or a report: a figure or the importance ranking that raises
is one line in report.md (and the output), the rest is drawn (adbs_lab/results/run_files.py: guarded). Also: a report
across studies of different objectives names no best, and says why; figures whose artifacts are gone are named."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from adbs_lab.results import from_store
from adbs_lab.records import objectives
from adbs_lab.results import run_files
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.trial_records import CONFIG_COLUMNS
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.policy import Standing
from tests.helpers.fakes import importance_trials



IMPORTANCE_NOT_DRAWN = "importance analysis (importance.md and its figures): not drawn"


def _constant_search() -> tuple[pd.DataFrame, pd.DataFrame]:
    """18 configurations of two searched parameters whose objective is the same number in every trial: fANOVA
    raises (zero total variance in its forest)."""
    trials = importance_trials(n_a=6, n_b=3).assign(val_avg_acc=50.0, trial_id=lambda t: [f"t{i}" for i in range(len(t))],
                                          base_epochs=2, base_epochs_run=2)
    trials = trials.assign(**{c: None for c in CONFIG_COLUMNS if c not in trials})  # trials.parquet's columns
    sessions = pd.DataFrame([{"trial_id": t.trial_id, "state": K.COMPLETE, "label": t.label, "seed": t.seed,
                              "session": s, "test_acc": 50.0, "val_acc": 50.0} for t in trials.itertuples()
                             for s in (0, 1)])
    return sessions, trials


def test_an_analysis_that_raises_is_a_line_in_report_md_and_the_rest_is_drawn(tmp_path, capsys):
    sessions, trials = _constant_search()
    run_files.study_figures("knobs", sessions, trials, tmp_path / "any")  # raised before (fANOVA's RuntimeError)
    not_drawn: list[str] = []
    figs = run_files.study_figures("knobs", sessions, trials, tmp_path, not_drawn=not_drawn)
    assert "knobs_sessions.png" in {f.name for f in figs}  # the figures that could be drawn are
    assert len(not_drawn) == 1 and not_drawn[0].startswith("importance analysis")
    assert "RuntimeError" in not_drawn[0] and "\n" not in not_drawn[0]
    assert f"warning: {not_drawn[0]}" in capsys.readouterr().out
    report = run_files.write_study_report(tmp_path, study="knobs", table=pd.DataFrame(), trials=trials, best=None,
                                          figures=figs, not_drawn=not_drawn).read_text()
    assert "## Not drawn" in report and not_drawn[0] in report


def test_a_report_that_fails_to_write_does_not_raise(tmp_path):
    lines: list[str] = []
    assert run_files.guarded("report.md", lambda: 1 / 0, lines) is None
    assert lines == ["report.md: not drawn (ZeroDivisionError: division by zero)"]


def _study(name: str, objs: list[str], trials: pd.DataFrame, run_id: str) -> from_store.Recorded:
    parent = SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name), data=SimpleNamespace(tags={}))
    return from_store.Recorded(parent, name, pd.DataFrame(), trials, None, None, objectives.parse(objs))


def test_no_best_across_studies_that_optimised_different_objectives():
    t = pd.DataFrame([{"label": "a", "state": K.COMPLETE, "val_avg_acc": 50.0, "d_cs": 0.5}])
    same = [_study("a", ["val_avg_acc:max"], t, "1" * 32), _study("b", ["val_avg_acc:max"], t, "2" * 32)]
    assert from_store.shared_objectives(same) == (objectives.parse(["val_avg_acc:max"]), None)
    other = [_study("a", ["val_avg_acc:max"], t, "1" * 32), _study("b", ["d_cs:max"], t, "2" * 32)]
    objs, why = from_store.shared_objectives(other)
    assert objs is None and "a: val_avg_acc:max; b: d_cs:max" in why
    savings = run_files.pruning_savings(t.assign(base_epochs=2, base_epochs_run=2))
    md = run_files.report_markdown(study="a + b", table_md="", best=None, savings=savings, no_best=why)
    assert why in md and "(no completed trials)" not in md


def test_figures_whose_artifacts_are_gone_are_named(tmp_path):
    """The ablation's t-SNE and similarity figures need each trial's embeddings.json; a report from a store whose
    artifacts were deleted says which figures were not drawn and why."""
    trials = pd.DataFrame([{"trial_id": f"t{i}", "label": "baseline", "state": K.COMPLETE, "seed": i,
                            "keep_embeddings": True, K.EMBEDDINGS: None} for i in range(2)])
    sessions = pd.DataFrame([{"trial_id": "t0", "state": K.COMPLETE, "label": "baseline", "seed": 0, "session": 0,
                              "test_acc": 50.0}])
    not_drawn: list[str] = []
    run_files.study_figures("ablation", sessions, trials, tmp_path, not_drawn=not_drawn)
    assert any(line.startswith("t-SNE and prototype-similarity figures: 2 of 2 trials") and "not drawn" in line
               for line in not_drawn), not_drawn


def _parent(name: str = "knobs") -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(run_id="f" * 32, run_name=f"{name} 2026-01-01 00:00"),
                           data=SimpleNamespace(tags={"adbs.command": f"studies/{name}.py"}))


def test_a_study_whose_analysis_fails_still_writes_its_report(tmp_path):
    """The study's own summary (adbs_lab/driver/summarise.py): the figures and report.md after the tables; the
    tracker is a stand-in (what is tested is our summary, not MLflow), and the study has no notes above the tables
    (adbs_lab/results/notes.py, tested in tests/adbs_lab/results/test_study_notes.py)."""
    from adbs_lab.driver import summarise

    sessions, trials = _constant_search()
    p = SimpleNamespace(plan=SimpleNamespace(name="knobs", order=None), dir=tmp_path,
                        experiment="knobs", notes=(),
                        objectives=objectives.DEFAULT, tracking_uri="sqlite:///m.db", base_values={},
                        conditions=(), reference=None, seeding=SeedList((0,)))
    tracker = SimpleNamespace(client=SimpleNamespace(get_run=lambda _: _parent()), parent_run_id="f" * 32)
    out = SimpleNamespace(sessions=sessions, trials=trials, table=pd.DataFrame(), best=None, pareto=None,
                          standing=Standing())
    files = summarise.figures_and_report(p, tracker, out)
    assert tmp_path / "report.md" in files and IMPORTANCE_NOT_DRAWN in (tmp_path / "report.md").read_text()


def test_a_report_from_the_store_whose_analysis_fails_is_written(tmp_path):
    """studies/report.py's writer (adbs_lab/results/from_store.py: write) on the same trials."""
    sessions, trials = _constant_search()
    study = from_store.Recorded(_parent(), "knobs", sessions, trials, None, None)
    files = from_store.write(study, pd.DataFrame(), tmp_path, fmt="text", uri="sqlite:///m.db", paper=False)
    assert tmp_path / "report.md" in files and IMPORTANCE_NOT_DRAWN in (tmp_path / "report.md").read_text()
