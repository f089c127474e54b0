"""Servers that the tests and bench/ start as processes of their own, with nothing of this repository's code in them:
a real PostgreSQL server and the port and process handling its start needs. A top-level package, not a folder of
tests/, because bench/load.py (through bench/load_check.py) starts the same PostgreSQL server as the tests, and
bench/ imports nothing from tests/; not a module of adbs_lab/, because no study or lab ever runs it. The package
imports nothing, so `from testing import postgres` is the module; it imports no package of this repository
(pyproject.toml, [tool.importlinter]).

    procs      a free port for a server, waiting until it listens or answers HTTP, stopping it
    postgres   a PostgreSQL server in a temporary data folder, as an unprivileged user (PgServer, missing)
"""

__all__ = ["procs", "postgres"]
