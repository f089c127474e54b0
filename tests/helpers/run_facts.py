"""The fields of a study object (adbs_lab/driver/prepared.py: Study) that the preflight takes from the options,
for a test's stand-in of one (a SimpleNamespace with only what the step under test reads)."""

from __future__ import annotations

from typing import Any

from adbs_lab.driver.options import StudyOptions
from adbs_lab.driver.prepared import RunSettings
from adbs_lab.results import notes
from adbs_lab.stores import paths


def run_facts(opts: StudyOptions, plan: Any = None, base_values: dict[str, Any] | None = None) -> dict[str, Any]:
    """run, smoke, preset, notes and experiment as the preflight types them from `opts` (notes and experiment need
    the `plan`)."""
    return {"run": RunSettings.of(opts), "smoke": opts.smoke, "preset": opts.preset_name,
            "notes": tuple(notes.lines(plan, opts, base_values or {})) if plan is not None else (),
            "experiment": (plan.name if plan is not None else "") + (paths.SMOKE if opts.smoke else "")}
