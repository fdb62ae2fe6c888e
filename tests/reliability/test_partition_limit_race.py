"""Four worker processes claiming through two gunicorn app servers on one PostgreSQL, each job
held a moment before it is completed: ``partition_max_running`` holds in every partition (the
jobs without a partition being one), sampled by an outside reader all along and replayed from
the job events afterwards, and no partition's rate window holds more claims than its
``partition_rate_limit``; every job is completed exactly once."""

from __future__ import annotations

import math
import multiprocessing
import random
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from devservers.servers import Client, Database, Gunicorn, prepare_database
from tests.reliability.forks import started, stopping

pytestmark = [pytest.mark.slow, pytest.mark.pg]

WORKERS, PER_PARTITION, RATE = 4, 2, 4  # report.build 2 at once a partition; webhook 4 a second
SETTINGS = {
    "report.build": {"partition_max_running": PER_PARTITION},
    "webhook.deliver": {"partition_rate_limit": f"{RATE}/second"},
}
REPORTS = {"a": 12, "b": 12, "c": 6, None: 10}  # report.build jobs per partition
WEBHOOKS = {"a": 8, "b": 8}
USERS = {"producer": "producer"} | {f"worker-{i}": "worker" for i in range(WORKERS)}
DEADLINE = 60.0


@pytest.fixture
def backend() -> str:
    return "postgresql"


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[tuple[Database, list[Gunicorn]]]:
    """The database with its users, and two gunicorn servers on it."""
    database = prepare_database(tmp_path / "db", USERS, url=database_url)
    logs = [tmp_path / name for name in ("a", "b")]
    for log in logs:
        log.mkdir()
    servers = [Gunicorn(database, log, workers=2, JOB_TYPE_SETTINGS=SETTINGS) for log in logs]
    try:
        for server in servers:
            server.start()
        yield database, servers
    finally:
        for server in servers:
            server.stop()


def _worker(hosts: list[str], token: str, seed: int, stop: Any, results: Any) -> None:
    """Claim one to five jobs through either server, hold them a moment, complete them; until
    told to stop. Reports the ids it completed, or the error that stopped it."""
    rng = random.Random(seed)
    clients = [Client(host, token) for host in hosts]
    done: list[int] = []
    try:
        while not stop.is_set():
            client = rng.choice(clients)
            status, body, _ = client.post("/jobs/claim", {"max_jobs": rng.choice([1, 3, 5])})
            assert status in (200, 204), (status, body)
            jobs = body["jobs"] if status == 200 else []
            if not jobs:
                time.sleep(0.01)
                continue
            time.sleep(rng.uniform(0.005, 0.03))  # the work: others claim meanwhile
            results_ = [
                {"id": j["id"], "attempt": j["attempt"], "outcome": "completed"} for j in jobs
            ]
            status, body, _ = rng.choice(clients).post("/jobs/finish", {"results": results_})
            assert status == 200 and all(r["status"] == 200 for r in body["results"]), body
            done += [job["id"] for job in jobs]
        results.put((done, None))
    except Exception as exc:  # reported to the test, which fails with it
        results.put((done, repr(exc)))
    finally:
        for client in clients:
            client.close()


def _seed(host: str, token: str) -> int:
    items = [
        {"type": "report.build"} | ({} if part is None else {"partition": part})
        for part, count in REPORTS.items()
        for _ in range(count)
    ]
    items += [
        {"type": "webhook.deliver", "partition": part}
        for part, count in WEBHOOKS.items()
        for _ in range(count)
    ]
    random.Random(7).shuffle(items)
    client = Client(host, token)
    try:
        status, body, _ = client.post("/jobs/batch", {"jobs": items})
    finally:
        client.close()
    assert status == 201, body
    return len(items)


_RUNNING = text(
    "SELECT coalesce(partition, ''), count(*) FROM jobs WHERE status = 'running' "
    "AND type = 'report.build' GROUP BY 1"
)
_LEFT = text("SELECT count(*) FROM jobs WHERE status <> 'completed'")


def _sample(engine: Engine) -> tuple[int, int]:
    """The most report.build jobs running in one partition now, and the jobs not completed."""
    with engine.connect() as conn:
        running = [n for _, n in conn.execute(_RUNNING)]
        return max(running, default=0), conn.execute(_LEFT).scalar_one()


def _replayed_peaks(engine: Engine) -> dict[str, int]:
    """The most report.build jobs running at once in each partition, replaying the events in
    id order (a claim under partition limits numbers its events after counting, under the
    type's lock)."""
    query = text(
        "SELECT coalesce(j.partition, ''), e.from_status, e.to_status FROM job_events e "
        "JOIN jobs j ON j.id = e.job_id WHERE j.type = 'report.build' ORDER BY e.id"
    )
    running: Counter[str] = Counter()
    peaks: Counter[str] = Counter()
    with engine.connect() as conn:
        for part, source, target in conn.execute(query):
            running[part] += (target == "running") - (source == "running")
            peaks[part] = max(peaks[part], running[part])
    return dict(peaks)


def _claims_per_second(engine: Engine) -> Counter[tuple[str, int]]:
    query = text(
        "SELECT j.partition, e.at FROM job_events e JOIN jobs j ON j.id = e.job_id "
        "WHERE j.type = 'webhook.deliver' AND e.kind = 'claimed'"
    )
    with engine.connect() as conn:
        return Counter(
            (part, math.floor(at.replace(tzinfo=UTC).timestamp()))
            for part, at in conn.execute(query)
        )


def test_partition_max_running_holds_across_processes_and_servers(
    served: tuple[Database, list[Gunicorn]],
) -> None:
    database, servers = served
    hosts = [server.host for server in servers]
    total = _seed(hosts[0], database.tokens["producer"])
    engine = create_engine(database.url)
    # Forked from a clean server process that imported this module once: nothing of this
    # process crosses into the workers, and they start in a fraction of a second.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    stop, results = context.Event(), context.Queue()
    processes = [
        context.Process(
            target=_worker, args=(hosts, database.tokens[f"worker-{i}"], i, stop, results)
        )
        for i in range(WORKERS)
    ]
    started_at, seen, samples, left = time.monotonic(), 0, 0, total
    with started(processes, DEADLINE), stopping(stop):
        while left and time.monotonic() - started_at < DEADLINE:
            peak, left = _sample(engine)
            seen, samples = max(seen, peak), samples + 1
            time.sleep(0.005)
        stop.set()
        reports = [results.get(timeout=DEADLINE) for _ in processes]
    elapsed = time.monotonic() - started_at
    peaks, windows = _replayed_peaks(engine), _claims_per_second(engine)
    engine.dispose()
    assert [error for _, error in reports if error] == []
    done = [job_id for ids, _ in reports for job_id in ids]
    print(
        f"\n{WORKERS} workers, 2 servers: {len(done)} jobs in {elapsed:.1f} s; "
        f"report.build at most {seen} running in a partition in {samples} samples, replayed "
        f"peaks {peaks}; webhook.deliver at most {max(windows.values())} claims a second in a "
        f"partition (limit {RATE})"
    )
    assert left == 0, "the run ended before the queue drained"
    assert sorted(done) == sorted(set(done)) and len(done) == total  # each job once
    assert seen <= PER_PARTITION
    assert max(peaks.values()) == PER_PARTITION  # reached, never passed
    assert max(windows.values()) <= RATE
    assert sum(windows.values()) == sum(WEBHOOKS.values())
