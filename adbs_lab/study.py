"""What a study script imports: `Plan`, then `main(plan, opts)` (run the study, exit with how it ended) or
`run(plan, opts)` (the same without the exit, for Python callers). The driver behind them is the package
adbs_lab/driver/ (preflight, claim, launch, summarise, one job a module; several studies as one: compose).

Importing this face loads none of the driver's heavy libraries (Ray, MLflow, pandas, torch): `main` and `run` first
check the flags that need none of them (adbs_lab/driver/flags.py), so a refused flag exits 2 in well under a second,
then load the driver; the other names load their module on first use.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from adbs.config import ConfigError
from adbs.exits import REFUSED, Exit
from adbs_lab.driver import flags
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan

if TYPE_CHECKING:
    from adbs_lab.driver.claim import claim
    from adbs_lab.driver.launch import cluster_slots, launch, resources
    from adbs_lab.driver.preflight import held, preflight, size, validate
    from adbs_lab.driver.prepared import Prepared, fail
    from adbs_lab.driver.summarise import Outcome, ended_count, summarise

__all__ = ["Plan", "Prepared", "Outcome", "StudyInputError", "validate", "size", "held", "preflight", "claim",
           "cluster_slots", "launch", "resources", "summarise", "ended_count", "run", "main", "fail"]

_OWNERS = {"claim": "claim", "cluster_slots": "launch", "launch": "launch", "resources": "launch",
           "held": "preflight", "preflight": "preflight", "size": "preflight", "validate": "preflight",
           "Prepared": "prepared", "fail": "prepared", "Outcome": "summarise", "ended_count": "summarise",
           "summarise": "summarise"}
"""Name -> its module in adbs_lab/driver/, imported on the name's first use (PEP 562's module __getattr__)."""


def __getattr__(name: str) -> Any:
    if name in _OWNERS:
        return getattr(importlib.import_module(f"adbs_lab.driver.{_OWNERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _checked(plan: Plan, opts: StudyOptions) -> None:
    """The light checks of the flags (adbs_lab/driver/flags.py); a refusal exits 2 with its message, as the
    preflight's would (adbs_lab/driver/prepared.py: fail), before the driver's libraries load."""
    try:
        flags.check(plan, opts)
    except (ConfigError, StudyInputError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        raise Exit(REFUSED) from None


def main(plan: Plan, opts: StudyOptions) -> NoReturn:
    """Run the study and exit with how it ended (adbs_lab/driver/run.py: main), after the light checks."""
    _checked(plan, opts)
    from adbs_lab.driver import run as driver

    driver.main(plan, opts)


def run(plan: Plan, opts: StudyOptions) -> Outcome | None:
    """The study without the exit (adbs_lab/driver/run.py: run), after the light checks."""
    _checked(plan, opts)
    from adbs_lab.driver import run as driver

    return driver.run(plan, opts)
