"""job event kinds checked by the database

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Frozen here: a later kind needs its own migration that widens the list.
KINDS = (
    "'enqueued', 'claimed', 'completed', 'retry_scheduled', 'failed', 'lease_expired', "
    "'cancelled', 'retried', 'released'"
)


def upgrade() -> None:
    # SQLite cannot add a CHECK constraint in place: batch mode recreates the table (keeping
    # AUTOINCREMENT, so a pruned event's id is never handed out again).
    with op.batch_alter_table(
        "job_events", schema=None, table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.create_check_constraint(op.f("ck_job_events_kind"), f"kind IN ({KINDS})")


def downgrade() -> None:
    with op.batch_alter_table(
        "job_events", schema=None, table_kwargs={"sqlite_autoincrement": True}
    ) as batch_op:
        batch_op.drop_constraint(op.f("ck_job_events_kind"), type_="check")
