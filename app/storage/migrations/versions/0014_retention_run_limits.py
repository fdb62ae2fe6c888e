"""retention and run-time limits: deadlines of running attempts, max_run_seconds overrides,
the event kind timed_out, and the record of the last retention prune

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

``job_events.kind`` is checked against a frozen list (migration 0003); ``timed_out`` widens it.
SQLite cannot change a CHECK constraint in place: the table is rebuilt, and the triggers and
indexes of ``job_events`` (migrations 0009, 0010), which a rebuild drops, are created again from
their own SQL as ``sqlite_master`` keeps it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import JSONDocument, UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Frozen here, like migration 0003's list: a later kind needs its own migration.
OLD_KINDS = (
    "enqueued",
    "claimed",
    "completed",
    "retry_scheduled",
    "failed",
    "lease_expired",
    "cancelled",
    "retried",
    "released",
)
NEW_KINDS = (*OLD_KINDS, "timed_out")


def _kinds(kinds: tuple[str, ...]) -> str:
    return f"kind IN ({', '.join(repr(kind) for kind in kinds)})"


def _check_kinds(kinds: tuple[str, ...]) -> None:
    """Replace the CHECK on ``job_events.kind`` with one allowing ``kinds``."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint(op.f("ck_job_events_kind"), "job_events", type_="check")
        op.create_check_constraint(op.f("ck_job_events_kind"), "job_events", _kinds(kinds))
        return
    kept = bind.exec_driver_sql(
        "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'job_events' "
        "AND type IN ('index', 'trigger') AND sql IS NOT NULL"
    ).all()
    with op.batch_alter_table(
        "job_events", schema=None, table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_constraint(op.f("ck_job_events_kind"), type_="check")
        batch_op.create_check_constraint(op.f("ck_job_events_kind"), _kinds(kinds))
    present = {name for (name,) in bind.exec_driver_sql("SELECT name FROM sqlite_master").all()}
    for name, sql in kept:
        if name not in present:
            bind.exec_driver_sql(sql)


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("deadline_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("type_overrides", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("max_run_seconds", sa.Integer(), nullable=True))
    op.create_table(
        "retention_runs",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("jobs", JSONDocument, nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("audit_events", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_retention_runs")),
    )
    _check_kinds(NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM job_events WHERE kind = 'timed_out'")
    _check_kinds(OLD_KINDS)
    op.drop_table("retention_runs")
    with op.batch_alter_table("type_overrides", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("max_run_seconds")
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("deadline_at")
