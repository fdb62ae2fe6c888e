"""Waiting claims behind the production server's processes: a trickle of jobs costs about one
claim statement per job, no empty looks from a commit another process serves (with two server
processes, and with four, where a commit names one of the processes that have waiters to
claim), and a waiter whose types match nothing due is not woken (real server, real sockets,
its /metrics)."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devservers.servers import Client, Database, Served, prepare_database, running
from tests.api.waiting import relooks

pytestmark = pytest.mark.slow

USERS = {"producer": "producer", "worker": "worker", "reporter": "worker", "admin": "admin"}
JOBS = 40  # enqueued one at a time, each on a new connection (so by any server process)
# Long-polling claimers, each asking again as soon as it got a job, by server processes: with
# four processes, three claimers leave some processes without waiters, whose commits the
# others serve.
CLAIMERS = {2: 6, 4: 3}


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return prepare_database(tmp_path / "db", USERS)


@pytest.fixture
def processes() -> int:
    """Server processes (the trickle runs with two and with four)."""
    return 2


@pytest.fixture
def server(database: Database, tmp_path: Path, processes: int) -> Iterator[Served]:
    with running(Served(database, tmp_path, workers=processes, threads=16)) as started:
        yield started


def _figures(server: Served, database: Database) -> dict[tuple[str, tuple[Any, ...]], float]:
    """Every sample of /metrics, by name and labels (both processes' added up)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(
            "GET", "/metrics", headers={"Authorization": f"Bearer {database.tokens['admin']}"}
        )
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _total(samples: dict[tuple[str, tuple[Any, ...]], float], name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, found), value in samples.items()
        if sample == name and all((k, v) in found for k, v in labels.items())
    )


def _claimer(
    server: Served, token: str, got: list[int], stop: threading.Event, **claim: Any
) -> None:
    """A worker's loop on its own keep-alive connection (as a worker's HTTP client keeps one):
    long-poll for one job, take it, ask again."""
    client = Client(server.host, token)
    try:
        while not stop.is_set():
            status, body, _ = client.post("/jobs/claim", {"wait_seconds": 2, **claim})
            if status == 200:
                got.append(body["id"])
    finally:
        client.close()


@pytest.mark.parametrize("processes", sorted(CLAIMERS))
def test_a_trickle_costs_one_claim_per_job_and_no_empty_looks(
    server: Served, database: Database
) -> None:
    before = _figures(server, database)
    began = time.monotonic()
    got: list[int] = []
    stop = threading.Event()
    claimers = [
        threading.Thread(
            target=_claimer,
            args=(server, database.tokens["worker"], got, stop),
            kwargs={"types": ["email.send"]},
        )
        for _ in range(CLAIMERS[server.workers])
    ]
    for thread in claimers:
        thread.start()
    time.sleep(1.0)  # every claimer waits
    enqueued = []
    for _ in range(JOBS):
        producer = Client(server.host, database.tokens["producer"])
        status, job, _ = producer.post("/jobs", {"type": "email.send"})
        producer.close()
        assert status == 201
        enqueued.append(job["id"])
        time.sleep(0.05)
    deadline = time.monotonic() + 20
    while len(got) < JOBS and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in claimers:
        thread.join(10)
    assert sorted(got) == sorted(enqueued)  # each job claimed once, none lost
    after = _figures(server, database)

    def grew(name: str, **labels: str) -> float:
        return _total(after, name, **labels) - _total(before, name, **labels)

    found = grew("queuelog_claim_looks_total", found="yes")
    empty = grew("queuelog_claim_looks_total", found="no")
    by = {
        s: grew("queuelog_claim_looks_total", found="no", source=s)
        for s in ("request", "dispatcher")
    }
    print(f"\n{JOBS} jobs: {found:.0f} looks that found one, {empty:.0f} empty looks {by}")
    assert found == JOBS  # one claim statement per job
    # Empty looks: each claimer's first look, the odd race between a ring and a new wait, and
    # each process's look once it no longer trusts that nothing is due.
    assert empty <= CLAIMERS[server.workers] + 0.1 * JOBS + server.workers * relooks(began)


def test_a_waiter_of_other_types_is_not_woken(server: Served, database: Database) -> None:
    before = _figures(server, database)
    began = time.monotonic()
    got: list[int] = []
    stop = threading.Event()
    reporter = threading.Thread(
        target=_claimer,
        args=(server, database.tokens["reporter"], got, stop),
        kwargs={"types": ["report.build"]},
    )
    reporter.start()
    time.sleep(1.0)
    producer = Client(server.host, database.tokens["producer"])
    for _ in range(10):
        assert producer.post("/jobs", {"type": "email.send"})[0] == 201
        time.sleep(0.05)
    time.sleep(0.5)
    stop.set()
    reporter.join(10)
    after = _figures(server, database)
    looks = _total(after, "queuelog_claim_looks_total") - _total(
        before, "queuelog_claim_looks_total"
    )
    assert got == []
    # The reporter's own first look in each process (and, there, one when the process starts
    # listening, and one each time it no longer trusts that nothing is due), none caused by the
    # ten email jobs.
    assert looks <= 4 + server.workers * relooks(began)
