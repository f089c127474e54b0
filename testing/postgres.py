"""A real PostgreSQL server for the tests and bench/load.py (Debian's `postgresql` package: initdb, pg_ctl), started
in a temporary data folder as an unprivileged user (PostgreSQL refuses to run as root, and CI runs as root), on a
free TCP port and a socket folder of its own, so parallel xdist workers each get their own server. Password
authentication over TCP (scram-sha-256), as a lab's server has, so bad credentials are really refused.

tests/conftest.py's `postgres` fixture starts one per test session, bench/load_check.py one per load run; tests that
need it skip with a message where PostgreSQL or its Python driver (psycopg, the `[postgres]` extra) is missing."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from testing.procs import free_port

USER, PASSWORD = "adbs", "adbs-test-pw"


def pg_bin() -> Path | None:
    """The folder of initdb and pg_ctl (Debian keeps them out of PATH, under /usr/lib/postgresql/<version>/bin)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def missing() -> str | None:
    """Why no server can be started here, or None."""
    if pg_bin() is None:
        return "PostgreSQL is not installed (apt-get install postgresql; .ci/run installs it)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the PostgreSQL driver psycopg is not installed (pip install -e '.[postgres]', included in '.[test]')"
    return None


class PgServer:
    """One server in a data folder of its own. `settings`: server settings given as `-c NAME=VALUE` at every start
    (idle_session_timeout=2s: a session idle that long is closed by the server, as a lab's server or proxy does
    after an hour). `restart`, `halt` and `start` are pg_ctl's, for tests of a server that goes away mid-study."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = dict(settings or {})
        self.bin = pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="adbs-test-pg-"))
        self.data, self.sock = self.root / "data", self.root / "sock"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # postgres will not run as root: run it as nobody, who owns only this folder
            self.as_user = ["runuser", "-u", "nobody", "--"]
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
        self.sock.mkdir()
        if self.as_user:
            os.chown(self.sock, pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)

    def _run(self, *cmd: str, timeout: float = 120) -> None:
        r = subprocess.run([*self.as_user, *cmd], capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if r.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")

    def start(self) -> "PgServer":
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            os.chown(pwfile, pwd.getpwnam("nobody").pw_uid, -1)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions")
        return self.resume()

    def resume(self) -> "PgServer":
        """Start the server on its data folder (after `start` made it, or after `halt`), on the same port."""
        opts = (f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=200 -c shared_buffers=32MB")
        opts += "".join(f" -c {k}={v}" for k, v in self.settings.items())
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"),
                  "-w", "-t", "60", "start")
        return self

    def halt(self) -> None:
        """Stop the server as an administrator would (fast: open sessions are ended, their transactions rolled
        back); its data stay for `resume`."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop", timeout=90)

    def restart(self) -> None:
        """A restart as an administrator's (`pg_ctl restart -m fast`): every session ended, the server back on the
        same port a moment later."""
        self.halt()
        self.resume()

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        except Exception:  # noqa: BLE001 - never started, or already gone
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, db: str = "postgres", *, user: str = USER, password: str = PASSWORD, port: int | None = None) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{port or self.port}/{db}"

    def new_database(self, prefix: str = "t") -> str:
        """A new, empty database of its own; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        con = psycopg.connect(self.url(), autocommit=True)
        try:
            with con.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            con.close()
        return self.url(name)
