"""schedules

Revision ID: 0006
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.storage.sqltypes import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=50), nullable=False),
        sa.Column("cron", sa.String(length=100), nullable=False),
        sa.Column("timezone", sa.String(length=64), server_default="UTC", nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("catch_up", sa.String(length=8), server_default="skip", nullable=False),
        sa.Column("next_run_at", UTCDateTime(), nullable=True),
        sa.Column("last_run_at", UTCDateTime(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("catch_up IN ('skip', 'one')", name=op.f("ck_schedules_catch_up")),
        sa.CheckConstraint(
            "enabled OR next_run_at IS NULL", name=op.f("ck_schedules_disabled_never_due")
        ),
        sa.CheckConstraint("priority IN (0, 10, 20, 30)", name=op.f("ck_schedules_priority")),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_schedules_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("name", name=op.f("uq_schedules_name")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_schedules_next_run_at"), ["next_run_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedules_next_run_at"))

    op.drop_table("schedules")
