"""type polls: when a worker last asked for jobs of each type, found or not

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07

The explainer's ``no_worker_polling`` read the latest claim events, so a worker whose
long-polls found nothing (its type paused by a limit, or nothing due) looked absent. Claims now
note the types they ask for here, each process at most once per interval per type. Empty at
first: the workers' next claims fill it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "type_polls",
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("polled_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("type", name=op.f("pk_type_polls")),
    )


def downgrade() -> None:
    op.drop_table("type_polls")
