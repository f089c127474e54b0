"""adbs/__init__.py loads its public names on first use: the light modules import without torch."""

from __future__ import annotations

import json
import subprocess
import sys

import adbs


def test_every_public_name_has_an_owner_and_resolves():
    # reads the private map adbs._OWNERS: the one place that says which module owns each public name
    assert sorted(adbs.__all__) == sorted(adbs._OWNERS)
    for name in adbs.__all__:
        value, owner = getattr(adbs, name), adbs._OWNERS[name]
        # the owner defines it (or, for a package, one of its modules does); PRESETS is a dict, with no __module__
        assert getattr(value, "__module__", owner).startswith(owner), (name, value.__module__)


def test_light_modules_load_no_torch():
    code = ("import sys, json, time; t = time.perf_counter(); import adbs.redaction, adbs.writable, adbs.cells; "
            "print(json.dumps([time.perf_counter() - t, sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'numpy', 'ray', 'optuna', 'mlflow'))]))")
    seconds, heavy = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                               check=True).stdout)
    print(f"import adbs.redaction, adbs.writable, adbs.cells: {seconds:.3f} s")
    assert heavy == []


def test_an_unknown_name_is_an_attribute_error():
    try:
        adbs.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("adbs.no_such_name resolved")
