"""The SQL of per-type flow control: admins' overrides, the claim windows that claims of a
limited type count in (and, on PostgreSQL, lock to take turns), and whether a type has due jobs.
What runs of each type comes from the counters (``dialects.counts``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, bindparam, exists, select, update

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.jobs import PENDING as CLAIMABLE
from app.queue.vocabulary.limits import Overridden, Override, Window
from app.storage.schema import jobs
from app.storage.schema_types import type_claim_windows, type_overrides
from app.storage.sqltypes import UTCDateTime

_OVERRIDES = select(type_overrides)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A literal status: the partial pending-by-type index serves it.
_PENDING = CLAIMABLE  # the literal terms of the pending-by-type index


def overrides(conn: Connection) -> dict[str, Override]:
    """Every type's override, by type (a small table: one row per type an admin changed)."""
    return {row.type: Override.from_row(row._mapping) for row in conn.execute(_OVERRIDES)}


@lru_cache(maxsize=4)
def claim_overrides_sql(dialect: Dialect) -> str:
    """The claim's read of the overrides, with a row of NULLs (no type) when a partitioned job
    is claimable: one probe of the (then empty) ix_jobs_claim_partition tells a claim of a
    queue without partitions to stay the plain claim."""
    jobs_table = "jobs" + dialect.index_hint("ix_jobs_claim_partition")
    return " ".join(
        [
            "SELECT type, max_running, rate_limit, paused, max_run_seconds,",
            "partition_max_running, partition_rate_limit FROM type_overrides",
            "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE EXISTS (SELECT 1 FROM",
            jobs_table,
            "WHERE status = 'pending' AND waiting_for IS NULL AND partition IS NOT NULL)",
        ]
    )


def claim_overrides(conn: Connection) -> tuple[dict[str, Overridden], bool]:
    """The override values every claim reads, and whether a partitioned job is claimable,
    through the driver's own cursor: statement execution costs SQLAlchemy many times this
    read of a few rows, and a claim without any limit must stay as fast as it was. (SQLite
    hands ``paused`` back as 0 or 1.)"""
    cursor = conn.connection.cursor()
    try:
        rows = cursor.execute(claim_overrides_sql(dialects.of(conn))).fetchall()
    finally:
        cursor.close()
    overrides = {
        job_type: Overridden(running, rate, None if paused is None else bool(paused), *rest)
        for job_type, running, rate, paused, *rest in rows
        if job_type is not None
    }
    return overrides, len(overrides) < len(rows)


def save_override(
    conn: Connection, job_type: str, values: Mapping[str, Any], *, actor: str, now: datetime
) -> Override:
    """Set the given override columns of ``job_type`` (None clears one); returns the row."""
    changes = {**values, "updated_by": actor, "updated_at": now}
    statement = (
        dialects.of(conn)
        .insert(type_overrides)
        .values(type=job_type, **changes)
        .on_conflict_do_update(index_elements=[type_overrides.c.type], set_=changes)
        .returning(*type_overrides.c)
    )
    return Override.from_row(conn.execute(statement).one()._mapping)


_LOCK_WINDOW = (
    select(type_claim_windows)
    .where(type_claim_windows.c.type == bindparam("job_type"))
    .with_for_update()
)


def lock_windows(conn: Connection, job_types: Collection[str]) -> dict[str, Window]:
    """The claim windows of ``job_types``, each row locked on PostgreSQL, so concurrent claims
    of a limited type take turns and each counts after the previous one committed (SQLite
    writers are already one at a time). A missing row is created first: a lock needs a row.

    One type at a time, in type order: a claim only ever waits for a row (to lock it, or for
    a concurrent insert of it to commit) ordered after every row it holds, so claims never
    wait on each other in a circle."""
    found = {}
    for name in sorted(job_types):
        row = conn.execute(_LOCK_WINDOW, {"job_type": name}).first()
        if row is None:
            conn.execute(
                dialects.of(conn).insert(type_claim_windows).on_conflict_do_nothing(),
                {"type": name, "window_started_at": _EPOCH, "claims": 0},
            )
            row = conn.execute(_LOCK_WINDOW, {"job_type": name}).one()
        found[name] = Window(row.window_started_at, row.claims)
    return found


def window(conn: Connection, job_type: str) -> Window | None:
    """The claim window of ``job_type`` as it stands (no lock: for reading only)."""
    row = conn.execute(
        select(type_claim_windows).where(type_claim_windows.c.type == job_type)
    ).first()
    return Window(row.window_started_at, row.claims) if row else None


_COUNT_CLAIMS = (
    update(type_claim_windows)
    .where(type_claim_windows.c.type == bindparam("job_type"))
    .values(window_started_at=bindparam("started_at"), claims=bindparam("claims"))
)


def count_claims(conn: Connection, job_type: str, *, started_at: datetime, claims: int) -> None:
    """Record that ``claims`` jobs of ``job_type`` were claimed in the window from
    ``started_at`` (the row was locked by ``lock_windows`` in this transaction)."""
    conn.execute(_COUNT_CLAIMS, {"job_type": job_type, "started_at": started_at, "claims": claims})


# Built once: a typed claim of a limited type runs it, and building one costs more than running it.
_ANY_DUE = select(
    exists().where(
        _PENDING,
        jobs.c.type.in_(bindparam("types", expanding=True)),
        jobs.c.run_at <= bindparam("now", type_=UTCDateTime()),
    )
)


def any_due(conn: Connection, job_types: Collection[str], now: datetime) -> bool:
    """Whether a job of one of ``job_types`` is due (a probe of the pending-by-type index)."""
    return bool(conn.execute(_ANY_DUE, {"types": sorted(job_types), "now": now}).scalar())
