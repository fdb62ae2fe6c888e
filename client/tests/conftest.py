"""Fixtures for the client's tests: a real gunicorn server on a prepared SQLite database.

The server side comes from the repository's own test helpers (``devservers.servers``); a worker host
that installs only ``queuelog-client`` needs none of this."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from queuelog_client import Client

from devservers.servers import Database, Gunicorn, prepare_database

ROLES = {"producer": "producer", "worker": "worker", "admin": "admin", "capped": "producer"}
CAPS = {"capped": "medium"}  # a producer that may not enqueue above medium
LEASE = 15  # seconds: heartbeats every 5 s, and a claim lost in a crash comes back quickly


@dataclass
class Server:
    """A running server, its database and one token per role."""

    gunicorn: Gunicorn
    database: Database

    @property
    def url(self) -> str:
        return f"http://{self.gunicorn.host}"

    def client(
        self, role: str, *, timeout: float = 10.0, retries: int = 5, coalesce: bool = True
    ) -> Client:
        token = self.database.tokens[role]
        return Client(self.url, token, timeout=timeout, retries=retries, coalesce=coalesce)

    def requests(self) -> collections.Counter[str]:
        """The requests the server answered so far, by route (its ``/metrics``, over every
        process): what a client cost it, counted where it is paid."""
        with self.client("admin") as admin:
            text = admin.transport.request("GET", "/metrics", idempotent=True).text
        counts: collections.Counter[str] = collections.Counter()
        for family in text_string_to_metric_families(text):
            if family.name == "queuelog_http_requests":
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        counts[sample.labels["route"]] += int(sample.value)
        return counts


def start_server(directory: Path, workers: int = 1, **config: Any) -> Generator[Server]:
    """A migrated database with a producer, a worker and an admin, served by gunicorn: one
    process by default, whose threads serve requests at once (a Python process costs about two
    seconds of CPU to start; several processes are the subject of tests/reliability)."""
    database = prepare_database(directory / "db", ROLES, caps=CAPS)
    gunicorn = Gunicorn(database, directory, workers=workers, **config)
    try:
        yield Server(gunicorn.start(), database)
    finally:
        gunicorn.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server shared by a test module (each test makes its own jobs)."""
    yield from start_server(tmp_path_factory.mktemp("server"))


@pytest.fixture
def producer(server: Server) -> Iterator[Client]:
    with server.client("producer") as client:
        yield client


@pytest.fixture
def admin(server: Server) -> Iterator[Client]:
    with server.client("admin") as client:
        yield client


@pytest.fixture
def worker(server: Server) -> Iterator[Client]:
    with server.client("worker") as client:
        yield client


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own (short leases), so that no other test's jobs are claimed."""
    yield from start_server(tmp_path, LEASE_SECONDS=LEASE)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.3)  # the predicates read the API: leave the server to the worker


def statuses(client: Client, ids: list[int]) -> collections.Counter[str]:
    """How many of ``ids`` are in each status."""
    wanted = set(ids)
    return collections.Counter(j.status for j in client.jobs(limit=1000) if j.id in wanted)


def transitions(client: Client, job_id: int, to_status: str) -> int:
    """How many events moved the job to ``to_status``."""
    return sum(1 for e in client.events(job_id) if e.to_status == to_status)
