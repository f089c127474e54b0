"""The check of a tracking server (adbs_lab/stores/tracking_store.py: tracking_problem, the preflight's and so
--dry-run's) answers within its bound whatever holds the server up: a name server that does not answer (outside
requests' timeouts), a server that trickles its answer (each byte within the read timeout), one that accepts and says
nothing; a refused connection at once. Each is a real socket or resolver call, the bound shortened for the test."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from adbs_lab.stores import tracking_store
from testing.procs import free_port

BOUND_S = 2.0


def _serve(port: int, answer) -> threading.Event:
    """A TCP server on 127.0.0.1:`port` calling answer(conn, stop) for each connection, until `stop` is set."""
    stop = threading.Event()
    srv = socket.create_server(("127.0.0.1", port))
    srv.settimeout(0.2)

    def loop():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(conn, stop), daemon=True).start()
        srv.close()

    threading.Thread(target=loop, daemon=True).start()
    return stop


def _trickle(conn, stop):
    """An answer a byte a second for a minute: each read is within the 10 s timeout of requests."""
    conn.recv(65536)
    for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"x" * 20:
        if stop.wait(1.0):
            break
        try:
            conn.sendall(bytes([b]))
        except OSError:
            break
    conn.close()


def _silent(conn, stop):
    stop.wait(60)
    conn.close()


@pytest.fixture
def bound(monkeypatch):
    monkeypatch.setattr(tracking_store, "PROBE_S", BOUND_S, raising=False)


@pytest.mark.parametrize("answer", [_trickle, _silent], ids=["trickles its answer", "says nothing"])
def test_a_server_that_holds_the_check_up_is_refused_within_the_bound(bound, answer):
    port = free_port()
    stop = _serve(port, answer)
    try:
        t0 = time.monotonic()
        with pytest.raises(tracking_store.TrackingError, match=f"tracking URI 'http://127.0.0.1:{port}'"):
            tracking_store.tracking_problem(f"http://127.0.0.1:{port}")
        assert time.monotonic() - t0 < BOUND_S + 3
    finally:
        stop.set()


def test_a_name_server_that_does_not_answer_is_refused_within_the_bound(bound, monkeypatch):
    """Resolving the host is outside requests' timeouts: the system resolver's own add up to minutes."""
    real = socket.getaddrinfo

    def stalled(host, *args, **kwargs):
        if host == "mlflow.stalled.example":
            time.sleep(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", stalled)
    t0 = time.monotonic()
    with pytest.raises(tracking_store.TrackingError, match="did not answer within"):
        tracking_store.tracking_problem("http://mlflow.stalled.example:5000")
    assert time.monotonic() - t0 < BOUND_S + 3


def test_a_refused_connection_is_refused_at_once_with_its_reason(bound):
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(tracking_store.TrackingError, match="is unreachable") as e:
        tracking_store.tracking_problem(f"http://127.0.0.1:{port}")
    assert time.monotonic() - t0 < BOUND_S + 3 and "pass --tracking-uri" in str(e.value)
