"""The list filters (status, type, priority, partition, the search text and the payload
search) as conditions on ``jobs``: one builder for the lists by creation, the sorted pages,
the counters' totals and the bulk actions' selections, so each filter means the same in all."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, or_

from app.queue.sql.payload_search import PayloadContains
from app.queue.vocabulary.jobs import JobFilters
from app.storage.schema import jobs


def search_as_id(search: str) -> int | None:
    """The search text read as a job id, when it is one."""
    # isascii: str.isdigit() is also true for "¹" or "٣", which int() refuses.
    by_id = search.isascii() and search.isdigit() and len(search) < 18
    return int(search) if by_id else None


def matching(filters: JobFilters, visible: ColumnElement[bool] | None) -> list[ColumnElement[bool]]:
    """The conditions of the status, type, priority and search filters as values (a bulk
    operation's selection), within what ``visible`` lets the caller see."""
    conditions: list[ColumnElement[bool]] = [] if visible is None else [visible]
    return conditions + filter_conditions(
        status=filters.status or None,
        job_type=filters.type or None,
        priority=filters.priority,
        search=filters.search or None,
        search_id=search_as_id(filters.search) if filters.search else None,
        partition=filters.partition,
        payload=filters.payload,
    )


def filter_conditions(
    *,
    status_column: ColumnElement[str] = jobs.c.status,
    status: Any = None,
    job_type: Any = None,
    priority: Any = None,
    search: Any = None,
    search_id: Any = None,
    partition: Any = None,
    payload: str | None = None,
) -> list[ColumnElement[bool]]:
    """The list filters as conditions on ``jobs``: each a value or a bound parameter, None when
    that filter is not set (``search_id``: the search text read as a job id, when it is one;
    ``status_column``: where the status is read; ``payload``: JSON text, never a parameter)."""
    conditions: list[ColumnElement[bool]] = []
    if status is not None:
        conditions.append(status_column == status)
    equal = ((jobs.c.type, job_type), (jobs.c.priority, priority), (jobs.c.partition, partition))
    for column, value in equal:
        if value is not None:
            conditions.append(column == value)
    if search is not None:
        matches = [jobs.c.idempotency_key == search]
        if search_id is not None:
            matches.append(jobs.c.id == search_id)
        conditions.append(or_(*matches))
    return conditions + ([PayloadContains(jobs.c.payload, payload)] if payload else [])
