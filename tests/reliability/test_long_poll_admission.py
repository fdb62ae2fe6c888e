"""Long-poll admission behind the production server: one token, or many, cannot make every
request handler wait (real server, real sockets)."""

from __future__ import annotations

import select
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
AT_ONCE = 1.0  # seconds other requests take at most while the admitted long-polls wait


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return prepare_database(tmp_path / "db", USERS)


@pytest.fixture
def server(database: Database, tmp_path: Path) -> Iterator[Served]:
    """One process with 8 handlers: at most 4 may wait, and 8 per token by default."""
    with running(Served(database, tmp_path, workers=1, threads=8)) as started:
        yield started


def _claims(
    server: Served, token: str, count: int, then: tuple[Client, int] | None = None
) -> list[tuple[int, dict[str, str], float]]:
    """Send ``count`` long-polling claims at once; (status, headers, seconds) of each. With
    ``then`` (a client and how many of the claims are refused), that client's own long-poll,
    sent once the refusals have come (every claim has been admitted or refused by then), must
    be let wait its whole time."""
    start = time.monotonic()
    request = http_request("POST", "/jobs/claim", token, {"wait_seconds": WAIT})
    sockets = send_on_new_sockets(server.port, request, count)
    try:
        other: list[tuple[int, float]] = []
        if then is not None:
            client, refusals = then
            _wait_for_answers(sockets, refusals)
            thread = threading.Thread(target=lambda: other.append(_timed_claim(client, start)))
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
    """A long-poll of ``client``: its status (-1 when turned away) and seconds since ``start``."""
    status, _, headers = client.post("/jobs/claim", {"wait_seconds": WAIT})
    client.close()
    return (status if "retry-after" not in headers else -1), time.monotonic() - start


def _wait_for_answers(sockets: list[socket.socket], count: int) -> None:
    """Wait (bounded) until ``count`` of ``sockets`` have an answer to read: the long-polls
    turned away answer at once, the admitted ones only when their wait ends."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        readable, _, _ = select.select(sockets, [], [], deadline - time.monotonic())
        if len(readable) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} long-polls were turned away")


def _turned_away(answers: list[tuple[int, dict[str, str], float]]) -> list[bool]:
    """Which long-polls were turned away (``Retry-After: 1``, at once) rather than let wait
    (their whole time), checking each answer is one or the other."""
    for status, headers, took in answers:
        assert status == 204 and headers.get("retry-after", "1") == "1", answers
        assert took < WAIT if "retry-after" in headers else took >= WAIT, answers
    return ["retry-after" in headers for _, headers, _ in answers]


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
        answers = _claims(server, database.tokens["worker"], 10, then=(other, 2))
    assert sorted(_turned_away(answers)) == [False] * 8 + [True] * 2, answers


def test_while_the_handlers_wait_other_requests_answer(server: Served, database: Database) -> None:
    request = http_request("POST", "/jobs/claim", database.tokens["worker"], {"wait_seconds": WAIT})
    waiting = send_on_new_sockets(server.port, request, 20)
    try:
        _wait_for_answers(waiting, 20 - 4)  # 4 wait (the process's half), the rest turned away
        producer = Client(server.host, database.tokens["producer"], timeout=3)
        started = time.monotonic()
        assert producer.get("/healthz")[0] == 200
        assert producer.post("/jobs", {"type": "email.send"})[0] == 201
        assert time.monotonic() - started < AT_ONCE
        producer.close()
        statuses = [read_status(sock, WAIT + 10) for sock in waiting]
        assert [s[0] if s else None for s in statuses].count(200) == 1, statuses
        refused = [s for s in statuses if s and "retry-after" in s[1]]
        assert len(refused) == 20 - 4, statuses  # of the 4 that waited, one got the job
    finally:
        for sock in waiting:
            sock.close()


def test_the_per_token_bound_is_a_setting(tmp_path: Path, database: Database) -> None:
    with running(
        Served(database, tmp_path, workers=1, threads=32, LONG_POLL_PER_TOKEN=2)
    ) as server:
        answers = _claims(server, database.tokens["worker"], 5)
    assert sorted(_turned_away(answers)) == [False] * 2 + [True] * 3, answers
