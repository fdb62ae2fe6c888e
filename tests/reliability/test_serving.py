"""The production server (``make serve``) under long-polls and slow or silent clients."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.accounts import service as accounts
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import EnqueueBody
from app.queue.usecases import enqueueing
from app.queue.vocabulary.timeutil import utcnow
from app.storage.transactions import announce
from devservers.servers import (
    Client,
    Database,
    Served,
    app_settings,
    http_request,
    prepare_database,
    read_status,
    running,
    send_on_new_sockets,
)
from devservers.sockets import read_answer, wait_until_read
from tests.backends import every_backend  # noqa: F401 (these tests run on both engines)

pytestmark = pytest.mark.slow

USERS = {"producer": "producer", "worker": "worker"}
# Seconds every other request gets, whatever the waiters and slow clients do: below the waits
# (5 s and more) a request stalled behind them would take, above what four test processes on
# two busy cores make of a health check at worst (2.02 s once on PostgreSQL in CI, 3.41 s once
# under a CPU quota slower than CI's).
ANSWER_WITHIN = 4.0


@pytest.fixture
def database(database_url: str, tmp_path: Path) -> Database:
    """A migrated database of the backend under test, with a producer and a worker."""
    return prepare_database(tmp_path / "db", USERS, url=database_url)


@pytest.fixture
def server(database: Database, tmp_path: Path) -> Iterator[Served]:
    """The production server with two processes."""
    with running(Served(database, tmp_path, workers=2)) as started:
        yield started


def _long_polls(server: Served, token: str, count: int, wait: float) -> Callable[[], list[Any]]:
    """Send ``count`` long-polling claims, each on its own connection, and wait until the
    server has read every one; the returned function waits for their answers and gives
    [(status, job or None)]."""
    request = http_request("POST", "/jobs/claim", token, {"wait_seconds": wait})
    sockets = send_on_new_sockets(server.port, request, count)
    try:
        wait_until_read(sockets, 30)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise

    def join() -> list[Any]:
        try:
            answers = [read_answer(sock, wait + 30) for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        assert all(a is not None for a in answers), answers
        return [(status, json.loads(body) if body else None) for status, _, body in answers]

    return join


def _timed(call: Callable[[], tuple[int, Any, Any]]) -> tuple[int, float]:
    start = time.monotonic()
    status, _, _ = call()
    return status, time.monotonic() - start


def test_more_waiting_claims_than_processes_leave_enqueues_and_lists_answering(
    server: Served, database: Database
) -> None:
    waiting = _long_polls(server, database.tokens["worker"], count=8, wait=6)
    producer = Client(server.host, database.tokens["producer"], timeout=10)
    for _ in range(3):
        status, took = _timed(lambda: producer.post("/jobs", {"type": "email.send"}))
        assert status == 201 and took < ANSWER_WITHIN, (status, took)
        status, took = _timed(lambda: producer.get("/jobs"))
        assert status == 200 and took < ANSWER_WITHIN, (status, took)
    producer.close()
    results = waiting()
    assert sorted(r[0] for r in results) == [200] * 3 + [204] * 5, results
    assert len({r[1]["id"] for r in results if r[0] == 200}) == 3


def test_slow_clients_do_not_stall_others(server: Served, database: Database) -> None:
    stalled = []
    for _ in range(6):  # each declares a 100-byte body, sends a few bytes and stops
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nuser"
        )
        stalled.append(sock)
    try:
        wait_until_read(stalled, 30)  # each holds the server's attention now
        producer = Client(server.host, database.tokens["producer"], timeout=10)
        for _ in range(5):
            status, took = _timed(lambda: producer.get("/jobs"))
            assert status == 200 and took < ANSWER_WITHIN, (status, took)
            status, took = _timed(lambda: producer.post("/jobs", {"type": "email.send"}))
            assert status == 201 and took < ANSWER_WITHIN, (status, took)
            producer.close()  # a new connection each time: it may land on any process
    finally:
        for sock in stalled:
            sock.close()


@pytest.mark.usefixtures("backend")
def test_long_polls_in_every_process_are_woken_by_an_enqueue_from_another_process(
    server: Served, database: Database
) -> None:
    """Waiters in both server processes; the jobs are enqueued by this test's own process."""
    waiting = _long_polls(server, database.tokens["worker"], count=6, wait=15)
    app = create_app(app_settings(database))
    try:
        with app.app_context():
            request = EnqueueBody.parse({"type": "email.send"}, queue_settings()).to_request()
            with db.transaction() as conn:
                found = accounts.resolve_token(conn, database.tokens["producer"], now=utcnow())
                assert found is not None
                actor = found[1].actor()
                for _ in range(6):
                    announce(enqueueing.enqueue(conn, actor, request, now=utcnow()).effects)
            enqueued = time.monotonic()
    finally:
        db.close(app)
    results = waiting()
    woken = time.monotonic()
    assert [r[0] for r in results] == [200] * 6, results
    # Woken by the enqueue, not by the end of their 15 s waits: 0.02-0.05 s on SQLite and
    # 0.15-0.3 s on PostgreSQL (six claims in turn) on a quiet machine; 1.07 s once on a test
    # run's loaded two cores.
    assert woken - enqueued < 3.0, results


def test_a_long_poll_answers_204_when_nothing_comes(server: Served, database: Database) -> None:
    client = Client(server.host, database.tokens["worker"], timeout=20)
    status, took = _timed(lambda: client.post("/jobs/claim", {"wait_seconds": 1.5}))
    client.close()
    assert status == 204 and 1.5 <= took < 4, (status, took)


def test_a_long_poll_whose_client_hung_up_is_handed_no_job(
    server: Served, database: Database
) -> None:
    """Workers killed while their finish-and-claims wait (a deploy, a crash): the server sees
    their connections close, and the next job goes to a worker still there. Handed to a gone
    waiter, it would have stayed running for the lease, then spent a retry (or failed, with
    none left) without ever running."""
    claim = {"max_jobs": 5, "wait_seconds": 20}
    request = http_request(
        "POST", "/jobs/finish", database.tokens["worker"], {"results": [], "claim": claim}
    )
    gone = send_on_new_sockets(server.port, request, 4)  # in both processes, most likely
    wait_until_read(gone, 30)
    time.sleep(0.5)  # each waits in its process's dispatcher now
    for sock in gone:
        sock.close()
    time.sleep(0.5)  # the server has seen them go
    producer = Client(server.host, database.tokens["producer"], timeout=10)
    worker = Client(server.host, database.tokens["worker"], timeout=10)
    try:
        status, job, _ = producer.post("/jobs", {"type": "email.send", "max_retries": 0})
        assert status == 201
        status, claimed, _ = worker.post("/jobs/claim", {"wait_seconds": 5})
        assert status == 200 and claimed["id"] == job["id"] and claimed["attempt"] == 1
    finally:
        producer.close()
        worker.close()


SLOW_BODY = (
    b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nu"
)


def test_slow_bodies_and_one_tokens_long_polls_leave_the_service_answering(
    server: Served, database: Database
) -> None:
    """160 clients that send a byte of their body and stop, and 140 long-polls of one token
    (the attack of issue #25): health checks and enqueues of another client still answer."""
    stalled = send_on_new_sockets(server.port, SLOW_BODY, 160)
    claim = http_request("POST", "/jobs/claim", database.tokens["worker"], {"wait_seconds": 5})
    waiting = send_on_new_sockets(server.port, claim, 140)
    try:
        wait_until_read(stalled + waiting, 30)
        producer = Client(server.host, database.tokens["producer"], timeout=10)
        for _ in range(5):
            status, took = _timed(lambda: producer.get("/healthz"))
            assert status == 200 and took < ANSWER_WITHIN, (status, took)
            status, took = _timed(lambda: producer.post("/jobs", {"type": "email.send"}))
            assert status == 201 and took < ANSWER_WITHIN, (status, took)
            producer.close()  # a new connection each time: it may land on any process
    finally:
        for sock in stalled + waiting:
            sock.close()


@pytest.fixture
def impatient(database: Database, tmp_path: Path) -> Iterator[Served]:
    """The production server with header and body timeouts of one second."""
    env = {"QUEUELOG_HEADER_TIMEOUT": "1", "QUEUELOG_BODY_TIMEOUT": "1"}
    with running(Served(database, tmp_path, workers=1, env=env)) as started:
        yield started


STOPPED_CLIENTS = {
    "silent": b"",  # connects and says nothing
    "partial headers": b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",
    "partial body": SLOW_BODY,  # a body that stops after one byte
    "no body": SLOW_BODY[: SLOW_BODY.index(b"\r\n\r\n") + 4],  # announced, never sent
}


def test_a_client_that_stops_sending_is_cut_off_after_the_timeout(impatient: Served) -> None:
    sockets = {
        name: send_on_new_sockets(impatient.port, sent, 1)[0]
        for name, sent in STOPPED_CLIENTS.items()
    }
    started = time.monotonic()
    try:
        for name, sock in sockets.items():
            answer = read_status(sock, 5)  # None: closed without an answer
            took = time.monotonic() - started
            assert answer is None or answer[0] == 408, (name, answer)
            assert 0.8 < took < 3, (name, took)
            assert sock.recv(1) == b"", name  # and the connection is closed
    finally:
        for sock in sockets.values():
            sock.close()
