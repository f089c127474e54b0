"""A command line of this repository run in the test's own process, as its subprocess would run it.

For the cases that end before any Ray session or training (refusals, --help): a new Python process spends 3-6 s
importing torch, Ray, MLflow and pandas before it reaches the line that refuses, and the test suite has dozens of
such cases. Running the same script with runpy (or `adbs.run.main` for `python -m adbs.run`) goes through the
same code, the same argparse and the same exit codes. Each command that refuses is still run as a real process
somewhere in the end-to-end tests (tests/adbs/test_run.py, tests/studies/test_paper.py, tests/e2e/test_refusals_and_recovery.py).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Iterator


@contextmanager
def _restored(cwd: str | os.PathLike | None) -> Iterator[None]:
    # the scripts set Ray's and MLflow's variables for their own process, and their signal handlers from their first
    # statement (adbs/light.py: guard); later tests of this worker get none of them
    environ, argv, here = dict(os.environ), list(sys.argv), os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        sys.argv[:] = argv
        os.environ.clear()
        os.environ.update(environ)
        for sig, handler in handlers.items():
            if handler is not None:  # None: not set from Python, nothing to restore
                signal.signal(sig, handler)


def in_process(capsys, argv: list[str], cwd: str | os.PathLike | None = None) -> SimpleNamespace:
    """Run `argv` ([python, script, args...] or [python, "-m", "adbs.run", args...]) here: returncode, stdout and
    stderr, as subprocess.run(..., capture_output=True, text=True) gives them."""
    assert argv[0] == sys.executable, argv
    capsys.readouterr()  # what the test printed before is not the command's
    code: int | None = 0
    with _restored(cwd):
        try:
            if argv[1] == "-m":
                assert argv[2] == "adbs.run", f"only `python -m adbs.run` is run in-process, not {argv[2]}"
                from adbs.run import main

                code = main(argv[3:])
            else:
                sys.argv[:] = argv[1:]
                runpy.run_path(argv[1], run_name="__main__")
        except SystemExit as e:
            code = e.code
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code or 0, stdout=out.out, stderr=out.err)
