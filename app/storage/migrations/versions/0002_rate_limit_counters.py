"""rate limit counters

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_limits")),
    )
    with op.batch_alter_table("rate_limits", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rate_limits_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("rate_limits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rate_limits_expires_at"))

    op.drop_table("rate_limits")
