"""A big queue for the scale bench, loaded the way a long-lived queue looks.

The jobs go in at the revision before the counters (0008) by the database's own bulk path
(``executemany`` on SQLite, ``COPY`` on PostgreSQL); then the upgrade to the latest revision
runs as it would on a big production database, counting what is there.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from flask import Flask

from app.accounts import service as accounts
from app.infra import db
from app.monitoring import rollup
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from devservers.accounts import AS_OPERATOR

BEFORE_COUNTERS = "0008"
PASSWORD = "bench-password-1234"
PRODUCERS = ("shop", "billing")
WORKERS = ("w1", "w2", "w3", "w4")
MONITOR = "prometheus"
TYPES = ("email.send", "report.build", "webhook.deliver")
# status, share of all jobs; one pending job in nine is back after a failed attempt
MIX = (("completed", 70), ("failed", 10), ("pending", 18), ("running", 2))
SPAN_SECONDS = 172_800  # the jobs were created over the last two days
# Each job is for one of this many customers (PAYLOAD_SEARCH_KEYS names the key): at a million
# jobs a customer has 20, so a payload search for one matches few jobs.
CUSTOMERS = 50_000
SEARCH_KEY = "customer_id"
INSERT_JOBS = (
    "INSERT INTO jobs (id, type, payload, priority, status, retry_count, max_retries, attempts, "
    "idempotency_key, created_by, run_at, claimed_at, lease_expires_at, lease_seconds, "
    "worker_id, result, error, created_at, updated_at, finished_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_EVENTS = (
    "INSERT INTO job_events (job_id, at, from_status, to_status, actor, attempt, kind) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
COPY_JOBS = (
    "COPY jobs (id, type, payload, priority, status, retry_count, max_retries, attempts, "
    "idempotency_key, created_by, run_at, claimed_at, lease_expires_at, lease_seconds, "
    "worker_id, result, error, created_at, updated_at, finished_at) FROM STDIN"
)
COPY_EVENTS = (
    "COPY job_events (job_id, at, from_status, to_status, actor, attempt, kind) FROM STDIN"
)
CHUNK = 20_000


def prepare(app: Flask) -> dict[str, int]:
    """Migrate to the revision before the counters and create the users; their ids by name."""
    migrate.upgrade(db.engine(app), BEFORE_COUNTERS)
    users = [("admin", "admin"), *((p, "producer") for p in PRODUCERS)]
    users += [*((w, "worker") for w in WORKERS), (MONITOR, "monitor")]
    with app.app_context(), db.transaction() as conn:
        return {
            name: accounts.create_user(
                conn,
                accounts.OPERATOR,
                name,
                role,
                password=PASSWORD,
                now=utcnow(),
                origin=AS_OPERATOR,
            ).id
            for name, role in users
        }


def _stamp(value: datetime) -> str:
    """A naive UTC timestamp as SQLAlchemy stores it in SQLite (PostgreSQL parses it too)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def rows(
    count: int, ids: dict[str, int], now: datetime
) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    """Each job's row and its two events, the same for every run and engine."""
    rng = random.Random(7)
    statuses = [status for status, share in MIX for _ in range(share)]
    for job_id in range(1, count + 1):
        status = statuses[job_id % 100]
        owner = rng.choice(PRODUCERS)
        worker = rng.choice(WORKERS)
        created = now - timedelta(seconds=(count - job_id) * SPAN_SECONDS / count + 60)
        finished = created + timedelta(seconds=rng.uniform(1, 50))
        retried = status == "pending" and job_id % 9 == 0
        holds = status in ("running", "completed")  # failing gives the job up
        run_at = finished + timedelta(seconds=rng.uniform(-60, 600)) if retried else created
        job = (
            job_id, TYPES[job_id % len(TYPES)],
            f'{{"{SEARCH_KEY}": {job_id % CUSTOMERS}, "n": 1}}', (job_id % 4) * 10, status,
            1 if status == "failed" or retried else 0, 3, 0 if status == "pending" and not retried
            else 1, f"key-{job_id}" if job_id % 10 == 0 else None, ids[owner], _stamp(run_at),
            _stamp(created) if holds else None,
            _stamp(now + timedelta(hours=6)) if status == "running" else None,
            300 if status == "running" else None, worker if holds else None,
            '{"ok": true}' if status == "completed" else None,
            "boom" if status == "failed" or retried else None, _stamp(created),
            _stamp(finished), _stamp(finished) if status in ("completed", "failed") else None,
        )  # fmt: skip
        at, done = _stamp(created), _stamp(finished)
        enqueued: tuple[Any, ...] = (job_id, at, None, "pending", owner, None, "enqueued")
        claimed: tuple[Any, ...] = (job_id, at, "pending", "running", worker, 1, "claimed")
        if status == "pending" and not retried:  # a second copy keeps two events per job
            events = [enqueued, (job_id, at, None, "pending", "admin", None, "enqueued")]
        elif retried:
            events = [claimed, (job_id, done, "running", "pending", worker, 1, "retry_scheduled")]
        elif status == "running":
            events = [enqueued, claimed]
        else:
            events = [claimed, (job_id, done, "running", status, worker, 1, status)]
        yield job, events


def load_sqlite(path: str, count: int, ids: dict[str, int]) -> None:
    """Bulk-insert the jobs and events in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # loading only; the server runs with the default
    conn.execute("BEGIN")
    jobs: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = []

    def flush() -> None:
        conn.executemany(INSERT_JOBS, jobs)
        conn.executemany(INSERT_EVENTS, events)
        jobs.clear()
        events.clear()

    for job, job_events in rows(count, ids, datetime.now(UTC)):
        jobs.append(job)
        events.extend(job_events)
        if len(jobs) >= CHUNK:
            flush()
    flush()
    conn.execute("COMMIT")
    conn.close()


def load_postgresql(dsn: str, count: int, ids: dict[str, int]) -> None:
    """COPY the jobs, then their events (the rows made again: they are the same), then move
    the id sequence past them."""
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
        with cursor.copy(COPY_JOBS) as copy:
            for job, _ in rows(count, ids, now):
                copy.write_row(job)
        with cursor.copy(COPY_EVENTS) as copy:
            for _, events in rows(count, ids, now):
                for event in events:
                    copy.write_row(event)
        cursor.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), max(id)) FROM jobs")


def analyze(app: Flask) -> None:
    """Fresh planner statistics (and, on PostgreSQL, the visibility map index-only scans use)."""
    engine = db.engine(app)
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
        raw = engine.raw_connection()  # outside a transaction: measure reads, not the load's WAL
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw.close()
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")


def upgrade(app: Flask) -> float:
    """Migrate to the latest revision (with the payload search indexes); seconds it took."""
    started = time.perf_counter()
    migrate.upgrade(db.engine(app), payload_keys=app.config["PAYLOAD_SEARCH_KEYS"])
    return time.perf_counter() - started


def catch_up_metrics(app: Flask) -> float:
    """Fold every loaded event into the metric totals, as a scraper running all along would
    have; seconds it took."""
    started = time.perf_counter()
    with app.app_context():
        while True:
            with db.transaction() as conn:
                if not rollup.roll_up(conn):
                    break
    return time.perf_counter() - started
