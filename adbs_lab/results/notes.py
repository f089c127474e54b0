"""The lines above a study's tables that say how far its numbers are from the study as documented: a --smoke run
(numbers not meaningful) and every setting the command changed from the study's defaults (a flag the study does
not sweep, such as `alpha_sweep.py --shots 3`, is accepted and named here). The driver prints them in its start
line, writes them above table.txt, table.md and report.md, and records them on the MLflow parent run (TAG), from
which studies/report.py writes them again."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SMOKE", "TAG", "TAG_MAX", "changed", "lines", "from_tag", "tag_value"]

SMOKE = ("smoke run: numbers not meaningful (--smoke trains a tiny model for seconds to check the pipeline; run the "
         "study without --smoke for results)")
TAG = "adbs.notes"
TAG_MAX = 8000
"""MLflow's limit on a tag's value (characters)."""
"""The MLflow parent run's tag holding the lines (a JSON list)."""
DEFAULT_PRESET = "cpu"
"""The studies' default --preset (adbs_lab/driver/options.py: StudyOptions.preset)."""


def changed(plan, opts, base: dict[str, Any]) -> dict[str, Any]:
    """The settings `opts` changes from the study's defaults: the preset when it is not the default one, then each
    config key the command line or --config file gives (what the study sets itself aside) whose value differs from
    the study's default run's, in the order given."""
    from adbs.config import canonical, from_dict, resolve

    from adbs_lab.search import space as sp

    preset = "smoke" if opts.smoke else DEFAULT_PRESET
    fixed = sp.split(plan.space)[0]
    default = from_dict({**resolve(preset, plan.cpu_defaults, {}, {}), **fixed}).to_dict()
    ran = from_dict(base).to_dict()
    out: dict[str, Any] = {}
    if opts.preset_name != preset:
        out["preset"] = opts.preset_name
    given = [canonical(k) for k, _ in opts.config_values] + [canonical(k) for k in opts.config_overrides()]
    for key in dict.fromkeys(given):
        if key in ran and ran[key] != default.get(key):
            out[key] = ran[key]
    return out


def lines(plan, opts, base: dict[str, Any]) -> list[str]:
    """The smoke banner (--smoke) and the line of changed settings (none changed: no line)."""
    out = [SMOKE] if opts.smoke else []
    diff = changed(plan, opts, base)
    if diff:
        out.append(f"settings departing from {plan.name}'s defaults: " + ", ".join(f"{k}={_text(v)}" for k, v in diff.items()))
    return out


def from_tag(tags: dict[str, str]) -> list[str]:
    """The lines a parent run recorded (TAG); none for a run from before they were recorded."""
    try:
        value = json.loads(tags.get(TAG) or "[]")
    except ValueError:
        return []
    return [str(x) for x in value] if isinstance(value, list) else []


def _text(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def tag_value(notes: list[str]) -> str:
    """The notes as TAG holds them: a JSON list, lines dropped from the end (a last line says how many) to stay
    within TAG_MAX, so the value always parses."""
    n = len(notes)
    value = json.dumps(list(notes))
    while len(value) > TAG_MAX and n > 0:
        n -= 1
        value = json.dumps(list(notes[:n]) + [f"({len(notes) - n} more lines: see the study's table.txt)"])
    return value
