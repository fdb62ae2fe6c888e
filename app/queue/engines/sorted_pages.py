"""The jobs list in the orders other than creation (``app.queue.domain.sorting``), each read
along an index that keeps it within its status, LIMIT rows at a time:

- pending jobs by priority or run time: one range of the claim index per priority (ordered by
  run time, then id), beside the jobs waiting for parents (outside the claim index: sorted,
  as many as wait);
- finished jobs by their finish: ``ix_jobs_status_finished``;
- running jobs by their last heartbeat: sorted, as many as run (what the workers hold);
- a worker's pending and running jobs from its holder rows (the few it holds or gave back).

A page's rows come back in the page's order; where the next page starts is a keyset
(``Keyset``) of the order's columns, compared column by column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, or_, select, union_all

from app.queue.domain.models import Job, JobFilters
from app.queue.domain.sorting import KEY_COLUMNS, SortKey, in_order
from app.queue.domain.states import PRIORITIES, TERMINAL, JobStatus
from app.queue.engines.jobs import JOB_COLUMNS, PENDING, Viewer, filter_conditions, job_of
from app.queue.engines.jobs import search_as_id as id_of
from app.schema import jobs
from app.schema_figures import job_holders

Columns = list[tuple[Any, bool]]  # (column, ascends when the order does)
_HELD = job_holders.join(jobs, jobs.c.id == job_holders.c.job_id)


def page(conn: Connection, filters: JobFilters, viewer: Viewer) -> tuple[list[Job], bool]:
    """A page of the jobs ``viewer`` may see in the filters' order (not by creation: see
    ``engines.jobs.list_jobs``), and whether more lie beyond it in the paging direction."""
    sort, cursor, limit = filters.sort, filters.cursor, filters.limit
    forward = filters.rising
    columns = _columns(sort.key, filters.status)
    key = None if cursor is None else cursor.key
    if viewer.holder is not None and filters.status not in TERMINAL:
        where = [*_held(viewer.holder, filters.status), *_conditions(filters)]
        arms = [_walk(select(*JOB_COLUMNS).select_from(_HELD), where, columns, key, forward)]
    else:
        rule = viewer.condition()
        where = [*([] if rule is None else [rule]), *_conditions(filters)]
        if filters.status == JobStatus.PENDING:
            arms = _pending(sort.key, filters.priority, where, columns, key, forward)
        else:
            arms = [_walk(select(*JOB_COLUMNS), where, columns, key, forward)]
    found = _run(conn, [arm.limit(limit + 1) for arm in arms])
    ordered = in_order(found, sort.key, forward)[: limit + 1]
    more = len(ordered) > limit
    ordered = ordered[:limit]
    # The walk went against the page's order when it went back: turn it around.
    return (ordered if forward != sort.descending else ordered[::-1]), more


def _columns(key: SortKey, status: str | None) -> Columns:
    """The order's columns: a finished job's last change is its finish (the partial index of
    finished jobs keeps it), a running job's is its last heartbeat."""
    changed = jobs.c.finished_at if status in TERMINAL else jobs.c.updated_at
    named = {"id": jobs.c.id, "priority": jobs.c.priority, "run_at": jobs.c.run_at}
    named["changed_at"] = changed
    return [(named[name], up) for name, up in KEY_COLUMNS[key]]


def _conditions(filters: JobFilters) -> list[ColumnElement[bool]]:
    """The filters; a finished job's finish is named (the partial index of finished jobs
    serves only a query that says it)."""
    search = filters.search or None
    where = filter_conditions(
        status=filters.status,
        job_type=filters.type,
        priority=filters.priority,
        search=search,
        search_id=id_of(search) if search else None,
    )
    if filters.status in TERMINAL:
        where.append(jobs.c.finished_at.is_not(None))
    return where


def _held(worker: str, status: str | None) -> list[ColumnElement[bool]]:
    """A worker's pending or running jobs: its holder rows of that status (few: what it holds,
    and what it gave back to be retried)."""
    return [job_holders.c.worker == worker, job_holders.c.status == status]


def _walk(
    query: Select[Any],
    where: list[ColumnElement[bool]],
    columns: Columns,
    key: Sequence[Any] | None,
    forward: bool,
) -> Select[Any]:
    """``query`` walking ``columns`` in the direction of the page, from past ``key``."""
    beyond = [] if key is None else [_beyond(columns, key, forward)]
    order = [column.asc() if up == forward else column.desc() for column, up in columns]
    return query.where(*where, *beyond).order_by(*order)


def _beyond(columns: Columns, key: Sequence[Any], forward: bool) -> ColumnElement[bool]:
    """Rows strictly past ``key`` walking ``columns`` forward (or back), bounded on the first
    column so that an index range starts there."""
    (column, up), value = columns[0], key[0]
    rising = up == forward
    past: ColumnElement[bool] = column > value if rising else column < value
    if len(columns) == 1:
        return past
    reached = column >= value if rising else column <= value
    return and_(reached, or_(past, _beyond(columns[1:], key[1:], forward)))


def _pending(
    sort: SortKey,
    only: int | None,
    where: list[ColumnElement[bool]],
    columns: Columns,
    key: Sequence[Any] | None,
    forward: bool,
) -> list[Select[Any]]:
    """Pending jobs (of priority ``only``, when given): a range of the claim index per
    priority, each in run-time order, and the jobs waiting for parents."""
    arms = []
    within = columns[1:] if sort is SortKey.PRIORITY else columns  # one priority per arm
    for priority in sorted(PRIORITIES.values()):
        if only is not None and priority != only:
            continue
        at = key
        if sort is SortKey.PRIORITY and key is not None:
            if (priority - key[0]) * (1 if forward else -1) < 0:
                continue  # the whole band lies behind the cursor
            at = key[1:] if priority == key[0] else None
        claimable = select(*JOB_COLUMNS).where(PENDING, jobs.c.priority == priority)
        arms.append(_walk(claimable, where, within, at, forward))
    waiting = select(*JOB_COLUMNS).where(jobs.c.waiting_for.is_not(None))
    arms.append(_walk(waiting, where, columns, key, forward))
    return arms


def _run(conn: Connection, arms: list[Select[Any]]) -> list[Job]:
    """The rows of ``arms`` (each ordered and limited on its own), as jobs."""
    if len(arms) == 1:
        return [job_of(row) for row in conn.execute(arms[0])]
    parts = [select(*arm.subquery().c) for arm in arms]
    return [job_of(row) for row in conn.execute(union_all(*parts))]
