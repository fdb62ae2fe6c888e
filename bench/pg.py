"""PostgreSQL end to end: queuelog through its SDK next to pgqueuer's default QueueManager.

One throwaway server (fsync and synchronous_commit on), a database for each system.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg

from bench.e2e import (
    PICKUP_EVERY,
    PICKUP_JOBS,
    Queuelog,
    bulk,
    jobs_per_section,
    line,
    percentiles,
    pickup,
)
from tests.postgres import postgres_server


def _create(server: str, name: str) -> str:
    with psycopg.connect(f"{server.replace('+psycopg', '')}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


async def _pgqueuer(dsn: str, jobs: int) -> float:
    """Install pgqueuer's schema, enqueue ``jobs`` in one call, run 1 default QueueManager;
    jobs/s until its queue table is empty (a completion is durable once its row is gone)."""
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    watch = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        qm = QueueManager(queries)

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            """A no-op job."""

        running = asyncio.create_task(qm.run())
        await asyncio.sleep(1.0)  # started and listening, as queuelog's workers are
        start = time.perf_counter()
        await queries.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            row = await (await watch.execute("SELECT count(*) FROM pgqueuer")).fetchone()
            if row is not None and row[0] == 0:
                break
            await asyncio.sleep(0.01)
        rate = jobs / (time.perf_counter() - start)
        qm.shutdown.set()
        await asyncio.wait_for(running, 30)
        return rate
    finally:
        await conn.close()
        await watch.close()


async def _pgqueuer_pickup(dsn: str, jobs: int) -> tuple[float, float]:
    """One job every 50 ms into an idle pgqueuer queue; (p50, p99) ms from enqueue to held."""
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    listen = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    send = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    held: dict[object, float] = {}
    try:
        qm = QueueManager(Queries(PsycopgDriver(listen)))
        producer = Queries(PsycopgDriver(send))

        @qm.entrypoint("pickup")
        async def pickup(job: Job) -> None:
            """Record when the job is in the consumer's hands."""
            held[job.id] = time.time()

        running = asyncio.create_task(qm.run())
        await asyncio.sleep(1.0)  # listening, idle
        sent: dict[object, float] = {}
        for _ in range(jobs):
            at = time.time()
            (job_id,) = await producer.enqueue(["pickup"], [None], [0])
            sent[job_id] = at
            await asyncio.sleep(max(0.0, PICKUP_EVERY - (time.time() - at)))
        await asyncio.sleep(1.0)
        qm.shutdown.set()
        await asyncio.wait_for(running, 30)
    finally:
        await listen.close()
        await send.close()
    return percentiles([(held[i] - at) * 1000 for i, at in sent.items() if i in held])


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
        their_p50, their_p99 = asyncio.run(_pgqueuer_pickup(dsn, PICKUP_JOBS))
        line("bulk (batches of 100)", ours, theirs, "jobs/s", "pgqueuer")
        line("pickup p50", p50, their_p50, "ms", "pgqueuer")
        line("pickup p99 (goal: <= 50 ms)", p99, their_p99, "ms", "pgqueuer")
