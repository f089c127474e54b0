"""What a study script imports: `Plan`, then `main(plan, opts)` (run the study, exit with how it ended) or
`run(plan, opts)` (the same without the exit, for Python callers). The driver behind them is the package
adbs_lab/driver/ (preflight, claim, launch, summarise, one job a module; several studies as one: compose).

Importing this face loads none of the driver's heavy libraries (Ray, MLflow, pandas, torch): `main` and `run` first
check the flags that need none of them (adbs_lab/driver/flags.py: the options, the space, the base config), so a
refused flag exits 2 in well under a second, then load the driver (adbs/light.py: lazy, the boundary study scripts
cross); the other names load their module on first use.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

from adbs import light
from adbs.config import ConfigError
from adbs.exits import REFUSED, Exit
from adbs_lab.driver import flags
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan

if TYPE_CHECKING:
    from adbs_lab.driver import run as driver
    from adbs_lab.driver.claim import claim
    from adbs_lab.driver.launch import cluster_slots, launch, resources
    from adbs_lab.driver.preflight import held, preflight, size, validate
    from adbs_lab.driver.prepared import Study, fail
    from adbs_lab.driver.summarise import Outcome, ended_count, summarise
else:
    driver = light.lazy("adbs_lab.driver.run")  # Ray, MLflow, pandas, torch: loaded once the flags are checked

__all__ = ["Plan", "Study", "Outcome", "StudyInputError", "validate", "size", "held", "preflight", "claim",
           "cluster_slots", "launch", "resources", "summarise", "ended_count", "run", "main", "fail", "check_parts"]

_OWNERS = {"claim": "claim", "cluster_slots": "launch", "launch": "launch", "resources": "launch",
           "held": "preflight", "preflight": "preflight", "size": "preflight", "validate": "preflight",
           "Study": "prepared", "fail": "prepared", "Outcome": "summarise", "ended_count": "summarise",
           "summarise": "summarise"}
"""Name -> its module in adbs_lab/driver/, imported on the name's first use (PEP 562's module __getattr__)."""


def __getattr__(name: str) -> Any:
    if name in _OWNERS:
        return getattr(light.lazy(f"adbs_lab.driver.{_OWNERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _checked(plan: Plan, opts: StudyOptions, part: str = "") -> None:
    """The light checks of the flags (adbs_lab/driver/flags.py); a refusal exits 2 with its message, as the
    preflight's would (adbs_lab/driver/prepared.py: fail; `part`: "paper, hosts: " as a composition's check names
    it, adbs_lab/driver/compose.py), before the driver's libraries load."""
    try:
        flags.check(plan, opts)
    except (ConfigError, StudyInputError) as e:
        print(f"error: {part}{e}", file=sys.stderr, flush=True)
        raise Exit(REFUSED) from None


def check_parts(name: str, parts: dict[str, tuple[Plan, StudyOptions]]) -> None:
    """The light checks of every part of the composition `name` (studies/paper.py: {part: (plan, options)}), before
    the driver loads; the first refusal exits 2 naming the part."""
    for part, (plan, opts) in parts.items():
        _checked(plan, opts, f"{name}, {part}: ")


def main(plan: Plan, opts: StudyOptions) -> NoReturn:
    """Run the study and exit with how it ended (adbs_lab/driver/run.py: main), after the light checks."""
    _checked(plan, opts)
    driver.main(plan, opts)


def run(plan: Plan, opts: StudyOptions) -> Outcome | None:
    """The study without the exit (adbs_lab/driver/run.py: run), after the light checks."""
    _checked(plan, opts)
    return driver.run(plan, opts)
