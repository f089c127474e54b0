"""How many of a configuration's seeds completed, and which configurations may be ranked.

A configuration runs once per seed; Optuna is told its mean over seeds only when every seed completed, and holds
it FAIL (a seed diverged or raised) or PRUNED otherwise (adbs_lab/search/searcher.py). The tables, best_config.json and
pareto.json follow the same rule, here: a configuration is *whole* when every trial it ran is COMPLETE. Every table
row, best configuration and Pareto point says how many of its seeds completed ("2 of 2", "1 of 2, 1 diverged"); a
configuration missing seeds is listed with those counts, shown from its completed seeds, and never ranked: it is
not eligible for best_config.json or the Pareto front, whose means would otherwise cover a subset of seeds the
other configurations' means do not.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from adbs_lab.records import metrics_keys as K

__all__ = ["MISSING_STATES", "NOTE", "counts", "text", "states", "whole_labels", "ranked", "pruned_out", "not_ranked",
           "not_ranked_lines"]

MISSING_STATES = (K.DIVERGED, K.FAILED, K.PRUNED, K.INTERRUPTED, K.RUNNING)
"""The states of a seed that did not complete, in the order a seeds cell names them."""
NOTE = ("seeds: trials that completed of those the row ran, then what became of the others; a row missing seeds is "
        "shown from its completed seeds only and never ranked: neither best_config.json nor the Pareto front "
        "considers it")


def counts(trials: pd.DataFrame, label: str = "label") -> dict[str, dict[str, int]]:
    """{configuration: {state: trials}} in the order configurations first appear."""
    if trials is None or trials.empty or label not in trials or "state" not in trials:
        return {}
    out: dict[str, dict[str, int]] = {}
    for lab, state in zip(trials[label], trials["state"]):
        c = out.setdefault(str(lab), {})
        c[str(state)] = c.get(str(state), 0) + 1
    return out


def text(c: dict[str, int]) -> str:
    """"2 of 2", "1 of 2, 1 diverged", "0 of 3, 2 diverged, 1 failed": completed of ran, then what is missing."""
    ran = sum(c.values())
    missing = [f"{c[s]} {s.lower()}" for s in MISSING_STATES if c.get(s)]
    other = ran - c.get(K.COMPLETE, 0) - sum(c.get(s, 0) for s in MISSING_STATES)
    missing += [f"{other} other"] if other else []
    return ", ".join([f"{c.get(K.COMPLETE, 0)} of {ran}", *missing])


def states(c: dict[str, int]) -> dict[str, int]:
    """The counts as best_config.json and pareto.json hold them: {"complete": 2, "diverged": 1} (non-zero only)."""
    return {s.lower(): n for s, n in c.items() if n}


def _whole(c: dict[str, int]) -> bool:
    return bool(c) and c.get(K.COMPLETE, 0) == sum(c.values())


def whole_labels(trials: pd.DataFrame, label: str = "label") -> list[str]:
    """The configurations every trial of which completed."""
    return [lab for lab, c in counts(trials, label).items() if _whole(c)]


def ranked(trials: pd.DataFrame, label: str = "label") -> pd.DataFrame:
    """The complete trials of whole configurations: the only rows best_config.json and the Pareto front rank."""
    if trials is None or trials.empty or "state" not in trials:
        return trials
    whole = whole_labels(trials, label)
    return trials[(trials["state"] == K.COMPLETE) & trials[label].astype(str).isin(whole)]


def pruned_out(c: dict[str, int]) -> bool:
    """A configuration the pruner stopped before any seed completed: an outcome of the search, counted under the
    report's pruning, not a configuration with seeds missing from its numbers (it has none)."""
    return bool(c) and c.get(K.PRUNED, 0) == sum(c.values())


def not_ranked(trials: pd.DataFrame, label: str = "label") -> list[dict[str, Any]]:
    """[{config_label, seeds ("1 of 2, 1 diverged"), seed_states}] of every configuration missing a seed (those
    `pruned_out` left out)."""
    return [{"config_label": lab, "seeds": text(c), "seed_states": states(c)}
            for lab, c in counts(trials, label).items() if not _whole(c) and not pruned_out(c)]


def not_ranked_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per configuration that is not ranked, as printed and written into report.md."""
    if not rows:
        return []
    return ([f"not ranked (missing seeds; not eligible for best_config.json or the Pareto front): {len(rows)} "
             f"configuration{'s' * (len(rows) != 1)}"]
            + [f"  {r['config_label']}: {r['seeds']}" for r in rows])
