"""Each value a user gives is coerced once, where it enters (a flag, a `--set` pair, a --config file's key), and
the code after that trusts the typed value: adbs/config/values.py, precedence.py and file.py.

A unit test of our own logic: a spy counts the calls of adbs/config/coercion.py: coerce_value per key, the outermost
call of each value only (it calls itself for `X | None` and tuples).
"""

from __future__ import annotations

import collections
import json

import pytest

from adbs.config import coercion, host_options
from adbs.config.precedence import resolve
from adbs.config.schema import from_dict, from_typed


@pytest.fixture
def coerced(monkeypatch):
    """{key: how many times a value of it was coerced} while the test runs."""
    calls: collections.Counter[str] = collections.Counter()
    real = coercion.coerce_value
    depth = 0

    def spy(name, tp, value):
        nonlocal depth
        if depth == 0:
            calls[name] += 1
        depth += 1
        try:
            return real(name, tp, value)
        finally:
            depth -= 1

    monkeypatch.setattr(coercion, "coerce_value", spy)
    monkeypatch.setattr(host_options, "coerce_value", spy)
    return calls


def _run_args(argv):
    from adbs.run import build_parser

    return build_parser().parse_args(argv)


def test_each_flag_set_pair_and_file_key_is_coerced_once(tmp_path, coerced):
    from adbs.config import cli, host_preset, load_file

    path = tmp_path / "c.yaml"
    path.write_text("shots: '3'\nsavc:\n  small_crops: 1\nfinetune_lr: 0.02\n")
    args = _run_args(["--host", "savc", "--base-epochs", "3", "--set", "alpha=0.02", "--savc.queue-size", "512",
                      "--milestones", "5", "6", "--set", "savc.key_momentum=0.99", "--config", str(path)])
    # the pieces of adbs/run.py: config_of, but validate (which checks the Config's own host_options text again,
    # as it does for a Config built directly)
    cfg = from_typed(resolve(args.preset, None, cli.overrides(args), load_file(args.config)))
    flags = ["host", "base_epochs", "alpha", "savc.queue_size", "milestones", "savc.key_momentum"]
    file = ["shots", "savc.small_crops", "finetune_lr"]
    preset = list(host_preset("savc", "cpu"))  # the preset's own values (its host among them) are typed once too
    assert coerced == collections.Counter(flags + file + preset), coerced
    assert (cfg.base_epochs, cfg.alpha, cfg.shots, cfg.milestones, cfg.finetune_lr) == (3, 0.02, 3, (5, 6), 0.02)
    assert json.loads(cfg.host_options) == {"queue_size": 512, "key_momentum": 0.99, "small_crops": 1}
    assert cfg == from_dict({**cfg.to_dict()})  # the same Config as the coercing path gives


def test_a_typed_host_options_value_is_coerced_once_when_folded(coerced):
    from adbs.config import cli

    args = _run_args(["--host", "savc", "--set", 'host_options={"queue_size": "256"}',
                      "--set", "savc.key_momentum=0.99"])
    cfg = from_typed(resolve(args.preset, None, cli.overrides(args)))
    assert json.loads(cfg.host_options) == {"queue_size": 256, "key_momentum": 0.99}
    assert coerced["savc.queue_size"] == 1 and coerced["savc.key_momentum"] == 1, coerced


def test_from_dict_and_replace_coerce_each_given_value_once(coerced):
    cfg = from_dict({"alpha": "0.02", "host": "savc", "savc.queue_size": "512", "abs_margin": "false"})
    assert coerced == {"alpha": 1, "host": 1, "savc.queue_size": 1, "abs_boundary": 1}, coerced
    coerced.clear()
    again = cfg.replace(seed="4", **{"savc.key_momentum": "0.99"})
    assert coerced == {"seed": 1, "savc.key_momentum": 1}, coerced  # cfg's own values are typed already
    assert (again.seed, json.loads(again.host_options)) == (4, {"queue_size": 512, "key_momentum": 0.99})
