"""The SQL of per-partition flow control (``partition_max_running``, ``partition_rate_limit``):
what runs of a type in each partition, the claims counted in each partition's rate window, and
the type and partition of the jobs a claim picked. Read only by claims of a type with partition
limits, while they hold the type's turn (``type_limits_sql.lock_windows``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, func, literal_column, select

from app.queue.sql import dialects
from app.queue.vocabulary.limits import Window
from app.storage.schema import jobs
from app.storage.schema_partitions import NULL_PARTITION
from app.storage.schema_types import partition_claim_windows as windows_table
from app.storage.sqltypes import UTCDateTime

_PARTITION = func.coalesce(jobs.c.partition, NULL_PARTITION)
# The running jobs of one type (ix_jobs_status_type's range: few jobs run at once).
_RUNNING = (
    select(_PARTITION, func.count())
    .where(jobs.c.status == literal_column("'running'"), jobs.c.type == bindparam("job_type"))
    .group_by(_PARTITION)
)
_WINDOWS = select(
    windows_table.c.partition, windows_table.c.window_started_at, windows_table.c.claims
).where(
    windows_table.c.type == bindparam("job_type"),
    windows_table.c.window_started_at >= bindparam("since", type_=UTCDateTime()),
)
_KEYS = select(jobs.c.id, jobs.c.type, _PARTITION).where(
    jobs.c.id.in_(bindparam("ids", expanding=True))
)
_STALE = delete(windows_table).where(
    windows_table.c.type == bindparam("job_type"),
    windows_table.c.window_started_at < bindparam("since", type_=UTCDateTime()),
)


def running_by_partition(conn: Connection, job_type: str) -> dict[str, int]:
    """How many jobs of ``job_type`` run now in each partition (``NULL_PARTITION``: those
    without one); partitions running none are left out."""
    return {part: int(n) for part, n in conn.execute(_RUNNING, {"job_type": job_type})}


def windows(conn: Connection, job_type: str, since: datetime) -> dict[str, Window]:
    """The rate windows of ``job_type``'s partitions that started at ``since`` or later."""
    rows = conn.execute(_WINDOWS, {"job_type": job_type, "since": since})
    return {part: Window(started, claims) for part, started, claims in rows}


def keys_of(conn: Connection, ids: Collection[int]) -> dict[int, tuple[str, str]]:
    """``id -> (type, partition)`` of the jobs ``ids`` (``NULL_PARTITION``: none)."""
    if not ids:
        return {}
    return {job_id: (t, part) for job_id, t, part in conn.execute(_KEYS, {"ids": list(ids)})}


def count_claims(
    conn: Connection, job_type: str, started_at: datetime, claims: Mapping[str, int]
) -> None:
    """Set the claims of ``job_type``'s partitions in the window from ``started_at`` (the
    claim holds the type's turn), and forget the windows that ended before it."""
    conn.execute(_STALE, {"job_type": job_type, "since": started_at})
    if not claims:
        return
    insert = dialects.of(conn).insert(windows_table)
    statement = insert.on_conflict_do_update(
        index_elements=[windows_table.c.type, windows_table.c.partition],
        set_={
            "window_started_at": insert.excluded.window_started_at,
            "claims": insert.excluded.claims,
        },
    )
    rows = [
        {"type": job_type, "partition": part, "window_started_at": started_at, "claims": n}
        for part, n in sorted(claims.items())
    ]
    conn.execute(statement, rows)
