"""One handler for SIGINT (Ctrl-C) and SIGTERM (a scheduler's or service manager's stop) from the first line of
a study's run to its last (adbs_lab/driver/run.py, adbs_lab/driver/compose.py), so an interruption at any step
ends the study with exit 130 and one line, never by the signal (143) or by a handler of Ray's. Before the run, from
the script's first statement, the command's early handler does the same (adbs/light.py: guard); `handling` takes
over from it and gives it back when the run ends.

What the handler does depends on the step (`Interrupts.mode`):
- "raise" (checks, preparing Ray's trials): KeyboardInterrupt where the study is; the step says what it was doing.
- "defer" (starting Ray, claiming the folder, writing the tables): the first signal is noted and raised when the
  step ends, so nothing is left half made (a KeyboardInterrupt inside ray.init can abort the process: exit 134);
  a second signal interrupts at once.
- "tune" (inside tuner.fit): Tune's own graceful stop (SIGUSR1: it saves its state and returns the trials so far,
  ray/tune/tune.py: _setup_signal_catching) once Tune listens for it; before that, KeyboardInterrupt.

Ray installs a SIGTERM handler of its own in the driver when it starts (ray/_private/worker.py: init, and
ray/_private/node.py: _register_shutdown_hooks, both through ray._private.utils.set_sigterm_handler): exiting 15
or 1 with a traceback. `ray_starting` keeps ours in place (Ray's processes are still stopped by its atexit hook
and by ray.shutdown), and Tune's SIGINT handler is turned off (TUNE_DISABLE_SIGINT_HANDLER: ours forwards).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from adbs import light

if TYPE_CHECKING:
    import ray._private.utils as ray_utils
else:
    ray_utils = light.lazy("ray._private.utils")  # Ray's start: loaded by the study's launch, not with this module

__all__ = ["Interrupts", "handling", "current", "ray_starting"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_TUNE_SIGINT = "TUNE_DISABLE_SIGINT_HANDLER"


class Interrupts:
    """The process's one SIGINT/SIGTERM handler and what it saw (`signal`: the first signal's name)."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.mode = "raise"
        self.count = 0
        """Signals received; the first one in a deferred step waits for the step's end, a second does not."""
        self._since = 0  # `count` when the current step began

    def handler(self, signum: int, _frame) -> None:
        self.signal = self.signal or signal.Signals(signum).name
        self.count += 1
        first = self.count == self._since + 1  # the step's first signal
        if self.mode == "defer" and first:
            return  # raised by `during` when the step ends
        if self.mode == "tune" and first and _tune_listens():
            os.kill(os.getpid(), signal.SIGUSR1)
            return
        raise KeyboardInterrupt

    @property
    def name(self) -> str:
        """The signal that stopped the study, as printed (Ctrl-C for SIGINT)."""
        return {"SIGINT": "Ctrl-C", None: "Ctrl-C"}.get(self.signal, self.signal or "Ctrl-C")

    def reinstall(self) -> None:
        """Ours again for both signals, at the C level too: Ray's core worker installs a C++ failure handler for
        SIGTERM (it logs the signal, then aborts: exit 134) behind Python's back, where signal.getsignal still
        names ours; signal.signal sets the process's handler again."""
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                signal.signal(sig, self.handler)

    @contextmanager
    def during(self, mode: str) -> Iterator["Interrupts"]:
        """The block in `mode` ("defer" or "tune"); a signal deferred in it is raised as it ends."""
        before, self.mode, self._since = self.mode, mode, self.count
        try:
            yield self
        finally:
            self.mode = before
        if mode == "defer" and self.count > self._since:
            raise KeyboardInterrupt


def _tune_listens() -> bool:
    """Tune's SIGUSR1 handler is installed (tuner.fit has set up its loop); before, SIGUSR1 would kill us."""
    return hasattr(signal, "SIGUSR1") and callable(signal.getsignal(signal.SIGUSR1))


_CURRENT: Interrupts | None = None


@contextmanager
def handling() -> Iterator[Interrupts]:
    """Our handler for SIGINT and SIGTERM for the block (a study's run, a composition of studies); nested blocks
    share the outer one's. The handlers before are restored after: a script's early one (adbs/light.py: guard),
    or a Python caller's. Off the main thread (a study run from a worker thread) signals cannot be handled: the
    caller's handlers stay."""
    global _CURRENT
    if _CURRENT is not None or threading.current_thread() is not threading.main_thread():
        yield current()
        return
    _CURRENT = Interrupts()
    before = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    # Tune's own SIGINT handler would take Ctrl-C from ours during fit; ours forwards it (SIGUSR1) instead
    tune_env = os.environ.setdefault(_TUNE_SIGINT, "1")
    _CURRENT.reinstall()
    try:
        yield _CURRENT
    finally:
        _CURRENT = None
        if tune_env == "1" and os.environ.get(_TUNE_SIGINT) == "1":
            os.environ.pop(_TUNE_SIGINT, None)
        light.doing("after the study's run ended: what it wrote stays as its lines above say")  # the guard's again
        for sig, h in before.items():
            signal.signal(sig, h if h is not None else signal.SIG_DFL)


def current() -> Interrupts:
    """The handler of the enclosing `handling` block; outside one, a handler that only records (installs nothing)."""
    return _CURRENT if _CURRENT is not None else Interrupts()


@contextmanager
def ray_starting() -> Iterator[None]:
    """ray.init without Ray's SIGTERM handler: ours stays, and a signal meanwhile is raised once Ray is up (a
    KeyboardInterrupt inside ray.init can leave its threads to abort the process)."""
    ints = _CURRENT
    if ints is None:  # no study's handler (a Python caller's own): Ray's as it is
        yield
        return
    saved = ray_utils.set_sigterm_handler
    ray_utils.set_sigterm_handler = lambda _handler: None
    try:
        with ints.during("defer"):
            yield
    finally:
        ray_utils.set_sigterm_handler = saved
        ints.reinstall()  # whatever else Ray's start set: ours again
