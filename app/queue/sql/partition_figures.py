"""The SQL of the busiest partitions (metrics, the types page): a type's due and running jobs
per partition, the ``BUSIEST`` partitions by name and the rest summed, read from bounded
samples so a scrape costs the same at ten partitions as at ten thousand."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, bindparam, text

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.storage.sqltypes import UTCDateTime

BUSIEST = 5  # partitions named per type and figure; the rest are summed
# The due figures of a type count its oldest DUE_SAMPLE due jobs: a range of the pending-by-type
# index and a row read each, however large the backlog. The running figures count the type's
# jobs among RUNNING_SAMPLE running jobs of all types (as many as the workers hold: in practice
# every running job), read from the lease index.
DUE_SAMPLE = 500
RUNNING_SAMPLE = 2_000

# A sample of partitions (``part``, NULL: none), counted: its BUSIEST largest partitions (ties
# by name, the partition null first), each with ``named`` 1, then the whole sample's size with
# ``named`` 0. (A CTE read twice is computed once, on both engines.)
_COUNTED = """
, counted AS (SELECT part, count(*) AS n FROM sample GROUP BY part)
SELECT named, part, n FROM (
  SELECT 1 AS named, part, n FROM counted ORDER BY n DESC, coalesce(part, '') LIMIT :busiest
) AS busiest
UNION ALL SELECT 0, NULL, coalesce(sum(n), 0) FROM counted
"""

Counted = tuple[list[tuple[str | None, int]], int]  # the busiest (part, jobs), all jobs counted


@lru_cache(maxsize=4)
def _due(dialect: Dialect) -> Any:
    """The type's oldest ``:sample`` due jobs (the literal terms of ix_jobs_pending_type, so
    its range of the type serves them in run_at order), counted by partition."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_pending_type")
    where = "status = 'pending' AND waiting_for IS NULL AND type = :type AND run_at <= :now"
    sample = ["WITH sample AS (SELECT partition AS part FROM", jobs, "WHERE", where]
    statement = text(" ".join([*sample, "ORDER BY run_at LIMIT :sample)", _COUNTED]))
    # :now bound as the columns store time (SQLite compares the text)
    return statement.bindparams(bindparam("now", type_=UTCDateTime()))


@lru_cache(maxsize=4)
def _running(dialect: Dialect) -> Any:
    """``:sample`` running jobs of every type (the lease index holds running jobs only; the
    LIMIT bounds the read), counted by type and partition: one read for all the types."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_lease")
    running = ["SELECT type, partition FROM", jobs, "WHERE status = 'running' LIMIT :sample"]
    sql = ["SELECT type, partition, count(*) FROM (", *running, ") AS running"]
    return text(" ".join([*sql, "GROUP BY type, partition"]))


def due(conn: Connection, job_type: str, now: datetime) -> Counted:
    """The due jobs (pending, claimable, run_at passed) of ``job_type`` among its oldest
    ``DUE_SAMPLE``: the ``BUSIEST`` partitions and how many were counted in all."""
    params = {"type": job_type, "now": now, "sample": DUE_SAMPLE, "busiest": BUSIEST}
    return _counted(conn.execute(_due(dialects.of(conn)), params))


def running(conn: Connection) -> dict[str, Counted]:
    """The running jobs of each type among ``RUNNING_SAMPLE`` of every type: its ``BUSIEST``
    partitions and how many were counted in all (types with none running are left out)."""
    by_type: dict[str, list[tuple[str | None, int]]] = {}
    params = {"sample": RUNNING_SAMPLE}
    for job_type, part, n in conn.execute(_running(dialects.of(conn)), params):
        by_type.setdefault(job_type, []).append((part, int(n)))
    return {
        job_type: (
            sorted(parts, key=lambda p: (-p[1], p[0] or ""))[:BUSIEST],
            sum(n for _, n in parts),
        )
        for job_type, parts in by_type.items()
    }


def _counted(result: Any) -> Counted:
    busiest, total = [], 0
    for named, part, n in result:
        if named:
            busiest.append((part, int(n)))
        else:
            total = int(n)
    return busiest, total
