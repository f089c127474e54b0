"""Bad study input fails before anything starts, with a message saying what to change (no Ray here)."""

from __future__ import annotations

import dataclasses

import pytest

from adbs.config import ConfigError
from adbs.exits import Exit
from adbs_lab import study
from adbs_lab.records import metrics_keys as K
from adbs_lab.driver import options
from adbs_lab.stores import paths, tracking_store
from adbs_lab.driver import resume
from adbs_lab.stores.paths import DEFAULT_TRACKING_URI, REPO_ROOT
from search_spaces import kshot_grid

PLAN = study.Plan(name="t", space={"variant": "adb+ic", "shots": [1, 5]}, space_source="tests")


def _args(*flags):
    return options.parse("t", argv=[*flags, "--gpus-per-trial", "0"] if "--gpus-per-trial" not in flags
                         else list(flags))[0]


@pytest.mark.slow
def test_unknown_set_key_and_wrong_type():
    with pytest.raises(ConfigError, match="unknown config key 'alhpa'.*alpha"):
        study.validate(PLAN, _args("--set", "alhpa=0.1"))
    with pytest.raises(ConfigError, match="base_epochs must be an int"):
        study.validate(PLAN, _args("--set", "base_epochs=many"))
    with pytest.raises(SystemExit):  # argparse-style usage error: --set expects KEY=VALUE
        _args("--set", "alpha")


def test_set_of_a_searched_key_is_refused():
    with pytest.raises(study.StudyInputError, match="this study sweeps shots itself"):
        study.validate(PLAN, _args("--set", "shots=3"))


@pytest.mark.parametrize("flags,named", [(("--shots", "3"), "--shots 3: "), (("--set", "shots=3"), "--set shots=3: ")])
def test_a_searched_key_is_named_as_typed_with_what_to_run_instead(flags, named):
    """A field flag and --set share one list of overrides; the refusal names the one the user typed, and says
    what runs that one value (the study's argv is what the user typed: options.parse records it)."""
    opts = _args(*flags).replace(argv=("t.py", *flags))
    with pytest.raises(study.StudyInputError) as e:
        study.validate(PLAN, opts)
    assert str(e.value).startswith(named + "this study sweeps shots itself (shots 1, 5;"), e.value
    assert "so every trial sets it and the flag would be overridden" in str(e.value)
    assert "Drop the flag; to train that one configuration alone: python -m adbs.run --shots 3;" in str(e.value)


def test_unknown_search_space_key():
    plan = study.Plan(name="t", space={"shotz": [1, 5]}, space_source="search_spaces/x.py:GRID")
    with pytest.raises(ConfigError, match="search space search_spaces/x.py:GRID: unknown config key 'shotz'"):
        study.validate(plan, _args())


def test_ways_not_dividing_novel_classes():
    plan = study.Plan(name="t", space={"ways": [5, 7]}, space_source="tests")
    with pytest.raises(study.StudyInputError, match="ways=7"):
        study.validate(plan, _args())


def test_shots_larger_than_images_per_class():
    plan = study.Plan(name="t", space={"shots": [5, 100000]}, space_source="tests")
    with pytest.raises(study.StudyInputError, match="shots=100000"):
        study.validate(plan, _args())


def test_full_kshot_grid_is_valid_on_synthetic():
    plan = study.Plan(name="k", space=kshot_grid.GRID, space_source="tests")
    base, configs, _ = study.validate(plan, _args())
    assert base["variant"] == "adb+ic" and len(configs) == 12


def test_gpu_request_without_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(study.StudyInputError, match="asks for GPUs but this machine has none.*--gpus-per-trial 0"):
        study.validate(PLAN, _args("--gpus-per-trial", "0.5"))
    opts = options.parse("t", argv=[])[0]
    assert study.validate(PLAN, opts)[2] == 0.0 and opts.gpus_per_trial is None  # resolved, never mutated


def test_unreachable_tracking_uri():
    with pytest.raises(tracking_store.TrackingError, match="unreachable"):
        tracking_store.check_tracking_uri("http://127.0.0.1:9")
    with pytest.raises(tracking_store.TrackingError, match="relative"):
        tracking_store.check_tracking_uri("sqlite:///relative/mlflow.db")


def test_default_store_is_absolute_under_the_repo(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_store.tracking_uri(None) == DEFAULT_TRACKING_URI == f"sqlite:///{REPO_ROOT / 'mlflow' / 'mlflow.db'}"
    assert paths.artifact_root(DEFAULT_TRACKING_URI) == (REPO_ROOT / "mlflow" / "artifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////x/y.db")
    assert tracking_store.tracking_uri(None) == "sqlite:////x/y.db"
    assert tracking_store.tracking_uri("http://h:5000") == "http://h:5000"


def test_objective_is_one_shared_constant():
    assert K.OBJECTIVE == "summary/val_avg_acc" and K.MODE == "max"


@pytest.mark.slow
def test_core_library_never_imports_orchestration():
    import subprocess
    import sys

    code = ("import sys, adbs, adbs.config, adbs.trial, adbs.loops, adbs.hosts, adbs.data, adbs.run; "
            "bad = [m for m in ('ray', 'optuna', 'mlflow') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


BAD_INPUTS = [
    # (what is wrong, study flags, message fragment)
    ("unknown config key", ["--set", "alhpa=0.1"], "valid keys"),
    ("wrong type", ["--set", "shots=five"], "shots must be an int"),
    ("negative alpha", ["--set", "alpha=-0.1"], "alpha must be > 0"),
    ("zero lr", ["--set", "base_lr=0"], "base_lr must be > 0"),
    ("zero epochs", ["--set", "base_epochs=0"], "base_epochs must be > 0"),
    ("more sessions than classes", ["--set", "sessions=50"], "sessions"),
    ("unknown dataset", ["--set", "dataset=imagenet"], "valid choices: synthetic"),
    ("unknown backbone", ["--set", "backbone=vit"], "valid choices: convnet"),
    ("unknown variant", ["--set", "variant=adbs"], "baseline, adb, adb+ic"),
    ("missing dataset root", ["--dataset", "cifar100", "--data-root", "/nonexistent/data"], "cifar-100-python"),
    ("GPU without GPUs", ["--gpus-per-trial", "1"], "this machine has none"),
    ("unwritable storage", ["--storage", "/proc/adbs-runs"], "--storage"),
    ("unknown storage scheme", ["--storage", "ftp://host/runs"], "unsupported URL scheme 'ftp'"),
]


@pytest.mark.parametrize("what,flags,fragment", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_table(what, flags, fragment, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plan = study.Plan(name="t", space={"variant": "adb+ic"}, space_source="tests")
    with pytest.raises((ConfigError, study.StudyInputError, ValueError)) as e:
        study.validate(plan, _args(*flags))
    assert fragment in str(e.value), f"{what}: {e.value}"


def test_options_parsed_once_into_a_frozen_object():
    opts, extra = options.parse("t", options.Defaults(seeds=(0, 1), smoke_seeds=(0,), num_samples=4,
                                                      smoke_num_samples=2), argv=["--smoke", "--set", "alpha=0.05"])
    assert opts.seeds == (0,) and opts.num_samples == 2 and opts.overrides == (("alpha", "0.05"),)
    with pytest.raises(dataclasses.FrozenInstanceError):  # frozen: nothing downstream changes what the user asked for
        opts.seeds = (1,)
    opts, _ = options.parse("t", options.Defaults(seeds=(0, 1)), argv=["--seeds", "3"])
    assert opts.seeds == (3,) and opts.num_samples is None
    built = options.StudyOptions(seeds=(0, 1), smoke=True)  # the same object, without argparse
    assert built.base_config()["base_epochs"] == 2


def test_one_config_precedence_for_studies_and_the_single_run():
    """preset < study defaults < --dataset/--data-root/--set, in adbs.config.resolve, used by both entry points."""
    from adbs.config import PRESETS, resolve
    from adbs.run import build_parser

    assert resolve("cpu", {"base_epochs": 5}, {"base_epochs": "7"})["base_epochs"] == 7
    assert resolve("cpu", {"base_epochs": 5}, {})["base_epochs"] == 5
    assert resolve("cifar100", {"base_epochs": 5}, {})["base_epochs"] == 100  # study defaults: cpu preset only
    paper = resolve("cpu", None, {"dataset": "cifar100", "data_root": "/d"})
    assert paper["backbone"] == "resnet12" and paper["base_epochs"] == PRESETS["cifar100"]["base_epochs"]
    opts = options.parse("t", argv=["--dataset", "cifar100", "--data-root", "/d"])[0]
    assert opts.base_config() == paper
    run_args = build_parser().parse_args(["--dataset", "cifar100", "--data-root", "/d"])
    from adbs.config import cli

    assert resolve(run_args.preset, None, cli.overrides(run_args)) == paper


BAD_STUDY_INPUTS = [
    # (what a new user tried, flags, message fragment): each refused before Ray starts
    ("negative num-samples", ["--num-samples", "-1"], "--num-samples must be >= 1"),
    ("zero num-samples", ["--num-samples", "0"], "--num-samples must be >= 1"),
    ("duplicate seeds", ["--seeds", "0", "0"], "--seeds repeats 0"),
    ("negative seed", ["--seeds", "-1"], "--seeds -1: seeds must be >= 0"),
    ("nan momentum", ["--set", "momentum=nan"], "momentum must be a finite number"),
    ("inf temperature", ["--set", "temperature=inf"], "temperature must be a finite number"),
    ("nan base lr", ["--set", "base_lr=nan"], "base_lr must be a finite number"),
    ("nan alpha", ["--set", "alpha=nan"], "alpha must be a finite number"),
    ("slash in name", ["--name", "a/b"], "no '/', no '..'"),
    ("dots in name", ["--name", ".."], "no '/', no '..'"),
]


@pytest.mark.parametrize("what,flags,fragment", BAD_STUDY_INPUTS, ids=[r[0] for r in BAD_STUDY_INPUTS])
def test_bad_study_inputs_are_refused_before_ray(what, flags, fragment):
    opts = options.parse("t", options.Defaults(num_samples=4), argv=[*flags, "--gpus-per-trial", "0"])[0]
    plan = study.Plan(name="t", space={"variant": "adb+ic"}, space_source="tests")
    with pytest.raises((ConfigError, study.StudyInputError)) as e:
        study.validate(plan, opts)
    assert fragment in str(e.value), f"{what}: {e.value}"


@pytest.mark.slow
def test_run_out_folder_refused_before_training(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "adbs.run", "--preset", "smoke", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert r.returncode == 2 and "is a folder" in r.stderr and "base epoch" not in r.stdout


def test_no_cluster_at_auto_and_ctrl_c_during_ray_start(monkeypatch, tmp_path, capsys):
    """ray.init's ConnectionError and a Ctrl-C while Ray starts end in a message, not a traceback."""
    import ray

    opts = options.parse("t", argv=["--address", "auto", "--storage", str(tmp_path), "--gpus-per-trial", "0",
                                    "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])[0]
    p = study.preflight(PLAN, opts)

    def no_cluster(**kw):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.")

    monkeypatch.setattr(ray, "init", no_cluster)
    with pytest.raises(Exit) as e:
        study.cluster_slots(p)
    assert e.value.code == 2 and "--address auto: no Ray cluster there" in (e.value.message or "")

    p = study.preflight(PLAN, opts)  # the lock was released: the same study can start again

    def interrupted(**kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(ray, "init", interrupted)
    with pytest.raises(SystemExit) as e:
        study.cluster_slots(p)
    err = capsys.readouterr().err
    assert e.value.code == 130 and "interrupted (Ctrl-C) while starting Ray; no trial ran; start it again with:" in err


# _damaged_tune_state, _unloadable_state: private helpers of adbs_lab/driver/resume.py, tested directly (the
# state files a full disk or an older version leaves; the run-level refusal is in tests/adbs_lab/driver/test_outcome.py)
def test_damaged_tune_state_is_named(tmp_path):
    from adbs_lab.stores.study_folder import StudyFolder

    where = StudyFolder(str(tmp_path), "s")
    exp = tmp_path / "s" / "tune"
    exp.mkdir(parents=True)
    (exp / "experiment_state-2026.json").write_text("{}")
    assert resume._damaged_tune_state(where) is None
    (exp / "search_gen_state-2026.json").write_bytes(b"")  # what a full disk leaves
    file, e = resume._damaged_tune_state(where)
    assert file.name == "search_gen_state-2026.json" and not isinstance(e, (ImportError, AttributeError))


def test_a_tune_state_saved_by_code_that_moved_is_named_as_such(tmp_path, monkeypatch):
    """Tune pickles the searcher and callbacks by reference to their code: state saved by an earlier version
    whose modules moved does not load, and --resume says so instead of calling it damaged."""
    import pickle
    import sys

    from adbs_lab.stores.study_folder import StudyFolder

    (tmp_path / "gone_module.py").write_text("class Callback:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import gone_module

    exp = tmp_path / "runs" / "s" / "tune"
    exp.mkdir(parents=True)
    (exp / "tuner.pkl").write_bytes(pickle.dumps(gone_module.Callback()))
    (tmp_path / "gone_module.py").unlink()
    monkeypatch.delitem(sys.modules, "gone_module")
    file, e = resume._damaged_tune_state(StudyFolder(str(tmp_path / "runs"), "s"))
    assert file.name == "tuner.pkl" and isinstance(e, ImportError)
    text = resume._unloadable_state(file, e, cache="/c")
    assert "names code this version of adbs_lab does not have (ModuleNotFoundError" in text
    assert "adbs.code_version" in text and "without --resume" in text and "damaged" not in text
    assert "it is damaged (EOFError" in resume._unloadable_state(file, EOFError(), cache="/c")


@pytest.mark.parametrize("saved, error", [(b"cadbs_lab.tracking\nMlflowTracker\n.", ModuleNotFoundError),
                                           (b"cadbs_lab.search\nStudySearch\n.", AttributeError)])
def test_a_study_saved_before_adbs_lab_became_packages_is_refused_by_name(tmp_path, saved, error):
    """The addresses Ray Tune pickled before adbs_lab/ was split into packages (the tracker was
    adbs_lab.tracking.MlflowTracker, the searcher adbs_lab.search.StudySearch; a pickle names a class by module and
    name, as these protocol-0 GLOBAL opcodes do): --resume names the code as gone, never as damaged."""
    from adbs_lab.stores.study_folder import StudyFolder

    exp = tmp_path / "runs" / "s" / "tune"
    exp.mkdir(parents=True)
    (exp / ("tuner.pkl" if b"tracking" in saved else "searcher-state-2026.pkl")).write_bytes(saved)
    file, e = resume._damaged_tune_state(StudyFolder(str(tmp_path / "runs"), "s"))
    assert isinstance(e, error), e
    text = resume._unloadable_state(file, e, cache="/c")
    assert "names code this version of adbs_lab does not have" in text and "damaged" not in text


@pytest.mark.slow
def test_host_flag_picks_the_hosts_preset_and_options_fold_into_host_options():
    base = _args("--host", "savc", "--set", "savc.queue_size=256").base_config()
    assert base["host"] == "savc" and base["host_options"] == '{"queue_size": 256}'
    paper = _args("--host", "alice", "--dataset", "cifar100", "--data-root", "/d").base_config()
    assert paper["backbone"] == "resnet18_cifar" and paper["base_lr"] == 0.01  # alice_cifar100
    assert '"mix_times": 4' in paper["host_options"]
    with pytest.raises(ConfigError, match="option of host savc, but host is baseline"):
        _args("--set", "savc.queue_size=256").base_config()
    plan = study.Plan(name="t", space={"variant": "adb+ic"}, space_source="tests")
    study.validate(plan, _args("--smoke", "--host", "savc", "--set", "savc.small_crops=2"))  # a valid study
    # the single run resolves the same flags to the same config
    from adbs.config import resolve

    assert resolve("cpu", None, {"host": "savc", "savc.queue_size": 256}) == base


@pytest.mark.slow
def test_study_and_report_help_state_their_defaults_and_the_metrics(capsys):
    import subprocess
    import sys

    with pytest.raises(SystemExit):
        options.parser(None, options.Defaults(pruner="median", num_samples=4)).parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("(default: median;", "seed of the Optuna sampler (default: 0)", "last checkpoint (default: 2)",
                     "default: 5)"):
        assert fragment in text
    r = subprocess.run([sys.executable, str(REPO_ROOT / "studies" / "report.py"), "--help"], capture_output=True,
                       text=True, timeout=120)
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "(default: test_acc; one of " + ", ".join(K.SESSION_METRICS) + ")" in text


@pytest.mark.parametrize("url", ["s3://AKID:hunter2@bucket/runs?endpoint_override=127.0.0.1:1",
                                 "s3://bucket/runs?secret_key=hunter2&endpoint_override=127.0.0.1:1"])
def test_a_storage_url_with_credentials_is_refused(url):
    """Credentials in --storage ended up in the study's own files in the bucket (Ray Tune's tuner.pkl and searcher
    state hold the trainable's base-cache URL): refused before anything is written, the URL shown redacted."""
    from adbs_lab.driver.preflight import check_storage_writable

    with pytest.raises(options.StudyInputError, match="the URL carries credentials") as e:
        check_storage_writable(url)
    assert "hunter2" not in str(e.value) and "AWS_SECRET_ACCESS_KEY" in str(e.value)


def test_held_calls_a_run_stopped_before_tune_saved_anything_claimed_with_or_without_its_parent_run(tmp_path, tracking_uri):
    """held (adbs_lab/driver/preflight.py) says "unfinished" only where --resume can continue (Ray Tune's state
    saved: check_resume asks the same); a run stopped after `claim` wrote study.json (no parent run yet) or after
    its tracker made the parent run (KILLED by the interrupt) but before the Tuner saved its state is "claimed"."""
    import json
    from types import SimpleNamespace

    from adbs_lab.stores.study_folder import StudyFolder

    uri = tracking_uri
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "study.json").write_text(json.dumps({"fingerprint": "f1"}))
    p = SimpleNamespace(where=StudyFolder(str(tmp_path), "t"), fingerprint="f1", tracking_uri=uri)
    assert study.held(p) == "claimed"
    client = tracking_store.client(uri)
    parent = client.create_run(client.create_experiment("t")).info.run_id
    client.set_terminated(parent, "KILLED")
    (folder / tracking_store.RUNS_FILE).write_text(json.dumps({"parent": parent, "trials": {}, "ended": {}}))
    assert study.held(p) == "claimed"
    (folder / "tune").mkdir()
    (folder / "tune" / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    assert study.held(p) == "unfinished"
    client.set_terminated(parent, "FINISHED")
    assert study.held(p) == "finished"
    assert study.held(SimpleNamespace(where=p.where, fingerprint="f2", tracking_uri=uri)) is None
