import dataclasses

import pytest

from adbs.config import FIELDS, PRESETS, Config, ConfigError, coerce, field_doc, from_dict, preset


def test_every_field_has_a_docstring():
    missing = [name for name in FIELDS if not field_doc(name)]
    assert not missing, f"fields without a docstring: {missing}"


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
        ("abs_margin", "false", False),
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
    [("shots", "five"), ("shots", 2.5), ("abs_margin", "maybe"), ("alpha", True), ("dataset", 3), ("milestones", 5)],
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
            assert k in FIELDS, f"preset {name} has unknown key {k}"
            v = list(v) if isinstance(v, tuple) else v
            assert defaults[k] != v, f"preset {name} repeats the default of {k}"
        cfg = preset(name, data_root="/data")
        assert isinstance(cfg, Config)
    with pytest.raises(ConfigError, match="valid presets"):
        preset("cifar")


def test_derived_values():
    assert Config(variant="baseline").learn_margins is False
    assert Config(variant="baseline").effective_finetune_epochs == 0
    assert Config(variant="adb", alpha=0.05).effective_alpha == 0.0
    assert Config(variant="adb+ic", alpha=0.05).effective_alpha == 0.05


def test_round_trip_through_dict():
    cfg = preset("cub200", data_root="/d", seed=3)
    assert from_dict(cfg.to_dict()) == cfg
    assert dataclasses.replace(cfg) == cfg.replace()
