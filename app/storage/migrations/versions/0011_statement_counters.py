"""statement counters: on PostgreSQL the job counters move once per statement, not once per row

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03

Migration 0009's triggers run for each row: a claim, a finish or an enqueue of 50 jobs ran 50
trigger functions, each with its own upserts, and that was about half of PostgreSQL's time for
those statements. Here the counters of jobs (``job_counts``, ``finished_per_minute``,
``job_holders``) and of worker activity (``worker_activity``) are kept by statement-level
triggers that read the statement's transition tables and upsert each counter row once.

SQLite has no statement-level triggers: its row triggers stay (they run in the writer's own
process, with no round trip). The rare reclaim trigger (a claim of an attempt after the first)
and the BEFORE UPDATE guard stay row-level on both engines.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

STATUSES = ("pending", "running", "completed", "failed", "cancelled")
SHARD = "queuelog_counter_shard()"
ROW_TRIGGERS = {  # migration 0009's row triggers that the statement triggers replace
    "jobs_count_insert": "jobs",
    "jobs_count_update": "jobs",
    "jobs_count_delete": "jobs",
    "job_events_count_insert": "job_events",
}


def _flags(new: str | None, old: str | None) -> str:
    """Each status column's change for a job that arrives in status ``new`` and leaves ``old``
    (column expressions, or None)."""
    columns = []
    for status in STATUSES:
        terms = [f"CAST({new} = '{status}' AS integer)"] if new else []
        terms += [f"- CAST({old} = '{status}' AS integer)"] if old else []
        columns.append(f"{' '.join(terms)} AS {status}")
    return ", ".join(columns)


def _upsert_counts(rows: str) -> str:
    """Add ``rows`` (scope, type, priority and a change per status) to ``job_counts``, one
    upsert per counter row."""
    sums = ", ".join(f"sum({s})" for s in STATUSES)
    added = ", ".join(f"{s} = job_counts.{s} + excluded.{s}" for s in STATUSES)
    return (
        "INSERT INTO job_counts (scope, type, priority, shard, "
        f"{', '.join(STATUSES)}) SELECT scope, type, priority, {SHARD}, {sums} "
        f"FROM ({rows}) AS moved GROUP BY scope, type, priority "
        f"ON CONFLICT (scope, type, priority, shard) DO UPDATE SET {added}"
    )


def _ring(table: str, keys: str, columns: str, rows: str, last_at: bool = False) -> str:
    """The upsert of a ring of minute slots (migration 0009's rule: a newer minute restarts its
    slot, the same minute adds to it, an older one is outside every window). ``rows`` give the
    ring's key columns, ``minute`` and ``n`` (and ``last_at``); per slot only its newest
    minute is kept, so no counter row is upserted twice by one statement."""
    newer = f"excluded.minute > {table}.minute"
    same = f"excluded.minute = {table}.minute"
    later = f"{newer} OR ({same} AND excluded.last_at > {table}.last_at)"
    latest = f"last_at = CASE WHEN {later} THEN excluded.last_at ELSE {table}.last_at END, "
    extra = ", last_at" if last_at else ""
    return (
        f"INSERT INTO {table} ({columns}, slot, shard, minute, n{extra}) "
        f"SELECT DISTINCT ON ({columns}, slot) {columns}, slot, {SHARD}, minute, n{extra} "
        f"FROM (SELECT *, CAST(extract(minute FROM minute) AS integer) AS slot FROM ({rows}) "
        f"AS counted) AS slotted ORDER BY {columns}, slot, minute DESC "
        f"ON CONFLICT ({keys}) DO UPDATE SET "
        f"n = CASE WHEN {newer} THEN excluded.n WHEN {same} THEN {table}.n + excluded.n "
        f"ELSE {table}.n END, {latest if last_at else ''}"
        f"minute = CASE WHEN {newer} THEN excluded.minute ELSE {table}.minute END"
    )


# The jobs of an UPDATE whose status changed, with both sides (a statement trigger cannot name
# columns, so it also runs for heartbeats: they change no status and add nothing).
_MOVED = (
    "SELECT n.id, n.type, n.priority, n.created_by, n.status, n.run_at, n.updated_at, "
    "n.worker_id, o.status AS old_status, o.worker_id AS old_worker "
    "FROM new_rows n JOIN old_rows o ON o.id = n.id WHERE o.status <> n.status"
)


def _on_insert() -> list[str]:
    flags = _flags("status", None)
    return [
        _upsert_counts(
            f"SELECT '*' AS scope, type, priority, {flags} FROM new_rows UNION ALL "
            f"SELECT 'owner:' || created_by, type, priority, {flags} FROM new_rows"
        )
    ]


def _on_update() -> list[str]:
    moved = _flags("m.status", "m.old_status")
    arrived = _flags("m.status", None)
    counts = _upsert_counts(
        f"SELECT '*' AS scope, m.type, m.priority, {moved} FROM moved m UNION ALL "
        f"SELECT 'owner:' || m.created_by, m.type, m.priority, {moved} FROM moved m UNION ALL "
        f"SELECT 'holder:' || h.worker, m.type, m.priority, {moved} FROM moved m "
        "JOIN job_holders h ON h.job_id = m.id UNION ALL "
        # a claim by a worker that never held the job makes it one of that worker's jobs
        f"SELECT 'holder:' || m.worker_id, m.type, m.priority, {arrived} FROM moved m "
        "WHERE m.status = 'running' AND NOT EXISTS (SELECT 1 FROM job_holders h "
        "WHERE h.worker = m.worker_id AND h.job_id = m.id) UNION ALL "
        "SELECT 'worker:' || m.worker_id, m.type, m.priority, 0, 1, 0, 0, 0 FROM moved m "
        "WHERE m.status = 'running' UNION ALL "
        "SELECT 'worker:' || m.old_worker, m.type, m.priority, 0, -1, 0, 0, 0 FROM moved m "
        "WHERE m.old_status = 'running'"
    )
    finished = (
        "SELECT scope, status, minute, count(*) AS n FROM ("
        "SELECT '*' AS scope, m.status, date_trunc('minute', m.updated_at) AS minute "
        "FROM moved m WHERE m.status IN ('completed', 'failed') UNION ALL "
        "SELECT 'owner:' || m.created_by, m.status, date_trunc('minute', m.updated_at) "
        "FROM moved m WHERE m.status IN ('completed', 'failed') UNION ALL "
        "SELECT 'holder:' || h.worker, m.status, date_trunc('minute', m.updated_at) "
        "FROM moved m JOIN job_holders h ON h.job_id = m.id "
        "WHERE m.status IN ('completed', 'failed')) AS finishes GROUP BY scope, status, minute"
    )
    changed = (
        "SELECT n.id, n.status, n.run_at, n.worker_id FROM new_rows n JOIN old_rows o "
        "ON o.id = n.id WHERE o.status <> n.status OR o.run_at <> n.run_at"
    )
    with_moved = f"WITH moved AS ({_MOVED}) "
    return [
        with_moved + counts,  # before the claim's holder rows: they tell new holders
        with_moved
        + _ring("finished_per_minute", "scope, status, slot, shard", "scope, status", finished),
        "INSERT INTO job_holders (worker, job_id, status, run_at) "
        f"SELECT c.worker_id, c.id, c.status, c.run_at FROM ({changed}) AS c "
        "WHERE c.status = 'running' ON CONFLICT (worker, job_id) DO NOTHING",
        f"UPDATE job_holders h SET status = c.status, run_at = c.run_at FROM ({changed}) AS c "
        "WHERE h.job_id = c.id AND (h.status <> c.status OR h.run_at <> c.run_at)",
    ]


def _on_delete() -> list[str]:
    gone = _flags(None, "o.status")
    return [
        _upsert_counts(
            f"SELECT '*' AS scope, o.type, o.priority, {gone} FROM old_rows o UNION ALL "
            f"SELECT 'owner:' || o.created_by, o.type, o.priority, {gone} FROM old_rows o "
            f"UNION ALL SELECT 'holder:' || h.worker, o.type, o.priority, {gone} "
            "FROM old_rows o JOIN job_holders h ON h.job_id = o.id UNION ALL "
            "SELECT 'worker:' || o.worker_id, o.type, o.priority, 0, -1, 0, 0, 0 "
            "FROM old_rows o WHERE o.status = 'running'"
        ),
        "DELETE FROM job_holders h USING old_rows o WHERE h.job_id = o.id",
    ]


def _on_events() -> list[str]:
    rows = (
        "SELECT actor AS worker, kind, date_trunc('minute', at) AS minute, count(*) AS n, "
        "max(at) AS last_at FROM new_rows WHERE actor IS NOT NULL "
        "AND kind IN ('claimed', 'completed', 'failed') GROUP BY actor, kind, minute"
    )
    return [_ring("worker_activity", "worker, kind, slot, shard", "worker, kind", rows, True)]


# (name, table, event, transition tables, statements)
TRIGGERS = [
    ("jobs_counts_inserted", "jobs", "INSERT", "NEW TABLE AS new_rows", _on_insert),
    (
        "jobs_counts_updated",
        "jobs",
        "UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        _on_update,
    ),
    ("jobs_counts_deleted", "jobs", "DELETE", "OLD TABLE AS old_rows", _on_delete),
    ("job_events_counts_inserted", "job_events", "INSERT", "NEW TABLE AS new_rows", _on_events),
]


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, table in ROW_TRIGGERS.items():
        bind.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
        bind.exec_driver_sql(f"DROP FUNCTION queuelog_{name}()")
    for name, table, event, tables, statements in TRIGGERS:
        body = "".join(f"    {s};\n" for s in statements())
        bind.exec_driver_sql(
            f"CREATE FUNCTION queuelog_{name}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN\n{body}    RETURN NULL;\nEND\n$$"
        )
        bind.exec_driver_sql(
            f"CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {tables} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION queuelog_{name}()"
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, table, _, _, _ in TRIGGERS:
        bind.exec_driver_sql(f"DROP TRIGGER {name} ON {table}")
        bind.exec_driver_sql(f"DROP FUNCTION queuelog_{name}()")
    for statement in _row_triggers():
        bind.exec_driver_sql(statement)


def _row_triggers() -> list[str]:
    """Migration 0009's row triggers that this one replaced, as it created them."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("0009_job_counters.py")
    spec = importlib.util.spec_from_file_location("queuelog_migration_0009", path)
    assert spec is not None and spec.loader is not None
    earlier = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(earlier)
    created: list[str] = earlier._create_triggers("postgresql")
    return [s for s in created if any(f"queuelog_{name}()" in s for name in ROW_TRIGGERS)]
