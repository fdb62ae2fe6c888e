"""Two app servers on one PostgreSQL: exactly-once completion, cross-server wake-ups, kill -9."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from app.api.dispatcher import TRUST
from devservers.servers import (
    REPO,
    Client,
    Database,
    Served,
    http_request,
    prepare_database,
    send_on_new_sockets,
)
from devservers.sockets import read_answer, wait_until_read
from tests.reliability import fleet

pytestmark = [pytest.mark.slow, pytest.mark.pg]

PRODUCERS, WORKERS, JOBS_PER_PRODUCER = 2, 6, 320
KILL_AFTER_COMPLETED = 100
USERS = {f"producer-{i}": "producer" for i in range(PRODUCERS)} | {"worker": "worker"}
CLIENT_TIMEOUT = 80.0


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
def database(database_url: str, tmp_path: Path) -> Database:
    return prepare_database(tmp_path / "db", USERS, url=database_url)


@pytest.fixture
def servers(database: Database, tmp_path: Path) -> Iterator[list[Served]]:
    """Two production servers (``make serve``'s) on different ports; recovered leases are
    due within a second."""
    started = []
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            server = Served(database, tmp_path / name, workers=2, BACKOFF_BASE_SECONDS=1)
            started.append(server.start())
        yield started
    finally:
        for server in started:
            server.stop()


def _spawn(mode: str, hosts: list[str], token: str, **options: Any) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "tests.reliability.fleet", mode, "--hosts", ",".join(hosts)]
    argv += ["--token", token]
    for name, value in options.items():
        argv += [f"--{name}", str(value)]
    return subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _report(process: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = process.communicate(timeout=CLIENT_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _sql(database: Database, statement: str) -> list[Any]:
    engine = create_engine(database.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(statement)))
    finally:
        engine.dispose()


def test_jobs_complete_exactly_once_across_two_servers_even_when_one_is_killed(
    servers: list[Served], database: Database, tmp_path: Path
) -> None:
    hosts = [server.host for server in servers]
    stop = tmp_path / "stop"
    clients = [
        _spawn(
            "produce",
            hosts,
            database.tokens[f"producer-{i}"],
            prefer=i % 2,
            prefix=f"p{i}",
            count=JOBS_PER_PRODUCER,
        )
        for i in range(PRODUCERS)
    ]
    workers = [
        _spawn("work", hosts, database.tokens["worker"], prefer=i % 2, stop=stop)
        for i in range(WORKERS)
    ]
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            done = _sql(database, "SELECT count(*) FROM jobs WHERE status = 'completed'")[0][0]
            if done >= KILL_AFTER_COMPLETED:
                break
            time.sleep(0.05)
        assert done >= KILL_AFTER_COMPLETED, f"only {done} completed before the kill"
        servers[0].kill_9()  # mid-run: its in-flight claims are held by nobody now
        killed = time.monotonic()
        produced = [_report(p) for p in clients]
        # Workers stop at the first empty claim once told to: by then the leases of the jobs
        # claimed through the dead server have run out, so those jobs are due again, and the
        # survivors no longer trust that nothing is due (the dead server may have kept jobs
        # for its own waiters and died before claiming them).
        trusted = TRUST.total_seconds()
        time.sleep(max(0.0, killed + max(fleet.LEASE_SECONDS, trusted) + 0.5 - time.monotonic()))
        stop.touch()
        worked = [_report(w) for w in workers]
    finally:
        for process in clients + workers:
            if process.poll() is None:
                process.kill()
                process.communicate()

    expected = PRODUCERS * JOBS_PER_PRODUCER
    statuses: Counter[str] = Counter()
    for report in produced + worked:
        statuses.update(report["statuses"])
    errors = [e for report in produced + worked for e in report["errors"]]
    server_errors = {k: n for k, n in statuses.items() if k.split()[-1].startswith("5")}
    rows = _sql(database, "SELECT idempotency_key, status FROM jobs")
    completions = Counter(
        job_id
        for (job_id,) in _sql(database, "SELECT job_id FROM job_events WHERE kind = 'completed'")
    )
    acknowledged = Counter(job_id for report in worked for job_id in report["completed"])
    duplicates = [job_id for job_id, n in completions.items() if n != 1]
    lost = [(key, status) for key, status in rows if status != "completed"]
    assert not errors, (errors[:10], statuses)
    assert not server_errors, server_errors
    assert len(rows) == len({key for key, _ in rows}) == expected
    assert not lost and not duplicates, (lost[:10], duplicates[:10])
    assert sum(completions.values()) == expected
    assert all(n == 1 for n in acknowledged.values())
    assert sum(r["failovers"] for r in produced + worked) >= 1  # the kill was felt
    assert statuses["claimed"] >= expected


def test_a_long_poll_on_one_server_is_woken_by_an_enqueue_on_the_other(
    servers: list[Served], database: Database
) -> None:
    claim = http_request("POST", "/jobs/claim", database.tokens["worker"], {"wait_seconds": 15})
    (sock,) = send_on_new_sockets(servers[0].port, claim, 1)
    try:
        wait_until_read([sock], 30)  # the claim is the first server's
        producer = Client(servers[1].host, database.tokens["producer-0"])
        status, job, _ = producer.post("/jobs", {"type": "email.send"})
        enqueued = time.monotonic()
        producer.close()
        answer = read_answer(sock, 30)
        answered = time.monotonic()
    finally:
        sock.close()
    assert status == 201 and answer is not None
    assert answer[0] == 200 and json.loads(answer[2])["id"] == job["id"], answer
    assert answered - enqueued < 1.0
