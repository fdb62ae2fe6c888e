"""pgqueuer 1.6.0 driven as its documentation shows, the peer of the PostgreSQL section.

Its README drains a queue with QueueManager processes, each with one connection of the asyncpg
driver, an entrypoint and ``run()`` with the defaults, fed by one ``enqueue`` call with lists of
entrypoints and payloads. Driven that way on this machine, 4 QueueManager processes drain no-op
jobs at 2,666-6,399 jobs/s (bench/references.py). The bench used to run one QueueManager on
psycopg in the process that also enqueued and polled the table every 10 ms, and got 293.

* bulk: the queue is emptied and checkpointed, ``jobs`` no-op jobs are enqueued in one call
  (timed apart, not part of the figure), then 4 QueueManager processes started beforehand (so
  interpreter start-up and imports are not timed) drain it with ``run(mode=drain)``; the
  figure runs from their common start until the last one returns, every job done and logged.
* pickup: one QueueManager in continuous mode, idle and listening; one job every 50 ms, each
  carrying its number; latency from just before ``enqueue`` to its handler starting.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from typing import Any

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"
PROCESSES = 4
TIMEOUT = 120.0  # seconds a drain or a pickup run may take before it counts as failed


async def _connect(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, command_timeout=60)


async def _install(dsn: str) -> None:
    conn = await _connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        if not await queries.schema_is_installed():
            await queries.install()  # the same SQL as `pgq install`
    finally:
        await conn.close()


def install(dsn: str) -> None:
    """Create pgqueuer's tables in the (empty) database at ``dsn``."""
    asyncio.run(_install(dsn))


async def _empty(conn: asyncpg.Connection) -> None:
    """Each run starts from empty tables, with no dirty pages of the last run left to write."""
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics RESTART IDENTITY")
    await conn.execute("CHECKPOINT")


async def _reset(dsn: str) -> None:
    conn = await _connect(dsn)
    try:
        await _empty(conn)
    finally:
        await conn.close()


async def _fill(dsn: str, jobs: int) -> float:
    """Empty the queue and enqueue ``jobs`` no-op jobs in one call; returns that call's seconds."""
    conn = await _connect(dsn)
    try:
        await _empty(conn)
        start = time.perf_counter()
        await Queries(AsyncpgDriver(conn)).enqueue([ENTRYPOINT] * jobs, [b"{}"] * jobs, [0] * jobs)
        took = time.perf_counter() - start
        await conn.execute("CHECKPOINT")
        return took
    finally:
        await conn.close()


async def _count(dsn: str, sql: str) -> int:
    conn = await _connect(dsn)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def _consume(dsn: str, mode: str, stop_after: int, start: Any, out: Any) -> None:
    """One QueueManager with pgqueuer's defaults; puts (jobs handled, {payload number: monotonic
    time its handler started}, error) in ``out`` when ``run()`` returns."""
    conn = await _connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    started: dict[int, float] = {}
    handled = 0

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1
        if job.payload and job.payload != b"{}":
            started[int(job.payload)] = time.monotonic()
        if stop_after and handled >= stop_after:
            qm.shutdown.set()

    execution = QueueExecutionMode.drain if mode == "drain" else QueueExecutionMode.continuous
    await asyncio.get_running_loop().run_in_executor(None, start.wait, TIMEOUT)
    task = asyncio.create_task(qm.run(mode=execution))
    done, _ = await asyncio.wait({task}, timeout=TIMEOUT)
    if not done:
        qm.shutdown.set()
        await asyncio.wait({task}, timeout=10)
    error = "timed out" if not done else (repr(task.exception()) if task.exception() else None)
    out.put((handled, time.monotonic(), started, error))
    await conn.close()


def _consumer_process(dsn: str, mode: str, stop_after: int, start: Any, out: Any) -> None:
    try:
        asyncio.run(_consume(dsn, mode, stop_after, start, out))
    except Exception as exc:  # reported, so the bench fails with it instead of waiting
        out.put((0, time.monotonic(), {}, repr(exc)))


class Consumers:
    """QueueManager processes, connected and waiting at a barrier until ``go()``."""

    def __init__(self, dsn: str, processes: int, mode: str, stop_after: int = 0) -> None:
        context = mp.get_context("spawn")
        self.start = context.Barrier(processes + 1)
        self.out = context.Queue()
        self.processes = [
            context.Process(
                target=_consumer_process, args=(dsn, mode, stop_after, self.start, self.out)
            )
            for _ in range(processes)
        ]
        for process in self.processes:
            process.start()

    def go(self) -> float:
        """Let them run; returns the monotonic time they were let go."""
        self.start.wait(TIMEOUT)
        return time.monotonic()

    def results(self) -> list[tuple[int, float, dict[int, float], str | None]]:
        """What each process put out when its ``run()`` returned (raises on any error)."""
        try:
            results = [self.out.get(timeout=TIMEOUT + 30) for _ in self.processes]
        finally:
            for process in self.processes:
                process.join(15)
                if process.is_alive():
                    process.kill()
        errors = [error for *_, error in results if error]
        if errors:
            raise RuntimeError(f"pgqueuer consumers failed: {errors}")
        return results


def drain(dsn: str, jobs: int) -> tuple[float, float]:
    """(jobs/s of 4 default QueueManagers draining ``jobs`` enqueued in one call, seconds of
    that one enqueue call)."""
    consumers = Consumers(dsn, PROCESSES, "drain")
    try:
        enqueue_seconds = asyncio.run(_fill(dsn, jobs))
    finally:
        start = consumers.go()  # a failed fill still lets them run (and drain nothing) and exit
    results = consumers.results()
    elapsed = max(ended for _, ended, _, _ in results) - start
    handled = sum(count for count, *_ in results)
    left = asyncio.run(_count(dsn, "SELECT count(*) FROM pgqueuer"))
    if handled != jobs or left:
        raise RuntimeError(f"pgqueuer handled {handled} of {jobs} jobs, {left} left queued")
    return jobs / elapsed, enqueue_seconds


async def _trickle(dsn: str, jobs: int, every: float) -> list[float]:
    """Enqueue job number 0, 1, ... one at a time, ``every`` seconds apart; returns when each
    was sent (monotonic, taken just before its ``enqueue``)."""
    conn = await _connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        sent = []
        for number in range(jobs):
            sent.append(time.monotonic())
            await queries.enqueue(ENTRYPOINT, str(number).encode())
            await asyncio.sleep(max(0.0, every - (time.monotonic() - sent[-1])))
        return sent
    finally:
        await conn.close()


def pickup(dsn: str, jobs: int, every: float) -> list[float]:
    """Milliseconds from enqueue to handler start of ``jobs`` jobs sent ``every`` seconds apart
    to one idle, listening QueueManager."""
    asyncio.run(_reset(dsn))
    consumers = Consumers(dsn, 1, "continuous", stop_after=jobs)
    consumers.go()
    time.sleep(1.0)  # let it reach its idle LISTEN wait
    sent = asyncio.run(_trickle(dsn, jobs, every))
    ((_, _, started, _),) = consumers.results()
    return [(started[n] - at) * 1000 for n, at in enumerate(sent) if n in started]
