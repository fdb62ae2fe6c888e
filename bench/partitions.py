"""Fair turns between partitions: ``make bench SECTION=partitions``, on SQLite and (with
``BENCH_PARTITIONS_PG=1``) on a throwaway PostgreSQL server.

* A noisy neighbour: one partition's ``BENCH_NOISY_JOBS`` (default 100,000) due jobs, older
  than the one due job of each of 100 other partitions: how many of the 100 the first 200
  claims take (goal: all 100; claimed in FIFO order, none would be).
* The claim at scale: ``BENCH_PARTITION_JOBS`` (default 1,000,000) due jobs in 10,000
  partitions, against the same queue without partitions: the claim's p50 on each, sampled in
  turns, each claim rolled back so every sample claims from the same queue. Goal: at most
  1.5 times.

The jobs are written by one set-based INSERT per queue (a recursive CTE on SQLite,
``generate_series`` on PostgreSQL): loading a million rows one by one would take longer than
the measurements.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask
from sqlalchemy import bindparam, text

from app import create_app
from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.timeutil import utcnow
from app.storage import migrate
from app.storage.sqltypes import UTCDateTime
from bench import SECRET
from bench.workflow import _claim
from devservers.accounts import make_user

QUIET = 100  # partitions with one due job each
FIRST = 200  # claims counted in the noisy-neighbour case
PARTITIONS = 10_000
SAMPLES = 200
_NUMBERS = {
    "sqlite": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
    "SELECT i FROM n",
    "postgresql": "SELECT generate_series(1, :count) AS i",
}


def _app(url: str) -> tuple[Flask, Actor, Actor]:
    app = create_app({"SECRET_KEY": SECRET, "DATABASE_URL": url})
    migrate.upgrade(db.engine(app))
    producer = make_user(app, "tenant-app", "producer").actor()
    worker = make_user(app, "tenant-worker", "worker").actor()
    return app, producer, worker


def _insert(app: Flask, owner: int, count: int, partition: str, age: timedelta) -> None:
    """``count`` due jobs of ``owner``, ``age`` old, in the partition the SQL expression
    ``partition`` of the row number ``i`` names (``NULL``: none)."""
    engine = db.engine(app)
    numbers = _NUMBERS[engine.dialect.name]
    columns = "type, payload, priority, max_retries, created_by, run_at, created_at, updated_at"
    values = ["'email.send', '{}', 0, 3, :owner, :at, (:at), (:at),", partition]
    insert = ["INSERT INTO jobs (", columns, ", partition) SELECT", *values]
    insert += ["FROM (", numbers, ") AS numbers"]
    sql = text(" ".join(insert)).bindparams(bindparam("at", type_=UTCDateTime()))
    with app.app_context(), db.transaction() as conn:
        conn.execute(sql, {"owner": owner, "count": count, "at": utcnow() - age})


def _analyze(app: Flask) -> None:
    with db.engine(app).connect() as conn:
        conn.execute(text("ANALYZE"))
        conn.commit()


def noisy_neighbour(url: str, noisy: int) -> int:
    """How many of the quiet partitions' jobs the first ``FIRST`` claims take."""
    app, producer, worker = _app(url)
    _insert(app, producer.id, noisy, "'noisy'", timedelta(hours=1))
    _insert(app, producer.id, QUIET, "'quiet-' || i", timedelta(minutes=1))
    _analyze(app)
    taken: list[Any] = []
    with app.app_context():
        settings = queue_settings()
        for _ in range(FIRST):
            with db.transaction() as conn:
                job = claiming.claim(conn, worker, now=utcnow(), settings=settings)
            assert job is not None
            taken.append(job.partition)
    db.engine(app).dispose()
    return sum(1 for partition in taken if partition != "noisy")


def at_scale(urls: tuple[str, str], size: int) -> tuple[float, float]:
    """The claim's p50 on ``size`` due jobs without partitions and in ``PARTITIONS``
    partitions, sampled in turns so a busy moment of the machine falls on both alike."""
    plain, producer, worker = _app(urls[0])
    parted, _, _ = _app(urls[1])
    started = time.perf_counter()
    _insert(plain, producer.id, size, "NULL", timedelta(minutes=5))
    _insert(parted, producer.id, size, f"'t' || (i % {PARTITIONS})", timedelta(minutes=5))
    for app in (plain, parted):
        _analyze(app)
    print(f"  {size:,} jobs loaded twice in {time.perf_counter() - started:.0f} s")
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(SAMPLES):
        for app, taken in zip((plain, parted), samples, strict=True):
            taken.append(_claim(app, worker))
    for app in (plain, parted):
        db.engine(app).dispose()
    return statistics.median(samples[0]), statistics.median(samples[1])


def measure(urls: tuple[str, str, str], label: str) -> None:
    """Both cases on one engine (``urls``: the noisy queue's, the plain and the partitioned)."""
    noisy = int(os.environ.get("BENCH_NOISY_JOBS", "100000"))
    size = int(os.environ.get("BENCH_PARTITION_JOBS", "1000000"))
    quiet = noisy_neighbour(urls[0], noisy)
    print(
        f"{label}: {noisy:,} due jobs in one partition, then one in each of {QUIET} others: "
        f"the first {FIRST} claims took {quiet} of the {QUIET} "
        f"(goal {QUIET}: {'ok' if quiet == QUIET else 'MISSED'})"
    )
    plain, parted = at_scale((urls[1], urls[2]), size)
    ratio = parted / plain
    print(
        f"  claim p50 at {size:,} due jobs: {plain * 1000:.2f} ms without partitions, "
        f"{parted * 1000:.2f} ms in {PARTITIONS:,} partitions: {ratio:.2f}x "
        f"(goal <= 1.5: {'ok' if ratio <= 1.5 else 'MISSED'})"
    )


def run(base: Path) -> None:
    """The partitions section: SQLite, then PostgreSQL when asked for."""
    names = ("noisy", "plain", "parted")
    sqlite = tuple(f"sqlite:///{base / name}.sqlite3" for name in names)
    measure(sqlite, "SQLite")  # type: ignore[arg-type]
    if os.environ.get("BENCH_PARTITIONS_PG") != "1":
        return
    from devservers.postgres import create_database, postgres_server

    with postgres_server(durable=True) as server:
        urls = tuple(create_database(server, name) for name in names)
        measure(urls, "PostgreSQL")  # type: ignore[arg-type]
