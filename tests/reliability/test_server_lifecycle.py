"""What the production server keeps from the gunicorn configuration it replaced: a graceful
restart lets waiting long-polls answer, and a stuck worker is replaced (real processes and
signals)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from devservers.servers import (
    Client,
    Database,
    Served,
    http_request,
    prepare_database,
    read_status,
    running,
    send_on_new_sockets,
)
from devservers.sockets import wait_until_read

pytestmark = pytest.mark.slow


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return prepare_database(tmp_path / "db", {"producer": "producer", "worker": "worker"})


def _wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_graceful_restart_lets_a_waiting_long_poll_answer(
    database: Database, tmp_path: Path
) -> None:
    with running(Served(database, tmp_path, workers=1)) as server:
        before = server.worker_pids()
        claim = http_request("POST", "/jobs/claim", database.tokens["worker"], {"wait_seconds": 3})
        started = time.monotonic()
        (sock,) = send_on_new_sockets(server.port, claim, 1)
        try:
            wait_until_read([sock], 30)  # the claim is the old worker's
            assert server.process is not None
            os.kill(server.process.pid, signal.SIGHUP)
            answer = read_status(sock, 30)
            waited = time.monotonic() - started
        finally:
            sock.close()
        assert answer is not None and answer[0] == 204 and waited >= 3, (answer, waited)
        assert "retry-after" not in answer[1]  # it waited, it was not turned away
        # The old worker is gone once its claim answered; a new one serves in its place.
        assert _wait_for(lambda: not set(before) & set(server.worker_pids()), 60)
        assert server.worker_pids() and server.answers(), server.log_tail()


def test_a_stuck_worker_is_replaced(database: Database, tmp_path: Path) -> None:
    env = {"QUEUELOG_WORKER_TIMEOUT": "2"}
    with running(Served(database, tmp_path, workers=2, env=env)) as server:
        # both started: a worker stopped before its first heartbeat would not be watched yet
        started = ("Started worker-1 runtime", "Started worker-2 runtime")
        assert _wait_for(lambda: all(s in server.log_tail(100) for s in started), 30)
        stuck, healthy = server.worker_pids()
        os.kill(stuck, signal.SIGSTOP)  # its event loop turns no more, as if stuck
        try:
            replaced = _wait_for(lambda: stuck not in server.worker_pids(), 60)
        finally:
            if not replaced:
                os.kill(stuck, signal.SIGCONT)
        assert replaced, server.log_tail()
        assert _wait_for(lambda: len(server.worker_pids()) == 2, 60), server.log_tail()
        assert healthy in server.worker_pids()
        for _ in range(4):  # new connections, whichever worker takes them
            client = Client(server.host, database.tokens["producer"], timeout=5)
            assert client.get("/healthz")[0] == 200
            client.close()
