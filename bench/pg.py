"""PostgreSQL end to end: queuelog through its SDK next to pgqueuer's default QueueManager.

One throwaway server (fsync and synchronous_commit on), a database for each system. Rounds
alternate between the two, each run after a warm-up drain, as in the SQLite section.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.e2e import (
    BATCH,
    PICKUP_EVERY,
    PICKUP_JOBS,
    WARM_UP,
    Queuelog,
    bulk,
    fsync_ms,
    jobs_per_section,
    line,
    load,
    percentiles,
    pickup,
    rounds_per_section,
    warm_up,
)
from tests.postgres import postgres_server


def _create(server: str, name: str) -> str:
    with psycopg.connect(f"{server.replace('+psycopg', '')}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


async def _install(dsn: str) -> None:
    """pgqueuer's schema (what ``pgq install`` creates)."""
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await Queries(PsycopgDriver(conn)).install()


Scenario = Callable[[Any, Any, dict[object, float]], Awaitable[float | tuple[float, float]]]


async def _with_manager(dsn: str, scenario: Scenario) -> Any:
    """Run ``scenario(producer queries, watching connection, held)`` next to one default
    QueueManager (entrypoint ``noop``; ``held`` gets each job's pickup time), after it has
    started listening and drained a warm-up batch."""
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

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            """A no-op job that notes when it was picked up."""
            held[job.id] = time.time()

        running = asyncio.create_task(qm.run())
        await asyncio.sleep(1.0)  # started and listening
        await _drain(producer, send, WARM_UP)
        held.clear()
        figure = await scenario(producer, send, held)
        qm.shutdown.set()
        await asyncio.wait_for(running, 30)
        return figure
    finally:
        await listen.close()
        await send.close()


async def _drain(producer: Any, watch: Any, jobs: int) -> float:
    """Enqueue ``jobs`` in one call; jobs/s until the queue table is empty (a completion is
    durable once its row is gone)."""
    start = time.perf_counter()
    await producer.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        row = await (await watch.execute("SELECT count(*) FROM pgqueuer")).fetchone()
        if row is not None and row[0] == 0:
            break
        await asyncio.sleep(0.01)
    return jobs / (time.perf_counter() - start)


def _pgqueuer_bulk(dsn: str, jobs: int) -> float:
    async def scenario(producer: Any, watch: Any, held: dict[object, float]) -> float:
        return await _drain(producer, watch, jobs)

    return float(asyncio.run(_with_manager(dsn, scenario)))


def _pgqueuer_pickup(dsn: str, jobs: int) -> tuple[float, float]:
    """One job every 50 ms into an idle pgqueuer queue; (p50, p99) ms from enqueue to held."""

    async def scenario(producer: Any, watch: Any, held: dict[object, float]) -> tuple[float, float]:
        sent: dict[object, float] = {}
        for _ in range(jobs):
            at = time.time()
            (job_id,) = await producer.enqueue(["noop"], [None], [0])
            sent[job_id] = at
            await asyncio.sleep(max(0.0, PICKUP_EVERY - (time.time() - at)))
        await asyncio.sleep(1.0)
        return percentiles([(held[i] - at) * 1000 for i, at in sent.items() if i in held])

    p50, p99 = asyncio.run(_with_manager(dsn, scenario))
    return p50, p99


def run(base: Path) -> None:
    """Bulk drain and pickup latency on PostgreSQL, queuelog next to pgqueuer."""
    jobs, rounds = jobs_per_section(), rounds_per_section()
    with postgres_server(durable=True) as server:
        print(
            f"end to end, PostgreSQL (fsync, synchronous_commit on), {jobs} no-op jobs, "
            f"median (best) of {rounds} rounds:"
        )
        started, fsync = load(), fsync_ms(base)
        dsn = _create(server, "pgqueuer").replace("+psycopg", "")
        asyncio.run(_install(dsn))
        system = Queuelog(base / "queuelog", url=_create(server, "queuelog"))
        ours: dict[str, list[float]] = {"bulk": [], "p50": [], "p99": []}
        theirs: dict[str, list[float]] = {"bulk": [], "p50": [], "p99": []}
        try:
            for n in range(rounds):
                for side in ("queuelog", "pgqueuer") if n % 2 == 0 else ("pgqueuer", "queuelog"):
                    if side == "queuelog":
                        warm_up(system)
                        ours["bulk"].append(bulk(system, jobs))
                        warm_up(system)
                        p50, p99 = pickup(system, PICKUP_JOBS)
                        figures = ours
                    else:
                        theirs["bulk"].append(_pgqueuer_bulk(dsn, jobs))
                        p50, p99 = _pgqueuer_pickup(dsn, PICKUP_JOBS)
                        figures = theirs
                    figures["p50"].append(p50)
                    figures["p99"].append(p99)
        finally:
            system.close()
        line(f"bulk (batches of {BATCH})", ours["bulk"], theirs["bulk"], "jobs/s", "pgqueuer")
        line("pickup p50", ours["p50"], theirs["p50"], "ms", "pgqueuer")
        line("pickup p99 (goal: <= 50 ms)", ours["p99"], theirs["p99"], "ms", "pgqueuer")
        print(f"  load average {started} at the start, {load()} at the end; fsync {fsync}")
