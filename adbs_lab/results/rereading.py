"""A finished study's verdicts are its own: what it recorded decides them, and another δ, reference or error rate
asked of it afterwards is printed apart, under a heading that says what it guarantees.

- **The recorded policy** (`recorded`): the verdict policy the study ran under, as it recorded it (study.json's
  `verdicts`, written when the study claimed its folder, adbs_lab/driver/claim.py; else its MLflow parent run's tags,
  adbs_lab/stats/policy.py: VerdictPolicy.from_tags), never the flags of the command that reads it.
- **Another δ** (`lines`: "re-read with δ = 3 points"): the same intervals, at the same looks and levels, read
  against ±δ'. It keeps the run's guarantee: the family's intervals cover their true differences together with
  probability at least 1 - α whatever δ is (the coverage is of the intervals; δ only names which verdict an interval
  gives, adbs_lab/stats/verdicts.py: classify), so every verdict read from covering intervals at any δ is true.
- **Another reference or error rate**: another family of comparisons (or of levels), printed as a new family. Its
  intervals are adjusted over its own comparisons, and it guarantees nothing jointly with the run's verdicts; a
  family chosen after seeing the run's results guarantees nothing at all (docs/statistics.md, "Re-reading a finished
  study").
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Mapping, Sequence

from adbs_lab.results import comparisons
from adbs_lab.results.comparisons import Compared
from adbs_lab.stats.policy import PAIRS_TAG, SMOKE_BANNER, TAG, VerdictPolicy
from adbs_lab.stats.rules import shown

__all__ = ["RECORD_KEY", "record", "recorded", "changes", "lines"]

RECORD_KEY = "verdicts"
"""study.json's key of the verdict policy the study was started with (`record`)."""


def record(policy: VerdictPolicy) -> dict[str, str]:
    """The policy as study.json keeps it: its MLflow tags (VerdictPolicy.tags), with every comparison (a tag is cut
    at MLflow's limit, a file is not)."""
    return {**policy.tags(), PAIRS_TAG: json.dumps([list(p) for p in policy.pairs or ()])}


def recorded(held: Mapping[str, Any], parent_tags: Callable[[], Mapping[str, str] | None]) -> VerdictPolicy | None:
    """The policy a study recorded: study.json's (`held`) where it has one, else its parent run's tags (`parent_tags`,
    called only then: it reads the MLflow store); None where neither records it."""
    mine = held.get(RECORD_KEY)
    if isinstance(mine, dict) and TAG in mine:
        return VerdictPolicy.from_tags(mine)
    tags = parent_tags()
    return None if tags is None else VerdictPolicy.from_tags(tags)


def changes(run: VerdictPolicy, asked: VerdictPolicy) -> tuple[bool, list[str]]:
    """(whether δ differs, what makes `asked` another family than `run`'s: its comparisons, its error rate)."""
    other = []
    if asked.pairs is not None and run.pairs is not None and tuple(asked.pairs) != tuple(run.pairs):
        other.append("other comparisons (another reference)")
    if asked.alpha != run.alpha:
        other.append(f"another family error rate ({shown(asked.alpha)}, the run's {shown(run.alpha)})")
    return asked.delta != run.delta, other


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")


def lines(run: VerdictPolicy, asked: VerdictPolicy, read: Callable[[VerdictPolicy], Sequence[Compared]]) -> list[str]:
    """What a command that asks another δ, reference or error rate of a finished study prints after the run's own
    verdicts: a re-reading at δ' (the run's comparisons, looks and α: its guarantee holds) or a new family (asked's
    comparisons and α at the run's looks: its own adjustment, nothing jointly with the run's). `read(policy)` gives
    the comparisons of the study's table under a policy. None when nothing differs."""
    new_delta, other = changes(run, asked)
    if not new_delta and not other:
        return []
    if not other:
        said = read(run.with_delta(asked.delta))
        keeps = (SMOKE_BANNER if run.smoke else
                 f"these and the run's verdicts above are all true together with probability at least "
                 f"{run.level_text}, since the family's intervals cover together whatever δ they are read against")
        head = (f"re-read with δ = {_points(asked.delta)} (the run's δ is {_points(run.delta)}): the same intervals, at "
                f"the same looks and levels, read against ±{_points(asked.delta)}; {keeps} (docs/statistics.md, "
                f"\"Re-reading a finished study\"):")
        return ["", head, *comparisons.sentences(said)]
    policy = run.with_pairs(asked.pairs, asked.m) if asked.pairs is not None else run
    policy = policy.with_delta(asked.delta)
    if asked.alpha != run.alpha:  # all of the new α on the primary metric, at the run's looks
        looks = None if run.looks is None else dataclasses.replace(run.looks, alpha=asked.alpha)
        policy = dataclasses.replace(policy, alpha=asked.alpha, split=None, looks=looks)
    said = read(policy)
    head = (f"a new family, not the run's ({'; '.join(other)}): adjusted over its own comparisons at the run's looks, "
            f"it guarantees nothing jointly with the run's verdicts above, and nothing at all where it was chosen "
            f"after seeing them (docs/statistics.md, \"Re-reading a finished study\"):")
    return ["", head, *comparisons.sentences(said)] if said else ["", head, "(no comparisons)"]

