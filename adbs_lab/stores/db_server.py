"""A database server as a study's store (PostgreSQL, MySQL: the Optuna storage, an MLflow store given as a database
URL): whether an error says the server stopped answering (`store_down`), the SQLAlchemy engine settings the platform
sets (`engine_kwargs`), and how long a study waits for a server that went away before it stops with the --resume
command (`STORE_WAIT_S`, `patiently`). docs/clusters.md ("A database server that goes away") says why each is set.

Light: the tenacity retry loop and the standard library, no SQLAlchemy, Optuna or MLflow at import.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from adbs import env
from adbs.redaction import redact

__all__ = ["STORE_WAIT_S", "POOL_RECYCLE_S", "CONNECT_TIMEOUT_S", "DOWN_WARNING", "is_server",
           "locked", "store_down", "engine_kwargs", "patiently"]

STORE_WAIT_S = env.seconds("ADBS_STORE_WAIT_S")
"""How long one call to a database server that stopped answering (restarted, failed over, unreachable) is retried
before the study stops (exit 1, with the --resume command): long enough for a restart or a fail-over, short enough
that a study whose server is gone for good says so within minutes instead of hanging (adbs/env.py bounds it; a
value out of its bounds is refused before a study starts)."""

POOL_RECYCLE_S = 300
"""A pooled connection older than this is replaced when it is next taken: a firewall or load balancer that drops
idle TCP connections silently (AWS's NLB after 350 s) would leave the pre-ping below waiting on a dead socket."""

CONNECT_TIMEOUT_S = 10
"""A connection attempt to an unreachable PostgreSQL host gives up after this (libpq's connect_timeout), so each
try of the wait takes seconds, not the operating system's TCP timeout of minutes."""

DOWN_WARNING = "is not answering"
"""In the line printed per wait (tests and bench/load.py look for it)."""

_SERVERS = ("postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle")

T = TypeVar("T")


def is_server(url: str) -> bool:
    """Whether `url` names a database server (not a SQLite file, not an MLflow tracking server over HTTP)."""
    return str(url).split("://", 1)[0].split("+", 1)[0].lower() in _SERVERS


def locked(e: BaseException) -> bool:
    """Whether `e` says a SQLite file is locked by another process (waited out apart: tracking_store's client)."""
    text = str(e).lower()
    return "database is locked" in text or "database table is locked" in text


def store_down(e: BaseException) -> bool:
    """Whether `e` (or its causes) says a database or tracking server stopped answering: MLflow's SQL store turns
    the driver's connection errors into TEMPORARILY_UNAVAILABLE (module mlflow.store.db.utils: make_managed_session),
    Optuna's RDB storage into StorageInternalError, SQLAlchemy raises OperationalError, a tracking server's client a
    refused connection. A locked SQLite file is not one (tracking_store's patient client waits it out), nor a full
    disk (its own message: adbs_lab/driver/session.py: disk_full)."""
    cur: BaseException | None = e
    while cur is not None:
        text = str(cur).lower()
        if locked(cur) or "disk is full" in text or "no space left" in text:
            return False
        if getattr(cur, "error_code", None) == "TEMPORARILY_UNAVAILABLE" or type(cur).__name__ in (
                "OperationalError", "InterfaceError", "StorageInternalError") or any(
                m in text for m in ("connection refused", "connection failed", "server closed the connection",
                                    "could not connect", "terminating connection", "max retries exceeded")):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def engine_kwargs(url: str) -> dict[str, Any]:
    """SQLAlchemy's create_engine arguments for a database server's URL ({} for anything else). pool_pre_ping: a
    pooled connection is tested before use and replaced when the server closed it, as PostgreSQL does to a session
    idle past idle_session_timeout, a restart does to all, and a proxy does after its own idle limit (Optuna sets it
    by default only for MySQL: optuna/optuna#5600; MLflow sets it for its SQL store always)."""
    if not is_server(url):
        return {}
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "pool_recycle": POOL_RECYCLE_S}
    if url.split("://", 1)[0].split("+", 1)[0].lower() in ("postgresql", "postgres"):
        kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    return kwargs


def patiently(call: Callable[..., T], *args: Any, what: str, **kwargs: Any) -> T:
    """call(*args, **kwargs), tried again while its server is not answering (`store_down`: refused, restarting,
    the connection cut), after 0.5 s, 1 s, 2 s, ... (at most 10 s apart), until STORE_WAIT_S have passed since the
    first try (the pause under way then ends first), with one warning line per wait; then the last error is
    raised. `what` names the store in that line (redacted). A call is tried again only after it failed: a
    statement that did not commit changed nothing."""
    retrying = Retrying(retry=retry_if_exception(store_down), stop=stop_after_delay(STORE_WAIT_S),
                        wait=wait_exponential(multiplier=0.5, max=10.0), reraise=True,
                        before_sleep=lambda state: _waiting(redact(what), state))
    return retrying(call, *args, **kwargs)


def _waiting(what: str, state: RetryCallState) -> None:
    action, outcome = state.next_action, state.outcome
    assert action is not None and outcome is not None, "tenacity decides after an attempt, before it sleeps"
    e = outcome.exception()
    assert e is not None, "tenacity waits only after a failed attempt"
    shown = e.__cause__ or e  # Optuna's StorageInternalError says only "during the commit"; its cause says why
    first = redact((str(shown).strip().splitlines() or [type(shown).__name__])[0])[:200]  # redact, then cut
    print(f"warning: {what} {DOWN_WARNING} ({first}); waiting up to {STORE_WAIT_S:.0f} s in all for it "
          f"(ADBS_STORE_WAIT_S): try {state.attempt_number}, next in {action.sleep:.1f} s", file=sys.stderr, flush=True)
