"""The one owner of "best": whether a study may name a best configuration at all, and which one it names.

A best is a claim, and the claims a study makes are its verdicts (adbs_lab/results/comparisons.py): so a study names
a best only where verdicts can back or refute it. Two kinds of study name none:
- a study whose grid varies data conditions (Plan.conditions: kshot_grid's ways and shots): a 5-way row averages 8
  sessions and a 10-way row 4, and a condition is a setting of the problem, not a choice; its verdicts compare the
  variants within each cell;
- a study that makes no verdicts: no reference row (Plan.baseline or Plan.reference_axis, or --reference) and no
  race of a sampled search (--seeds auto): the highest mean of a few seeds is within noise of the next as often as
  not, and nothing says which.
Both still write best_config.json, naming no configuration (`config_label` null) and saying why (`why`), so a
script that reads it finds the reason instead of a configuration chosen by noise. The start line, the table's
notes, the progress lines, best_config.json and report.md (adbs_lab/driver/summarise.py, launch.py, progress.py;
studies/report.py through the parent run's tag TAG) all read the decision from here."""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

__all__ = ["TAG", "withheld", "progress_text", "choose"]

TAG = "adbs.no_best"
"""The MLflow parent run's tag holding why the study names no best (absent where it names one): studies/report.py
reads it back instead of ranking the rows itself."""


def withheld(study: str, *, conditions: Sequence[str] = (), verdicts: bool) -> str | None:
    """Why `study` names no best configuration, or None where it may name one. `conditions`: its grid axes that are
    data conditions (Plan.conditions); `verdicts`: whether it compares rows (a reference row, so its table has
    comparisons) or races a sampled search's best samples (--seeds auto)."""
    if conditions:
        return (f"{study} varies data conditions ({', '.join(conditions)}), not knobs: no configuration is best "
                "across them; its verdicts compare the variants within each cell (table.txt)")
    if not verdicts:
        return (f"{study} has no reference row, so it makes no verdicts and names no best: the highest mean over "
                "a few seeds is not shown to beat the next (give its Plan a reference_axis= or baseline=, or run it "
                "with --reference LABEL; a sampled search: --seeds auto races its best samples on fresh seeds)")
    return None


def progress_text(conditions: Sequence[str] = (), verdicts: bool = True) -> str | None:
    """The short form the progress lines end with in place of "best ... so far", or None where they name one."""
    if conditions:
        return f"no best across {', '.join(conditions)} (data conditions: the table compares within each cell)"
    if not verdicts:
        return "no reference row: no verdicts, no best named"
    return None


def choose(trials: pd.DataFrame, objectives: tuple, *, why: str | None,
           compared: Sequence[Any] = ()) -> dict[str, Any] | None:
    """best_config.json's content: {"config_label": None, "why": why} where a best is withheld (`why`, from
    `withheld`); else the best mean on the validation objective (adbs_lab/results/tables.py: best_config), said to be
    resolved or not by the table's verdicts `compared` (`resolved_by_verdicts`, and the rows it cannot be told
    from); None where no trial completed."""
    from adbs_lab.results import comparisons, tables

    if why:
        return {"config_label": None, "why": why}
    best = tables.best_config(trials, objectives) if len(trials) else None
    if best is None or not compared:
        return best
    ok, tied = comparisons.best_standing(str(best["config_label"]), compared)
    return {**best, "resolved_by_verdicts": ok, **({} if ok else {"indistinguishable_from": tied})}
