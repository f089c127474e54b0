"""The one owner of "best": whether a study may name a best configuration at all, and which one it names.

A best is a claim, and the claims a study makes are its verdicts (adbs_lab/results/comparisons.py): so a study names
a best only where verdicts can back or refute it. Two kinds of study name none:
- a study whose grid varies data conditions (Plan.conditions: kshot_grid's ways and shots): a 5-way row averages 8
  sessions and a 10-way row 4, and a condition is a setting of the problem, not a choice; its verdicts compare the
  variants within each cell;
- a study that makes no verdicts: no reference row (Plan.baseline or Plan.reference_axis, or --reference) and no
  race of a sampled search (--seeds auto): the highest mean of a few seeds is within noise of the next as often as
  not, and nothing says which.
best_config.json says which: across data conditions it names no configuration (`config_label` null, and `why`);
without verdicts it holds the configuration of the highest mean for reference (as a best the verdicts do not resolve
does), marked `named: false` with `why`, so `--config best_config.json` still reruns it and nothing reads it as a
finding. The start line, the table's notes, the progress lines, the closing lines, best_config.json and report.md
(adbs_lab/driver/summarise.py, launch.py, progress.py; studies/report.py through the parent run's tag TAG) all read
the decision from here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from adbs import light

if TYPE_CHECKING:
    import pandas as pd

    from adbs_lab.results import comparisons, tables
else:  # pandas loads with the tables, not with the rule (adbs_lab/driver/prepared.py reads it in light entry points)
    comparisons = light.lazy("adbs_lab.results.comparisons")
    tables = light.lazy("adbs_lab.results.tables")

__all__ = ["TAG", "RACE_PROGRESS", "withheld", "progress_text", "tag_value", "from_tag", "choose"]

TAG = "adbs.no_best"
"""The MLflow parent run's tag holding why the study names no best (JSON {"why": text, "across_conditions": bool};
absent where it names one): studies/report.py reads it back instead of deciding again (`from_tag`)."""


def withheld(study: str, *, conditions: Sequence[str] = (), verdicts: bool) -> str | None:
    """Why `study` names no best configuration, or None where it may name one. `conditions`: its grid axes that are
    data conditions (Plan.conditions); `verdicts`: whether it compares rows (a reference row, so its table has
    comparisons) or races a sampled search's best samples (--seeds auto)."""
    if conditions:
        return (f"{study} varies data conditions ({', '.join(conditions)}), not knobs: no configuration is best "
                "across them; its verdicts compare rows within each cell of them (table.txt)")
    if not verdicts:
        return (f"{study} has no reference row, so it makes no verdicts and names no best: the highest mean over "
                "a few seeds is not shown to beat the next (give its Plan a reference_axis= or baseline=, or run it "
                "with --reference LABEL; a sampled search: --seeds auto races its best samples on fresh seeds)")
    return None


RACE_PROGRESS = "best: the race's leader, named when it ends (one trial's value is no best)"
"""What a race's progress lines end with: its best is the leader its verdicts choose on fresh seeds
(adbs_lab/search/seeds/race.py), never the highest value of one trial so far."""


def progress_text(conditions: Sequence[str] = (), verdicts: bool = True, race: bool = False) -> str | None:
    """The short form the progress lines end with in place of "best ... so far", or None where they name one.
    `race`: the seed policy chooses the best (a race), so the lines name none before it does."""
    if conditions:
        return f"no best across {', '.join(conditions)} (data conditions: the table compares within each cell)"
    if not verdicts:
        return "no reference row: no verdicts, no best named"
    if race:
        return RACE_PROGRESS
    return None


def tag_value(why: str, conditions: Sequence[str]) -> str:
    """TAG's value for a study that names no best for `why` (`conditions`: the data conditions it varies)."""
    return json.dumps({"why": why, "across_conditions": bool(conditions)})


def from_tag(tags: dict[str, str]) -> tuple[str | None, bool]:
    """(why, across conditions) as a study recorded it in TAG; (None, False) where it names a best."""
    try:
        value = json.loads(tags.get(TAG) or "{}")
    except ValueError:
        return None, False
    return (str(value["why"]), bool(value.get("across_conditions"))) if isinstance(value, dict) and value.get(
        "why") else (None, False)


def choose(trials: "pd.DataFrame", objectives: tuple, *, why: str | None = None, across_conditions: bool = False,
           compared: Sequence[Any] = ()) -> dict[str, Any] | None:
    """best_config.json's content. `why` (from `withheld`), across data conditions: {"config_label": None,
    "named": False, "why": why}; `why` without verdicts: the highest mean's configuration for reference, `named`
    false; else the best mean on the validation objective (adbs_lab/results/tables.py: best_config), said to be
    resolved or not by the table's verdicts `compared` (`resolved_by_verdicts`, and the rows it cannot be told from).
    None where no trial completed."""
    if why and across_conditions:
        return {"config_label": None, "named": False, "why": why}
    best = tables.best_config(trials, objectives) if len(trials) else None
    if best is None:
        return None
    if why:
        return {**best, "named": False, "why": why}
    if not compared:
        return best
    ok, tied = comparisons.best_standing(str(best["config_label"]), compared)
    return {**best, "resolved_by_verdicts": ok, **({} if ok else {"indistinguishable_from": tied})}
