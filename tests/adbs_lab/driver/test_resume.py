"""--resume across a move of the code (adbs_lab/driver/resume.py: moved_code): the globals Ray Tune's state pickles
name, read without unpickling, and those of adbs/adbs_lab this version lacks."""

from __future__ import annotations

import json
import pickle

import pytest
from tests.helpers.pickles import flattened, renamed

from adbs_lab.driver import resume
from adbs_lab.driver.tracker import MlflowTracker
from adbs_lab.records.objectives import Objective, ObjectiveError
from adbs_lab.search.searcher import StudySearch
from adbs_lab.stores import study_folder
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stores.study_folder import StudyFolder


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_globals_a_pickle_names_are_read_without_unpickling(protocol):
    # two names of one module: from protocol 4 the second STACK_GLOBAL takes the module's name from the memo
    data = pickle.dumps([StudySearch, {"k": Objective}, StudySearch, MlflowTracker, ObjectiveError],
                        protocol=protocol)
    assert resume.pickled_globals(data) == [("adbs_lab.search.searcher", "StudySearch"),
                                            ("adbs_lab.records.objectives", "Objective"),
                                            ("adbs_lab.driver.tracker", "MlflowTracker"),
                                            ("adbs_lab.records.objectives", "ObjectiveError")]


@pytest.mark.parametrize("module, name, missing", [
    ("adbs_lab.search.searcher", "StudySearch", False), ("adbs_lab.driver.tracker", "MlflowTracker", False),
    ("adbs_lab.driver.progress", "Progress", False), ("adbs.config.schema", "Config", False),
    ("adbs_lab.search", "StudySearch", True),  # the package is there, the class is not (its face imports nothing)
    ("adbs_lab.tracking", "MlflowTracker", True), ("adbs_lab.progress", "Progress", True),
    ("adbs_lab.search.searcher", "Gone", True), ("adbs_lab.study.x", "Y", True), ("adbs_lab.tracking", "", True),
    ("collections", "Gone", False)])  # not ours: Tune's own problem, not a move of this code
def test_code_this_version_lacks_is_found_without_importing_it(module, name, missing):
    assert resume.missing_code(module, name) is missing


def _saved_study(tmp_path, files: dict[str, bytes]) -> StudyFolder:
    exp = tmp_path / "runs" / "s" / "tune"
    exp.mkdir(parents=True)
    for name, data in files.items():
        (exp / name).write_bytes(data)
    return StudyFolder(str(tmp_path / "runs"), "s")


def test_a_state_saved_before_a_move_is_refused_with_the_version_to_resume_it_with(tmp_path):
    now = pickle.dumps({"searcher": StudySearch, "objective": Objective}, protocol=5)
    assert resume.moved_code(_saved_study(tmp_path / "now", {"searcher-state-1.pkl": now})) is None
    where = _saved_study(tmp_path / "then", {"searcher-state-1.pkl": renamed(now, flattened)})
    file, code = resume.moved_code(where)
    assert file.name == "searcher-state-1.pkl" and code == "adbs_lab.search.StudySearch"
    line = resume.moved_message(file, code, {"code_version": "0cad34c-dirty"})
    assert "names adbs_lab.search.StudySearch, which this version of the code does not have" in line
    assert "git checkout 0cad34c (its changes were not committed)" in line and "\n" not in line


def test_pickles_inside_tunes_json_state_are_read_too(tmp_path):
    # experiment_state-*.json keeps a trial's config as a hex cloudpickle, inside a JSON string (the trial's state)
    blob = renamed(pickle.dumps(Objective, protocol=5), flattened).hex()
    state = {"trial_data": [[json.dumps({"config": {"_type": "CLOUDPICKLE_FALLBACK", "value": blob}}), "{}"]]}
    where = _saved_study(tmp_path, {"experiment_state-1.json": json.dumps(state).encode()})
    assert resume.moved_code(where)[1] == "adbs_lab.objectives.Objective"


def test_a_damaged_state_is_left_to_the_damage_check(tmp_path):
    where = _saved_study(tmp_path, {"tuner.pkl": b"\x80\x05\x95", "searcher-state-1.pkl": b""})
    assert resume.moved_code(where) is None


def _resumable(tmp_path, pruner: str, share: float, **more) -> StudyFolder:
    """An interrupted study's folder as check_resume reads it: study.json with its settings, Tune's state (a
    tuner.pkl naming no code), its optuna.db holding the study and its runs file."""
    import optuna

    where = _saved_study(tmp_path, {"tuner.pkl": pickle.dumps({}, protocol=5)})
    settings = {"pruner": pruner, "sampler_seed": 0, "cpus_per_trial": None, "objectives": [], "shadow_share": share,
                **more}
    (where.local / "study.json").write_text(json.dumps({"study": "s", "fingerprint": "f", "settings": settings,
                                                        "command": "studies/s.py"}))
    (where.local / "mlflow_runs.json").write_text("{}")
    optuna.create_study(study_name="s", storage=f"sqlite:///{where.local / 'optuna.db'}")
    return where


@pytest.mark.parametrize("pruner, accepted", [("none", True), ("median", False), ("auto", False)])
def test_another_shadow_share_is_refused_on_resume_only_where_the_study_can_prune(tmp_path, monkeypatch, pruner,
                                                                                 accepted):
    """--shadow-share 0.5 on the --resume of a study saved with --shadow-share 0.2: with --pruner none no trial is
    stopped, so none ran on as a shadow and the share decided nothing: accepted (it was refused); where the study
    prunes, refused, saying why. The dry run reads the same check (adbs_lab/driver/preflight.py)."""
    from types import SimpleNamespace

    from adbs_lab.records import objectives
    from adbs_lab.driver.options import StudyInputError

    # check_resume binds study 's' to this test's files in a registry of the process (study_folder.rebind): left
    # there, a later test's searcher of a study 's', unpickled in the same worker, would open this test's optuna.db
    monkeypatch.setattr(study_folder, "_REBOUND", {})  # private
    where = _resumable(tmp_path, pruner, 0.2)
    run = SimpleNamespace(resume=True, optuna_storage=None, cpus_per_trial=None, shadow_share=0.5, reference=None,
                          max_concurrent=None, gpus_per_trial=None, max_failures=2)
    p = SimpleNamespace(run=run, verdicts=VerdictPolicy(), where=where, fingerprint="f", pruner=pruner, sampler_seed=0,
                        objectives=objectives.effective(()), optuna_url=f"sqlite:///{where.local / 'optuna.db'}",
                        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    if accepted:
        assert resume.check_resume(p)["shadow_share"] == 0.2  # the study's settings, as saved
        return
    with pytest.raises(StudyInputError) as e:
        resume.check_resume(p)
    said = str(e.value)
    assert "--shadow-share 0.5 differs from the study's --shadow-share 0.2" in said
    assert f"the share already decided which of the trials its pruner (--pruner {pruner}) stopped ran on" in said
    assert "rerun with --shadow-share 0.2" in said
    p.run.shadow_share = 0.2
    assert resume.check_resume(p)["shadow_share"] == 0.2


@pytest.mark.parametrize("given, refused", [({"resolve": 0.5}, "--resolve 0.5 differs from the study's --resolve 1 "),
                                            ({"error_rate": 0.1},
                                             "--error-rate 0.1 differs from the study's --error-rate 0.05 "),
                                            ({"error_rate": 0.05000001},  # not ":g"'s "0.05 differs from 0.05"
                                             "--error-rate 0.05000001 differs from the study's --error-rate 0.05 "),
                                            ({"reference": "alpha=0.1"},
                                             "--reference alpha=0.1 differs from the study's --reference (not given)"),
                                            ({}, None)])
def test_another_delta_error_rate_or_reference_is_refused_on_resume(tmp_path, monkeypatch, given, refused):
    """A --seeds auto study's searcher took its looks at the δ, α and comparisons it started with, and the summary
    would replay them at this run's: --resume with another --resolve, --error-rate or --reference is refused, naming
    the value to rerun with; the same ones are accepted. A study.json from before they were recorded is not checked
    for them."""
    from types import SimpleNamespace

    from adbs_lab.records import objectives
    from adbs_lab.driver.options import StudyInputError

    monkeypatch.setattr(study_folder, "_REBOUND", {})  # private: see the test above
    where = _resumable(tmp_path, "none", 0.2, error_rate=0.05, resolve=1.0, reference=None)
    run = SimpleNamespace(resume=True, optuna_storage=None, cpus_per_trial=None, shadow_share=0.2,
                          reference=given.get("reference"), max_concurrent=None, gpus_per_trial=None, max_failures=2)
    verdicts = VerdictPolicy(alpha=given.get("error_rate", 0.05), delta=given.get("resolve", 1.0))
    p = SimpleNamespace(run=run, verdicts=verdicts, where=where, fingerprint="f",
                        pruner="none", sampler_seed=0,
                        objectives=objectives.effective(()), optuna_url=f"sqlite:///{where.local / 'optuna.db'}",
                        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    if refused is None:
        assert resume.check_resume(p)["resolve"] == 1.0
        return
    with pytest.raises(StudyInputError) as e:
        resume.check_resume(p)
    assert refused in str(e.value) and "a study cannot change it midway" in str(e.value)
    old = _resumable(tmp_path / "old", "none", 0.2)  # study.json without resolve and reference: not checked
    monkeypatch.setattr(study_folder, "_REBOUND", {})  # private: see the test above
    assert not {"resolve", "error_rate"} & set(resume.check_resume(SimpleNamespace(**{**vars(p), "where": old})))
