"""SQL of dependencies and groups. Finishing any number of parents releases or
cancels their children in a few statements, each over every child at once (a parent with 10,000
children costs what a parent with one does, in statements); groups move their member counters
in one statement per finish."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    case,
    func,
    insert,
    literal_column,
    select,
    text,
    true,
    update,
)

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.sql.prepared import Prepared
from app.queue.sql.rows import insert_rows
from app.queue.vocabulary.jobs import Job
from app.storage.schema import job_dependencies, job_groups, jobs
from app.storage.sqltypes import UTCDateTime

_IDS: Columns = (("job_id", Kind.BIGINT),)
_EDGES: Columns = (("parent_id", Kind.BIGINT), ("child_id", Kind.BIGINT), ("on_failure", Kind.TEXT))


def _ids(dialect: Dialect) -> Any:
    """The ids of the ``:items`` parameter, for ``IN (...)``."""
    return select(dialect.items(_IDS).c.job_id)


def _id_items(ids: Collection[int]) -> dict[str, str]:
    return {"items": parameter(_IDS, [{"job_id": job_id} for job_id in ids])}


_MARK_PARENTS = {
    dialect: Prepared(
        update(jobs)
        .where(jobs.c.id.in_(_ids(dialect)))
        .values(has_dependents=true())
        .returning(jobs.c.id, jobs.c.status)
    )
    for dialect in dialects.DIALECTS.values()
}


def mark_parents(conn: Connection, ids: Collection[int]) -> dict[int, str]:
    """Mark ``ids`` as having dependents and read their statuses, by id. An UPDATE, so on
    PostgreSQL it waits for a transaction finishing one of them: either that finish sees the
    children this transaction adds, or this one sees the parent finished."""
    rows = _MARK_PARENTS[dialects.of(conn)].rows(conn, _id_items(ids))
    return {job_id: status for job_id, status in rows}


_INSERT_EDGES = {
    dialect: Prepared(insert_rows(dialect, job_dependencies, _EDGES))
    for dialect in dialects.DIALECTS.values()
}


def add_edges(conn: Connection, edges: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``(parent_id, child_id, on_failure)`` rows in one statement."""
    if edges:
        _INSERT_EDGES[dialects.of(conn)].run(conn, {"items": parameter(_EDGES, edges)})


@lru_cache(maxsize=8)
def _set_parents(dialect: Dialect, columns: Columns) -> Prepared:
    item = dialect.items(columns)
    values = {name: dialect.item_value(item, name, kind) for name, kind in columns[1:]}
    return Prepared(update(jobs).where(jobs.c.id == item.c.job_id).values(**values))


_WAITING: Columns = (("job_id", Kind.BIGINT), ("depends_on", Kind.JSON), ("waiting_for", Kind.JSON))


def set_parents(conn: Connection, items: Sequence[Mapping[str, Any]]) -> None:
    """Store each item's ``depends_on`` and ``waiting_for`` (None: awaits nothing) on its job
    (``job_id``): one statement for the jobs that wait, one for the others."""
    dialect = dialects.of(conn)
    for waits in (True, False):
        chosen = [item for item in items if (item["waiting_for"] is not None) is waits]
        columns = _WAITING if waits else _WAITING[:2]
        if chosen:
            _set_parents(dialect, columns).run(conn, {"items": parameter(columns, chosen)})


def children_to_cancel(conn: Connection, parents: Collection[int]) -> dict[int, int]:
    """The children of ``parents`` that asked to be cancelled when a parent fails, each with
    one of those parents (the one its event names)."""
    edges = job_dependencies
    query = (
        select(edges.c.child_id, func.min(edges.c.parent_id))
        .where(
            edges.c.parent_id.in_(_ids(dialects.of(conn))),
            edges.c.on_failure == literal_column("'cancel'"),
        )
        .group_by(edges.c.child_id)
    )
    return {child: parent for child, parent in conn.execute(query, _id_items(parents))}


_CANCEL = {
    dialect: Prepared(
        update(jobs)
        .where(
            jobs.c.id.in_(_ids(dialect)),
            jobs.c.status == literal_column("'pending'"),
            jobs.c.waiting_for.is_not(None),
        )
        .values(
            status=literal_column("'cancelled'"),
            waiting_for=None,
            secrets_sealed=None,  # finished for good: its secrets' values go, names stay
            finished_at=bindparam("now", type_=UTCDateTime()),
            updated_at=bindparam("now", type_=UTCDateTime()),
        )
        .returning(*JOB_COLUMNS)
    )
    for dialect in dialects.DIALECTS.values()
}


def cancel_waiting(conn: Connection, ids: Collection[int], now: datetime) -> list[Job]:
    """pending (waiting) -> cancelled, for the jobs of ``ids`` still waiting; the caller writes
    their events. The jobs that moved."""
    params = {**_id_items(ids), "now": now}
    return [job_of(row) for row in _CANCEL[dialects.of(conn)].rows(conn, params)]


@lru_cache(maxsize=4)
def _release(dialect: Dialect) -> Prepared:
    children = select(job_dependencies.c.child_id).where(
        job_dependencies.c.parent_id.in_(_ids(dialect))
    )
    rest = text(dialect.json_ids_without("jobs.waiting_for", "finished")).bindparams(
        bindparam("finished")
    )
    return Prepared(
        update(jobs)
        .where(jobs.c.waiting_for.is_not(None), jobs.c.id.in_(children))
        .values(waiting_for=rest, updated_at=bindparam("now", type_=UTCDateTime()))
        .returning(jobs.c.type, jobs.c.run_at, jobs.c.waiting_for)
    )


def release(
    conn: Connection, parents: Collection[int], now: datetime
) -> list[tuple[str, datetime]]:
    """Strike ``parents`` (just finished) off the waiting lists of their waiting children, in
    one statement; a child with nothing left to wait for is claimable (``waiting_for`` NULL)
    from its ``run_at``. The type and ``run_at`` of each child that stopped waiting."""
    params = {**_id_items(parents), "finished": json.dumps(sorted(parents)), "now": now}
    rows = _release(dialects.of(conn)).rows(conn, params)
    return [(job_type, run_at) for job_type, run_at, waiting in rows if waiting is None]


def parents_and_children(conn: Connection, job: Job) -> tuple[list[Job], list[Job]]:
    """The jobs ``job`` depends on and the jobs that depend on it (at most 200 of those)."""
    parents = select(job_dependencies.c.parent_id).where(job_dependencies.c.child_id == job.id)
    children = (
        select(job_dependencies.c.child_id)
        .where(job_dependencies.c.parent_id == job.id)
        .order_by(job_dependencies.c.child_id)
        .limit(200)
    )
    found = []
    for ids in (parents, children):
        query = select(*JOB_COLUMNS).where(jobs.c.id.in_(ids)).order_by(jobs.c.id)
        found.append([job_of(row) for row in conn.execute(query)])
    return found[0], found[1]


def count_waiting(
    conn: Connection, owner: int | None, job_types: Collection[str] | None = None
) -> int:
    """How many jobs wait for parents (of ``owner``, and of ``job_types``, when given):
    ix_jobs_waiting."""
    query = select(func.count()).where(jobs.c.waiting_for.is_not(None))
    if owner is not None:
        query = query.where(jobs.c.created_by == owner)
    if job_types is not None:
        query = query.where(jobs.c.type.in_(sorted(job_types)))
    return int(conn.execute(query).scalar_one())


def _waiting_by_type(dialect: Dialect) -> Any:
    """Read from the partial ix_jobs_waiting (waiting jobs only). SQLite is told so: to spare
    the GROUP BY a sort, its planner would walk every job along the type index instead (828 ms
    a /metrics scrape at a million jobs)."""
    hint = dialect.index_hint("ix_jobs_waiting")
    return text(
        f"SELECT type, count(*) FROM jobs{hint} WHERE waiting_for IS NOT NULL GROUP BY type"  # noqa: S608 (ours)
    )


_WAITING_BY_TYPE = {dialect: _waiting_by_type(dialect) for dialect in dialects.DIALECTS.values()}


def waiting_by_type(conn: Connection) -> dict[str, int]:
    """How many jobs of each type wait for parents."""
    query = _WAITING_BY_TYPE[dialects.of(conn)]
    return {job_type: int(n) for job_type, n in conn.execute(query)}


# Groups.


def create_group(conn: Connection, values: Mapping[str, Any]) -> int:
    """Insert a group row; its id."""
    group_id: int = conn.execute(
        insert(job_groups).values(**values).returning(job_groups.c.id)
    ).scalar_one()
    return group_id


def join_group(conn: Connection, group_id: int, ids: Collection[int]) -> None:
    """Make the jobs of ``ids`` members of the group."""
    query = update(jobs).where(jobs.c.id.in_(_ids(dialects.of(conn)))).values(group_id=group_id)
    conn.execute(query, _id_items(ids))


_MOVES: Columns = (("group_id", Kind.BIGINT), ("finished", Kind.INTEGER), ("failed", Kind.INTEGER))


@lru_cache(maxsize=4)
def _move_groups(dialect: Dialect) -> Prepared:
    item = dialect.items(_MOVES)
    left = job_groups.c.unfinished - item.c.finished
    return Prepared(
        update(job_groups)
        .where(job_groups.c.id == item.c.group_id)
        .values(
            unfinished=left,
            unsuccessful=job_groups.c.unsuccessful + item.c.failed,
            finished_at=case((left == 0, bindparam("now", type_=UTCDateTime())), else_=None),
        )
        .returning(*_GROUP_COLUMNS)
    )


@dataclass(frozen=True)
class Group:
    """One row of ``job_groups``."""

    id: int
    name: str
    created_by: int
    total: int
    unfinished: int
    unsuccessful: int
    on_complete: dict[str, Any] | None
    on_success: dict[str, Any] | None
    on_complete_id: int | None
    on_success_id: int | None
    created_at: datetime
    finished_at: datetime | None
    callbacks_refused: dict[str, str] | None


_GROUP_COLUMNS = [job_groups.c[name] for name in Group.__dataclass_fields__]


def move_groups(conn: Connection, moves: Sequence[Mapping[str, int]], now: datetime) -> list[Group]:
    """Count members in or out of their groups (one item per group: ``finished`` members to
    take off ``unfinished``, ``failed`` to add to ``unsuccessful``; negative for members an
    admin retried). On PostgreSQL the row lock of each group orders the transactions that move
    it, so exactly one sees ``unfinished`` reach 0. The groups as they are now."""
    if not moves:
        return []
    params = {"items": parameter(_MOVES, moves), "now": now}
    return [Group(*row) for row in _move_groups(dialects.of(conn)).rows(conn, params)]


def set_callback(conn: Connection, group_id: int, which: str, job_id: int) -> bool:
    """Record the job enqueued as the group's ``which`` callback, unless one already is."""
    column = job_groups.c[f"{which}_id"]
    query = (
        update(job_groups)
        .where(job_groups.c.id == group_id, column.is_(None))
        .values({column: job_id})
    )
    return conn.execute(query).rowcount == 1


def refuse_callbacks(conn: Connection, group_id: int, refused: Mapping[str, str]) -> None:
    """Record why the group's callbacks of ``refused`` (which: reason) were not enqueued."""
    query = update(job_groups).where(job_groups.c.id == group_id)
    conn.execute(query.values(callbacks_refused=dict(refused)))


def get_group(conn: Connection, group_id: int) -> Group | None:
    """One group."""
    row = conn.execute(select(*_GROUP_COLUMNS).where(job_groups.c.id == group_id)).first()
    return None if row is None else Group(*row)


def member_counts(conn: Connection, group_id: int) -> dict[str, int]:
    """A group's members per status (ix_jobs_group)."""
    query = (
        select(jobs.c.status, func.count())
        .where(jobs.c.group_id == group_id)
        .group_by(jobs.c.status)
    )
    return {status: count for status, count in conn.execute(query)}
