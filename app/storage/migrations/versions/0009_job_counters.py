"""job counters: counts per scope, job holders, finishes per minute, worker activity, by triggers

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

Triggers keep four tables right in the statement that inserts, moves or deletes a job or appends
an event, whatever runs it; the upgrade fills them from what is there. On PostgreSQL a writer adds
to a counter shard no other running transaction holds, so counters never serialize writers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
RUNNING = sa.text("status = 'running'")
KEYED = sa.text("idempotency_key IS NOT NULL")
HOME_SHARDS = 16  # a backend starts looking for a free shard at its pid modulo this
SHARD_LOCKS = 29036  # the advisory lock class of counter shards ("ql")


class TriggerSql(NamedTuple):
    """What differs between the databases in the trigger SQL (a NamedTuple: Alembic loads this
    file outside ``sys.modules``, where dataclasses cannot resolve their annotations)."""

    shard: str  # the counter shard the current transaction writes
    minute: Callable[[str], str]  # a timestamp truncated to its minute
    slot: Callable[[str], str]  # a timestamp's minute of the hour (0..59): its ring slot
    minutes: Callable[[str, int], str]  # a timestamp truncated to its minute, moved by n
    stamp: Callable[[datetime], str]  # a naive UTC timestamp literal
    flag: Callable[[str], str]  # a condition as 1 or 0
    refuse: Callable[[str], str]  # the trigger statement that aborts with a message


DIALECTS = {
    "sqlite": TriggerSql(
        shard="0",  # one writer at a time: nothing to spread
        # the text of a stored timestamp, 'YYYY-MM-DD HH:MM:SS.ffffff': cut, not parsed
        minute=lambda at: f"substr({at}, 1, 16) || ':00.000000'",
        slot=lambda at: f"CAST(substr({at}, 15, 2) AS INTEGER)",
        minutes=lambda at, n: f"strftime('%Y-%m-%d %H:%M:00.000000', {at}, '{n:+d} minutes')",
        stamp=lambda at: f"'{at:%Y-%m-%d %H:%M:%S}.000000'",
        flag=lambda condition: f"({condition})",
        refuse=lambda message: f"SELECT RAISE(ABORT, '{message}')",
    ),
    "postgresql": TriggerSql(
        shard="queuelog_counter_shard()",
        minute=lambda at: f"date_trunc('minute', {at})",
        slot=lambda at: f"CAST(extract(minute FROM {at}) AS integer)",
        minutes=lambda at, n: f"date_trunc('minute', {at}) + INTERVAL '{n} minutes'",
        stamp=lambda at: f"TIMESTAMP '{at:%Y-%m-%d %H:%M:%S}'",
        flag=lambda condition: f"CAST({condition} AS integer)",
        refuse=lambda message: f"RAISE EXCEPTION '{message}'",
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


STATUSES = ("pending", "running", "completed", "failed", "cancelled")  # a column each
_COUNT = (
    "INSERT INTO job_counts (scope, type, priority, shard, pending, running, completed, "
    "failed, cancelled) SELECT scope, {row}.type, {row}.priority, {shard}, pending, running, "
    "completed, failed, cancelled FROM ({rows}) AS moved WHERE {when} "
    "ON CONFLICT (scope, type, priority, shard) DO UPDATE SET "
    + ", ".join(f"{s} = job_counts.{s} + excluded.{s}" for s in STATUSES)
)
# A claim by a worker that never held the job makes it one of that worker's jobs.
_IS_NEW_HOLDER = (
    "NEW.status = 'running' AND NOT EXISTS "
    "(SELECT 1 FROM job_holders WHERE worker = NEW.worker_id AND job_id = NEW.id)"
)


def _moved(d: TriggerSql, new: str | None, old: str | None) -> str:
    """Each status column's change when a job arrives in ``new``'s status and leaves ``old``'s
    (``NEW``, ``OLD`` or None)."""
    columns = []
    for status in STATUSES:
        terms = [d.flag(f"{new}.status = '{status}'")] if new else []
        terms += [f"- {d.flag(f'{old}.status = {status!r}')}"] if old else []
        columns.append(f"{' '.join(terms)} AS {status}")
    return ", ".join(columns)


def _count(d: TriggerSql, new: str | None, old: str | None) -> str:
    """Move the job's counts in one row per scope: everyone's, its owner's, each holder's (a
    worker sees the jobs it holds or held) and its worker's while it runs (the workers page).
    Every row has its own key, which an upsert on PostgreSQL needs."""
    row = new or old
    moved = _moved(d, new, old)
    scopes = [f"SELECT '*' AS scope, {moved}", f"SELECT 'owner:' || {row}.created_by, {moved}"]
    if old:
        scopes.append(f"SELECT 'holder:' || worker, {moved} FROM job_holders WHERE job_id = OLD.id")
    if new and old:
        scopes.append(
            f"SELECT 'holder:' || NEW.worker_id, {_moved(d, new, None)} WHERE {_IS_NEW_HOLDER}"
        )
    for which, sign in ((new, 1), (old, -1)):
        if which:
            scopes.append(
                f"SELECT 'worker:' || {which}.worker_id, 0, {sign}, 0, 0, 0 "
                f"WHERE {which}.status = 'running'"
            )
    when = "OLD.status <> NEW.status" if new and old else "true"
    return _COUNT.format(row=row, shard=d.shard, rows=" UNION ALL ".join(scopes), when=when)


def _ring(table: str, keys: str, last_at: bool = False) -> str:
    """The upsert of a ring of minute slots: a newer minute restarts its slot, the same minute
    adds to it, an older one (a slower clock, an hour behind) is outside every window."""
    newer = f"excluded.minute > {table}.minute"
    same = f"excluded.minute = {table}.minute"
    later = f"{newer} OR ({same} AND excluded.last_at > {table}.last_at)"
    latest = f"last_at = CASE WHEN {later} THEN excluded.last_at ELSE {table}.last_at END, "
    return (
        f"ON CONFLICT ({keys}) DO UPDATE SET "
        f"n = CASE WHEN {newer} THEN excluded.n WHEN {same} THEN {table}.n + excluded.n "
        f"ELSE {table}.n END, {latest if last_at else ''}"
        f"minute = CASE WHEN {newer} THEN excluded.minute ELSE {table}.minute END"
    )


def _earlier_finishes(d: TriggerSql) -> str:
    """A worker that claims a job it never held (a failed job an admin retried: not its first
    attempt) also sees the job's finishes of the hour around its claim, as the charts of the
    jobs a worker holds or held always did. The hour reaches a minute past the claim, for a
    finish stamped by a slightly faster clock; 60 minutes, so each has a slot of its own."""
    return (
        "INSERT INTO finished_per_minute (scope, status, slot, shard, minute, n) "
        f"SELECT 'holder:' || NEW.actor, to_status, {d.slot('m')}, {d.shard}, m, count(*) "
        f"FROM (SELECT to_status, {d.minute('at')} AS m FROM job_events "
        "WHERE job_id = NEW.job_id AND to_status IN ('completed', 'failed')) AS earlier "
        "WHERE NOT EXISTS (SELECT 1 FROM job_events WHERE job_id = NEW.job_id "
        "AND to_status = 'running' AND actor = NEW.actor AND id < NEW.id) "
        f"AND m >= {d.minutes('NEW.at', -58)} AND m <= {d.minutes('NEW.at', 1)} "
        "GROUP BY to_status, m " + _ring("finished_per_minute", "scope, status, slot, shard")
    )


def _finished(d: TriggerSql) -> str:
    """A completion or final failure: in the minute's chart of everyone, its owner, its holders."""
    at = "NEW.updated_at"
    return (
        "INSERT INTO finished_per_minute (scope, status, slot, shard, minute, n) "
        f"SELECT scope, NEW.status, {d.slot(at)}, {d.shard}, {d.minute(at)}, 1 FROM ("
        "SELECT '*' AS scope UNION ALL SELECT 'owner:' || NEW.created_by "
        "UNION ALL SELECT 'holder:' || worker FROM job_holders WHERE job_id = NEW.id"
        ") AS scopes WHERE NEW.status IN ('completed', 'failed') AND OLD.status <> NEW.status "
        + _ring("finished_per_minute", "scope, status, slot, shard")
    )


def _triggers(d: TriggerSql) -> list[tuple[str, str, str, str, list[str]]]:
    """(name, when and event, table, condition, statements) of every trigger."""
    return [
        # The counts hold because a job's type, priority and owner never change: refused.
        (
            "jobs_immutable",
            "BEFORE UPDATE OF type, priority, created_by",
            "jobs",
            "OLD.type <> NEW.type OR OLD.priority <> NEW.priority OR OLD.created_by <> NEW.created_by",
            [
                d.refuse(
                    "the type, priority and owner of a job never change (job counts rely on it)"
                )
            ],
        ),
        ("jobs_count_insert", "AFTER INSERT", "jobs", "true", [_count(d, "NEW", None)]),
        (
            "jobs_count_update",
            "AFTER UPDATE OF status, run_at",  # holder rows keep the run_at of their job
            "jobs",
            "OLD.status <> NEW.status OR OLD.run_at <> NEW.run_at",
            [
                _count(d, "NEW", "OLD"),  # before the claim's holder row: it tells new holders
                _finished(d),
                "INSERT INTO job_holders (worker, job_id, status, run_at) "
                "SELECT NEW.worker_id, NEW.id, NEW.status, NEW.run_at "
                "WHERE NEW.status = 'running' ON CONFLICT (worker, job_id) DO NOTHING",
                "UPDATE job_holders SET status = NEW.status, run_at = NEW.run_at "
                "WHERE job_id = NEW.id AND (status <> NEW.status OR run_at <> NEW.run_at)",
            ],
        ),
        (
            "jobs_count_delete",
            "AFTER DELETE",
            "jobs",
            "true",
            [_count(d, None, "OLD"), "DELETE FROM job_holders WHERE job_id = OLD.id"],
        ),
        (
            "job_events_count_insert",
            "AFTER INSERT",
            "job_events",
            "NEW.actor IS NOT NULL AND NEW.kind IN ('claimed', 'completed', 'failed')",
            [
                "INSERT INTO worker_activity (worker, kind, slot, shard, minute, n, last_at) "
                f"SELECT NEW.actor, NEW.kind, {d.slot('NEW.at')}, {d.shard}, "
                f"{d.minute('NEW.at')}, 1, NEW.at "
                + _ring("worker_activity", "worker, kind, slot, shard", last_at=True)
            ],
        ),
        (
            "job_events_count_reclaim",
            "AFTER INSERT",
            "job_events",
            "NEW.kind = 'claimed' AND NEW.attempt > 1",
            [_earlier_finishes(d)],
        ),
    ]


def _create_triggers(dialect: str) -> list[str]:
    d = DIALECTS[dialect]
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW "
            f"WHEN ({condition}) BEGIN {''.join(f'{s}; ' for s in statements)}END"
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
            f"CREATE TRIGGER {name} {event} ON {table} FOR EACH ROW "
            f"WHEN ({condition}) EXECUTE FUNCTION queuelog_{name}()"
        )
    return created


def _backfill(d: TriggerSql, now: datetime) -> list[str]:
    """Fill the tables from the jobs and events already there: holders from claim events,
    counts from the jobs, the rings from the events of the last 60 minutes."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=59)
    since, until = d.stamp(start), d.stamp(start + timedelta(minutes=60))
    recent = f"e.at >= {since} AND e.at < {until}"
    finished = f"e.to_status IN ('completed', 'failed') AND {recent}"
    em = d.minute("e.at")

    def sums(table: str) -> str:
        return ", ".join(
            f"sum(CASE WHEN {table}status = '{status}' THEN 1 ELSE 0 END)" for status in STATUSES
        )

    return [
        "INSERT INTO job_holders (worker, job_id, status, run_at) "
        "SELECT DISTINCT e.actor, e.job_id, j.status, j.run_at FROM job_events e "
        "JOIN jobs j ON j.id = e.job_id WHERE e.to_status = 'running' AND e.actor IS NOT NULL",
        "INSERT INTO job_counts (scope, type, priority, shard, pending, running, completed, "
        f"failed, cancelled) SELECT '*', type, priority, 0, {sums('')} FROM jobs "
        "GROUP BY type, priority "
        f"UNION ALL SELECT 'owner:' || created_by, type, priority, 0, {sums('')} FROM jobs "
        "GROUP BY created_by, type, priority "
        f"UNION ALL SELECT 'holder:' || h.worker, j.type, j.priority, 0, {sums('j.')} "
        "FROM job_holders h JOIN jobs j ON j.id = h.job_id GROUP BY h.worker, j.type, j.priority "
        "UNION ALL SELECT 'worker:' || worker_id, type, priority, 0, 0, count(*), 0, 0, 0 "
        "FROM jobs WHERE status = 'running' GROUP BY worker_id, type, priority",
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


def _partial(name: str, table: str, columns: list[Any], where: Any) -> None:
    op.create_index(name, table, columns, sqlite_where=where, postgresql_where=where)


def _claim_index(extra: list[str]) -> None:
    """The claim order's partial index, with ``extra`` trailing columns."""
    op.drop_index("ix_jobs_claim", table_name="jobs")
    columns = [sa.literal_column("priority DESC"), "run_at", "id", *extra]
    _partial("ix_jobs_claim", "jobs", columns, PENDING)


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "job_counts",
        sa.Column("scope", sa.String(length=80), nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        *(sa.Column(status, sa.BigInteger(), nullable=False) for status in STATUSES),
        sa.PrimaryKeyConstraint("scope", "type", "priority", "shard", name=op.f("pk_job_counts")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "job_holders",
        sa.Column("worker", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("worker", "job_id", name=op.f("pk_job_holders")),
        sqlite_with_rowid=False,
    )
    for columns in (["job_id"], ["worker", "status", "job_id"]):
        op.create_index(f"ix_job_holders_{'_'.join(columns)}", "job_holders", columns)
    _partial("ix_job_holders_pending", "job_holders", ["worker", "run_at"], PENDING)
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
    _partial("ix_jobs_running_seen", "jobs", ["worker_id", "updated_at"], RUNNING)
    _partial("ix_jobs_idempotency_key", "jobs", ["idempotency_key"], KEYED)
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
    for index in ("ix_jobs_idempotency_key", "ix_jobs_running_seen", "ix_jobs_owner_status_run_at"):
        op.drop_index(index, table_name="jobs")
    op.create_index("ix_jobs_owner_status", "jobs", ["created_by", "status", "priority"])
    op.create_index("ix_jobs_priority_status", "jobs", ["priority", "status"])
    for table in ("worker_activity", "finished_per_minute", "job_holders", "job_counts"):
        op.drop_table(table)  # and its indexes
