import dataclasses

import pytest

from adbs.config import (
    FIELDS, PRESETS, Config, ConfigError, coerce, from_dict, option_keys, options_of, preset, shapes_base
)
from adbs.config.docs import field_doc
from adbs.hosts import host_names, options_class


def test_every_field_has_a_docstring():
    missing = [name for name in [*FIELDS, *option_keys()] if not field_doc(name)]
    assert not missing, f"fields without a docstring: {missing}"


@pytest.mark.parametrize("cls", [Config] + [options_class(h) for h in host_names()],
                         ids=["Config"] + [f"{h}.Options" for h in host_names()])
def test_every_field_declares_whether_it_shapes_the_base_session(cls):
    """Base[...] (in the cache key) or NotBase[...]: a new field cannot silently stay out of the key."""
    undeclared = [f.name for f in dataclasses.fields(cls) if f.name not in shapes_base(cls)]
    assert not undeclared, f"{cls.__name__} fields without Base[...] / NotBase[...]: {undeclared}"


def test_host_options_are_typed_checked_and_normalised():
    cfg = from_dict({"host": "savc", "savc.queue_size": "512", "savc.small_crops": 0})
    assert options_of(cfg).queue_size == 512 and cfg.host_options == '{"queue_size": 512}'  # defaults dropped
    assert from_dict(cfg.to_dict()) == cfg  # round trip through the flat dict (MLflow params, Tune)
    assert from_dict({"host": "savc", "host_options": "{'queue_size': 512}"}) == cfg  # str() of a dict, too
    with pytest.raises(ConfigError, match="did you mean savc.queue_size"):
        from_dict({"host": "savc", "savc.queu_size": 512})
    with pytest.raises(ConfigError, match="savc.queue_size must be an int"):
        from_dict({"host": "savc", "savc.queue_size": "many"})
    with pytest.raises(ConfigError, match="option of host savc, but host is alice"):
        from_dict({"host": "alice", "savc.queue_size": 512})
    with pytest.raises(ConfigError, match="valid choices: baseline"):
        from_dict({"host": "icarl"}).validate()
    with pytest.raises(ConfigError, match="savc.key_momentum must be in"):
        from_dict({"host": "savc", "savc.key_momentum": 1.5}).validate()


def test_unknown_key_lists_valid_keys_and_suggests():
    with pytest.raises(ConfigError) as e:
        from_dict({"alpah": 0.1})
    msg = str(e.value)
    assert "alpah" in msg and "did you mean alpha" in msg and "valid keys" in msg and "finetune_lr" in msg


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("alpha", "0.05", 0.05),
        ("alpha", 1, 1.0),
        ("shots", "10", 10),
        ("abs_boundary", "false", False),
        ("ways", "none", None),
        ("milestones", ["60", "80"], (60, 80)),
        ("milestones", "60,80,100", (60, 80, 100)),
        ("data_root", "/x", "/x"),
    ],
)
def test_coerce_parses_cli_strings(key, value, expected):
    assert coerce(key, value) == expected


@pytest.mark.parametrize(
    "key,value",
    [("shots", "five"), ("shots", 2.5), ("abs_boundary", "maybe"), ("alpha", True), ("dataset", 3), ("milestones", 5)],
)
def test_wrong_types_raise(key, value):
    with pytest.raises(ConfigError, match=key):
        coerce(key, value)


@pytest.mark.parametrize(
    "overrides,fragment",
    [
        ({"dataset": "imagenet"}, "valid choices: synthetic"),
        ({"backbone": "vit"}, "valid choices"),
        ({"variant": "adbs"}, "baseline, adb, adb+ic"),
        ({"alpha": 0.0}, "variant='adb'"),
        ({"alpha": -0.1, "variant": "adb"}, "alpha must be >= 0"),
        ({"base_lr": 0}, "base_lr must be > 0"),
        ({"base_epochs": -1}, "base_epochs must be > 0"),
        ({"shots": 0}, "shots must be > 0"),
        ({"val_fraction": 0.0}, "validation split is required"),
        ({"finetune_epochs": -2}, "finetune_epochs"),
        ({"dataset": "cifar100"}, "needs data_root"),
        ({"sessions": -1}, "sessions"),
    ],
)
def test_validate_rejects(overrides, fragment):
    with pytest.raises(ConfigError, match=None) as e:
        from_dict(overrides).validate()
    assert fragment in str(e.value)


def test_presets_hold_only_differences_and_resolve():
    defaults = Config().to_dict()
    for name, diff in PRESETS.items():
        for k, v in diff.items():
            if "." in k:  # a host option: known to its host, and not its default
                assert coerce(k, v) != getattr(options_class(k.split(".")[0])(), k.split(".", 1)[1]), (name, k)
                continue
            assert k in FIELDS, f"preset {name} has unknown key {k}"
            v = list(v) if isinstance(v, tuple) else v
            assert defaults[k] != v, f"preset {name} repeats the default of {k}"
        cfg = preset(name, data_root="/data")
        assert isinstance(cfg, Config)
    with pytest.raises(ConfigError, match="valid presets"):
        preset("cifar")


def test_derived_values():
    assert Config(variant="baseline").learn_boundaries is False
    assert Config(variant="baseline").effective_finetune_epochs == 0
    assert Config(variant="adb", alpha=0.05).effective_alpha == 0.0
    assert Config(variant="adb+ic", alpha=0.05).effective_alpha == 0.05


def test_round_trip_through_dict():
    cfg = preset("cub200", data_root="/d", seed=3)
    assert from_dict(cfg.to_dict()) == cfg
    assert dataclasses.replace(cfg) == cfg.replace()


def test_renamed_fields_keep_working():
    """m has one name (boundary) in code and docs; the fields' old names are read as the new ones."""
    from adbs.config import ConfigError, from_dict, resolve
    from adbs.run import build_parser

    cfg = from_dict({"abs_margin": False, "new_margin_init": "one", "margin_weight_decay": "false"})
    assert (cfg.abs_boundary, cfg.new_boundary_init, cfg.boundary_weight_decay) == (False, "one", False)
    assert resolve("cpu", None, {"new_margin_init": "abs_mean"})["new_boundary_init"] == "abs_mean"
    assert build_parser().parse_args(["--abs-margin", "false"]).overrides == [("abs_margin", "false")]  # read as abs_boundary
    with pytest.raises(ConfigError, match="old name of 'abs_boundary'"):
        from_dict({"abs_margin": False, "abs_boundary": True})


# --- values within what torch, numpy and the OS accept ---------------------------------------------------------


@pytest.mark.parametrize("args,fragment", [
    (["--seed", "100000000000000000000000"], "seed=100000000000000000000000 is out of range; allowed: "
                                             "-9223372036854775..18446744073709550"),
    (["--seed", "18446744073709551"], "seed=18446744073709551 is out of range"),  # seed * 1000 + k overflows
    (["--threads", "100000000000000000000000"], "threads=100000000000000000000000 is out of range; allowed: "
                                                "1..2147483647"),
    (["--threads", "0"], "threads=0 is out of range; allowed: 1..2147483647"),
    (["--synthetic-seed", "-1"], "synthetic_seed=-1 is out of range; allowed: >= 0"),
    (["--split-seed", "-1"], "split_seed=-1 is out of range; allowed: >= 0"),
])
def test_values_torch_or_numpy_refuse_are_refused_by_the_dry_run(tmp_path, capsys, args, fragment):
    """They once passed the dry run and ended in tracebacks from torch.manual_seed, torch.set_num_threads or
    numpy's SeedSequence inside the run."""
    import sys

    from tests.helpers.scripts import in_process

    out = tmp_path / "never.json"
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--out", str(out), *args,
                            "--dry-run"], cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and fragment in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_the_range_checks_cap_nothing_that_runs():
    """The bounds are torch's and numpy's own: the extreme seeds pass validation and seed torch (the derived
    seeds included), large split and benchmark seeds seed numpy."""
    import numpy as np
    import torch

    from adbs.config import SEED_MAX, SEED_MIN, SEED_SPAN

    for seed in (SEED_MIN, -1, 0, SEED_MAX):
        from_dict({"seed": seed}).validate()
        for derived in (seed, seed * SEED_SPAN, seed * SEED_SPAN + SEED_SPAN - 1):
            torch.Generator().manual_seed(derived)
    big = 10**30
    from_dict({"split_seed": big, "synthetic_seed": big, "threads": 2**31 - 1}).validate()
    np.random.default_rng([big, 1, 0, 0xADB5])
    np.random.SeedSequence([big, 0x5EED])
