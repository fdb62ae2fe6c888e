"""job counters: counts per scope, job holders, finishes per minute, worker activity, by triggers

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

The triggers keep four tables right in the transaction of every statement that inserts, moves or
deletes a job or appends an event, whichever code runs it; the upgrade fills them from the jobs
and events already there. On PostgreSQL each writing transaction adds to a counter shard that no
other running transaction holds (``queuelog_counter_shard``), so counters never serialize writers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import sqlalchemy as sa
from alembic import op

from app.schema import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PENDING = sa.text("status = 'pending'")
RUNNING = sa.text("status = 'running'")
KEYED = sa.text("idempotency_key IS NOT NULL")
HOME_SHARDS = 16  # a backend starts looking for a free shard at its pid modulo this
SHARD_LOCKS = 29036  # the advisory lock class of counter shards ("ql")


class Dialect(NamedTuple):
    """What differs between the engines in the trigger SQL (a NamedTuple: Alembic loads this
    file outside ``sys.modules``, where dataclasses cannot resolve their annotations)."""

    shard: str  # the counter shard the current transaction writes
    minute: Callable[[str], str]  # a timestamp truncated to its minute
    slot: Callable[[str], str]  # a timestamp's minute of the hour (0..59): its ring slot
    minutes: Callable[[str, int], str]  # a timestamp's minute moved by n minutes
    stamp: Callable[[datetime], str]  # a naive UTC timestamp literal


DIALECTS = {
    "sqlite": Dialect(
        shard="0",  # one writer at a time: nothing to spread
        minute=lambda at: f"strftime('%Y-%m-%d %H:%M:00.000000', {at})",
        slot=lambda at: f"CAST(strftime('%M', {at}) AS INTEGER)",
        minutes=lambda at, n: f"strftime('%Y-%m-%d %H:%M:00.000000', {at}, '{n:+d} minutes')",
        stamp=lambda at: f"'{at:%Y-%m-%d %H:%M:%S}.000000'",
    ),
    "postgresql": Dialect(
        shard="queuelog_counter_shard()",
        minute=lambda at: f"date_trunc('minute', {at})",
        slot=lambda at: f"CAST(extract(minute FROM {at}) AS integer)",
        minutes=lambda at, n: f"date_trunc('minute', {at}) + INTERVAL '{n} minutes'",
        stamp=lambda at: f"TIMESTAMP '{at:%Y-%m-%d %H:%M:%S}'",
    ),
}

# Each writer finds a shard no running transaction holds: its home shard, else the next free
# one. The lock lasts until its transaction ends, and asking again for a held lock succeeds at
# once, so every statement of a transaction may call this; no writer ever waits on a counter row.
SHARD_FUNCTION = f"""
CREATE FUNCTION queuelog_counter_shard() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    candidate integer := mod(pg_backend_pid(), {HOME_SHARDS});
BEGIN
    WHILE NOT pg_try_advisory_xact_lock({SHARD_LOCKS}, candidate) LOOP
        candidate := candidate + 1;
    END LOOP;
    RETURN candidate;
END
$$"""


def _scopes(row: str, sign: int) -> str:
    """The count rows job ``row`` (OLD or NEW) adds ``sign`` to: everyone's figures, its
    owner's, each holder's (a worker sees the jobs it holds or held) and, while it runs, its
    worker's (the workers page)."""
    rest = f"{row}.type, {row}.status, {row}.priority, {sign}"
    return (
        f"SELECT '*' AS scope, {row}.type AS type, {row}.status AS status, "
        f"{row}.priority AS priority, {sign} AS n "
        f"UNION ALL SELECT 'owner:' || {row}.created_by, {rest} "
        f"UNION ALL SELECT 'holder:' || worker, {rest} FROM job_holders WHERE job_id = {row}.id "
        f"UNION ALL SELECT 'worker:' || {row}.worker_id, {rest} WHERE {row}.status = 'running'"
    )


def _count(d: Dialect, rows: str) -> str:
    """Add ``rows`` (scope, type, status, priority, n) to the counts, summed per key first (a
    row may be updated once per statement on PostgreSQL)."""
    return (
        "INSERT INTO job_counts (scope, type, status, priority, shard, n) "
        f"SELECT scope, type, status, priority, {d.shard}, sum(n) FROM ({rows}) AS moved "
        "WHERE true GROUP BY scope, type, status, priority HAVING sum(n) <> 0 "
        "ON CONFLICT (scope, type, status, priority, shard) "
        "DO UPDATE SET n = job_counts.n + excluded.n"
    )


# A claim by a worker that never held the job makes it one of that worker's jobs.
_IS_NEW_HOLDER = (
    "NEW.status = 'running' AND NOT EXISTS "
    "(SELECT 1 FROM job_holders WHERE worker = NEW.worker_id AND job_id = NEW.id)"
)
_NEW_HOLDER = f"SELECT 'holder:' || NEW.worker_id, NEW.type, NEW.status, NEW.priority, 1 WHERE {_IS_NEW_HOLDER}"


def _ring(table: str, keys: str, last_at: bool = False) -> str:
    """The upsert of a ring of minute slots: a newer minute restarts its slot, the same minute
    adds to it, an older one (a slower clock, an hour behind) is outside every window."""
    newer = f"excluded.minute > {table}.minute"
    same = f"excluded.minute = {table}.minute"
    latest = (
        f"last_at = CASE WHEN {newer} OR ({same} AND excluded.last_at > {table}.last_at) "
        f"THEN excluded.last_at ELSE {table}.last_at END, "
        if last_at
        else ""
    )
    return (
        f"ON CONFLICT ({keys}) DO UPDATE SET "
        f"n = CASE WHEN {newer} THEN excluded.n WHEN {same} THEN {table}.n + excluded.n "
        f"ELSE {table}.n END, {latest}"
        f"minute = CASE WHEN {newer} THEN excluded.minute ELSE {table}.minute END"
    )


def _earlier_finishes(d: Dialect) -> str:
    """A new holder also sees the job's finishes of the hour around its claim (a failed job an
    admin retried), as the charts of the jobs a worker holds or held always did. The hour
    reaches a minute past the claim, for a finish stamped by a slightly faster clock; 60
    minutes, so each falls in a slot of its own."""
    return (
        "INSERT INTO finished_per_minute (scope, status, slot, shard, minute, n) "
        f"SELECT 'holder:' || NEW.worker_id, to_status, {d.slot('m')}, {d.shard}, m, count(*) "
        f"FROM (SELECT to_status, {d.minute('at')} AS m FROM job_events "
        "WHERE job_id = NEW.id AND to_status IN ('completed', 'failed')) AS earlier "
        f"WHERE {_IS_NEW_HOLDER} AND m >= {d.minutes('NEW.updated_at', -58)} "
        f"AND m <= {d.minutes('NEW.updated_at', 1)} GROUP BY to_status, m "
        + _ring("finished_per_minute", "scope, status, slot, shard")
    )


def _triggers(d: Dialect) -> list[tuple[str, str, str, str, list[str]]]:
    """(name, event, table, condition, statements) of every trigger."""
    m, slot = d.minute("NEW.at"), d.slot("NEW.at")
    counted = ("status", "priority", "type", "created_by", "run_at")  # holders keep run_at
    jobs_changed = " OR ".join(f"OLD.{column} <> NEW.{column}" for column in counted)
    return [
        ("jobs_count_insert", "INSERT", "jobs", "true", [_count(d, _scopes("NEW", 1))]),
        (
            "jobs_count_update",
            f"UPDATE OF {', '.join(counted)}",
            "jobs",
            jobs_changed,
            [
                _count(
                    d, f"{_scopes('OLD', -1)} UNION ALL {_scopes('NEW', 1)} UNION ALL {_NEW_HOLDER}"
                ),
                _earlier_finishes(d),
                "INSERT INTO job_holders (worker, job_id, status, run_at) "
                "SELECT NEW.worker_id, NEW.id, NEW.status, NEW.run_at "
                "WHERE NEW.status = 'running' ON CONFLICT (worker, job_id) DO NOTHING",
                "UPDATE job_holders SET status = NEW.status, run_at = NEW.run_at "
                "WHERE job_id = NEW.id AND (status <> NEW.status OR run_at <> NEW.run_at)",
            ],
        ),
        (
            "jobs_count_delete",
            "DELETE",
            "jobs",
            "true",
            [_count(d, _scopes("OLD", -1)), "DELETE FROM job_holders WHERE job_id = OLD.id"],
        ),
        (
            "job_events_count_insert",
            "INSERT",
            "job_events",
            "NEW.to_status IN ('running', 'completed', 'failed')",
            [
                "INSERT INTO finished_per_minute (scope, status, slot, shard, minute, n) "
                f"SELECT scope, NEW.to_status, {slot}, {d.shard}, {m}, 1 FROM ("
                "SELECT '*' AS scope "
                "UNION ALL SELECT 'owner:' || created_by FROM jobs WHERE id = NEW.job_id "
                "UNION ALL SELECT 'holder:' || worker FROM job_holders WHERE job_id = NEW.job_id"
                ") AS scopes WHERE NEW.to_status IN ('completed', 'failed') "
                + _ring("finished_per_minute", "scope, status, slot, shard"),
                "INSERT INTO worker_activity (worker, kind, slot, shard, minute, n, last_at) "
                f"SELECT NEW.actor, NEW.kind, {slot}, {d.shard}, {m}, 1, NEW.at "
                "WHERE NEW.actor IS NOT NULL AND NEW.kind IN ('claimed', 'completed', 'failed') "
                + _ring("worker_activity", "worker, kind, slot, shard", last_at=True),
            ],
        ),
    ]


def _create_triggers(dialect: str) -> list[str]:
    d = DIALECTS[dialect]
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW WHEN ({condition}) "
            f"BEGIN {''.join(f'{s}; ' for s in statements)}END"
            for name, event, table, condition, statements in _triggers(d)
        ]
    created = [SHARD_FUNCTION]
    for name, event, table, condition, statements in _triggers(d):
        body = "".join(f"    {s};\n" for s in statements)
        created.append(
            f"CREATE FUNCTION queuelog_{name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN\n{body}    RETURN NULL;\nEND\n$$"
        )
        created.append(
            f"CREATE TRIGGER {name} AFTER {event} ON {table} FOR EACH ROW "
            f"WHEN ({condition}) EXECUTE FUNCTION queuelog_{name}()"
        )
    return created


def _backfill(d: Dialect, now: datetime) -> list[str]:
    """Fill the tables from the jobs and events already there: holders from claim events,
    counts from the jobs, the rings from the events of the last 60 minutes."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
    since, until = d.stamp(start), d.stamp(start + timedelta(minutes=60))
    recent = f"e.at >= {since} AND e.at < {until}"
    finished = f"e.to_status IN ('completed', 'failed') AND {recent}"
    em = d.minute("e.at")
    return [
        "INSERT INTO job_holders (worker, job_id, status, run_at) "
        "SELECT DISTINCT e.actor, e.job_id, j.status, j.run_at FROM job_events e "
        "JOIN jobs j ON j.id = e.job_id WHERE e.to_status = 'running' AND e.actor IS NOT NULL",
        "INSERT INTO job_counts (scope, type, status, priority, shard, n) "
        "SELECT '*', type, status, priority, 0, count(*) FROM jobs "
        "GROUP BY type, status, priority "
        "UNION ALL SELECT 'owner:' || created_by, type, status, priority, 0, count(*) FROM jobs "
        "GROUP BY created_by, type, status, priority "
        "UNION ALL SELECT 'holder:' || h.worker, j.type, j.status, j.priority, 0, count(*) "
        "FROM job_holders h JOIN jobs j ON j.id = h.job_id "
        "GROUP BY h.worker, j.type, j.status, j.priority "
        "UNION ALL SELECT 'worker:' || worker_id, type, status, priority, 0, count(*) FROM jobs "
        "WHERE status = 'running' GROUP BY worker_id, type, status, priority",
        "INSERT INTO finished_per_minute (scope, status, slot, shard, minute, n) "
        f"SELECT scope, status, {d.slot('m')}, 0, m, count(*) FROM ("
        f"SELECT '*' AS scope, e.to_status AS status, {em} AS m FROM job_events e "
        f"WHERE {finished} "
        f"UNION ALL SELECT 'owner:' || j.created_by, e.to_status, {em} FROM job_events e "
        f"JOIN jobs j ON j.id = e.job_id WHERE {finished} "
        f"UNION ALL SELECT 'holder:' || h.worker, e.to_status, {em} FROM job_events e "
        f"JOIN job_holders h ON h.job_id = e.job_id WHERE {finished}"
        ") AS recent GROUP BY scope, status, m",
        "INSERT INTO worker_activity (worker, kind, slot, shard, minute, n, last_at) "
        f"SELECT e.actor, e.kind, {d.slot(em)}, 0, {em}, count(*), max(e.at) FROM job_events e "
        f"WHERE e.actor IS NOT NULL AND e.kind IN ('claimed', 'completed', 'failed') "
        f"AND {recent} GROUP BY e.actor, e.kind, {em}",
    ]


def _ring_table(name: str, key: sa.Column[str], what: str, *extra: sa.Column[object]) -> None:
    """A ring of 60 minute slots per (key, what) and shard (see ``_ring``)."""
    op.create_table(
        name,
        key,
        sa.Column(what, sa.String(length=16), nullable=False),
        sa.Column("slot", sa.SmallInteger(), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("minute", UTCDateTime(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        *extra,
        sa.PrimaryKeyConstraint(key.name, what, "slot", "shard", name=op.f(f"pk_{name}")),
        sqlite_with_rowid=False,
    )


def _claim_index(extra: list[str]) -> None:
    """The claim order's partial index, with ``extra`` trailing columns."""
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.literal_column("priority DESC"), "run_at", "id", *extra],
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "job_counts",
        sa.Column("scope", sa.String(length=80), nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "scope", "type", "status", "priority", "shard", name=op.f("pk_job_counts")
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "job_holders",
        sa.Column("worker", sa.String(length=64), nullable=False),
        sa.Column("job_id", BigId, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("worker", "job_id", name=op.f("pk_job_holders")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_job_holders_job_id", "job_holders", ["job_id"])
    op.create_index(
        "ix_job_holders_worker_status_job_id", "job_holders", ["worker", "status", "job_id"]
    )
    op.create_index(
        "ix_job_holders_pending",
        "job_holders",
        ["worker", "run_at"],
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )
    _ring_table(
        "finished_per_minute", sa.Column("scope", sa.String(length=80), nullable=False), "status"
    )
    _ring_table(
        "worker_activity",
        sa.Column("worker", sa.String(length=64), nullable=False),
        "kind",
        sa.Column("last_at", UTCDateTime(), nullable=False),
    )
    # The counts replace the dashboards' covering indexes; a producer's oldest due job is one
    # probe of (owner, status, run_at), a worker's last heartbeat one of (worker, updated_at),
    # a search by idempotency key one of the key; the claim index covers the explainer's count
    # of the jobs ahead (SQLite reads a partial index alone only when it holds every column).
    op.drop_index("ix_jobs_priority_status", table_name="jobs")
    op.drop_index("ix_jobs_owner_status", table_name="jobs")
    op.create_index("ix_jobs_owner_status_run_at", "jobs", ["created_by", "status", "run_at"])
    op.create_index(
        "ix_jobs_running_seen",
        "jobs",
        ["worker_id", "updated_at"],
        sqlite_where=RUNNING,
        postgresql_where=RUNNING,
    )
    op.create_index(
        "ix_jobs_idempotency_key",
        "jobs",
        ["idempotency_key"],
        sqlite_where=KEYED,
        postgresql_where=KEYED,
    )
    _claim_index(["status"])
    # Triggers first, then the backfill: on PostgreSQL creating them locks out writers of jobs
    # and job_events until this transaction commits, so nothing is counted twice or missed.
    for statement in _create_triggers(bind.dialect.name):
        bind.exec_driver_sql(statement)
    for statement in _backfill(DIALECTS[bind.dialect.name], datetime.now(UTC)):
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    bind = op.get_bind()
    for name, _, table, _, _ in _triggers(DIALECTS[bind.dialect.name]):
        if bind.dialect.name == "sqlite":
            bind.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            bind.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
            bind.exec_driver_sql(f"DROP FUNCTION queuelog_{name}()")
    if bind.dialect.name != "sqlite":
        bind.exec_driver_sql("DROP FUNCTION queuelog_counter_shard()")
    _claim_index([])
    op.drop_index("ix_jobs_idempotency_key", table_name="jobs")
    op.drop_index("ix_jobs_running_seen", table_name="jobs")
    op.drop_index("ix_jobs_owner_status_run_at", table_name="jobs")
    op.create_index("ix_jobs_owner_status", "jobs", ["created_by", "status", "priority"])
    op.create_index("ix_jobs_priority_status", "jobs", ["priority", "status"])
    op.drop_table("worker_activity")
    op.drop_table("finished_per_minute")
    op.drop_index("ix_job_holders_pending", table_name="job_holders")
    op.drop_index("ix_job_holders_worker_status_job_id", table_name="job_holders")
    op.drop_index("ix_job_holders_job_id", table_name="job_holders")
    op.drop_table("job_holders")
    op.drop_table("job_counts")
