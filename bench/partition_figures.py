"""The busiest partitions' figures at scale: ``make bench SECTION=partition-figures``, on SQLite
and (with ``BENCH_PARTITIONS_PG=1``) on a throwaway PostgreSQL server.

``BENCH_PARTITION_JOBS`` (default 1,000,000) due jobs of one type in 10,000 partitions and
``RUNNING`` running ones: the time a scrape spends on the partitions' figures of that type
(``partition_figures.busiest``), against what it already spends on the job figures of every
type (``stats.scrape_figures`` and the oldest due job per type), p50 and p95 of ``SAMPLES``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from flask import Flask
from sqlalchemy import Connection, text

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.monitoring import rollup
from app.queue.usecases import partition_figures, stats
from app.queue.vocabulary.timeutil import utcnow
from bench.partitions import PARTITIONS, _analyze, _app, _insert

RUNNING = 2_000
SAMPLES = 30

_RUNNING = (
    "UPDATE jobs SET status = 'running', worker_id = 'bench-worker', attempts = 1, "
    "lease_expires_at = :lease WHERE id IN (SELECT id FROM jobs ORDER BY id DESC LIMIT :n)"
)


def _timed(app: Flask, read: Callable[[Connection], object]) -> tuple[float, float]:
    """p50 and p95 in ms of ``read(conn)``, each in its own read transaction."""
    samples = []
    with app.app_context():
        for _ in range(SAMPLES):
            started = time.perf_counter()
            with db.read() as conn:
                read(conn)
            samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def measure(url: str, label: str, size: int) -> None:
    """Load the queue at ``url`` and time both reads."""
    app, producer, _ = _app(url)
    started = time.perf_counter()
    _insert(app, producer.id, size, f"'t' || (i % {PARTITIONS})", timedelta(minutes=5))
    with app.app_context(), db.transaction() as conn:
        conn.execute(text(_RUNNING), {"lease": utcnow() + timedelta(hours=1), "n": RUNNING})
    _analyze(app)
    print(f"{label}: {size:,} jobs in {PARTITIONS:,} partitions loaded in ", end="")
    print(f"{time.perf_counter() - started:.0f} s, {RUNNING:,} of them running")
    with app.app_context():
        types = queue_settings().job_types

    def scrape(conn: Connection) -> None:
        stats.scrape_figures(conn)
        rollup.oldest_due(conn, types, utcnow())

    def busiest(conn: Connection) -> None:
        partition_figures.busiest(conn, ["email.send"], utcnow())

    floor = _timed(app, scrape)
    figures = _timed(app, busiest)
    db.engine(app).dispose()
    print(f"  the job figures of every type (today's scrape): p50 {floor[0]:.1f} ms, ", end="")
    print(f"p95 {floor[1]:.1f} ms")
    print(f"  the busiest partitions of email.send: p50 {figures[0]:.1f} ms, ", end="")
    print(f"p95 {figures[1]:.1f} ms ({figures[0] / floor[0]:.1f}x)")


def run(base: Path) -> None:
    """The section: SQLite, then PostgreSQL when asked for."""
    size = int(os.environ.get("BENCH_PARTITION_JOBS", "1000000"))
    measure(f"sqlite:///{base / 'figures'}.sqlite3", "SQLite", size)
    if os.environ.get("BENCH_PARTITIONS_PG") != "1":
        return
    from devservers.postgres import create_database, postgres_server

    with postgres_server(durable=True) as server:
        measure(create_database(server, "figures"), "PostgreSQL", size)
