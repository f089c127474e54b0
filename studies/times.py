"""The studies' measured times, from studies/times.json (their one owner): a Plan's estimate per trial, the --smoke
figures of studies/paper.py, and how the README quotes a time (`shown`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FILE = Path(__file__).with_name("times.json")


@cache
def _data() -> dict[str, Any]:
    return json.loads(FILE.read_text(encoding="utf-8"))


def of(study: str) -> dict[str, Any]:
    """The entry of `study` (trial_s, default, smoke)."""
    return _data()["studies"][study]


def trial_s(study: str) -> float:
    """Seconds per trial of `study` on the CPU preset (Plan.est_trial_s)."""
    return float(of(study)["trial_s"])


def load(study: str) -> float:
    """The load average `study`'s times were measured at (Plan.est_load; 0: an idle machine)."""
    return float(of(study)["default"].get("load", 0))


def smoke_trial_s() -> float:
    """Seconds per --smoke trial (Plan.est_smoke_trial_s)."""
    return float(_data()["smoke_trial_s"])


def smoke(study: str) -> tuple[float, int]:
    """(wall seconds, trials) of `study`'s part of `studies/paper.py --smoke`."""
    m = of(study)["smoke"]
    return float(m["wall_s"]), int(m["trials"])


def shown(measure: dict[str, Any]) -> str:
    """A measured time as the README quotes it: `263 s` under 5 minutes, `5.5 min` above (the seconds may follow)."""
    if "wall_min" in measure:
        return f"{measure['wall_min']} min"
    s = measure["wall_s"]
    return f"{s} s" if s < 300 else f"{s / 60:.1f} min"
