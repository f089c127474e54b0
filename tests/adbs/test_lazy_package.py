"""adbs/__init__.py loads its public names on first use: the light modules import without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import adbs


def test_every_public_name_resolves_to_the_module_that_defines_it():
    owners = {"boundary_logits": "adbs.boundary", "Config": "adbs.config", "ConfigError": "adbs.fields",
              "preset": "adbs.config", "run_trial": "adbs.trial"}
    for name in adbs.__all__:
        assert name in dir(adbs) and getattr(adbs, name) is not None
    for name, owner in owners.items():
        assert getattr(adbs, name).__module__.startswith(owner), name


def test_light_modules_load_no_torch():
    code = ("import sys, json, time; t = time.perf_counter(); import adbs.redaction, adbs.writable, adbs.cells; "
            "print(json.dumps([time.perf_counter() - t, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'numpy', 'ray', 'optuna', 'mlflow'))]))")
    seconds, heavy = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                               check=True).stdout)
    print(f"import adbs.redaction, adbs.writable, adbs.cells: {seconds:.3f} s")
    assert heavy == []


def test_an_unknown_name_is_an_attribute_error():
    name = "no_such_name"
    with pytest.raises(AttributeError, match=name):
        getattr(adbs, name)
