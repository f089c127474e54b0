"""A study's record of its run (study.json, as adbs_lab/driver/claim.py writes it), written by hand for the tests of
--plan, which reads a finished study by what it recorded (adbs_lab/results/rereading.py)."""

from __future__ import annotations

import json
from typing import Any

from adbs_lab.driver.prepared import Study
from adbs_lab.results import rereading


def write_record(p: Study, policy: bool = True) -> None:
    """study.json of a run of `p` (its fingerprint, command and the settings --resume checks), with its verdict
    policy and reference (`policy`), or, as a study.json from before it recorded them, without."""
    held: dict[str, Any] = {"study": p.plan.name, "folder": p.folder, "fingerprint": p.fingerprint, "command": p.command,
            "settings": {"resolve": p.verdicts.delta, "reference": p.run.reference}}
    if policy:
        held |= {rereading.RECORD_KEY: rereading.record(p.verdicts), "baseline": p.reference}
    p.dir.mkdir(parents=True, exist_ok=True)
    (p.dir / "study.json").write_text(json.dumps(held))
