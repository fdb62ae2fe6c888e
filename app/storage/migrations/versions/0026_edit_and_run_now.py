"""edit and run now: the event kinds edited and run_now; an admin's retry may change a job's
priority, and the counts per priority follow it

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07

``job_events.kind`` widens as migration 0014 widened it (SQLite rebuilds the table).

``job_counts`` holds per (scope, type, priority): migration 0009's guard refused any change of
a job's priority so that the counting triggers, which count a move at the job's new priority,
stayed exact. The guard now lets the priority change in one move only, an admin's retry
(failed or cancelled to pending), and a row trigger on both engines, fired only by an UPDATE
that sets the priority, moves the job's old status from its old priority to its new one in
each scope that counts it: with the move's own count (old status out, new status in, at the
new priority) the job leaves its old status at its old priority and arrives in its new status
at its new one. The type and owner still never change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import op

from app.storage.migrations.earlier import migration

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

STATUSES = ("pending", "running", "completed", "failed", "cancelled")
NEW_KINDS = ("edited", "run_now")
GUARD = "jobs_immutable"
REPRICED = "jobs_count_repriced"
_OLD_GUARD = (
    "OLD.type <> NEW.type OR OLD.priority <> NEW.priority OR OLD.created_by <> NEW.created_by",
    "the type, priority and owner of a job never change (job counts rely on it)",
)
# Frozen here: the move that may reprice a job is the admin retry (``states.EDGES``).
_NEW_GUARD = (
    "OLD.type <> NEW.type OR OLD.created_by <> NEW.created_by OR (OLD.priority <> NEW.priority "
    "AND NOT (OLD.status IN ('failed', 'cancelled') AND NEW.status = 'pending'))",
    "the type and owner of a job never change, and its priority only as an admin retries it "
    "(job counts rely on it)",
)


def _repriced(shard: str, flag: Any) -> str:
    """The job's old status, out of its old priority and into its new one, in every scope that
    counts it: everyone's, its owner's, each holder's (a repriced job is not running, so no
    worker's scope counts it)."""
    moved = ", ".join(f"sides.sign * {flag(f'OLD.status = {s!r}')}" for s in STATUSES)
    added = ", ".join(f"{s} = job_counts.{s} + excluded.{s}" for s in STATUSES)
    return (
        f"INSERT INTO job_counts (scope, type, priority, shard, {', '.join(STATUSES)}) "
        f"SELECT scopes.scope, OLD.type, sides.priority, {shard}, {moved} FROM ("
        "SELECT '*' AS scope UNION ALL SELECT 'owner:' || OLD.created_by "
        "UNION ALL SELECT 'holder:' || worker FROM job_holders WHERE job_id = OLD.id"
        ") AS scopes CROSS JOIN (SELECT OLD.priority AS priority, -1 AS sign "
        "UNION ALL SELECT NEW.priority, 1) AS sides WHERE true "
        f"ON CONFLICT (scope, type, priority, shard) DO UPDATE SET {added}"
    )


def _sqlite(guard: tuple[str, str], repriced: bool) -> list[str]:
    condition, message = guard
    made = [
        f"DROP TRIGGER {GUARD}",
        f"CREATE TRIGGER {GUARD} BEFORE UPDATE OF type, priority, created_by ON jobs "
        f"FOR EACH ROW WHEN ({condition}) BEGIN SELECT RAISE(ABORT, '{message}'); END",
    ]
    if repriced:
        made.append(
            f"CREATE TRIGGER {REPRICED} AFTER UPDATE OF priority ON jobs FOR EACH ROW "
            f"WHEN (OLD.priority <> NEW.priority) BEGIN {_repriced('0', _sqlite_flag)}; END"
        )
    else:
        made.insert(0, f"DROP TRIGGER {REPRICED}")
    return made


def _sqlite_flag(condition: str) -> str:
    return f"({condition})"


def _postgresql_flag(condition: str) -> str:
    return f"CAST({condition} AS integer)"


def _postgresql(guard: tuple[str, str], repriced: bool) -> list[str]:
    condition, message = guard
    made = [
        f"CREATE OR REPLACE FUNCTION queuelog_{GUARD}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n    RAISE EXCEPTION '{message}';\n    RETURN NULL;\nEND\n$$",
        f"DROP TRIGGER {GUARD} ON jobs",
        f"CREATE TRIGGER {GUARD} BEFORE UPDATE OF type, priority, created_by ON jobs "
        f"FOR EACH ROW WHEN ({condition}) EXECUTE FUNCTION queuelog_{GUARD}()",
    ]
    if not repriced:
        return [*made, f"DROP TRIGGER {REPRICED} ON jobs", f"DROP FUNCTION queuelog_{REPRICED}()"]
    body = _repriced("queuelog_counter_shard()", _postgresql_flag)
    return [
        *made,
        f"CREATE FUNCTION queuelog_{REPRICED}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n    {body};\n    RETURN NULL;\nEND\n$$",
        # A row trigger with a column list: the hot statements never set the priority, so it
        # never fires for them (a statement trigger could not name the column).
        f"CREATE TRIGGER {REPRICED} AFTER UPDATE OF priority ON jobs FOR EACH ROW "
        f"WHEN (OLD.priority <> NEW.priority) EXECUTE FUNCTION queuelog_{REPRICED}()",
    ]


def _triggers(guard: tuple[str, str], repriced: bool) -> None:
    bind = op.get_bind()
    made = _sqlite if bind.dialect.name == "sqlite" else _postgresql
    for statement in made(guard, repriced):
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    kinds = migration("0014_retention_run_limits.py")
    kinds._check_kinds((*kinds.NEW_KINDS, *NEW_KINDS))
    _triggers(_NEW_GUARD, repriced=True)


def downgrade() -> None:
    # A repriced job keeps its new priority: the counts stay exact under the old triggers.
    _triggers(_OLD_GUARD, repriced=False)
    listed = ", ".join(f"'{kind}'" for kind in NEW_KINDS)
    op.execute(f"DELETE FROM job_events WHERE kind IN ({listed})")
    kinds = migration("0014_retention_run_limits.py")
    kinds._check_kinds(kinds.NEW_KINDS)
