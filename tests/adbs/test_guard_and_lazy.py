"""adbs/light.py: a lazy module imports at its first attribute read and not before (a failure raised there, as an
import's); the guard installs its handler only for the program's own module, and a signal then ends the command with
exit 130 and one line (a second one at once); a study's own handler takes over from it and gives it back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adbs import exits, light

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def handlers():
    """The process's SIGINT and SIGTERM handlers and the guard's text, as they were, after the test."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield before
    for sig, h in before.items():
        signal.signal(sig, h)
    light.doing(light.STARTING)


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.5)  # Python runs the handler at the next bytecode: here


@pytest.mark.parametrize(("name", "attr"), [("csv", "reader"), ("xml.dom.minidom", "parseString"),
                                           ("tests.adbs.no_such_module", "x")])
def test_a_lazy_module_imports_at_its_first_attribute_read(name, attr):
    code = textwrap.dedent(f"""
        import sys
        from adbs import light
        m = light.lazy({name!r})
        print({name!r} in sys.modules)
        try:
            m.{attr}
            print({name!r} in sys.modules)
        except ImportError as e:
            print(type(e).__name__)
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = r.stdout.split()
    assert lines[0] == "False", r.stderr  # declared: nothing imported
    assert lines[1:] == (["ModuleNotFoundError"] if "no_such" in name else ["True"]), r.stderr


def test_a_lazy_module_reads_and_patches_the_module_itself(monkeypatch):
    import json.decoder

    lazy = light.lazy("json.decoder")
    assert lazy.JSONDecodeError is json.decoder.JSONDecodeError
    monkeypatch.setattr(lazy, "JSONDecodeError", KeyError)  # a patch through the lazy name is the module's
    assert json.decoder.JSONDecodeError is KeyError
    assert "json.decoder" in repr(lazy)


@pytest.mark.parametrize("name", ["studies.ablation", "adbs.run", "not main"])
def test_the_guard_installs_nothing_for_an_imported_module(handlers, name):
    light.guard(name)
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


@pytest.mark.parametrize(("sig", "shown"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
@pytest.mark.parametrize("doing", [None, "while reading the MLflow store: run the same command again",
                                   "after job j was submitted: it goes on"])
def test_a_signal_after_the_guard_exits_130_with_one_line(handlers, capsys, sig, shown, doing):
    light.guard("__main__")
    if doing is not None:
        light.doing(doing)
    with pytest.raises(exits.Exit) as e:
        _signal_self(sig)
    assert e.value.code == exits.INTERRUPTED and isinstance(e.value, SystemExit)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f": interrupted ({shown}) {doing or light.STARTING}\n"), err


def test_a_study_run_takes_over_from_the_guard_and_gives_it_back(handlers, capsys):
    """Inside `handling` (adbs_lab/driver/interrupts.py) a signal is the study's (KeyboardInterrupt where it is, the
    step saying what it was doing); after it, the guard's again, saying that the run ended."""
    from adbs_lab.driver import interrupts

    light.guard("__main__")
    guard = signal.getsignal(signal.SIGTERM)
    with interrupts.handling() as ints:
        assert signal.getsignal(signal.SIGTERM) == ints.handler
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is guard and signal.getsignal(signal.SIGINT) is guard
    with pytest.raises(exits.Exit):
        _signal_self(signal.SIGINT)
    assert "interrupted (Ctrl-C) after the study's run ended" in capsys.readouterr().err


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_while_the_first_unwinds_ends_at_once_without_another_line(second):
    code = textwrap.dedent(f"""
        import os, signal, time
        from adbs import light
        light.guard("__main__")
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        finally:  # the first signal's exit unwinds through here, slowly
            os.kill(os.getpid(), {int(second)})
            time.sleep(5)
            print("not reached")
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == exits.INTERRUPTED, r.stderr
    assert r.stderr.strip().splitlines() == ["-c: interrupted (SIGTERM) " + light.STARTING] and not r.stdout


SWALLOWED = {  # places where Python prints an exception as "Exception ignored" and goes on
    "a weakref callback (importlib's module-lock callback)": """
        class A: pass
        a = A()
        keep = weakref.ref(a, lambda _: signal.raise_signal(SIG))
        del a""",
    "a __del__": """
        class A:
            def __del__(self): signal.raise_signal(SIG)
        A()""",
    "a finalizer": """
        class A: pass
        a = A()
        weakref.finalize(a, signal.raise_signal, SIG)
        del a""",
}


@pytest.mark.parametrize("where", SWALLOWED)
@pytest.mark.parametrize(("sig", "shown"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_handled_where_python_swallows_exceptions_still_ends_the_command(where, sig, shown):
    """The handler's exit raised inside a callback is printed as "Exception ignored" and dropped by Python: the command
    ran on after its "interrupted" line, to exit 0 (adbs/light.py: _swallowed raises it again in the main thread)."""
    code = "import signal, time, weakref\nfrom adbs import light\nlight.guard('__main__')\n" + f"SIG = {int(sig)}" + \
        textwrap.dedent(SWALLOWED[where]) + "\ntime.sleep(3)\nprint('still running')\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == exits.INTERRUPTED, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"-c: interrupted ({shown}) " + light.STARTING] and not r.stdout


@pytest.mark.parametrize("module", ["csv", "email.mime.text", "xml.dom"])
def test_the_pause_before_an_import_waits_there_for_the_signal(tmp_path, module):
    """ADBS_FAULT_INJECTION {"pause_at": "import MODULE"}: the command stops just before MODULE is first imported
    (tests/studies/test_interrupted_at_start.py stops the commands so) and exits 130 there."""
    code = f"from adbs import light\nlight.guard('__main__')\nimport {module}\nprint('imported')\n"
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "ADBS_FAULT_INJECTION": f'{{"pause_at": "import {module}", "marker_dir": "{tmp_path}"}}'}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        marker = tmp_path / f"paused-import {module}"
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == exits.INTERRUPTED and out == "", err
    assert err.strip().splitlines() == ["-c: interrupted (SIGTERM) " + light.STARTING]
