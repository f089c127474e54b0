"""Search spaces: every key is a Config field of the right type; grid/sampled handling."""

from __future__ import annotations

import pytest
from optuna.distributions import FloatDistribution

from adbs.config import FIELDS, Config, ConfigError
from adbs_lab.search import space as sp
from adbs_lab.records import tune_keys
from search_spaces import ablation, alpha_sweep, kshot_grid

SPACES = {
    "alpha_sweep.SPACE": alpha_sweep.SPACE,
    "alpha_sweep.GRID": alpha_sweep.GRID,
    "alpha_sweep.SMOKE_GRID": alpha_sweep.SMOKE_GRID,
    "kshot_grid.GRID": kshot_grid.GRID,
    "kshot_grid.SMOKE_GRID": kshot_grid.SMOKE_GRID,
    "ablation.SPACE": ablation.SPACE,
}


@pytest.mark.parametrize("name", SPACES)
def test_every_key_is_a_config_field(name):
    for key in SPACES[name]:
        assert key in FIELDS, f"{name}: {key!r} is not an adbs.config.Config field"
    sp.check(SPACES[name], source=name)


@pytest.mark.parametrize("rows", [ablation.ROWS, ablation.TOGGLES])
def test_ablation_rows_are_config_fields(rows):
    for overrides in rows.values():
        assert set(overrides) <= set(FIELDS)
    sp.check({}, source="ablation", rows=rows)
    assert ablation.BASELINE in ablation.ROWS


def test_paper_points_and_ranges():
    assert alpha_sweep.GRID["alpha"] == [0.01, 0.02, 0.05, 0.08, 0.1]
    d = alpha_sweep.SPACE["alpha"]
    assert (d.low, d.high, d.log) == (0.01, 0.1, True)
    assert kshot_grid.GRID["ways"] == [5, 10] and kshot_grid.GRID["shots"] == [1, 5, 10, 15, 20, 50]


def test_unknown_key_and_wrong_type_fail_with_choices():
    with pytest.raises(ConfigError, match="unknown config key 'alpah'.*did you mean alpha"):
        sp.check({"alpah": [0.1]}, source="x")
    with pytest.raises(ConfigError, match="shots must be an int"):
        sp.check({"shots": ["five"]}, source="x")
    with pytest.raises(ConfigError, match="row 'r'.*unknown config key"):
        sp.check({}, source="x", rows={"r": {"nope": 1}})


def test_grid_distributions_and_configs_to_check():
    space = {"variant": "adb+ic", "ways": [5, 10], "shots": [1, 5]}
    assert sp.grid_size(space, [1, 2]) == 8
    assert set(sp.optuna_distributions(space)) == {"ways", "shots"}  # a seed is no searched parameter
    assert sp.grid_points(space) == {"ways": [5, 10], "shots": [1, 5]}
    cfgs = sp.configs_to_check(sp.TrialMaker(Config()), space, [1, 2])
    assert len(cfgs) == 8 and {c.seed for c in cfgs} == {1, 2}
    assert all(c.seed == c.split_seed for c in cfgs)
    sampled = {"alpha": FloatDistribution(0.01, 0.1, log=True)}
    assert sorted(c.alpha for c in sp.configs_to_check(sp.TrialMaker(Config()), sampled, [0])) == [0.01, 0.1]


def test_resolve_and_describe():
    rows = {"adb": {"variant": "adb"}}
    cfg = sp.resolve_trial({"alpha": 0.05, tune_keys.ROW_KEY: "adb", tune_keys.SEED_KEY: 3, "_optuna_trial": 7}, rows)
    assert (cfg.variant, cfg.alpha, cfg.seed, cfg.split_seed) == ("adb", 0.05, 3, 3)
    assert tune_keys.describe({"alpha": 0.05, tune_keys.SEED_KEY: 2}, ["alpha", tune_keys.SEED_KEY]) == "alpha=0.05 seed=2"
    row, seed = tune_keys.ROW_KEY, tune_keys.SEED_KEY
    assert tune_keys.describe({row: "adb+ic", seed: 1}, [row, seed]) == "adb+ic seed=1"


@pytest.mark.parametrize("preset", ["cpu", "smoke", "cifar100", "mini_imagenet", "cub200"])
def test_hosts_rows_are_checked_configs_with_their_references(preset):
    from adbs.config import PRESETS, from_dict
    from search_spaces import hosts

    rows = hosts.rows(preset, hosts.HOSTS)
    sp.check({}, source="hosts", rows=rows)
    assert list(rows) == ["baseline", "baseline+ADBS", "SAVC", "SAVC+ADBS", "ALICE", "ALICE+ADBS", "OrCo", "OrCo+ADBS"]
    for name, change in rows.items():
        cfg = from_dict({**PRESETS[preset], "data_root": "/d", **change})
        assert cfg.host == change["host"] and cfg.variant == ("adb+ic" if name.endswith("+ADBS") else "baseline")
    if preset == "cpu":  # on CPU SAVC changes nothing but the host, ALICE its lr too (alice_cpu)
        assert rows["SAVC"] == {"host": "savc", "variant": "baseline"}
        assert rows["ALICE+ADBS"] == {"host": "alice", "base_lr": 0.01, "variant": "adb+ic"}
        assert rows["OrCo+ADBS"] == {"host": "orco", "variant": "adb+ic"}
    if preset == "cifar100":
        assert rows["SAVC"]["base_epochs"] == 600 and rows["ALICE"]["backbone"] == "resnet18_cifar"
        assert rows["OrCo"]["base_epochs"] == 10 and rows["OrCo"]["orco.session_epochs"] == 100  # phases 2 and 3
    if preset == "cub200":  # the row sets back what orco_cub200 leaves at the default and cub200 changes
        cfg = from_dict({**PRESETS[preset], "data_root": "/d", **rows["OrCo+ADBS"]})
        assert (cfg.schedule, cfg.finetune_epochs, cfg.base_epochs) == ("cosine", 10, 200)
    assert hosts.baselines(hosts.HOSTS)["SAVC+ADBS"] == "SAVC"


@pytest.mark.parametrize("key, axis", [
    ("alpha", [0.1, 0.1]),  # the same float twice
    ("alpha", [16, 0.05, 16.0]),  # an int and its float: one value of a float field
    ("base_images_per_class", [None, 40, None]),  # None twice
    ("data_root", [None, "None"]),  # a str | None field reads the text None as None
    ("shots", [5, "5"]),  # a text of the same int
])
def test_a_grid_axis_listing_a_value_twice_is_refused(key, axis):
    """Two points of one configuration would each run every seed: its row would count each seed twice and the
    comparisons would set it against itself. The value as the Config holds it decides (adbs/config/coercion.py)."""
    with pytest.raises(ConfigError, match=f"grid axis '{key}' lists .* twice"):
        sp.check({key: axis}, source="test")


@pytest.mark.parametrize("key, axis", [("alpha", [0.05, 0.1]), ("base_images_per_class", [None, 40, 80])])
def test_a_grid_axis_of_distinct_values_passes(key, axis):
    sp.check({key: axis}, source="test")


@pytest.mark.parametrize("space, row", [
    ({"alpha": [0.01, 0.1]}, {"variant": "adb+ic", "alpha": 0.05}),  # a grid axis
    ({"shots": [1, 5], "alpha": [0.05]}, {"shots": 5}),  # one of two axes
    ({"alpha": FloatDistribution(0.01, 0.1, log=True)}, {"alpha": 0.05}),  # a sampled value
])
def test_a_row_setting_what_the_space_varies_is_refused(space, row):
    """The row's value replaces each point's (adbs_lab/search/space.py: resolve_trial): its rows would each run the
    row's value under the label of another, and count as that many configurations."""
    with pytest.raises(ConfigError, match="row 'r' sets .*, which the space"):
        sp.check(space, source="test", rows={"r": row, "free": {"variant": "adb"}})


def test_a_row_may_set_what_the_space_fixes():
    sp.check({"variant": "adb", "alpha": [0.01, 0.1]}, source="test", rows={"r": {"variant": "adb+ic"}})
