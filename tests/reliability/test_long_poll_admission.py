"""Long-poll admission behind the production server: one token, or many, cannot make every
request handler wait (real server, real sockets)."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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

pytestmark = pytest.mark.slow

USERS = {"producer": "producer", "worker": "worker", "other": "worker"}
WAIT = 2.5  # seconds each admitted long-poll waits (nothing is ever due)
AT_ONCE = 1.0  # a refused long-poll answers well before its wait would have ended


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return prepare_database(tmp_path / "db", USERS)


@pytest.fixture
def server(database: Database, tmp_path: Path) -> Iterator[Served]:
    """One process with 8 handlers: at most 4 may wait, and 8 per token by default."""
    with running(Served(database, tmp_path, workers=1, threads=8)) as started:
        yield started


def _claims(
    server: Served, token: str, count: int, then: Client | None = None
) -> list[tuple[int, dict[str, str], float]]:
    """Send ``count`` long-polling claims at once; (status, headers, seconds) of each. With
    ``then``, that client's own long-poll meanwhile must be let wait its whole time."""
    start = time.monotonic()
    request = http_request("POST", "/jobs/claim", token, {"wait_seconds": WAIT})
    sockets = send_on_new_sockets(server.port, request, count)
    try:
        other: list[tuple[int, float]] = []
        if then is not None:
            thread = threading.Thread(target=lambda: other.append(_timed_claim(then, start)))
            thread.start()
        answered_after = _answer_times(sockets, start)
        answers = []
        for sock in sockets:
            answer = read_status(sock, 5)
            assert answer is not None
            answers.append((*answer, answered_after[sock]))
        if then is not None:
            thread.join(WAIT + 10)
            assert other and other[0][0] == 204 and other[0][1] >= WAIT, other
    finally:
        for sock in sockets:
            sock.close()
    return answers


def _timed_claim(client: Client, start: float) -> tuple[int, float]:
    """A long-poll of ``client`` sent a moment after the others: it waits its whole time."""
    time.sleep(0.3)
    status, _, headers = client.post("/jobs/claim", {"wait_seconds": WAIT})
    client.close()
    return (status if "retry-after" not in headers else -1), time.monotonic() - start


def _answer_times(sockets: list[socket.socket], start: float) -> dict[socket.socket, float]:
    """Seconds from ``start`` until each socket had an answer to read."""
    times = {}
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        deadline = start + WAIT + 10
        while len(times) < len(sockets) and time.monotonic() < deadline:
            for key, _ in selector.select(deadline - time.monotonic()):
                times[key.fileobj] = time.monotonic() - start
                selector.unregister(key.fileobj)
    assert len(times) == len(sockets), "a long-poll did not answer"
    return times  # type: ignore[return-value]


def test_a_token_waits_in_at_most_its_share_and_the_rest_answer_at_once(
    tmp_path: Path, database: Database
) -> None:
    # 16 of the process's 32 handlers may wait, 8 per token: a second token still gets its own.
    with running(Served(database, tmp_path, workers=1, threads=32)) as server:
        other = Client(server.host, database.tokens["other"], timeout=WAIT + 10)
        answers = _claims(server, database.tokens["worker"], 10, then=other)
    refused = [a for a in answers if a[2] < AT_ONCE]
    waited = [a for a in answers if a[2] >= WAIT]
    assert len(refused) == 2 and len(waited) == 8, answers
    assert all(status == 204 and headers["retry-after"] == "1" for status, headers, _ in refused)
    assert all(status == 204 and "retry-after" not in headers for status, headers, _ in waited)


def test_while_the_handlers_wait_other_requests_answer(server: Served, database: Database) -> None:
    request = http_request("POST", "/jobs/claim", database.tokens["worker"], {"wait_seconds": WAIT})
    waiting = send_on_new_sockets(server.port, request, 20)
    try:
        time.sleep(0.5)  # every admitted claim is asleep now
        producer = Client(server.host, database.tokens["producer"], timeout=3)
        started = time.monotonic()
        assert producer.get("/healthz")[0] == 200
        assert producer.post("/jobs", {"type": "email.send"})[0] == 201
        assert time.monotonic() - started < AT_ONCE
        producer.close()
        statuses = [read_status(sock, WAIT + 10) for sock in waiting]
        assert [s[0] if s else None for s in statuses].count(200) == 1, statuses
        refused = [s for s in statuses if s and "retry-after" in s[1]]
        assert len(refused) == 20 - 4, statuses  # 4 waited (the process's half), one got the job
    finally:
        for sock in waiting:
            sock.close()


def test_the_per_token_bound_is_a_setting(tmp_path: Path, database: Database) -> None:
    with running(
        Served(database, tmp_path, workers=1, threads=32, LONG_POLL_PER_TOKEN=2)
    ) as server:
        answers = _claims(server, database.tokens["worker"], 5)
    assert sorted(a[2] < AT_ONCE for a in answers) == [False] * 2 + [True] * 3, answers
