"""--config FILE (YAML or JSON) for `python -m adbs.run` and every study: precedence, unknown keys, best_config.json."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from adbs.config import Config, ConfigError, from_dict, load_file, resolve
from adbs_lab import study
from adbs_lab.driver import flags
from adbs_lab.driver import options
from adbs_lab.stores.paths import REPO_ROOT


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_yaml_and_json_read_fields_and_host_options(tmp_path):
    y = _write(tmp_path, "c.yaml", "alpha: 0.05\nmilestones: [30, 60]\nhost: savc\nsavc:\n  queue_size: 512\n"
                                   "alice.mix_times: 2\n")
    assert load_file(y) == {"alpha": 0.05, "milestones": (30, 60), "host": "savc", "savc.queue_size": 512,
                            "alice.mix_times": 2}
    j = _write(tmp_path, "c.json", json.dumps({"shots": "10", "abs_margin": False}))  # old names read as new
    assert load_file(j) == {"shots": 10, "abs_boundary": False}
    assert load_file(_write(tmp_path, "empty.yaml", "")) == {}


@pytest.mark.parametrize("name,text,fragment", [
    ("bad.yaml", "alpah: 0.1\n", "unknown config key 'alpah' (did you mean alpha?); valid keys: dataset"),
    ("bad.json", '{"savc": {"queu_size": 1}}', "did you mean savc.queue_size"),
    ("type.yaml", "shots: five\n", "shots must be an int"),
    ("list.yaml", "- alpha\n", "must hold a mapping"),
    ("broken.json", "{alpha: ", "is not valid JSON"),
    ("broken.yaml", "alpha: [0.1\n", "is not valid YAML"),
])
def test_bad_files_fail_with_the_config_error(tmp_path, name, text, fragment):
    path = _write(tmp_path, name, text)
    with pytest.raises(ConfigError) as e:
        load_file(path)
    assert fragment in str(e.value) and str(e.value).startswith(f"--config {path}")
    with pytest.raises(ConfigError, match="cannot read it"):
        load_file(str(tmp_path / "missing.yaml"))


def test_precedence_preset_file_flags():
    file = {"base_epochs": 3, "alpha": 0.05, "batch_size": 32}
    out = resolve("smoke", None, {"alpha": "0.02"}, file)
    assert out["base_epochs"] == 3 and out["alpha"] == 0.02 and out["batch_size"] == 32  # flag > file > preset
    assert out["sessions"] == 2  # the preset's, untouched by the file
    # a file's dataset picks the paper preset as --dataset does; flags still win over it
    paper = resolve("cpu", None, {"base_epochs": 5}, {"dataset": "cifar100", "data_root": "/d"})
    assert paper["backbone"] == "resnet12" and paper["base_epochs"] == 5
    # host options: the file's add to the host preset's; a typed one adds on top
    savc = resolve("cpu", None, {"savc.small_crops": 1}, {"host": "savc", "savc.queue_size": 256})
    assert json.loads(savc["host_options"]) == {"queue_size": 256, "small_crops": 1}


def test_a_whole_config_file_is_the_config_whatever_the_preset(tmp_path):
    """A study's best_config.json gives every field: it reproduces its trial, host options included."""
    trial = from_dict({"dataset": "cifar100", "data_root": "/d", "host": "savc", "savc.queue_size": 64,
                       "alpha": 0.03, "seed": 2, "split_seed": 2, "threads": 1})
    best = {"config_label": "alpha=0.03", "objective": "summary/val_avg_acc", "mean_over_seeds": 50.0, "seeds": 1,
            "config": json.loads(json.dumps(trial.to_dict()))}  # as results.write stores it
    path = _write(tmp_path, "best_config.json", json.dumps(best))
    for preset in ("cpu", "smoke", "cifar100"):
        assert from_dict(resolve(preset, None, {}, load_file(path))) == trial  # savc_cifar100's options unused
    assert from_dict(resolve("cpu", None, {"seed": 5}, load_file(path))) == trial.replace(seed=5)


@pytest.mark.slow
def test_single_run_takes_config_and_refuses_unknown_keys_before_compute(tmp_path):
    bad = _write(tmp_path, "bad.yaml", "base_epocs: 2\n")
    r = subprocess.run([sys.executable, "-m", "adbs.run", "--config", bad, "--out", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False)
    assert r.returncode == 2 and "did you mean base_epochs" in r.stderr and "base epoch" not in r.stdout
    assert len(r.stderr.strip().splitlines()) == 1


def test_study_options_read_the_file_once(tmp_path):
    path = _write(tmp_path, "c.yaml", "base_epochs: 3\nalpha: 0.05\nshots: 1\nseed: 4\n")
    opts = options.parse("t", argv=["--config", path, "--set", "alpha=0.02", "--smoke"])[0]
    assert opts.config_file == path and dict(opts.config_values) == {"base_epochs": 3, "alpha": 0.05, "shots": 1,
                                                                    "seed": 4}
    base = opts.base_config()
    assert base["base_epochs"] == 3 and base["alpha"] == 0.02 and base["sessions"] == 2
    # keys the study sets itself (searched shots, seeds) are the study's, with a note; not an error
    plan = study.Plan(name="t", space={"variant": "adb+ic", "shots": [1, 5]}, space_source="tests")
    assert flags.study_owned(plan, opts) == ("shots", "seed")
    base, configs, _ = study.validate(plan, opts.replace(gpus_per_trial=0.0))
    assert "shots" not in base and {c.shots for c in configs} == {1, 5} and {c.seed for c in configs} == {0}
    bad = _write(tmp_path, "bad.yaml", "alhpa: 1\n")
    with pytest.raises(SystemExit):
        options.parse("t", argv=["--config", bad])


def test_config_is_a_frozen_field():
    opts = options.StudyOptions(config_values=(("alpha", 0.05),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.config_values = ()  # type: ignore[misc]
    assert opts.base_config()["alpha"] == 0.05 and Config().alpha == 0.01


@pytest.mark.slow
def test_paper_presets_hold_the_papers_two_settings_only():
    from adbs.config import PAPER_SETTINGS, PRESETS, host_preset

    assert PAPER_SETTINGS == {"alpha": 0.05, "batch_size": 128}
    for name in ("cifar100", "mini_imagenet", "cub200"):
        code, paper = PRESETS[name], PRESETS[f"{name}_paper"]
        assert {k: v for k, v in paper.items() if code.get(k, object()) != v} == PAPER_SETTINGS
        cfg = from_dict(resolve(f"{name}_paper", None, {"data_root": "/d"})).validate()
        assert (cfg.alpha, cfg.batch_size, cfg.dataset) == (0.05, 128, name)
        savc = host_preset("savc", f"{name}_paper")  # a host keeps its own dataset settings
        assert savc == {**PRESETS[f"savc_{name}"], **PAPER_SETTINGS}
    r = subprocess.run([sys.executable, "-m", "adbs.run", "--help"], capture_output=True, text=True, timeout=120,
                       cwd=REPO_ROOT, check=False)
    assert "cifar100_paper" in r.stdout


def test_a_dry_run_names_the_file_keys_the_study_sets_itself_as_the_run_does(tmp_path, capsys):
    """kshot_grid searches shots and takes seed from --seeds: a --config file setting them gets the same note in
    the dry run as in the run (adbs_lab/driver/preflight.py: note_owned, printed by both)."""
    from tests.helpers.scripts import in_process

    f = tmp_path / "best.yaml"
    f.write_text("shots: 5\nseed: 3\nalpha: 0.02\n")
    r = in_process(capsys, [sys.executable, str(REPO_ROOT / "studies" / "kshot_grid.py"), "--config", str(f),
                            "--smoke", "--storage", str(tmp_path / "runs"), "--tracking-uri",
                            f"sqlite:///{tmp_path / 'm.db'}", "--dry-run"])
    assert r.returncode == 0, r.stderr
    assert f"note: --config {f}: this study sets shots, seed itself" in r.stdout and "dry run: study" in r.stdout


@pytest.mark.parametrize("name,text,fragment", [
    ("dup.yaml", "alpha: 0.05\nseed: 1\nalpha: 0.1\n", "key 'alpha' is given twice (lines 1 and 3); give it once"),
    ("dup.json", '{"alpha": 0.05, "alpha": 0.1}', "key 'alpha' is given twice"),
    ("dup-nested.yaml", "host: savc\nsavc:\n  queue_size: 512\n  queue_size: 64\n", "key 'queue_size' is given twice"),
    ("both.yaml", "host: savc\nsavc: {queue_size: 512}\nsavc.queue_size: 1024\n",
     "savc.queue_size is given twice"),
    ("both.json", '{"host": "savc", "savc.queue_size": 1024, "savc": {"queue_size": 512}}',
     "savc.queue_size is given twice"),
    ("scalar.yaml", "savc: 5\n", "host options of savc must be a mapping of its options"),
])
def test_a_file_saying_one_key_twice_or_a_host_without_a_mapping_is_refused(tmp_path, name, text, fragment):
    """Once: the last of two equal keys won in silence, and `savc: 5` got 'unknown config key' with every key."""
    path = _write(tmp_path, name, text)
    with pytest.raises(ConfigError) as e:
        load_file(path)
    assert str(e.value).startswith(f"--config {path}: ") and fragment in str(e.value), str(e.value)
    assert "valid keys" not in str(e.value)


# _UniqueKeyLoader: the private YAML loader of adbs/config/file.py, tested directly (load_file refuses the test's
# keys before a merge key could show): a merge key followed by its own value is not a key given twice.
def test_a_yaml_merge_key_may_still_be_overridden(tmp_path):
    path = _write(tmp_path, "merge.yaml", "common: &c {alpha: 0.05, seed: 1}\nrun:\n  <<: *c\n  seed: 2\n")
    import yaml

    from adbs.config.file import _UniqueKeyLoader

    with open(path) as f:
        assert yaml.load(f.read(), Loader=_UniqueKeyLoader)["run"] == {"alpha": 0.05, "seed": 2}


@pytest.mark.parametrize("value,expected", [("1", True), ("0", False), ("true", True)])
def test_a_bool_in_a_file_reads_as_the_same_text_after_set(tmp_path, value, expected):
    """`abs_boundary: 1` was refused in a file while `--set abs_boundary=1` was taken: both take it now."""
    path = _write(tmp_path, "b.yaml", f"abs_boundary: {value}\n")
    assert load_file(path) == {"abs_boundary": expected}
    assert from_dict({"abs_boundary": value}).abs_boundary is expected
    with pytest.raises(ConfigError, match="abs_boundary must be a bool"):
        load_file(_write(tmp_path, "two.yaml", "abs_boundary: 2\n"))


@pytest.mark.parametrize("script", [None, "alpha_sweep.py"])
@pytest.mark.parametrize("flags,fragment", [
    (["--config", "A", "--config", "B"], "argument --config: given twice"),
    (["--host", ""], "argument --host: an empty host names none; valid hosts: baseline, alice, orco, savc"),
    (["--dataset", ""], "argument --dataset: an empty dataset names none; valid datasets: synthetic"),
])
def test_config_twice_and_an_empty_host_are_refused(tmp_path, capsys, script, flags, fragment):
    """--config a.yaml --config b.yaml once dropped a.yaml in silence; --host "" once meant the baseline."""
    from tests.helpers.scripts import in_process

    a, b = _write(tmp_path, "a.yaml", "alpha: 0.05\n"), _write(tmp_path, "b.yaml", "seed: 3\n")
    flags = [{"A": a, "B": b}.get(f, f) for f in flags]
    head = ["-m", "adbs.run", "--out", str(tmp_path / "o.json")] if script is None else [
        str(REPO_ROOT / "studies" / script), "--storage", str(tmp_path / "runs")]
    r = in_process(capsys, [sys.executable, *head, *flags, "--dry-run"])
    assert r.returncode == 2 and fragment in r.stderr, r.stderr
    assert "dry run" not in r.stdout
