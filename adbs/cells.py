"""How a number reads in a table cell, for every table the platform prints or writes: the session table of
`python -m adbs.run` (adbs/run.py: session_table), a study's table (adbs_lab/results/tables.py: format_table), its LaTeX and
plain renderings (adbs_lab/results/renderings.py) and the paired differences (adbs_lab/results/compare.py: format_paired).

A missing or non-finite value is "-"; a number has a fixed count of decimals (2 unless the column says otherwise);
a mean with the half-width of its 95% interval reads "58.71 ± 1.20", the mean alone where there is no interval.
"""

from __future__ import annotations

import math
import numbers

MISSING = "-"


def finite(v: object) -> bool:
    """A finite real number (numpy's included), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def number(v: object, digits: int = 2, *, signed: bool = False) -> str:
    """`v` to `digits` decimals (with its sign when `signed`), or "-"."""
    if not finite(v):
        return MISSING
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def mean_ci(mean: object, half: object = None, digits: int = 2, *, pm: str = " ± ", signed: bool = False) -> str:
    """"mean ± half" (`pm` joins them: " $\\pm$ " in LaTeX), the mean alone where `half` is not a finite number,
    "-" where the mean is not."""
    if not finite(mean):
        return MISSING
    shown = number(mean, digits, signed=signed)
    return shown + pm + number(half, digits) if finite(half) else shown


def duration(seconds: float) -> str:
    """4 s, 12 min, 2.3 h: what a person reads at a glance."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
