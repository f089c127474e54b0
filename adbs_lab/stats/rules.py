"""The verdicts' two settings, α (the family error rate, --error-rate) and δ (the smallest difference that matters,
--resolve): their defaults, their bounds and the one rule of each, in pure Python.

A study's options check both before anything heavy loads (adbs_lab/driver/options.py: StudyOptions.check, which
adbs_lab/study.py runs in well under a second), and studies/report.py checks its --resolve by the same rule; the
verdict policy (adbs_lab/stats/policy.py: VerdictPolicy) takes its defaults from here. Kept apart from the policy,
which imports the intervals' scipy: a refused flag should not wait for it.
"""

from __future__ import annotations

import math

__all__ = ["DEFAULT_ALPHA", "DEFAULT_DELTA", "MAX_ALPHA", "MAX_DELTA", "alpha_problem", "delta_problem", "shown"]

DEFAULT_ALPHA = 0.05
"""The family's error rate unless a study is told otherwise (--error-rate)."""
DEFAULT_DELTA = 1.0
"""δ in accuracy points (--resolve): a difference inside ±δ is too small to matter."""
MAX_ALPHA = 0.5
"""The largest family error rate a study takes: beyond it a "verdict" is wrong more often than not."""
MAX_DELTA = 100.0
"""The largest δ: accuracies are percentages, so no difference exceeds 100 points."""


def shown(x: float) -> str:
    """A setting's number as a line says it: `:g` where that is the number, else every digit (`:g` turned
    --error-rate 0.5000001 into "0.5", refused for exceeding 0.5, and 0.05000001 into "0.05 differs from 0.05")."""
    short = f"{x:g}"
    return short if float(short) == x or not math.isfinite(x) else repr(float(x))


def alpha_problem(alpha: float) -> str | None:
    """What is wrong with a family error rate (None: nothing): it must be > 0 and at most MAX_ALPHA."""
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0 < alpha <= MAX_ALPHA):
        return (f"the family error rate must be > 0 and at most {MAX_ALPHA:g} (all of a study's verdicts are true "
                f"together with probability at least 1 - A; e.g. 0.05)")
    return None


def delta_problem(delta: float) -> str | None:
    """What is wrong with δ (None: nothing): it must be > 0 and at most MAX_DELTA points."""
    if not (isinstance(delta, (int, float)) and math.isfinite(delta) and 0 < delta <= MAX_DELTA):
        return (f"δ is the smallest difference that matters, in accuracy points, and must be > 0 and at most "
                f"{MAX_DELTA:g} (e.g. 1.0)")
    return None
