"""The tests' own HTTP client (``devservers.servers.Client``) meets connections the server has
closed: ``make serve``'s server closing idle ones (after ``QUEUELOG_HEADER_TIMEOUT``), and a
server on 127.0.0.1 that closes them at moments a healthy queuelog does not choose on demand
(right after an answer, or as the next request arrives)."""

from __future__ import annotations

import socket
import socketserver
from collections.abc import Iterator
from pathlib import Path

import pytest

from devservers.servers import Client, Served, prepare_database, running
from devservers.sockets import serving

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Closing(socketserver.ThreadingTCPServer):
    """Answers the first request of each connection as if keeping it alive, then closes it:
    at once (``wait_for_next`` false: an idle timeout of zero), or once the next request has
    arrived, unanswered (an idle timeout that fires as it comes). Records each request line."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *, wait_for_next: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.wait_for_next = wait_for_next
        self.received: list[str] = []

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(socketserver.StreamRequestHandler):
    server: Closing

    def handle(self) -> None:
        self._read_request()
        self.wfile.write(ANSWER)
        self.wfile.flush()
        if self.server.wait_for_next:
            self._read_request()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _read_request(self) -> None:
        line = self.rfile.readline().decode().strip()
        length = 0
        while header := self.rfile.readline().strip():
            name, _, value = header.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        self.rfile.read(length)
        if line:
            self.server.received.append(line)


@pytest.fixture(params=[False, True], ids=["closed-after-answering", "closed-as-the-next-came"])
def closing(request: pytest.FixtureRequest) -> Iterator[Closing]:
    with serving(Closing(wait_for_next=request.param)) as server:
        yield server


def test_a_get_whose_connection_the_server_closed_goes_on_a_new_one(closing: Closing) -> None:
    client = Client(closing.host, "t", timeout=10)
    try:
        assert [client.get(f"/groups/{n}")[0] for n in range(3)] == [200] * 3
    finally:
        client.close()
    assert closing.received[-1] == "GET /groups/2 HTTP/1.1"


def test_a_post_that_may_have_arrived_is_not_sent_again() -> None:
    with serving(Closing(wait_for_next=True)) as closing:  # it reads the second, then closes
        client = Client(closing.host, "t", timeout=10)
        try:
            assert client.post("/jobs/claim")[0] == 200
            with pytest.raises(ConnectionError):
                client.post("/jobs/claim")
        finally:
            client.close()
    assert closing.received == ["POST /jobs/claim HTTP/1.1"] * 2  # each once


@pytest.mark.slow
def test_any_request_goes_on_a_new_connection_once_the_server_closed_the_idle_one(
    tmp_path: Path,
) -> None:
    database = prepare_database(tmp_path / "db", {"producer": "producer"})
    idle_close = {"QUEUELOG_HEADER_TIMEOUT": "1"}  # granian closes a connection idle for 1 s
    with running(Served(database, tmp_path, workers=1, env=idle_close)) as server:
        client = Client(server.host, database.tokens["producer"], timeout=10)
        try:
            assert client.get("/jobs")[0] == 200
            assert client.closed_by_server(wait=30)
            status, job, _ = client.post("/jobs", {"type": "email.send"})
            assert status == 201, job
            assert client.closed_by_server(wait=30)
            status, page, _ = client.get("/jobs")
            assert status == 200 and [j["id"] for j in page["jobs"]] == [job["id"]]
        finally:
            client.close()
