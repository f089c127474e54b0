"""The runner: each job is one code on one seed, a subprocess writing its log; --jobs of them at a time,
progress lines echoed, the tail of the log when one fails, and the others stopped.
"""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import ToolError
from .logs import progress_line


@dataclasses.dataclass
class Job:
    code: str  # "released" or "ours"
    seed: int
    cmd: list[str]
    cwd: Path
    log: Path
    result: Path | None = None  # ours' JSON

    @property
    def tag(self) -> str:
        return f"{self.code} seed {self.seed}"


_print_lock = threading.Lock()


def say(msg: str) -> None:
    """Print one line whole, also while runs in threads print theirs."""
    with _print_lock:
        print(msg, flush=True)


def tail(path: Path, n: int = 30) -> str:
    """The last n non-empty lines of a log, indented, for an error message."""
    try:
        lines = path.read_text(errors="replace").replace("\r", "\n").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    | " + ln[:300] for ln in [ln for ln in lines if ln.strip()][-n:])


def run_job(job: Job, *, env: dict[str, str], timeout: float | None, stop: threading.Event) -> float:
    """Run one job, echo its progress lines, return its wall time; raise ToolError with the log's tail on failure."""
    if stop.is_set():
        raise ToolError(f"{job.tag}: not started (an earlier run failed)")
    say(f"[{job.tag}] start (log {job.log})")
    t0 = time.monotonic()
    with open(job.log, "w") as fh:
        fh.write("$ " + " ".join(job.cmd) + f"\n# cwd {job.cwd}\n")
        fh.flush()
        proc = subprocess.Popen(job.cmd, cwd=job.cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    pos, buf, rc = 0, "", None
    while rc is None:
        try:
            rc = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            if stop.is_set():  # another run failed: do not spend the device on this one
                proc.kill()
                proc.wait()
                raise ToolError(f"{job.tag}: stopped (an earlier run failed)") from None
            if timeout and time.monotonic() - t0 > timeout:
                proc.kill()
                proc.wait()
                raise ToolError(f"{job.tag}: killed after --timeout {timeout:.0f}s; last lines of {job.log}:\n"
                                + tail(job.log)) from None
        pos, buf = _echo_progress(job, pos, buf)
    wall = time.monotonic() - t0
    if rc != 0:
        raise ToolError(f"{job.tag} failed (exit status {rc}) after {wall:.0f}s; last lines of {job.log}:\n"
                        + tail(job.log))
    say(f"[{job.tag}] done in {wall:.1f}s")
    return wall


def _echo_progress(job: Job, pos: int, buf: str) -> tuple[int, str]:
    """Echo the progress lines the log gained since byte `pos`; returns the new position and the unfinished line."""
    with open(job.log, "rb") as fh:
        fh.seek(pos)
        chunk = fh.read()
    buf += chunk.decode("utf-8", errors="replace").replace("\r", "\n")
    *lines, buf = buf.split("\n")
    for ln in lines:
        msg = progress_line(job.code, ln)
        if msg:
            say(f"[{job.tag}] {msg}")
    return pos + len(chunk), buf


def run_all(jobs: list[Job], *, n_parallel: int, envs: dict[str, dict[str, str]], timeout: float | None
            ) -> dict[tuple[str, int], float]:
    """Run the jobs, n_parallel at a time; {(code, seed): wall seconds}. A failure stops the rest and raises
    ToolError with every failure's message (not the 'stopped' ones it caused)."""
    stop = threading.Event()
    walls: dict[tuple[str, int], float] = {}
    errors: list[str] = []

    def one(job: Job) -> None:
        try:
            walls[(job.code, job.seed)] = run_job(job, env=envs[job.code], timeout=timeout, stop=stop)
        except ToolError as e:
            if not (stop.is_set() and str(e).endswith("(an earlier run failed)")):
                errors.append(str(e))
            stop.set()

    with ThreadPoolExecutor(max_workers=max(1, n_parallel)) as ex:
        list(ex.map(one, jobs))
    if errors:
        raise ToolError("\n".join(errors))
    return walls
