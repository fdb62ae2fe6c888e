"""Measure queuelog against floors taken in the same run, on this machine, right now.

Each figure is printed with a ratio to a floor that does the least work the same path could
do, so a noisy shared machine moves both together:

* service enqueue and claim+complete, one transaction each, against raw ``sqlite3``
  statements with the same pragmas and the same commit per operation;
* claim latency at the head of a deep queue against the same claim on a shallow queue
  (index-served: the ratio should stay near 1);
* each call of the HTTP API through gunicorn against a no-op Flask JSON app served by the
  same gunicorn configuration (``bench/http_calls.py``), then the same calls in one process,
  CPU time per call against the no-op app's (``bench/wsgi_calls.py``), then the HTTP path
  driven by wrk, ``make serve``'s server beside gunicorn (``bench/wrk_http.py``; section
  ``wrk`` alone);
* the sanitizer's CPU time per 4 KiB error against one regular expression's pass over the same
  text (``bench/sanitize.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from app import create_app
from app.accounts import service as accounts
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.contract.job_requests import EnqueueBody
from app.queue.usecases import claiming, enqueueing, reports
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from app.storage.databases import sqlite
from app.storage.schema import jobs
from bench import (
    SECRET,
    attempt_logs,
    e2e,
    http_calls,
    partition_figures,
    partitions,
    pg,
    pg_requests,
    retention,
    sanitize,
    workflow,
    wrk_http,
    wsgi_calls,
)
from bench.scale import run_scale
from devservers.accounts import AS_OPERATOR, make_user

ROOT = Path(__file__).resolve().parent.parent


def rate(count: int, seconds: float) -> float:
    """Operations per second."""
    return count / seconds if seconds > 0 else float("inf")


def timed(fn: Callable[[], int]) -> float:
    """Run ``fn`` (which returns how many operations it did) and return operations per second."""
    start = time.perf_counter()
    count = fn()
    return rate(count, time.perf_counter() - start)


def report(name: str, value: float, floor: float, unit: str = "ops/s") -> None:
    """Print one figure with its ratio to the floor."""
    print(f"  {name:<52} {value:>10.0f} {unit}   ratio {value / floor:5.2f} of floor")


def make_app(folder: Path, **config: Any) -> Any:
    app = create_app(
        {
            "SECRET_KEY": SECRET,
            "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
            **config,
        }
    )
    migrate.upgrade(db.engine(app))
    return app


def floor_sqlite(path: Path, count: int) -> tuple[float, float]:
    """Raw sqlite3: insert rows, then claim-and-finish them, one commit per operation, on a
    file with the pages queuelog gives its own."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={sqlite.PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT, priority INT, run_at TEXT, p TEXT)"
    )
    conn.execute("CREATE INDEX t_claim ON t (priority DESC, run_at, id) WHERE status='pending'")

    def insert() -> int:
        for _ in range(count):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO t (status, priority, run_at, p) VALUES ('pending', 0, ?, ?)",
                (time.time(), json.dumps({"n": 1})),
            )
            conn.execute("COMMIT")
        return count

    def claim_finish() -> int:
        for _ in range(count):
            conn.execute("BEGIN IMMEDIATE")
            (job_id,) = conn.execute(
                "UPDATE t SET status='running' WHERE id = (SELECT id FROM t WHERE "
                "status='pending' ORDER BY priority DESC, run_at, id LIMIT 1) RETURNING id"
            ).fetchone()
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "UPDATE t SET status='completed' WHERE id=? AND status='running'", (job_id,)
            )
            conn.execute("COMMIT")
        return count

    result = timed(insert), timed(claim_finish)
    conn.close()
    return result


_JOB = (
    "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, created_at, "
    "updated_at) VALUES ('email.send', ?, 0, 3, 1, ?, ?, ?) RETURNING id"
)
_EVENT = (
    "INSERT INTO job_events (job_id, at, from_status, to_status, actor, attempt, kind) "
    "VALUES (?, ?, ?, ?, 'p', ?, ?)"
)
_CLAIM = (
    "UPDATE jobs SET status = 'running', worker_id = 'w', attempts = attempts + 1, "
    "claimed_at = ?1, lease_expires_at = ?1, lease_seconds = 300, updated_at = ?1 "
    "WHERE id = (SELECT id FROM jobs INDEXED BY ix_jobs_claim WHERE status = 'pending' "
    "AND run_at <= ?1 ORDER BY priority DESC, run_at, id LIMIT 1) RETURNING id"
)
_COMPLETE = (
    "UPDATE jobs SET status = 'completed', lease_expires_at = NULL, finished_at = ?1, "
    "progress = 100, updated_at = ?1 WHERE id = ?2 AND status = 'running' AND worker_id = 'w'"
)


def floor_schema(folder: Path, count: int) -> tuple[float, float]:
    """Raw sqlite3 on queuelog's own schema (its indexes are most of a commit's pages): the
    same rows the service writes, a job and its event per operation, nothing else."""
    db.close(make_app(folder))
    conn = sqlite3.connect(folder / "bench.sqlite3", isolation_level=None)
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "INSERT INTO users (name, name_lower, role, session_nonce, created_at) "
        "VALUES ('p', 'p', 'producer', 'n', '2026-01-01 00:00:00.000000')"
    )

    def stamp() -> str:
        return str(utcnow().replace(tzinfo=None).isoformat(" ", "microseconds"))

    def insert() -> int:
        for _ in range(count):
            at = stamp()
            conn.execute("BEGIN IMMEDIATE")
            (job_id,) = conn.execute(_JOB, (json.dumps({"n": 1}), at, at, at)).fetchone()
            conn.execute(_EVENT, (job_id, at, None, "pending", None, "enqueued"))
            conn.execute("COMMIT")
        return count

    def claim_finish() -> int:
        for _ in range(count):
            at = stamp()
            conn.execute("BEGIN IMMEDIATE")
            (job_id,) = conn.execute(_CLAIM, (at,)).fetchone()
            conn.execute(_EVENT, (job_id, at, "pending", "running", 1, "claimed"))
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_COMPLETE, (at, job_id))
            conn.execute(_EVENT, (job_id, at, "running", "completed", 1, "completed"))
            conn.execute("COMMIT")
        return count

    result = timed(insert), timed(claim_finish)
    conn.close()
    return result


def service_figures(app: Any, count: int) -> tuple[float, float]:
    """Enqueue then claim+complete through the service, one transaction per call."""
    with app.app_context():
        settings = queue_settings()
        producer, worker = make_user(app, "p", "producer"), make_user(app, "w", "worker")
        request = EnqueueBody.parse(
            {"type": "email.send", "payload": {"n": 1}}, settings
        ).to_request()

        def enqueue() -> int:
            for _ in range(count):
                with db.transaction() as conn:
                    enqueueing.enqueue(conn, producer.actor(), request, now=utcnow())
            return count

        def claim_complete() -> int:
            for _ in range(count):
                with db.transaction() as conn:
                    job = claiming.claim(conn, worker.actor(), now=utcnow(), settings=settings)
                assert job is not None
                with db.transaction() as conn:
                    reports.complete(conn, worker.actor(), job.id, now=utcnow())
            return count

        return timed(enqueue), timed(claim_complete)


def load_queue(app: Any, depth: int) -> Actor:
    """Bulk-load ``depth`` due jobs of mixed priority; return an admin that may claim them."""
    with app.app_context():
        with db.transaction() as conn:
            user = accounts.create_user(
                conn,
                accounts.OPERATOR,
                "bulk",
                "admin",
                now=utcnow(),
                origin=AS_OPERATOR,
            )
            now = utcnow()
            rows = [
                {
                    "type": "email.send",
                    "payload": {"n": i},
                    "priority": (i % 4) * 10,
                    "created_by": user.id,
                    "run_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(depth)
            ]
            for start in range(0, depth, 5000):
                conn.execute(insert(jobs), rows[start : start + 5000])
        raw = db.engine().raw_connection()  # measure claims, not the bulk load's WAL
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw.close()
    return user.actor()


def claim_rate(app: Any, actor: Actor, samples: int) -> float:
    """Claims per second at the head of the queue, one transaction each."""
    with app.app_context():
        settings = queue_settings()

        def claims() -> int:
            for _ in range(samples):
                with db.transaction() as conn:
                    assert claiming.claim(conn, actor, now=utcnow(), settings=settings)
            return samples

        return timed(claims)


ROUNDS = 3  # each figure is the best of this many rounds, floors and figures interleaved
BENCH_LIMITS = {"email.send": {"max_running": 1_000_000, "rate_limit": "1000000/second"}}


def best(rounds: Sequence[tuple[float, ...]]) -> tuple[float, ...]:
    """The best (highest) value of each position over the rounds."""
    return tuple(max(values) for values in zip(*rounds, strict=True))


def service_section(base: Path) -> None:
    """Service layer and deep queue figures against their floors."""
    count = int(os.environ.get("BENCH_OPS", "1000"))
    print(
        f"queuelog bench: {count} operations per figure, best of {ROUNDS} rounds, "
        "SQLite synchronous=FULL"
    )
    rounds = []
    for n in range(ROUNDS):
        (base / f"floor{n}").mkdir()
        floor = floor_sqlite(base / f"floor{n}" / "raw.sqlite3", count)
        same = floor_schema(base / f"schema{n}", count)
        rounds.append(floor + same + service_figures(make_app(base / f"svc{n}"), count))
    floor_insert, floor_claim, schema_insert, schema_claim, enqueue, claim = best(rounds)
    print("service layer vs raw sqlite3 (one commit per operation):")
    report("floor: raw INSERT (one-index table)", floor_insert, floor_insert)
    report("floor: raw job + event INSERT, queuelog's schema", schema_insert, floor_insert)
    report("enqueueing.enqueue (with event row)", enqueue, floor_insert)
    print(f"{'':56} = {enqueue / schema_insert:5.2f} of the same rows on the same schema")
    report("floor: raw claim UPDATE + finish UPDATE (one index)", floor_claim, floor_claim)
    report("floor: the same with events, queuelog's schema", schema_claim, floor_claim)
    report("claiming.claim + reports.complete (with events)", claim, floor_claim)
    print(f"{'':56} = {claim / schema_claim:5.2f} of the same rows on the same schema")
    print("claim at the head of the queue (index-served: ratio should stay near 1):")
    shallow_app, deep_app = make_app(base / "shallow"), make_app(base / "deep")
    # The claimed type limited (limits it never reaches): each claim takes its type's turn,
    # counts its running jobs and its rate window, and records the claim.
    limited_app = make_app(base / "limited", JOB_TYPE_SETTINGS=BENCH_LIMITS)
    shallow_actor, deep_actor = load_queue(shallow_app, 2_000), load_queue(deep_app, 200_000)
    limited_actor = load_queue(limited_app, 2_000)
    shallow, deep, limited = best(
        [
            (
                claim_rate(shallow_app, shallow_actor, 200),
                claim_rate(deep_app, deep_actor, 200),
                claim_rate(limited_app, limited_actor, 200),
            )
            for _ in range(ROUNDS)
        ]
    )
    report("claims/s with 2,000 pending (floor)", shallow, shallow)
    report("claims/s with 200,000 pending", deep, shallow)
    report("claims/s with 2,000 pending, max_running + rate_limit", limited, shallow)


def http_section(base: Path) -> None:
    """Each API call through gunicorn against the no-op floor, then in one process."""
    rounds = int(os.environ.get("BENCH_HTTP_ROUNDS", "5"))
    count = int(os.environ.get("BENCH_HTTP_CALLS", "500"))
    http_calls.run(base / "server", rounds, count, report)
    wsgi_calls.run(base / "in-process", rounds, count)
    print("the HTTP path from a C load generator (wrk): make serve's server beside gunicorn")
    wrk_http.run(base / "wrk")


def scale_section(base: Path) -> None:
    """Pages and lists at 10k and 1M jobs, per role."""
    print("pages and lists at scale (gunicorn -w 4; p50/p95 of 15 requests after one warm-up):")
    run_scale(base)


SECTIONS = {
    "service": service_section,
    "http": http_section,
    "wrk": wrk_http.run,
    "e2e": e2e.run,
    "pg": pg.run,
    "statements": pg_requests.run,
    "scale": scale_section,
    "retention": retention.run,
    "workflow": workflow.run,
    "partitions": partitions.run,
    "partition-figures": partition_figures.run,
    "sanitize": sanitize.run,
    "logs": attempt_logs.run,
}


def main(argv: list[str]) -> None:
    """Run the named sections (``python -m bench e2e``), or all of them."""
    unknown = [name for name in argv if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section {unknown}; choose from {', '.join(SECTIONS)}")
    base = Path(tempfile.mkdtemp(prefix="queuelog-bench-"))
    try:
        for name in argv or list(SECTIONS):
            (base / name).mkdir()
            SECTIONS[name](base / name)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
