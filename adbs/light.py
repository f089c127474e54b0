"""What a command does before torch, Ray, MLflow or pandas load: its signal handler from the first statement, and
the one way an entry point reaches the modules that load them.

Every command of the repository (each study script, studies/report.py, studies/paper.py, studies/submit.py,
`python -m adbs.run`) begins with

    from adbs import light
    light.guard(__name__)              # SIGINT and SIGTERM: exit 130 and one line from here on

    driver = light.lazy("adbs_lab.driver.run")   # loaded at its first use, after the flags are checked

so its flags are parsed and checked (what needs no store) before any of those libraries loads, and a signal after
its first statement, at any moment, ends it with exit 130 (adbs/exits.py: INTERRUPTED) and one line on stderr, never
by the signal (143) or with a traceback. A handler of the command's own takes over where it has one (a study's run:
adbs_lab/driver/interrupts.py, whose first Ctrl-C is Tune's graceful stop; the training of `python -m adbs.run`)
and gives this one back when it ends. Before the first statement is Python's own start (0.11 s of the 0.14-0.18 s
to the handler, at load average 8.6 on 2 cores; docs/studies.md, "Exit codes"): a signal there still ends the process as the
signal does.

`lazy` is the boundary: an entry point declares the heavy modules it uses at its top, and each loads where it is
first used (an attribute read), so nothing above that point pays for it. tests/repo/test_light_boundary.py keeps the
rule: an entry point's own imports, and theirs, load none of `HEAVY`, and none of its functions imports them; they
are reached through `lazy`. Standard library only, as adbs/exits.py is.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

from adbs.exits import INTERRUPTED, Exit

__all__ = ["HEAVY", "STARTING", "guard", "doing", "lazy", "pause_point", "PAUSE_KEY"]

HEAVY: Final = ("torch", "ray", "mlflow", "pandas")
"""The libraries an entry point loads only through `lazy`: each costs seconds to import on a loaded machine."""

STARTING: Final = "while starting: nothing was started or written"
"""What a signal interrupts until the command says otherwise (`doing`): parsing and checking its flags, loading its
libraries."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state: dict[str, Any] = {"doing": STARTING, "signal": "", "again": False}


def guard(name: str) -> None:
    """The command's handler for SIGINT and SIGTERM from here on, when `name` (the caller's `__name__`) is
    "__main__": the module runs as the program. Imported (studies/paper.py imports the study scripts, a test imports
    one), it installs nothing. Off the main thread, where signals cannot be handled, neither."""
    if name != "__main__" or threading.current_thread() is not threading.main_thread():
        return
    _state.update(doing=STARTING, signal="", again=False)
    for sig in _SIGNALS:
        signal.signal(sig, _handler)
    sys.unraisablehook = _swallowed(sys.unraisablehook)
    _pause_before_import()


def _swallowed(previous: Any) -> Any:
    """sys.unraisablehook that answers a signal whose exit was swallowed: a handler that runs inside a weakref
    callback or a __del__ (importlib's module-lock callback while a module imports) raises its Exit there, where Python
    prints it as "Exception ignored" and goes on, so the command ran on after its "interrupted" line. The exit is
    raised again in the main thread, from a timer thread, once the callback has returned (no second line)."""
    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, Exit) and exc.code == INTERRUPTED and _state["signal"] in ("SIGINT", "SIGTERM"):
            _state["again"] = True
            signum = signal.Signals[_state["signal"]]
            import _thread

            threading.Timer(0.01, _thread.interrupt_main, args=(signum,)).start()
            return
        previous(unraisable)

    return hook


def doing(what: str) -> None:
    """What a signal would interrupt from now on, as its line says it after "interrupted (SIGTERM) ": e.g. "while
    reading the MLflow store; run the same command again" (studies/report.py)."""
    _state["doing"] = what


def _handler(signum: int, _frame: object) -> None:
    """One line, then exit 130 through SystemExit (adbs/exits.py: Exit), so `finally` blocks and atexit still run;
    a second signal while the first unwinds ends the process at once, without another line."""
    if _state["again"]:  # the first signal's exit, raised again (`_swallowed`)
        _state["again"] = False
        raise Exit(INTERRUPTED)
    if _state["signal"]:
        os._exit(INTERRUPTED)
    _state["signal"] = signal.Signals(signum).name
    shown = "Ctrl-C" if signum == signal.SIGINT else _state["signal"]
    line = f"{_program()}: interrupted ({shown}) {_state['doing']}"
    try:
        sys.stdout.flush()  # what the command printed comes first
    except (OSError, ValueError, RuntimeError):  # closed, or the signal came inside a write to it
        pass
    try:
        print(("\n" if sys.stderr.isatty() else "") + line, file=sys.stderr, flush=True)
    except (OSError, ValueError, RuntimeError):  # the signal came inside a write to stderr: past its buffer
        os.write(2, (line + "\n").encode())
    raise Exit(INTERRUPTED)


def _program() -> str:
    """The command as its line names it: `python -m adbs.run`, or the script's name (`ablation.py`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return f"python -m {spec.name}" if spec is not None and spec.name else os.path.basename(sys.argv[0])


class _Lazy:
    """A module that imports itself at its first attribute read (`importlib.import_module`, which raises there as
    an import would, and is tried again at the next read). Not the standard library's LazyLoader, which imports a
    dotted name's parents at once (`mlflow.tracking` would import mlflow) and leaves a module that failed to load
    half made in sys.modules."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __setattr__(self, attr: str, value: Any) -> None:  # a patch of the module's name (a test's, a hook's)
        if attr == "_name":
            object.__setattr__(self, attr, value)
        else:
            setattr(importlib.import_module(self._name), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at its first use (adbs/light.py)>"


def lazy(name: str) -> Any:
    """The module `name`, imported at its first attribute read (`driver.main(...)`), not here; typed as the module
    where the caller imports it under `if TYPE_CHECKING:`."""
    return _Lazy(name)


PAUSE_KEY = "pause_at"


def pause_point(name: str, **facts: object) -> None:
    """Fault injection for the interruption tests: with ADBS_FAULT_INJECTION {"pause_at": NAME, "marker_dir": DIR}
    the command writes DIR/paused-NAME and waits here (at most 60 s) for the test's signal. Other keys of it name
    `facts` the point must have ({"pause_at": "base_session", "seed": 2}: a trial of seed 2). Does nothing otherwise.
    The points: "import MODULE" (just before MODULE is first imported: `guard` installs it) and the study's own
    (adbs_lab/driver/run.py, adbs_lab/driver/launch.py, adbs_lab/driver/tracker.py)."""
    spec = os.environ.get("ADBS_FAULT_INJECTION")
    if not spec or f'"{PAUSE_KEY}"' not in spec:
        return
    f = json.loads(spec)
    if f.get(PAUSE_KEY) != name or any(f[k] != v for k, v in facts.items() if k in f):
        return
    Path(f["marker_dir"], f"paused-{name}").write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)


class _PauseBefore:
    """A finder on sys.meta_path (the protocol is its find_spec; importlib.abc, whose base class it would be, costs
    a hundredth of a second to import before the handler is in place): pauses (`pause_point`) just before one module
    is first imported, then lets the import go on as it would."""

    def __init__(self, module: str) -> None:
        self.module = module

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == self.module:
            sys.meta_path.remove(self)
            pause_point(f"import {fullname}")
        return None


def _pause_before_import() -> None:
    """ADBS_FAULT_INJECTION {"pause_at": "import MODULE", ...}: a pause inside the import of MODULE's importer (e.g.
    "import pandas" while a study loads its driver), for the tests of a signal there."""
    spec = os.environ.get("ADBS_FAULT_INJECTION")
    if spec and f'"{PAUSE_KEY}"' in spec:
        at = str(json.loads(spec).get(PAUSE_KEY, ""))
        if at.startswith("import "):
            sys.meta_path.insert(0, _PauseBefore(at[len("import "):]))
