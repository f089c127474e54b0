"""SIGINT or SIGTERM to a command before its own handler takes over (before a study's run, report.py's store,
submit.py's job, adbs.run's training): exit 130 and one line on stderr, no traceback, from the command's first
statement (adbs/light.py: guard). Before, a study script that was still importing died by SIGTERM (143) without a
word and printed a traceback for Ctrl-C, for as long as its imports took (14 s and more on a loaded machine).

Each command is a real process, stopped at one point of its start:
- "first statement": as soon as its handler is in place (the process's caught-signal mask in /proc says so), that
  is, while it imports its own light modules;
- "light import": at the import of one of those modules, paused there (ADBS_FAULT_INJECTION's "import MODULE");
- "heavy import": its flags parsed and checked, inside the import of pandas, torch or Ray that the boundary
  (adbs/light.py: lazy) starts, paused there (slow tier: the process loads part of a heavy library first);
- "after a delay": a fixed time after it started, wherever it is then (slow tier).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adbs.exits import INTERRUPTED

REPO = Path(__file__).resolve().parents[2]
STUDIES = ("ablation", "ablation_path", "alpha_sweep", "boundary", "hosts", "knobs", "kshot_grid")
LINUX = pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the signal mask in /proc")


def _command(entry: str, tmp: Path) -> list[str]:
    """A command that would run for a while past its checks: a dry run, or report.py/submit.py up to their store and
    cluster (none answers)."""
    stores = ["--storage", str(tmp / "runs"), "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}"]
    if entry in STUDIES or entry == "paper":
        return [sys.executable, f"studies/{entry}.py", "--smoke", "--dry-run", *stores]
    if entry == "report":
        # a server that does not answer: a missing SQLite file is refused before the heavy imports (report.py)
        return [sys.executable, "studies/report.py", "ablation", "--tracking-uri", "http://127.0.0.1:9"]
    if entry == "submit":
        return [sys.executable, "studies/submit.py", "--address", "http://127.0.0.1:9", "--", "studies/ablation.py",
                "--smoke", "--storage", str(tmp / "shared"), "--tracking-uri", "http://127.0.0.1:9"]
    assert entry == "adbs.run"
    return [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--dry-run", "--out", str(tmp / "o.json")]


LIGHT = {"ablation": "adbs_lab.driver.options", "report": "adbs_lab.stores.tracking_store",
         "adbs.run": "adbs.config", "paper": "adbs_lab.driver.options", "submit": "adbs_lab.driver.outcome"}
"""A light module each command imports after its handler, before its flags are parsed."""
HEAVY = {"ablation": "pandas", "report": "pandas", "adbs.run": "torch", "paper": "pandas", "submit": "ray"}
"""The heavy library each command's boundary loads once its flags are checked."""


def _caught_sigterm(pid: int) -> bool:
    """Whether process `pid` catches SIGTERM (its handler is installed): /proc/PID/status, SigCgt."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in text.splitlines() if line.startswith("SigCgt:"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def _stopped(entry: str, point: str, sig: int, tmp: Path, delay: float = 0.0) -> subprocess.CompletedProcess:
    """`entry` run until `point`, then sent `sig`: the process as it ended."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pause = {"light import": LIGHT, "heavy import": HEAVY}.get(point)
    if pause is not None:
        env["ADBS_FAULT_INJECTION"] = json.dumps({"pause_at": f"import {pause[entry]}", "marker_dir": str(tmp)})
    argv = _command(entry, tmp)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        reached = {"first statement": lambda: _caught_sigterm(proc.pid),
                   "after a delay": lambda: time.monotonic() - t0 >= delay}.get(
            point, lambda: (tmp / f"paused-import {pause[entry]}").exists())
        while not reached() and proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.001)
        assert proc.poll() is None, (f"{entry} ended before {point}", proc.communicate())
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _one_line(r: subprocess.CompletedProcess, sig: int) -> str:
    assert r.returncode == INTERRUPTED, (r.returncode, r.stderr[-3000:])
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    name = signal.Signals(sig).name
    # the guard's line (adbs/light.py), or the one of adbs.run's own handler, in place once its flags are checked
    assert (f"interrupted ({'Ctrl-C' if sig == signal.SIGINT else name})" in lines[0]
            or lines[0].startswith(f"interrupted by {name}: the run stopped before writing its result")), lines
    return lines[0]


FAST = [*((e, "first statement", (signal.SIGTERM, signal.SIGINT)[i % 2])
          for i, e in enumerate([*STUDIES, "paper", "report", "submit", "adbs.run"])),
        *((e, "light import", (signal.SIGINT, signal.SIGTERM)[i % 2]) for i, e in enumerate(LIGHT))]


@LINUX
@pytest.mark.parametrize(("entry", "point", "sig"), FAST, ids=[f"{e}-{p}-{signal.Signals(s).name}" for e, p, s in FAST])
def test_a_signal_while_a_command_starts_exits_130_with_one_line(tmp_path, entry, point, sig):
    line = _one_line(_stopped(entry, point, sig, tmp_path), sig)
    assert "nothing was started or written" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("entry", list(HEAVY))
def test_a_signal_inside_the_heavy_import_after_the_checks_exits_130_with_one_line(tmp_path, entry, sig):
    line = _one_line(_stopped(entry, "heavy import", sig, tmp_path), sig)
    assert "nothing was started or written" in line or entry == "adbs.run" and "before writing its result" in line


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "delay"), [("ablation", 0.5), ("paper", 1.5), ("adbs.run", 1.0)])
def test_a_signal_after_a_delay_exits_130_with_one_line(tmp_path, entry, delay):
    """Wherever the command is then (its imports, its checks, the driver's preflight), one line and 130."""
    _one_line(_stopped(entry, "after a delay", signal.SIGTERM, tmp_path, delay), signal.SIGTERM)
