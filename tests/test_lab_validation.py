"""Bad study input fails before anything starts, with a message saying what to change (no Ray here)."""

from __future__ import annotations

import pytest

from adbs.config import ConfigError
from adbs_lab import cli, metrics_keys as K, study, tracking
from adbs_lab.paths import DEFAULT_TRACKING_URI, REPO_ROOT
from search_spaces import kshot_grid

PLAN = study.Plan(name="t", space={"variant": "adb+ic", "shots": [1, 5]}, space_source="tests")


def _args(*flags):
    return cli.parser("t").parse_args([*flags, "--gpus-per-trial", "0"] if "--gpus-per-trial" not in flags else list(flags))


def test_unknown_set_key_and_wrong_type():
    with pytest.raises(ConfigError, match="unknown config key 'alhpa'.*alpha"):
        study.validate(PLAN, _args("--set", "alhpa=0.1"))
    with pytest.raises(ConfigError, match="base_epochs must be an int"):
        study.validate(PLAN, _args("--set", "base_epochs=many"))
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        study.validate(PLAN, _args("--set", "alpha"))


def test_set_of_a_searched_key_is_refused():
    with pytest.raises(study.StudyInputError, match="this study searches shots"):
        study.validate(PLAN, _args("--set", "shots=3"))


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
    base = study.validate(plan, _args())
    assert base["variant"] == "adb+ic"


def test_gpu_request_without_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(study.StudyInputError, match="asks for GPUs but this machine has none.*--gpus-per-trial 0"):
        study.validate(PLAN, _args("--gpus-per-trial", "0.5"))
    args = cli.parser("t").parse_args([])
    study.validate(PLAN, args)
    assert args.gpus_per_trial == 0.0


def test_unreachable_tracking_uri():
    with pytest.raises(tracking.TrackingError, match="unreachable"):
        tracking.check_tracking_uri("http://127.0.0.1:9")
    with pytest.raises(tracking.TrackingError, match="relative"):
        tracking.check_tracking_uri("sqlite:///relative/mlflow.db")


def test_default_store_is_absolute_under_the_repo(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri(None) == DEFAULT_TRACKING_URI == f"sqlite:///{REPO_ROOT / 'mlflow' / 'mlflow.db'}"
    assert tracking.artifact_root(DEFAULT_TRACKING_URI) == (REPO_ROOT / "mlflow" / "artifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////x/y.db")
    assert tracking.tracking_uri(None) == "sqlite:////x/y.db"
    assert tracking.tracking_uri("http://h:5000") == "http://h:5000"


def test_objective_is_one_shared_constant():
    assert K.OBJECTIVE == "summary/val_avg_acc" and K.MODE == "max"


def test_core_library_never_imports_orchestration():
    import subprocess
    import sys

    code = ("import sys, adbs, adbs.config, adbs.trial, adbs.loops, adbs.hosts, adbs.data; "
            "bad = [m for m in ('ray', 'optuna', 'mlflow') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


BAD_INPUTS = [
    # (what is wrong, study flags, message fragment) — issue 7, point 4
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


def test_host_flag_picks_the_hosts_preset_and_options_fold_into_host_options():
    base = cli.base_overrides(_args("--host", "savc", "--set", "savc.queue_size=256"))
    assert base["host"] == "savc" and base["host_options"] == '{"queue_size": 256}'
    paper = cli.base_overrides(_args("--host", "alice", "--dataset", "cifar100", "--data-root", "/d"))
    assert paper["backbone"] == "resnet18_cifar" and paper["base_lr"] == 0.01  # alice_cifar100
    assert '"mix_times": 4' in paper["host_options"]
    with pytest.raises(ConfigError, match="option of host savc, but host is baseline"):
        cli.base_overrides(_args("--set", "savc.queue_size=256"))
    plan = study.Plan(name="t", space={"variant": "adb+ic"}, space_source="tests")
    study.validate(plan, _args("--smoke", "--host", "savc", "--set", "savc.small_crops=2"))  # a valid study
