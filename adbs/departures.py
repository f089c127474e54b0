"""The line that says a result departs from the released code, above every table of results: the session table of
`python -m adbs.run` (adbs/run.py: session_table) and a study's tables (adbs_lab/results/tables.py: departure_lines).

A departure is a boundary remedy (adbs/config/schema.py: BOUNDARY_REMEDIES) set to other than the released code's value,
which is the Config default; the CPU preset sets one (docs/findings.md, point 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def changed(config: Mapping[str, Any]) -> dict[str, Any]:
    """The boundary remedies `config` sets to other than the released code's values, in BOUNDARY_REMEDIES' order."""
    from adbs.config import BOUNDARY_REMEDIES, Config

    default = Config()
    return {k: config[k] for k in BOUNDARY_REMEDIES if k in config and config[k] != getattr(default, k)}


def lines(remedies: Mapping[str, Any], scope: str = "") -> list[str]:
    """The departure line for `remedies` (name -> value; none: no line), `scope` saying where it holds
    (" in every trial")."""
    if not remedies:
        return []
    return [f"departs from the released code{scope}: " + ", ".join(f"{k}={_plain(v)}" for k, v in remedies.items())
            + " (a boundary remedy; docs/boundary-dynamics.md, studies/boundary.py)"]


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v  # numpy scalars from a table read as Python's
