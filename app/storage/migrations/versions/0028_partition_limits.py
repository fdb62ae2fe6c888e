"""partition limits: type_overrides.partition_max_running and partition_rate_limit, and the
claims per partition in a rate window (partition_claim_windows)

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07

A type may limit what runs (``partition_max_running``) and what is claimed per window
(``partition_rate_limit``) in each of its partitions; admins override the configuration in
``type_overrides`` as for the per-type limits. ``partition_claim_windows`` counts the claims of
one partition of a type in its current window (``partition`` "" for the jobs without one).
SQLite adds the CHECK by rebuilding ``type_overrides`` (a small table without triggers).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

PARTITION_LENGTH = 64  # app.queue.vocabulary.job_fields.PARTITION when this revision was written


def upgrade() -> None:
    with op.batch_alter_table("type_overrides", schema=None) as batch_op:
        batch_op.add_column(sa.Column("partition_max_running", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("partition_rate_limit", sa.String(length=32), nullable=True))
        batch_op.create_check_constraint(
            op.f("ck_type_overrides_partition_max_running"),
            "partition_max_running IS NULL OR partition_max_running >= 1",
        )
    op.create_table(
        "partition_claim_windows",
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column("partition", sa.String(length=PARTITION_LENGTH), nullable=False),
        sa.Column("window_started_at", UTCDateTime(), nullable=False),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("type", "partition", name=op.f("pk_partition_claim_windows")),
    )


def downgrade() -> None:
    op.drop_table("partition_claim_windows")
    with op.batch_alter_table("type_overrides", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_type_overrides_partition_max_running"), type_="check")
        batch_op.drop_column("partition_rate_limit")
        batch_op.drop_column("partition_max_running")
