"""The jobs list in the orders other than creation (``app.queue.vocabulary.orders``), each read
along indexes that keep it within its status, at most a page of rows from each:

- pending jobs: everyone's from the claim index, one range per priority in run-time order
  (and the jobs waiting for parents from their own partial index, sorted: as many as wait); a
  producer's from ``ix_jobs_owner_status_run_at``, a worker's from its pending holder rows
  (``ix_job_holders_pending``), by priority one range per priority it has jobs of;
- running jobs by last heartbeat: one range of ``ix_jobs_running_seen`` per worker running
  jobs (the counters name them);
- finished jobs by their finish: ``ix_jobs_status_finished``.

Each read is one statement of one shape, built and compiled once (``Prepared``); a page's rows
come back in the page's order."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    false,
    literal_column,
    or_,
    select,
    union_all,
)

from app.queue.sql import counts as counts_sql
from app.queue.sql import totals as totals_sql
from app.queue.sql.filters import filter_conditions, search_as_id
from app.queue.sql.jobs import (
    JOB_COLUMNS,
    PENDING,
    Viewer,
    job_of,
    visible_to_owner,
    visible_to_worker,
)
from app.queue.sql.prepared import Prepared
from app.queue.vocabulary.jobs import Job, JobFilters
from app.queue.vocabulary.orders import KEY_COLUMNS, SortKey, in_order
from app.queue.vocabulary.states import JobStatus
from app.storage.schema import jobs
from app.storage.schema_figures import job_holders

Columns = list[tuple[Any, bool]]  # (column, ascends when the order does)
Where = list[ColumnElement[bool]]
_HELD = job_holders.join(jobs, jobs.c.id == job_holders.c.job_id)
_RUNNING = jobs.c.status == literal_column("'running'")  # literal: the partial index's term
_HELD_AS = {
    "pending": job_holders.c.status == literal_column("'pending'"),
    "running": job_holders.c.status == literal_column("'running'"),
}
_HELD_COPIES = [job_holders.c.run_at, job_holders.c.job_id]  # the holder rows' run time, id


class _Shape(NamedTuple):
    """What one page's statement depends on; every value is a parameter."""

    key: SortKey
    read: str  # claim, owner, held (pending or running), workers, finished
    viewer: str  # all, owner, holder
    status: str  # the status filter's value (a literal in the statement)
    type: bool
    priority: bool
    search: int  # 0: none, 1: idempotency key, 2: key or id
    forward: bool  # the walk ascends the order
    past: bool  # the walk starts past a key
    bands: tuple[tuple[int, bool | None], ...]  # priority, and the key applies (None: skip)
    workers: int  # ranges of running workers, named w0, w1, ...
    partition: bool
    payload: str  # the payload search's JSON text ("": none)


def page(conn: Connection, filters: JobFilters, viewer: Viewer) -> tuple[list[Job], bool]:
    """A page of the jobs ``viewer`` may see in the filters' order (not by creation: see
    ``engines.jobs.list_jobs``), and whether more lie beyond it in the paging direction."""
    sort, forward = filters.sort, filters.rising
    key = None if filters.cursor is None else filters.cursor.key
    if totals_sql.known(filters) and totals_sql.counted(conn, filters, viewer) == 0:
        return [], False  # the counters know: no read at all
    read, names = _read(conn, filters, viewer)
    pending = filters.status == JobStatus.PENDING
    bands = _bands(conn, filters, viewer, key, forward) if pending else ()
    search = filters.search or ""
    search_id = search_as_id(search)
    shape = _Shape(
        sort.key,
        read,
        viewer.kind,
        filters.status or "",
        bool(filters.type),
        filters.priority is not None,
        (1 if search_id is None else 2) if search else 0,
        forward,
        key is not None,
        bands,
        len(names),
        filters.partition is not None,
        filters.payload or "",
    )
    params: dict[str, Any] = {
        "viewer": viewer.value,
        "type": filters.type,
        "priority": filters.priority,
        "search": search,
        "search_id": search_id or 0,
        "partition": filters.partition,
        "limit": filters.limit + 1,
    }
    params |= {f"k{i}": value for i, value in enumerate(key or ())}
    params |= {f"w{i}": name for i, name in enumerate(names)}
    # A payload search is built for its needle alone, not kept among the cached shapes.
    statement = _statement.__wrapped__(shape) if shape.payload else _statement(shape)
    found = [job_of(row) for row in statement.rows(conn, params)]
    ordered = in_order(found, sort.key, forward)[: filters.limit + 1]
    more = len(ordered) > filters.limit
    ordered = ordered[: filters.limit]
    # The walk went against the page's order when it went back: turn it around.
    return (ordered if forward != sort.descending else ordered[::-1]), more


def _read(conn: Connection, filters: JobFilters, viewer: Viewer) -> tuple[str, list[str]]:
    """Which read serves the page, and the names of the workers whose ranges it reads.

    A worker sees the jobs it runs and those it ran before another took them over: while the
    counters say it has none of the latter, its own range is all it sees; otherwise its
    holder rows are read and sorted (as many as it holds)."""
    if filters.status == JobStatus.PENDING:
        return {"all": "claim", "owner": "owner", "holder": "held"}[viewer.kind], []
    if filters.status != JobStatus.RUNNING:
        return "finished", []
    running = counts_sql.running_by_worker(conn)
    if viewer.holder is None:
        return "workers", sorted(name for name, n in running.items() if n)
    held = totals_sql.counted(conn, JobFilters(status=JobStatus.RUNNING), viewer)
    own = running.get(viewer.holder, 0)
    return ("workers", [viewer.holder]) if held == own else ("held", [])


def _bands(
    conn: Connection,
    filters: JobFilters,
    viewer: Viewer,
    key: Sequence[Any] | None,
    forward: bool,
) -> tuple[tuple[int, bool | None], ...]:
    """The priority ranges a pending read walks, in priority order, and whether the key
    applies in each (the priority order: only in the key's own range; None: the range lies
    behind the key). By run time along an index that keeps it there is one range, (-1, key)."""
    by_priority = filters.sort.key is SortKey.PRIORITY
    if not by_priority and viewer.kind != "all":
        return ((-1, key is not None),)
    have = {
        priority
        for status, priority, n in counts_sql.counts(conn, viewer.counts_scope)
        if status == JobStatus.PENDING and n
    }
    if filters.priority is not None:
        have &= {filters.priority}
    if not by_priority or key is None:
        return tuple((priority, key is not None) for priority in sorted(have))
    ahead = 1 if forward else -1
    return tuple((p, None if (p - key[0]) * ahead < 0 else p == key[0]) for p in sorted(have))


@lru_cache(maxsize=512)
def _statement(shape: _Shape) -> Prepared:
    """The page's statement of one shape: its reads, each ordered and limited on its own."""
    columns = _columns(shape)
    arms = _arms(shape, columns)
    if len(arms) == 1:
        return Prepared(arms[0])
    if not arms:
        return Prepared(select(*JOB_COLUMNS).where(false()))
    # The reads merged in the walk's order and cut to a page here, not in Python.
    merged = union_all(*(select(*arm.subquery().c) for arm in arms)).subquery()
    order = [
        merged.c[column.name].asc() if up == shape.forward else merged.c[column.name].desc()
        for column, up in columns
    ]
    return Prepared(select(*merged.c).order_by(*order).limit(bindparam("limit")))


def _columns(shape: _Shape) -> Columns:
    """The order's columns: a finished job's last change is its finish (the partial index of
    finished jobs keeps it), a running job's is its last heartbeat."""
    changed = jobs.c.finished_at if shape.read == "finished" else jobs.c.updated_at
    named = {"id": jobs.c.id, "priority": jobs.c.priority, "run_at": jobs.c.run_at}
    named["changed_at"] = changed
    return [(named[name], up) for name, up in KEY_COLUMNS[shape.key]]


def _arms(shape: _Shape, columns: Columns) -> list[Select[Any]]:
    """The reads of a shape, each a SELECT ordered and limited on its own."""
    rows = select(*JOB_COLUMNS)
    held = select(*JOB_COLUMNS).select_from(_HELD)
    if shape.read == "finished":  # its finish is named, as the partial index says it
        where = [*_rule(shape), *_filters(shape, status=True), jobs.c.finished_at.is_not(None)]
        return [_walk(shape, columns, 0).of(rows.where(*where))]
    if shape.read == "workers":
        seen = [] if shape.viewer == "holder" else _rule(shape)  # running it: it holds it
        where = [_RUNNING, *seen, *_filters(shape)]
        return [
            _walk(shape, columns, 0).of(rows.where(*where, jobs.c.worker_id == bindparam(f"w{i}")))
            for i in range(shape.workers)
        ]
    if shape.read == "held":
        mine = [job_holders.c.worker == _VIEWER_NAME, _HELD_AS[shape.status], *_filters(shape)]
        if shape.status == JobStatus.RUNNING:
            return [_walk(shape, columns, 0).of(held.where(*mine))]
        return _banded(shape, columns, held.where(*mine), _HELD_COPIES)
    if shape.read == "owner":  # ix_jobs_owner_status_run_at: waiting jobs are in it too
        return _banded(shape, columns, rows.where(*_rule(shape), *_filters(shape, status=True)))
    claimable = rows.where(PENDING, *_filters(shape))  # literal: the claim index's own terms
    waiting = rows.where(jobs.c.waiting_for.is_not(None), *_unindexed(shape))
    return [*_banded(shape, columns, claimable), _walk(shape, columns, 0).of(waiting)]


def _banded(
    shape: _Shape, columns: Columns, query: Select[Any], copies: list[Any] | None = None
) -> list[Select[Any]]:
    """``query`` walked once per band of ``shape`` (a priority, or -1: every priority), each
    in run-time order; ``copies``: the run time and id as the read's index keeps them."""
    arms = []
    for priority, past in shape.bands:
        if past is None:
            continue
        whole = priority < 0 or shape.key is SortKey.RUN_AT
        within = columns if whole else columns[1:]  # by priority: one priority per range
        if copies is not None:
            within = [(copy, up) for copy, (_, up) in zip(copies, within, strict=True)]
        walk = _Walk(within, 0 if whole else 1, shape.forward, past)
        band = [] if priority < 0 else [jobs.c.priority == priority]
        arms.append(walk.of(query.where(*band)))
    return arms


class _Walk:
    """Columns walked one way, from past the key's values ``k<first>...`` when ``past``."""

    def __init__(self, columns: Columns, first: int, forward: bool, past: bool) -> None:
        self.columns, self.first, self.forward, self.past = columns, first, forward, past

    def of(self, query: Select[Any]) -> Select[Any]:
        """``query`` in the walk's order, past its key, limited to a page and one row."""
        forward, columns = self.forward, self.columns
        if self.past:
            at = [bindparam(f"k{self.first + i}", type_=c.type) for i, (c, _) in enumerate(columns)]
            query = query.where(_beyond(columns, at, forward))
        order = [column.asc() if up == forward else column.desc() for column, up in columns]
        return query.order_by(*order).limit(bindparam("limit"))


def _walk(shape: _Shape, columns: Columns, first: int) -> _Walk:
    return _Walk(columns, first, shape.forward, shape.past)


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


_VIEWER_ID = bindparam("viewer", type_=Integer())
_VIEWER_NAME = bindparam("viewer", type_=String())


def _rule(shape: _Shape) -> Where:
    """Whose jobs the viewer may see, as a condition (none for admins)."""
    if shape.viewer == "owner":
        return [visible_to_owner(_VIEWER_ID)]
    return [visible_to_worker(_VIEWER_NAME)] if shape.viewer == "holder" else []


def _filters(shape: _Shape, *, status: bool = False) -> Where:
    """The type, priority, search and payload filters (and the status one, when ``status``; the
    other reads name it as their indexes do)."""
    return filter_conditions(
        status=literal_column(f"'{shape.status}'") if status else None,
        job_type=bindparam("type") if shape.type else None,
        priority=bindparam("priority") if shape.priority else None,
        search=bindparam("search") if shape.search else None,
        search_id=bindparam("search_id") if shape.search == 2 else None,
        partition=bindparam("partition") if shape.partition else None,
        payload=shape.payload or None,
    )


def _unindexed(shape: _Shape) -> Where:
    """The filters of the waiting jobs' read, the type written so that its index (of every
    job) does not beat the partial index of the waiting ones."""
    where = _filters(shape._replace(type=False))
    if shape.type:
        where.append(jobs.c.type.concat("") == bindparam("type"))
    return where
