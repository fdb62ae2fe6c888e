"""uniqueness while active: jobs.unique_key and its partial index

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ACTIVE_WITH_KEY = "unique_key IS NOT NULL AND status IN ('pending', 'running')"


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unique_key", sa.String(length=200), nullable=True))
        batch_op.create_index(
            "ix_jobs_unique",
            ["created_by", "type", "unique_key"],
            unique=False,
            sqlite_where=sa.text(ACTIVE_WITH_KEY),
            postgresql_where=sa.text(ACTIVE_WITH_KEY),
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_unique")
        batch_op.drop_column("unique_key")
