"""Module addresses of this repository that moved: `python -m OLD` says where the module went and exits 2 (a
command typed from older notes, a script, a cron line), and `import OLD` raises ImportError naming the new address.
An old address imports nothing of the new module (every name has one address: tests/repo/test_one_address.py).
The command it repeats shows a URL's credentials as *** (adbs/redaction.py). Standard library, adbs/exits.py and
adbs/redaction.py only."""

from __future__ import annotations

import shlex
import sys
from typing import NoReturn

from adbs.exits import REFUSED
from adbs.redaction import redact

__all__ = ["MOVED", "moved"]

MOVED = {"adbs_lab.local_cluster": "adbs_lab.cluster.local_cluster", "adbs_lab.dashboard": "adbs_lab.stores.dashboard",
         "adbs_lab.serve": "adbs_lab.stores.serve"}
"""Old address -> new one: the modules with a `python -m` entry point that moved when adbs_lab/ became packages."""


def moved(old: str, run_as: str) -> NoReturn:
    """The whole of an old address's module: `run_as` is its __name__ ("__main__" under `python -m`)."""
    new = MOVED[old]
    if run_as != "__main__":
        raise ImportError(f"{old} moved to {new}: import it from there")
    args = shlex.join(redact(a) for a in sys.argv[1:])  # a password typed in a URL is not repeated
    print(f"error: python -m {old} moved to python -m {new}; run: python -m {new}{' ' + args if args else ''}",
          file=sys.stderr, flush=True)
    raise SystemExit(REFUSED)
