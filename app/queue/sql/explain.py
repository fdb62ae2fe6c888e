"""The SQL the explainer reads: a job's place in the claim order. Every query is bounded by a
LIMIT and served by an index."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, literal, or_, select

from app.queue.sql.jobs import PENDING as CLAIMABLE
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import PRIORITIES
from app.storage.schema import jobs

# The partial claim index only serves a query naming the same literal terms.
_PENDING = CLAIMABLE


def _count(conn: Connection, conditions: list[Any], limit: int) -> int:
    """How many pending jobs meet ``conditions``, counting no further than ``limit``."""
    bounded = select(literal(1)).where(_PENDING, *conditions).limit(limit).subquery()
    return int(conn.execute(select(func.count()).select_from(bounded)).scalar_one())


def jobs_ahead(conn: Connection, job: Job, now: datetime, cap: int) -> int:
    """How many due pending jobs a claim takes before ``job`` (priority DESC, run_at, id),
    counted up to ``cap``. One range of ix_jobs_claim per priority at or above the job's."""
    ahead = 0
    for priority in sorted((p for p in PRIORITIES.values() if p > job.priority), reverse=True):
        ahead += _count(conn, [jobs.c.priority == priority, jobs.c.run_at <= now], cap - ahead)
        if ahead >= cap:
            return cap
    same_band = [
        jobs.c.priority == job.priority,
        jobs.c.run_at <= job.run_at,
        or_(jobs.c.run_at < job.run_at, jobs.c.id < job.id),
    ]
    return ahead + _count(conn, same_band, cap - ahead)
