"""How many jobs a list's filters match: from the counts the database keeps (``job_counts``,
per scope, type and priority) where they know every filter, else counted along an index up to
a cap, so that no count reads a million rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, literal, select

from app.queue.domain.models import JobFilters
from app.queue.domain.states import JobStatus
from app.queue.engines.jobs import Viewer, matching
from app.schema_figures import job_counts


def known(filters: JobFilters) -> bool:
    """Whether the counters know how many jobs ``filters`` match (they keep no search)."""
    return not filters.search


def counted(conn: Connection, filters: JobFilters, viewer: Viewer) -> int:
    """How many jobs ``viewer`` sees that ``filters`` match, exactly, from the counters: one
    range of their primary key (``known`` says when they can tell)."""
    statuses = [filters.status] if filters.status else [status.value for status in JobStatus]
    summed: Any = sum((job_counts.c[status] for status in statuses), start=literal(0))
    query = select(func.coalesce(func.sum(summed), 0)).where(
        job_counts.c.scope == viewer.counts_scope
    )
    if filters.type:
        query = query.where(job_counts.c.type == filters.type)
    if filters.priority is not None:
        query = query.where(job_counts.c.priority == filters.priority)
    return int(conn.execute(query).scalar_one())


def counted_up_to(conn: Connection, filters: JobFilters, viewer: Viewer, cap: int) -> int:
    """How many jobs ``viewer`` sees that ``filters`` match, counting no further than
    ``cap``."""
    bounded = select(literal(1)).where(*matching(filters, viewer.condition())).limit(cap)
    return int(conn.execute(select(func.count()).select_from(bounded.subquery())).scalar_one())
