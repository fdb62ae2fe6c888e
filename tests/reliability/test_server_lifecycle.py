"""What the production server keeps from the gunicorn configuration it replaced: a graceful
restart lets waiting long-polls answer, and a stuck worker is replaced (real processes and
signals)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from devservers.servers import Client, Database, Served, prepare_database, running

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
        answers: list[Any] = []
        client = Client(server.host, database.tokens["worker"], timeout=15)

        def poll() -> None:
            started = time.monotonic()
            answers.append((client.post("/jobs/claim", {"wait_seconds": 3})[0], started))
            answers.append(time.monotonic() - started)

        thread = threading.Thread(target=poll)
        thread.start()
        time.sleep(0.5)  # the claim is asleep in the worker
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGHUP)
        thread.join(15)
        client.close()
        assert answers and answers[0][0] == 204 and answers[1] >= 3, answers
        assert _wait_for(lambda: server.worker_pids() and server.worker_pids() != before, 15)
        assert Client(server.host, database.tokens["producer"]).get("/healthz")[0] == 200


def test_a_stuck_worker_is_replaced(database: Database, tmp_path: Path) -> None:
    env = {"QUEUELOG_WORKER_TIMEOUT": "2"}
    with running(Served(database, tmp_path, workers=2, env=env)) as server:
        # both started: a worker stopped before its first heartbeat would not be watched yet
        started = ("Started worker-1 runtime", "Started worker-2 runtime")
        assert _wait_for(lambda: all(s in server.log_tail(100) for s in started), 30)
        stuck, healthy = server.worker_pids()
        os.kill(stuck, signal.SIGSTOP)  # its event loop turns no more, as if stuck
        try:
            replaced = _wait_for(lambda: stuck not in server.worker_pids(), 10)
        finally:
            if not replaced:
                os.kill(stuck, signal.SIGCONT)
        assert replaced, server.log_tail()
        assert _wait_for(lambda: len(server.worker_pids()) == 2, 10), server.log_tail()
        assert healthy in server.worker_pids()
        for _ in range(4):  # new connections, whichever worker takes them
            client = Client(server.host, database.tokens["producer"], timeout=5)
            assert client.get("/healthz")[0] == 200
            client.close()
