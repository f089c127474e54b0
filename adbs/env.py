"""The durations the platform reads from the environment (ADBS_*_S), each checked once against its bounds: the one
table of them (`SECONDS`), the value a module uses (`seconds`), and what is wrong with the environment as set
(`problems`, which a study's checks refuse before anything starts: adbs_lab/driver/flags.py). A value that is not a
finite number of seconds within its bounds gives the default to the module that reads it, and a problem to refuse:
NaN or an absurd bound (1e12 s) would make a wait that never ends. Standard library only.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

__all__ = ["Seconds", "SECONDS", "seconds", "problem", "problems"]

DAY_S = 86400.0


@dataclass(frozen=True)
class Seconds:
    default: float
    least: float
    most: float
    what: str
    """What the duration is, for the refusal's words."""


SECONDS: dict[str, Seconds] = {
    "ADBS_STORE_WAIT_S": Seconds(300.0, 0.0, DAY_S, "how long a study waits for a database server that stopped "
                                                    "answering (adbs_lab/stores/db_server.py)"),
    "ADBS_MLFLOW_LOCKED_WAIT_S": Seconds(300.0, 0.0, DAY_S, "how long a write waits for an MLflow SQLite store that "
                                                            "another process locked (adbs_lab/stores/tracking_store.py)"),
    "ADBS_TUNE_START_WAIT_S": Seconds(120.0, 0.0, DAY_S, "how long a study waits for another study on this machine to "
                                                         "start its trials (adbs_lab/search/tune_staging.py)"),
    "ADBS_CACHE_LEASE_S": Seconds(60.0, 1.0, 3600.0, "how long a trainer's lease on a base-session cache key in an "
                                                     "object store lasts without renewal (adbs/cache.py)"),
}
"""Every duration read from the environment: its default, its bounds (a day at most for a wait: a server or a lock
not back by then is not coming back for this run) and what it is."""


def _read(name: str) -> tuple[float, str | None]:
    spec = SECONDS[name]
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return spec.default, None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and spec.least <= value <= spec.most:
        return value, None
    return spec.default, (f"{name}={raw!r}: not a number of seconds from {spec.least:g} to {spec.most:g} ({spec.what};"
                          f" default {spec.default:g}); give one in that range, or unset it")


def seconds(name: str) -> float:
    """The value of `name` (a key of SECONDS) as set, or its default where it is unset or refused (`problem`)."""
    return _read(name)[0]


def problem(name: str) -> str | None:
    """What is wrong with `name` as set (the refusal's words), or None."""
    return _read(name)[1]


def problems() -> list[str]:
    """What is wrong with every duration of SECONDS as set."""
    return [p for p in map(problem, SECONDS) if p]
