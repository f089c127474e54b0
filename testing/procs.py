"""Servers the tests and bench/ start as processes (MLflow, optuna-dashboard, PostgreSQL, the S3 stand-in): a free
port to give them, waiting until they answer, and stopping them."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A local TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 120, what: str = "the server") -> None:
    """Until something listens on 127.0.0.1:port (RuntimeError when `proc` exits first or time runs out)."""
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{what} does not listen on port {port} (exit code {proc.poll()})") from None
            time.sleep(0.3)


def wait_http(url: str, proc: subprocess.Popen, timeout: float, what: str, log: Path | None = None) -> None:
    """Until `url` answers 200; fails the test, with the end of `log`, when `proc` exits first or time runs out."""
    deadline = time.time() + timeout
    while True:
        try:
            if urllib.request.urlopen(url, timeout=5).status == 200:
                return
        except OSError:
            pass
        assert proc.poll() is None and time.time() < deadline, \
            f"{what} did not start (exit code {proc.poll()}):\n{log.read_text()[-3000:] if log else ''}"
        time.sleep(0.5)


def stop(proc: subprocess.Popen, wait_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it is still running after `wait_s`."""
    proc.terminate()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
