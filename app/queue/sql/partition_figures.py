"""The SQL of the busiest partitions (metrics, the types page): due and running jobs per
partition, the ``BUSIEST`` partitions by name and the rest summed, read from bounded samples
so a scrape costs the same at ten partitions as at ten thousand."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, text

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect

BUSIEST = 5  # partitions named per type and figure; the rest are summed
# The due figures of a type count its oldest DUE_SAMPLE due jobs: a probe of the pending-by-type
# index and a row read each, however large the backlog. The running figures count up to
# RUNNING_SAMPLE running jobs of all types (as many as the workers hold, in practice all).
DUE_SAMPLE = 10_000
RUNNING_SAMPLE = 10_000

# A sample (type, part) ranked per type: each of the BUSIEST largest partitions with its place
# (ties by name, the partition null first), then the others summed under place 0 and part NULL.
_RANKED = """
, counted AS (SELECT type, part, count(*) AS n FROM sample GROUP BY type, part)
, ranked AS (
  SELECT type, part, n,
         row_number() OVER (PARTITION BY type ORDER BY n DESC, coalesce(part, '')) AS place
  FROM counted)
, marked AS (
  SELECT type, n,
         CASE WHEN place <= :busiest THEN place ELSE 0 END AS place,
         CASE WHEN place <= :busiest THEN part END AS part
  FROM ranked)
SELECT type, place, part, sum(n) AS n FROM marked GROUP BY type, place, part
ORDER BY type, place
"""

_SAMPLE = "WITH sample AS (SELECT type, partition AS part FROM"
Ranked = list[tuple[str, int, str | None, int]]  # (type, place or 0 for the rest, part, jobs)


@lru_cache(maxsize=4)
def _due(dialect: Dialect) -> Any:
    """The type's oldest ``:sample`` due jobs (the literal terms of ix_jobs_pending_type, so
    its range of the type serves them in run_at order), ranked by partition."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_pending_type")
    where = "status = 'pending' AND waiting_for IS NULL AND type = :type AND run_at <= :now"
    sample = [_SAMPLE, jobs, "WHERE", where, "ORDER BY run_at LIMIT :sample)", _RANKED]
    return text(" ".join(sample))


@lru_cache(maxsize=4)
def _running(dialect: Dialect) -> Any:
    """Up to ``:sample`` running jobs of every type (the lease index holds running jobs only),
    ranked by partition within each type."""
    jobs = "jobs" + dialect.index_hint("ix_jobs_lease")
    sample = [_SAMPLE, jobs, "WHERE status = 'running' LIMIT :sample)", _RANKED]
    return text(" ".join(sample))


def due(conn: Connection, job_type: str, now: datetime) -> Ranked:
    """The due jobs (pending, claimable, run_at passed) of ``job_type`` per partition, among
    its oldest ``DUE_SAMPLE``: the ``BUSIEST`` partitions, then the rest summed."""
    params = {"type": job_type, "now": now, "sample": DUE_SAMPLE, "busiest": BUSIEST}
    return _rows(conn.execute(_due(dialects.of(conn)), params))


def running(conn: Connection) -> Ranked:
    """The running jobs of every type per partition (up to ``RUNNING_SAMPLE`` in all): each
    type's ``BUSIEST`` partitions, then the rest summed."""
    params = {"sample": RUNNING_SAMPLE, "busiest": BUSIEST}
    return _rows(conn.execute(_running(dialects.of(conn)), params))


def _rows(result: Any) -> Ranked:
    return [(job_type, int(place), part, int(n)) for job_type, place, part, n in result]
