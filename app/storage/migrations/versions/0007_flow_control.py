"""flow control: per-type overrides and claim windows

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "type_overrides",
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("rate_limit", sa.String(length=32), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=True),
        sa.Column("updated_by", sa.String(length=64), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "max_running IS NULL OR max_running >= 1", name=op.f("ck_type_overrides_max_running")
        ),
        sa.PrimaryKeyConstraint("type", name=op.f("pk_type_overrides")),
    )
    op.create_table(
        "type_claim_windows",
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("window_started_at", UTCDateTime(), nullable=False),
        sa.Column("claims", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("type", name=op.f("pk_type_claim_windows")),
    )


def downgrade() -> None:
    op.drop_table("type_claim_windows")
    op.drop_table("type_overrides")
