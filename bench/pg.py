"""PostgreSQL end to end: queuelog through its SDK next to pgqueuer's default QueueManager.

One throwaway server (fsync and synchronous_commit on), a database for each system.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path

import psycopg

from bench.e2e import PICKUP_JOBS, Queuelog, bulk, jobs_per_section, line, pickup
from tests.postgres import postgres_server


def _create(server: str, name: str) -> str:
    with psycopg.connect(f"{server.replace('+psycopg', '')}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


async def _pgqueuer(dsn: str, jobs: int) -> float:
    """Install pgqueuer's schema, enqueue ``jobs`` in one call, drain with 1 QueueManager."""
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        qm = QueueManager(queries)

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            """A no-op job."""

        start = time.perf_counter()
        await queries.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
        await qm.run(mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
        return jobs / (time.perf_counter() - start)
    finally:
        await conn.close()


def run(base: Path) -> None:
    """Bulk drain and pickup latency on PostgreSQL, queuelog next to pgqueuer."""
    jobs = jobs_per_section()
    with postgres_server(durable=True) as server:
        print(f"end to end, PostgreSQL (fsync, synchronous_commit on), {jobs} no-op jobs:")
        system = Queuelog(base / "queuelog", url=_create(server, "queuelog"))
        try:
            ours = bulk(system, jobs)
            p50, p99 = pickup(system, PICKUP_JOBS)
        finally:
            system.close()
        dsn = _create(server, "pgqueuer").replace("+psycopg", "")
        theirs = asyncio.run(_pgqueuer(dsn, jobs))
        line("bulk (batches of 100)", ours, theirs, "jobs/s", "pgqueuer")
        print(f"  {'pickup p50 / p99':<28} queuelog {p50:7.1f} / {p99:.1f} ms (goal: p99 <= 50)")
