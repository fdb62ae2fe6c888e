"""How many jobs a list's filters match: from the counts the database keeps (``job_counts``,
per scope, type and priority) where they know every filter, else counted along an index up to
a cap, so that no count reads a million rows."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal, select

from app.queue.sql.filters import matching
from app.queue.sql.jobs import Viewer
from app.queue.sql.prepared import Prepared
from app.queue.vocabulary.jobs import JobFilters
from app.queue.vocabulary.states import JobStatus
from app.storage.schema_figures import job_counts


def known(filters: JobFilters) -> bool:
    """Whether the counters know how many jobs ``filters`` match (they keep no search, no
    payload search and no partition)."""
    return not filters.search and not filters.payload and filters.partition is None


def counted(conn: Connection, filters: JobFilters, viewer: Viewer) -> int:
    """How many jobs ``viewer`` sees that ``filters`` match, exactly, from the counters: one
    range of their primary key (``known`` says when they can tell)."""
    query = _counted(filters.status or None, bool(filters.type), filters.priority is not None)
    params = {"scope": viewer.counts_scope, "type": filters.type, "priority": filters.priority}
    row = query.row(conn, params)
    return int(row[0]) if row else 0


@lru_cache(maxsize=32)
def _counted(status: str | None, by_type: bool, by_priority: bool) -> Prepared:
    """The counters' sum for one shape of filters: a status (None: all of them), a type, a
    priority."""
    statuses = [status] if status else [each.value for each in JobStatus]
    summed: Any = sum((job_counts.c[name] for name in statuses), start=literal(0))
    query = select(func.coalesce(func.sum(summed), 0)).where(
        job_counts.c.scope == bindparam("scope")
    )
    if by_type:
        query = query.where(job_counts.c.type == bindparam("type"))
    if by_priority:
        query = query.where(job_counts.c.priority == bindparam("priority"))
    return Prepared(query)


def counted_up_to(conn: Connection, filters: JobFilters, viewer: Viewer, cap: int) -> int:
    """How many jobs ``viewer`` sees that ``filters`` match, counting no further than
    ``cap``."""
    bounded = select(literal(1)).where(*matching(filters, viewer.condition())).limit(cap)
    return int(conn.execute(select(func.count()).select_from(bounded.subquery())).scalar_one())
