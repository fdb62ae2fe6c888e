"""operations: the monitor role, the audit log, metric rollups, metrics and workers indexes

Revision ID: 0005
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import JSONDocument, UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

OLD_ROLES = "role IN ('producer', 'worker', 'admin')"
NEW_ROLES = "role IN ('producer', 'worker', 'admin', 'monitor')"
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _set_role_check(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint(op.f("ck_users_role"), "users", type_="check")
        op.create_check_constraint(op.f("ck_users_role"), "users", new)
        return
    # SQLite cannot alter a CHECK. Rebuilding `users` would cascade-delete every token and
    # job row that references it (foreign keys are on), so the constraint text is rewritten
    # in place: SQLite documents this for loosening constraints, which needs no data change.
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema=ON")
    bind.exec_driver_sql(
        "UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = 'users'",
        (old, new),
    )
    bind.exec_driver_sql(f"PRAGMA schema_version={int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema=OFF")


def upgrade() -> None:
    _set_role_check(OLD_ROLES, NEW_ROLES)
    op.create_table(
        "audit_events",
        sa.Column("id", BigId, nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=True),
        sa.Column("details", JSONDocument, nullable=True),
        sa.Column("client_address", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    op.create_index("ix_audit_events_actor_id", "audit_events", ["actor", "id"])
    op.create_index("ix_audit_events_action_id", "audit_events", ["action", "id"])
    op.create_table(
        "metric_counters",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("label", sa.String(length=32), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", "type", "label", name=op.f("pk_metric_counters")),
    )
    op.create_table(
        "metric_rollup",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_rollup")),
    )
    pending = sa.text("status = 'pending'")
    running = sa.text("status = 'running'")
    op.create_index("ix_jobs_status_type", "jobs", ["status", "type"])
    op.create_index(
        "ix_jobs_pending_type",
        "jobs",
        ["type", "run_at"],
        sqlite_where=pending,
        postgresql_where=pending,
    )
    op.create_index(
        "ix_jobs_running_worker",
        "jobs",
        ["worker_id", "lease_expires_at"],
        sqlite_where=running,
        postgresql_where=running,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_running_worker", table_name="jobs")
    op.drop_index("ix_jobs_pending_type", table_name="jobs")
    op.drop_index("ix_jobs_status_type", table_name="jobs")
    op.drop_table("metric_rollup")
    op.drop_table("metric_counters")
    op.drop_index("ix_audit_events_action_id", table_name="audit_events")
    op.drop_index("ix_audit_events_actor_id", table_name="audit_events")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_table("audit_events")
    op.execute("DELETE FROM users WHERE role = 'monitor'")
    _set_role_check(NEW_ROLES, OLD_ROLES)
