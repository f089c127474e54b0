"""Generated config values for the tests of every reader of a searched value (tests/adbs_lab/records/
test_config_values.py, tests/adbs_lab/results/test_searched_values.py, tests/adbs_lab/stores/test_dashboard.py):
values of each kind a search space may hold, drawn with texts that read like other values, a searched
categorical of a given shape, and the comparison of two values by type and value."""

from __future__ import annotations

import numpy as np

from adbs_lab.records.value_text import text

TRICKY = ("None", "True", "False", "80", "-0", "1.0", "1e-05", "nan", "inf", "", "a b", "mean", '"q"', '"', "[1, 2]",
          "null")
"""Texts that read like another value, or like a quoted one."""
KINDS = ("none", "bool", "int", "float", "str")
SHAPES = [("none", "int"), ("none", "int", "int"), ("bool", "str"), ("int", "float"), ("none", "str", "float"),
          ("str", "none"), ("none", "bool")]
"""Searched categoricals: None beside ints (base_images_per_class {80, None}, {40, 80, None}), bools or texts, a
bool beside a text, an int beside a float, three types at once."""


def draw(kind: str, rng: np.random.Generator):
    """One value of `kind`: ints around 0 and up to 200, floats sampled as a search samples them (never rounded),
    texts from TRICKY."""
    if kind == "none":
        return None
    if kind == "bool":
        return bool(rng.integers(2))
    if kind == "int":
        return int(rng.integers(-5, 200))
    if kind == "float":
        return float(rng.choice([rng.uniform(1e-4, 1.0), rng.uniform(-1e3, 1e3), 80.0, 1e16]))
    return str(rng.choice(TRICKY))


def generated(shape: tuple[str, ...], seed: int) -> list:
    """One value per kind of `shape`, drawn by `draw` until no two are one value (the searched categorical)."""
    rng = np.random.default_rng(seed)
    out: list = []
    for kind in shape:
        v = draw(kind, rng)
        while any(text(v) == text(u) or same(u, v) for u in out):
            v = draw(kind, rng)
        out.append(v)
    return out


def same(a, b) -> bool:
    """One value: of one type (an int read as a float by pandas is the same number) and equal."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return (a == b) if numbers else (type(a) is type(b) and a == b)
