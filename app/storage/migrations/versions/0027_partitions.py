"""partitions: jobs.partition, schedules.partition, ix_jobs_claim_partition, partition_turns

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07

A job may name the partition it is claimed fairly in (a tenant, a customer); a schedule may
name the partition of the jobs it enqueues. NULL: the partition null. Columns are added in
place (no table rebuild), so the counters' triggers stay as they are.

Claims serve partitions in turn: ``ix_jobs_claim_partition`` holds the claimable partitioned
jobs by priority, partition and FIFO order (a job without a partition never enters it), and
``partition_turns`` where each priority's turn stands.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

PARTITIONED = sa.text("status = 'pending' AND waiting_for IS NULL AND partition IS NOT NULL")
PARTITION_LENGTH = 64  # app.queue.vocabulary.job_fields.PARTITION when this revision was written


def upgrade() -> None:
    for table in ("jobs", "schedules"):
        with op.batch_alter_table(table, schema=None, recreate="never") as batch_op:
            batch_op.add_column(
                sa.Column("partition", sa.String(length=PARTITION_LENGTH), nullable=True)
            )
    op.create_index(
        "ix_jobs_claim_partition",
        "jobs",
        [sa.literal_column("priority DESC"), "partition", "run_at", "id"],
        sqlite_where=PARTITIONED,
        postgresql_where=PARTITIONED,
    )
    op.create_table(
        "partition_turns",
        sa.Column("priority", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("partition", sa.String(length=PARTITION_LENGTH), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("priority"),
    )
    # One row per priority from the start: a claim only ever updates its row, and passes over
    # it while another claim's transaction holds it (never waits, never races an insert).
    op.execute(
        "INSERT INTO partition_turns (priority, partition, updated_at) "
        "SELECT priority, '', CURRENT_TIMESTAMP FROM (SELECT 0 AS priority UNION ALL "
        "SELECT 10 UNION ALL SELECT 20 UNION ALL SELECT 30) AS priorities"
    )


def downgrade() -> None:
    op.drop_table("partition_turns")
    op.drop_index("ix_jobs_claim_partition", table_name="jobs")
    for table in ("schedules", "jobs"):
        with op.batch_alter_table(table, schema=None, recreate="never") as batch_op:
            batch_op.drop_column("partition")
