"""studies/ablation_path.py before anything runs: --dry-run prints the differences and the number of trials and
writes nothing; bad input (an unknown preset, a missing file, A the same as B, no knobs study to take B from, too
many differences for --smoke) exits 2 with a message naming what was wrong and how to fix it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from adbs.config import Config
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(REPO / "studies" / "ablation_path.py")]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.yaml").write_text("new_boundary_init: abs_mean\nfinetune_epochs: 2\n")
    (tmp_path / "b.yaml").write_text("new_boundary_init: one\nfinetune_epochs: 0\n")
    return tmp_path


def _run(capsys, tmp_path, *flags):
    return in_process(capsys, [*SCRIPT, *flags, "--storage", str(tmp_path / "runs"),
                               "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])


def test_dry_run_prints_the_differences_and_trials_and_writes_nothing(capsys, files):
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "2 differences (new_boundary_init, finetune_epochs)" in r.stdout
    # 2 candidates on 3-5 seeds, then the 3 configurations of the path on the 3 confirmation seeds 5 6 7
    assert "15-19 trials: the race 6-10" in r.stdout and "10 without racing" in r.stdout
    assert "the confirmation 9 at most (the 3 configurations of the path on seeds 5 6 7)" in r.stdout
    assert not (files / "runs").exists() or not [f for f in (files / "runs").rglob("*") if f.is_file()]


def test_default_b_is_the_latest_knobs_study(capsys, tmp_path):
    best = tmp_path / "runs" / "knobs" / "best_config.json"
    best.parent.mkdir(parents=True)
    best.write_text(json.dumps({"config_label": "x", "objective": "summary/val_avg_acc", "mean_over_seeds": 1.0,
                                "seeds": 1, "config": Config(variant="adb+ic", alpha=0.01).to_dict()}))
    r = _run(capsys, tmp_path, "--smoke", "--set", "alpha=0.05", "--dry-run")
    assert r.returncode == 2 and "--smoke runs at most 2 differences" in r.stderr  # the full config differs more
    r = _run(capsys, tmp_path, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert f"-> {best}" in r.stdout


@pytest.mark.parametrize("flags, said", [
    (["--from", "no_such_preset_or_file", "--to", "cpu"], "no such file, and not a preset name"),
    (["--from", "missing/a.yaml", "--to", "cpu"], "--from missing/a.yaml: no such file"),
    (["--from", str(REPO / "docs"), "--to", "cpu"], f"--from {REPO / 'docs'} is a folder"),  # was "no such file"
    (["--from", "cpu", "--to", "cpu"], "are the same configuration"),
    (["--from", "cpu", "--released", "--to", "cpu"], "cannot go with --from"),
    ([], "no knobs study in"),
    (["--to", "cpu", "--seeds", "auto"], "pass --seeds with a list"),
])
def test_bad_input_exits_2_before_anything(capsys, tmp_path, flags, said):
    r = _run(capsys, tmp_path, *flags, "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_resume_without_an_earlier_run_exits_2_as_its_dry_run_does(capsys, files, dry):
    """A run with --resume and nothing to continue started the path from nothing, while its dry run refused."""
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"), "--resume", *dry)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--resume: no earlier run of ablation_path to continue" in r.stderr
    assert not (files / "runs").exists() or not [f for f in (files / "runs").rglob("*") if f.is_file()]


def test_resume_dry_run_of_one_difference_looks_where_the_run_starts(capsys, tmp_path):
    """With one difference the path's first Tune run is the confirmation (a step of one candidate races nothing):
    the dry run with --resume accepts the earlier run there, as the run continues it."""
    (tmp_path / "a.yaml").write_text("alpha: 0.05\n")
    (tmp_path / "b.yaml").write_text("alpha: 0.1\n")
    earlier = tmp_path / "runs" / "ablation_path-smoke-confirm"  # a --smoke path's (adbs_lab/stores/paths.py: SMOKE)
    earlier.mkdir(parents=True)
    (earlier / "study.json").write_text(json.dumps({"study": "ablation_path", "fingerprint": "x"}))
    flags = ["--smoke", "--from", str(tmp_path / "a.yaml"), "--to", str(tmp_path / "b.yaml"), "--resume", "--dry-run"]
    r = _run(capsys, tmp_path, *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 differences (alpha)" in r.stdout


def test_the_path_runs_command_tag_holds_no_password():
    """The path's MLflow run tagged the command as typed, a --tracking-uri password included (the studies' runs
    record it redacted: adbs_lab/driver/preflight.py, logged_argv)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("adbs_ablation_path", REPO / "studies" / "ablation_path.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tag = mod.command_tag(("studies/ablation_path.py", "--tracking-uri", "http://bob:hunter22@mlflow:5000",
                           "--optuna-storage=postgresql://bob:hunter22@db/optuna"))
    assert "hunter22" not in tag and tag.count("***@") == 2


@pytest.mark.parametrize("flags", [[], ["--resume"], ["--dry-run"], ["--resume", "--dry-run"]])
def test_a_second_run_of_a_running_path_is_refused_naming_the_path(capsys, files, flags):
    """Two runs of one path on one storage: the second named the Tune run the first was in (study
    'ablation_path-s1l1') after printing its own start, and between two of the first's Tune runs it would start
    (or move aside) the others. The path's own folder is locked for the whole path: the second exits 2 at once,
    naming the path, its folder and what to do, and writes nothing."""
    from adbs_lab.stores.study_folder import StudyFolder

    storage = files / "runs"
    first = files / "a.yaml", files / "b.yaml"
    # what the first run holds while it races its first step: the path's lock, the Tune run's lock and study.json
    locks = [StudyFolder(str(storage), f).lock(f"studies/ablation_path.py --from {first[0]} --to {first[1]}")
             for f in ("ablation_path", "ablation_path-s1l1")]
    (storage / "ablation_path-s1l1").mkdir()
    (storage / "ablation_path-s1l1" / "study.json").write_text(json.dumps({"study": "ablation_path"}))
    before = {f: f.stat().st_mtime_ns for f in storage.rglob("*")}
    try:
        r = _run(capsys, files, "--from", str(first[0]), "--to", str(first[1]), *flags)
    finally:
        for lock in locks:
            lock.release()
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"ablation_path: study 'ablation_path' is already running in {storage} (PID" in r.stderr
    assert f"that run holds this path ({storage / 'ablation_path'}," in r.stderr
    assert "wait for it to end" in r.stderr and "--name NAME to run another path beside it" in r.stderr
    assert "ablation_path-s1l1' is already running" not in r.stderr and "each step races" not in r.stdout
    assert {f: f.stat().st_mtime_ns for f in storage.rglob("*")} == before


@pytest.mark.parametrize("name", ["confirm", "s1l1", "s12l3", "x-confirm", "x-s2l1"])
def test_a_name_that_is_another_paths_tune_run_is_refused(capsys, files, name):
    """--name confirm made the path's folder <storage>/ablation_path-confirm: the unnamed path's confirmation Tune run
    (and --name x-s2l1 that of --name x's second step). Its lock, held for the whole path, then refused that Tune run,
    and its table and report were written into that run's folder, to be moved aside by it. Such a name exits 2."""
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"), "--name", name,
             "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--name {name!r}" in r.stderr and "Tune run" in r.stderr
    assert not (files / "runs").exists()


@pytest.mark.parametrize("name", ["confirmed", "s1", "s1l", "x-s1l1y", "slow"])
def test_a_name_like_a_tune_runs_but_not_one_is_accepted(capsys, files, name):
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"), "--name", name,
             "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr


def test_resume_after_an_interrupt_while_claiming_a_tune_run_starts_that_run(files, monkeypatch):
    """Ctrl-C while the first Tune run claimed its folder (study.json written, no Tune state yet: 'no trial ran')
    left a run that --resume and its dry run accepted, and then the run exited 2 after its start line: 'no
    interrupted study to continue in .../ablation_path-s1l1'. Such a Tune run is started, not continued."""
    import importlib.util

    import pandas as pd

    from adbs_lab import study
    from adbs_lab.driver import options

    spec = importlib.util.spec_from_file_location("adbs_ablation_path", REPO / "studies" / "ablation_path.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    storage = files / "runs"
    opts, _ = options.parse(mod.parser(), argv=["--smoke", "--resume", "--storage", str(storage), "--tracking-uri",
                                                f"sqlite:///{files / 'mlflow.db'}"])
    base = opts.base_config()
    configs = {"finetune_epochs=0": {**base, "finetune_epochs": 0}}
    plan = mod.sub_plan({lab: mod.row_overrides(c, base) for lab, c in configs.items()})
    p = study.preflight(plan, mod.sub_opts(opts, "s1l1", [0]).replace(resume=False))
    p.where.cleanup()
    (storage / "ablation_path-smoke-s1l1").mkdir(parents=True)  # what the claim wrote before Ctrl-C (a --smoke path)
    (storage / "ablation_path-smoke-s1l1" / "study.json").write_text(json.dumps({"fingerprint": p.fingerprint}))
    assert study.held(p) == "claimed"
    started = []

    def run(plan, sopts):
        started.append(sopts.resume)
        trials = pd.DataFrame({"state": ["COMPLETE"], "label": ["finetune_epochs=0"], "seed": [0],
                               "val_avg_acc": [1.0]})
        return type("Outcome", (), {"code": 0, "trials": trials})()

    monkeypatch.setattr(study, "run", run)
    assert mod.Runner(opts, base)("s1l1", configs, [0]) == {"finetune_epochs=0": {0: 1.0}}
    assert started == [False]


NO_CONFIGURATION = [
    None,  # no trial of the study completed (adbs_lab/results/tables.py: write)
    {"config_label": None, "why": "no configuration completed every seed, and one missing a seed is never ranked",
     "not_ranked": [{"config_label": "alpha=0.01", "seeds": "1 of 2, 1 failed"}]},
    {"config_label": None, "why": "kshot_grid varies data conditions (ways, shots), not knobs"},
]


@pytest.mark.parametrize("best", NO_CONFIGURATION, ids=["null", "none ranked", "data conditions"])
def test_a_best_config_that_names_no_configuration_is_refused_in_words(capsys, tmp_path, best):
    """--to a best_config.json holding no configuration failed on its key config_label (or, null, read as no values:
    B the preset itself); it is refused naming why the study chose none, as --config FILE of adbs.run refuses it."""
    f = tmp_path / "knobs" / "best_config.json"
    f.parent.mkdir()
    f.write_text(json.dumps(best))
    r = _run(capsys, tmp_path, "--to", str(f), "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "names no configuration" in r.stderr and "config_label" not in r.stderr.replace(
        "a study's best_config.json", ""), r.stderr
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--config", str(f), "--dry-run"])
    assert r.returncode == 2 and "names no configuration" in r.stderr, r.stderr


def _smoke_best(tmp_path, **changes) -> Path:
    """The best_config.json of a --smoke knobs study: the smoke preset's full config, its budget included."""
    from adbs.config import from_dict, resolve

    f = tmp_path / "runs" / "knobs" / "best_config.json"  # the latest knobs study: the default B
    f.parent.mkdir(parents=True, exist_ok=True)
    config = {**from_dict(resolve("smoke", None, {})).to_dict(), **changes}
    f.write_text(json.dumps({"config_label": "x", "objective": "summary/val_avg_acc", "config": config}))
    return f


@pytest.mark.parametrize("flags", [[], ["--set", "base_epochs=3"], ["--from", "FILE", "--to", "cpu"]],
                         ids=["B from knobs --smoke", "one budget field set", "A from knobs --smoke"])
def test_an_end_at_the_smoke_budget_is_refused_without_smoke(capsys, tmp_path, flags):
    """A B taken from a --smoke run listed the smoke preset's budget (base epochs, images, sessions) as differences
    of the path; the path refuses it, naming the budget and the two ways out (--smoke, or B from a full run)."""
    f = _smoke_best(tmp_path, new_boundary_init="one")
    r = _run(capsys, tmp_path, *[str(f) if x == "FILE" else x for x in flags], "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "holds the smoke preset's budget (" in r.stderr and "pass --smoke" in r.stderr, r.stderr
    assert ("base_epochs=2" in r.stderr) == ("base_epochs=3" not in flags), r.stderr


def test_a_smoke_path_takes_an_end_at_its_budget_and_presets_are_taken_as_named(capsys, tmp_path):
    _smoke_best(tmp_path, new_boundary_init="one")
    r = _run(capsys, tmp_path, "--smoke", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "1 differences (new_boundary_init)" in r.stdout
    r = _run(capsys, tmp_path, "--from", "smoke", "--to", "cpu", "--dry-run")  # the budget is what is asked about
    assert r.returncode == 0 and "base_epochs" in r.stdout, r.stderr


@pytest.mark.parametrize("flags, said", [
    (["--confirm-seeds", "4", "5", "6"], "the confirmation seeds (4 5 6) include selection seeds (4)"),
    (["--confirm-seeds"], "the confirmation seeds (0 1 2 3 4) are the selection seeds"),
    (["--seeds", "0", "1", "2", "--confirm-seeds", "2", "1"], "the confirmation seeds (2 1) are the selection seeds"),
    (["--confirm-seeds", "7", "8", "9"], None),
])
def test_confirmation_seeds_among_the_selection_seeds_are_said(capsys, files, flags, said):
    """--confirm-seeds overlapping --seeds was taken without a word; the dry run (and the run) says the Δs on them
    are post-selection."""
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"), *flags, "--dry-run")
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stdout.splitlines() if line.startswith("note: the confirmation seeds")]
    assert notes == ([] if said is None else [notes[0]]) and (said is None or said in notes[0]), r.stdout
    assert said is None or "post-selection" in notes[0]


@pytest.mark.parametrize("name, value", [("ADBS_STORE_WAIT_S", "1e12"), ("ADBS_CACHE_LEASE_S", "nan")])
def test_a_wait_out_of_bounds_is_refused_before_the_path_starts(capsys, monkeypatch, files, name, value):
    """Each Tune run of the path refused it, but only once the path had started (its lock taken, its first line
    printed); the path's own checks refuse it first, as its dry run does."""
    monkeypatch.setenv(name, value)
    r = _run(capsys, files, "--from", str(files / "a.yaml"), "--to", str(files / "b.yaml"))
    assert r.returncode == 2 and f"{name}={value!r}" in r.stderr, r.stdout + r.stderr
    assert "differences (" not in r.stdout and not (files / "runs").exists()
