"""children and trace context: jobs.parent_id with its partial index, jobs.traceparent/tracestate

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

A worker may enqueue children of the job it holds (``parent_id``, listed on the parent's page
through ``ix_jobs_parent``, which holds spawned jobs only). An enqueue's W3C trace context is
kept with the job and handed back by the claim. Columns are added in place (no table rebuild),
so the counters' triggers of migration 0009 stay as they are.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

SPAWNED = sa.text("parent_id IS NOT NULL")
TRACESTATE_MAX = 512  # app.queue.vocabulary.trace.TRACESTATE_MAX when this revision was written


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(
            sa.Column(
                "parent_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
            )
        )
        batch_op.add_column(sa.Column("traceparent", sa.String(length=55), nullable=True))
        batch_op.add_column(
            sa.Column("tracestate", sa.String(length=TRACESTATE_MAX), nullable=True)
        )
    op.create_index(
        "ix_jobs_parent",
        "jobs",
        ["parent_id", "id"],
        sqlite_where=SPAWNED,
        postgresql_where=SPAWNED,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_parent", table_name="jobs")
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("tracestate")
        batch_op.drop_column("traceparent")
        batch_op.drop_column("parent_id")
