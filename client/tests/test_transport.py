"""Retries, backoff and timeouts over real sockets: a scripted HTTP server on 127.0.0.1 for
answers a healthy queuelog never gives on demand (502, 429, dropped connections), and a real
gunicorn server whose SQLite database the test locks to force its 503."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import Server, start_server
from queuelog_client import Client, Conflict, ServerError, Unreachable

from devservers.servers import free_port
from devservers.sockets import serving

AT = "2026-01-02T03:04:05Z"
JOB = {
    **{"id": 7, "type": "email.send", "payload": {}, "priority": "low", "status": "pending"},
    **{"retry_count": 0, "max_retries": 3, "attempt": 0, "idempotency_key": None},
    **{"run_at": AT, "claimed_at": None, "lease_expires_at": None, "worker_id": None},
    **{"progress": None, "progress_message": None, "result": None, "created_at": AT},
    **{"updated_at": AT, "finished_at": None, "secret_names": [], "deadline_at": None},
    **{"depends_on": [], "waiting_for": [], "group_id": None, "parent_id": None, "trace": None},
    **{"partition": None},
}


@dataclass
class Answer:
    """One scripted answer: a status and body, or ``drop`` (close without answering), after
    ``delay`` seconds."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    delay: float = 0.0


class Scripted(ThreadingHTTPServer):
    """Answers requests in the order of ``script`` and records what it received."""

    daemon_threads = True

    def __init__(self, script: list[Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.received: list[tuple[str, str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Scripted

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.received.append((self.command, self.path, json.loads(raw) if raw else None))
        answer = self.server.script.pop(0)
        time.sleep(answer.delay)
        if answer.drop:
            self.close_connection = True
            return
        data = json.dumps(answer.body).encode() if answer.body is not None else b""
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output clean


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with serving(Scripted([])) as httpd:
        yield httpd


def busy(status: int = 503, after: str = "0") -> Answer:
    return Answer(status, {"title": "busy", "status": status}, {"Retry-After": after})


def test_enqueue_is_retried_with_the_same_idempotency_key(scripted: Scripted) -> None:
    scripted.script += [busy(503), Answer(502, {"title": "bad gateway"}), Answer(drop=True)]
    scripted.script += [Answer(201, JOB)]
    with Client(scripted.url, "t") as client:
        job = client.enqueue("email.send", {"a": 1})
    assert job.id == 7
    keys = {body["idempotency_key"] for _, _, body in scripted.received}
    assert len(scripted.received) == 4 and len(keys) == 1


def test_gets_are_retried_after_network_errors(scripted: Scripted) -> None:
    scripted.script += [Answer(drop=True), Answer(500, {"title": "oops"}), Answer(200, JOB)]
    with Client(scripted.url, "t") as client:
        assert client.get(7).status == "pending"
    assert [r[:2] for r in scripted.received] == [("GET", "/jobs/7")] * 3


def test_cancel_is_resent_only_when_it_cannot_have_happened(scripted: Scripted) -> None:
    scripted.script += [busy(503), busy(429), Answer(200, JOB)]
    with Client(scripted.url, "t") as client:
        assert client.cancel(7).id == 7
        assert len(scripted.received) == 3
        scripted.script += [Answer(502, {"title": "bad gateway", "detail": "upstream"})]
        with pytest.raises(ServerError) as caught:
            client.cancel(7)
        assert caught.value.status == 502 and caught.value.detail == "upstream"
        scripted.script += [Answer(drop=True)]
        with pytest.raises(Unreachable):
            client.cancel(7)
    assert len(scripted.received) == 5  # neither the 502 nor the dropped cancel was resent


def test_a_fenced_report_whose_connection_the_server_closed_goes_again_at_once(
    scripted: Scripted,
) -> None:
    """The server closes a kept-alive connection as a heartbeat goes out: the worker's reports
    (sent without retries, the worker keeps them itself) go once more on a new connection."""
    answer = {"results": [{"id": 7, "status": 200}]}
    scripted.script += [Answer(200, answer), Answer(drop=True), Answer(200, answer)]
    slept: list[float] = []
    with Client(scripted.url, "t") as client:
        client.transport.sleep = slept.append
        beat = [{"id": 7, "attempt": 1}]
        assert client.heartbeat(beat, retries=0) == answer["results"]
        assert client.heartbeat(beat, retries=0) == answer["results"]
        assert slept == []  # at once: a closed connection is no failure of the server
        scripted.script += [Answer(drop=True), Answer(drop=True)]
        with pytest.raises(Unreachable):  # but only once: a server that drops every request
            client.heartbeat(beat, retries=0)
    assert len(scripted.received) == 5


def test_retry_after_is_honoured(scripted: Scripted) -> None:
    scripted.script += [busy(429, after="1"), Answer(200, JOB)]
    with Client(scripted.url, "t") as client:
        started = time.monotonic()
        client.get(7)
    assert time.monotonic() - started >= 0.9


def test_retries_are_bounded(scripted: Scripted) -> None:
    scripted.script += [busy(503)] * 3
    with Client(scripted.url, "t", retries=2) as client, pytest.raises(ServerError) as caught:
        client.get(7)
    assert caught.value.status == 503 and caught.value.title == "busy"
    assert len(scripted.received) == 3


def test_every_call_has_a_timeout(scripted: Scripted) -> None:
    scripted.script += [Answer(200, JOB, delay=2.0)]
    with Client(scripted.url, "t", timeout=0.3) as client, pytest.raises(Unreachable) as caught:
        client.cancel(7)
    assert "Timeout" in (caught.value.detail or "")


def test_a_server_that_is_not_there_is_unreachable() -> None:
    client = Client(f"http://127.0.0.1:{free_port()}", "t", retries=1)
    with client, pytest.raises(Unreachable) as caught:
        client.get(1)
    assert caught.value.status is None and "Connect" in (caught.value.detail or "")


def test_an_error_without_a_problem_body_is_still_typed(scripted: Scripted) -> None:
    scripted.script += [Answer(409)]
    with Client(scripted.url, "t") as client, pytest.raises(Conflict) as caught:
        client.get(7)
    assert caught.value.status == 409 and caught.value.title == "Conflict"


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that gives up on a locked database after 200 ms (503 + Retry-After)."""
    yield from start_server(tmp_path_factory.mktemp("busy"), SQLITE_BUSY_TIMEOUT_MS=200)


def locked(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    conn.execute("BEGIN IMMEDIATE")  # holds the write lock until rollback
    return conn


@pytest.mark.slow
def test_a_locked_database_answers_503_and_enqueue_retries_once_it_is_free(
    busy_server: Server,
) -> None:
    conn = locked(busy_server.database.path)
    try:
        impatient = busy_server.client("producer", retries=0)
        with impatient, pytest.raises(ServerError) as caught:
            impatient.enqueue("email.send")
        assert caught.value.status == 503
        results: list[Any] = []
        with busy_server.client("producer") as patient:
            thread = threading.Thread(
                target=lambda: results.append(patient.enqueue("email.send", {"locked": True}))
            )
            thread.start()
            time.sleep(1.5)  # several 503s, each followed by a Retry-After wait
            conn.execute("ROLLBACK")
            thread.join(30)
    finally:
        conn.close()
    assert len(results) == 1 and results[0].status == "pending"
    rows = sqlite3.connect(busy_server.database.path).execute(
        "SELECT id FROM jobs WHERE json_extract(payload, '$.locked') = 1"
    )
    assert [row[0] for row in rows] == [results[0].id]  # created exactly once
