"""The base sessions a study's trials will train, told before they start (adbs_lab/driver/base_sessions.py), and the
start line's estimate that counts the others at a loaded trial's cost (adbs_lab/driver/launch.py: estimate_text)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from adbs.config import from_dict
from adbs_lab import study
from adbs_lab.driver import launch, options
from adbs_lab.driver.base_sessions import BaseSessions, count, keys
from adbs_lab.driver.preflight import study as typed
from adbs_lab.search import space as sp
from adbs_lab.search.seeds.fixed import SeedList
from tests.helpers.run_facts import run_facts


def _prepared(space, tmp_path, tracking_uri, *flags, defaults=None):
    defaults = defaults or options.Defaults()
    plan = study.Plan(name="bases", space=space, space_source="tests")
    opts = options.parse("t", defaults, argv=["--smoke", "--gpus-per-trial", "0", "--storage", str(tmp_path / "runs"),
                                    "--tracking-uri", tracking_uri, *flags])[0]
    return typed(plan, opts)


def _configs(p, slots):
    return sp.configs_to_check(launch.trial_maker(p, slots), p.space, list(p.seeding.seeds))


def test_the_trials_whose_base_session_the_cache_holds_or_another_trial_trains_are_counted(tmp_path, tracking_uri):
    """22 of a k-shot grid's 24 trials loaded their base session: shots act on incremental sessions only (NotBase:
    one base session for both), and an entry of the cache is one base session fewer to train."""
    slots = launch.Slots(gpus=0, cpus=1, max_concurrent=2)
    p = _prepared({"alpha": [0.02, 0.05], "shots": [1, 5]}, tmp_path, tracking_uri, "--seeds", "0", "1")
    assert count(p, launch.trial_maker(p, slots)) == BaseSessions(trials=8, to_train=4)  # no cache folder yet
    held = keys(_configs(p, slots), "cpu")[0]
    cache = tmp_path / "runs" / "base_cache"
    cache.mkdir(parents=True)
    (cache / f"{held}.json").write_text(json.dumps({"key": held, "sha256": "unread"}))
    (cache / "0123.json").write_text(json.dumps({"key": "another"}))  # another's entry, or a copy: not held
    bases = launch.base_sessions(p, slots)
    assert (bases.trials, bases.to_train, bases.reusing) == (8, 3, 5)
    no_cache = _prepared({"alpha": [0.02, 0.05], "shots": [1, 5]}, tmp_path, tracking_uri, "--seeds", "0", "1",
                         "--no-cache")
    assert count(no_cache, launch.trial_maker(no_cache, slots)) == BaseSessions(trials=8, to_train=8)


def test_a_sampled_space_is_not_counted(tmp_path, tracking_uri):
    """A sampled space draws its points as the study goes: which base sessions they need is not told before."""
    from optuna.distributions import FloatDistribution

    p = _prepared({"alpha": FloatDistribution(0.01, 0.1, log=True)}, tmp_path, tracking_uri,
                  defaults=options.Defaults(num_samples=3, smoke_num_samples=3))
    assert count(p, launch.trial_maker(p, launch.Slots(gpus=0, cpus=1, max_concurrent=2))) is None


def test_the_start_line_counts_a_trial_that_loads_its_base_session_at_a_loaded_trials_cost():
    """24 trials, 2 base sessions to train, 2 at a time at load 0: one wave of 60 s trials, then 22 trials of
    launch.CACHED_TRIAL_S (8 s) two at a time: 60 + 88 s, not twelve waves of 60 s (12 min)."""
    opts, _ = options.parse(options.parser("t"), argv=[])
    p = SimpleNamespace(plan=study.Plan(name="t", space={}, space_source="tests", est_trial_s=60), **run_facts(opts),
                        total=24, n_configs=24, base=from_dict({}), seeding=SeedList((0,)))
    assert "roughly 12.0 min" in launch.estimate_text(p, 2, load=0.0)
    text = launch.estimate_text(p, 2, load=0.0, bases=BaseSessions(trials=24, to_train=2))
    assert "roughly 2.5 min" in text and "22 of 24 trials load their base session" in text
