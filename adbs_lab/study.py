"""What a study script imports: `Plan`, then `main(plan, opts)` (run the study, exit with how it ended) or
`run(plan, opts)` (the same without the exit, for Python callers). The driver behind them is the package
adbs_lab/driver/ (preflight, claim, launch, summarise, one job a module; several studies as one: compose).
"""

from __future__ import annotations

from adbs_lab.driver.claim import claim
from adbs_lab.driver.launch import cluster_slots, launch, resources
from adbs_lab.driver.preflight import held, preflight, size, validate
from adbs_lab.driver.prepared import Prepared, fail
from adbs_lab.driver.run import main, run
from adbs_lab.driver.summarise import Outcome, ended_count, summarise
from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.plan import Plan

__all__ = ["Plan", "Prepared", "Outcome", "StudyInputError", "validate", "size", "held", "preflight", "claim",
           "cluster_slots", "launch", "resources", "summarise", "ended_count", "run", "main", "fail"]
