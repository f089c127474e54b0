"""How a command ended, told by its exit code: the same four codes for every study, studies/paper.py,
studies/submit.py --wait, `python -m adbs.run` and the other commands of the repository (docs/studies.md, "Exit codes").

Every command's `main` runs its work through `status` (or is decorated with `entry`), so a layer anywhere below
raises `Exit` with a code and an optional message line instead of printing and exiting itself, and the process's
exit status is decided in one place. Standard library only: the light commands (the MLflow launcher,
studies/report.py --help) import it without torch.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Final, ParamSpec

__all__ = ["OK", "FAILED", "REFUSED", "INTERRUPTED", "Exit", "status", "entry"]

OK: Final = 0
"""Done: every planned trial ended complete, pruned or diverged, and at least one completed (a diverged trial, a
NaN/inf loss, is an outcome of the search recorded as DIVERGED, not an error); for the other commands, they did
what they were asked."""

FAILED: Final = 1
"""Failed after it started: a trial raised an error, no trial completed, or the study failed after it started (the
MLflow store failed, the disk filled, the upload failed). A study's tables, figures and report are written from
what ended."""

REFUSED: Final = 2
"""Refused before anything started (bad input: flags, config, stores, a name another run owns); nothing was
written. argparse's own exit on a usage error is this code too."""

INTERRUPTED: Final = 130
"""Stopped by the user (Ctrl-C, SIGTERM; 128 + SIGINT, as a shell reports it); a study's --resume continues it."""


class Exit(SystemExit):
    """End the command with `code` (one of the codes above), `message` (one line or more, printed to stderr by the
    command's `status`) when given. Any layer raises it; the command's `main` turns it into the exit status.

    It is a SystemExit, as sys.exit's exception is: the `except Exception` handlers between the raise and the
    command's `main` (a trial's error handling, a failed-after-it-started report) let it through, and a caller
    that does not catch it (a script run through runpy, a part of studies/paper.py) still ends with its code."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(code)
        self.code: int = code
        self.message = message

    def announce(self) -> int:
        """Print the message (if any) to stderr; the code."""
        if self.message:
            print(self.message, file=sys.stderr, flush=True)
        return self.code


P = ParamSpec("P")


def status(work: Callable[P, int | None], *args: P.args, **kwargs: P.kwargs) -> int:
    """The exit status of `work(*args, **kwargs)`: the code it returns (None: OK), or the code of the Exit it
    raises, whose message goes to stderr here."""
    try:
        code = work(*args, **kwargs)
    except Exit as e:
        return e.announce()
    return OK if code is None else code


def entry(main: Callable[P, int | None]) -> Callable[P, int]:
    """`main` made a command's entry point: it returns its exit status, an Exit raised below it included
    (`status`)."""

    @functools.wraps(main)
    def entry(*args: P.args, **kwargs: P.kwargs) -> int:
        return status(main, *args, **kwargs)

    return entry
