"""The statements one request of each batch route sends PostgreSQL, as the server logs them:
``POST /jobs/batch``, ``POST /jobs/claim`` (with the claim path's housekeeping and without),
``POST /jobs/heartbeat`` and ``POST /jobs/finish``, for N = 1, 50 and 100 jobs.

A server of its own (one process, no workers, its own database, every statement logged)
answers the SDK's requests one at a time, as the ``Worker`` and ``enqueue_many`` send them;
each size is counted after a warm-up cycle of that size. Around each request the log's new
lines of that database are counted: all it sent (BEGIN, COMMIT, the token check, the pool's
pings, housekeeping), as statements (simple queries, and executions of extended ones) and as
log lines (which add each extended statement's parse and bind). The claim path's housekeeping
runs at most once per ``SCHEDULE_TICK_SECONDS`` in each process: the claim is counted once
after a longer pause (it runs the housekeeping) and once right after that (it does not).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.e2e import JOB_TYPE
from bench.pg_statements import LOGGED, log_statements
from devservers.postgres import create_database, postgres_server
from devservers.servers import Served, prepare_database, running

SIZES = (1, 50, 100)
CYCLES = 2  # counted cycles per size, after one warm-up
TICK = 2  # the counted server's SCHEDULE_TICK_SECONDS and RETENTION_TICK_SECONDS
GOAL = 20  # statements for a batch request of 50 (or fewer)
BATCH, CLAIM, HOUSEKEEPING = "POST /jobs/batch", "POST /jobs/claim", "POST /jobs/claim + ticks"
HEARTBEAT, FINISH = "POST /jobs/heartbeat", "POST /jobs/finish"
ROWS = (BATCH, CLAIM, HOUSEKEEPING, HEARTBEAT, FINISH)
# Any statement's log line: "<time> [<pid>] <database> LOG:  duration: <ms> ms  <kind>..."
DURATION = re.compile(r"\[\d+\] (\S+) LOG:  duration: ")
Counts = dict[tuple[str, int], list[tuple[int, int]]]  # (row, N) -> (statements, lines) each


class Log:
    """The server's log, read around one request at a time."""

    def __init__(self, path: Path, database: str) -> None:
        self.path, self.database = path, database

    def around(self, call: Callable[[], Any]) -> tuple[tuple[int, int], Any]:
        """((statements, lines) of the database while ``call`` ran, what it returned)."""
        start = self.path.stat().st_size
        answer = call()
        time.sleep(0.05)  # written before the answer left the database; a margin all the same
        with self.path.open("rb") as file:
            file.seek(start)
            lines = file.read().decode(errors="replace").splitlines()
        ours = [line for line in lines if (m := DURATION.search(line)) and m[1] == self.database]
        statements = sum(1 for line in ours if LOGGED.search(line))
        return (statements, len(ours)), answer


def _cycle(producer: Any, worker: Any, size: int, log: Log, counts: Counts | None) -> None:
    """Enqueue, claim (after a pause, then at once), heartbeat and finish ``size`` jobs the
    way the SDK does; with ``counts``, add each counted request's statements there."""

    def counted(row: str, call: Callable[[], Any]) -> Any:
        figures, answer = log.around(call)
        if counts is not None:
            counts.setdefault((row, size), []).append(figures)
        return answer

    items = [{"type": JOB_TYPE}] * size
    counted(BATCH, lambda: producer.enqueue_many(items))
    producer.enqueue_many(items)

    def claim() -> list[Any]:
        jobs: list[Any] = worker.claim(max_jobs=size, types=[JOB_TYPE], wait_seconds=5)
        if len(jobs) != size:
            raise RuntimeError(f"a claim of {size} got {len(jobs)} jobs")
        return jobs

    time.sleep(TICK + 0.2)
    paused = time.monotonic()
    first = counted(HOUSEKEEPING, claim)
    second = counted(CLAIM, claim)
    if time.monotonic() - paused > TICK:
        raise RuntimeError("the claims took longer than the tick: rerun on a quieter machine")
    held = [{"id": job.id, "attempt": job.attempt} for job in first]
    counted(HEARTBEAT, lambda: worker.heartbeat(held))
    counted(FINISH, lambda: worker.finish([item | {"outcome": "completed"} for item in held]))
    worker.finish([{"id": j.id, "attempt": j.attempt, "outcome": "completed"} for j in second])


def _spread(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def print_table(counts: Counts) -> None:
    """Statements (log lines) per request, a column per size."""
    print(
        "  statements per request as PostgreSQL logs them (one request at a time after a "
        "warm-up; BEGIN, COMMIT, token check and pings included; log lines with parse and "
        f"bind in brackets; '+ ticks': the claim that runs the housekeeping, once per "
        f"SCHEDULE_TICK_SECONDS per process); goal: every batch request of 50 in <= {GOAL}:"
    )
    print(f"    {'request':<28}" + "".join(f"{f'N = {size}':>14}" for size in SIZES))
    for row in ROWS:
        cells = []
        for size in SIZES:
            figures = counts[row, size]
            statements, lines = zip(*figures, strict=True)
            cells.append(f"{_spread(list(statements))} ({_spread(list(lines))})")
        print(f"    {row:<28}" + "".join(f"{cell:>14}" for cell in cells))
    at_50 = [
        statistics.median(s for s, _ in counts[row, 50]) for row in ROWS if row != HOUSEKEEPING
    ]
    print(f"    largest batch request of 50, housekeeping aside: {max(at_50):.0f} statements")


def table(database_url: str, admin_url: str, folder: Path) -> None:
    """Count and print the statements of each batch request, on the empty database at
    ``database_url`` (its server's own database at ``admin_url``)."""
    from queuelog_client import Client

    log = Log(log_statements(admin_url), database_url.rsplit("/", 1)[1])
    users = {"producer": "producer", "worker": "worker"}
    database = prepare_database(folder / "db", users, url=database_url)
    served = Served(
        database, folder, workers=1, SCHEDULE_TICK_SECONDS=TICK, RETENTION_TICK_SECONDS=TICK
    )
    with running(served):
        url = f"http://{served.host}"
        with (
            Client(url, database.tokens["producer"]) as producer,
            Client(url, database.tokens["worker"]) as worker,
        ):
            counts: Counts = {}
            for size in SIZES:
                for cycle in range(CYCLES + 1):
                    _cycle(producer, worker, size, log, counts if cycle else None)
    print_table(counts)


def run(base: Path) -> None:
    """The table alone, on a throwaway server of its own."""
    with postgres_server() as server:
        admin = f"{server.replace('+psycopg', '')}/postgres"
        table(create_database(server, "requests"), admin, base)
