"""attempt logs: the lines a worker sends while it holds an attempt

Revision ID: 0025
Revises: 0023
Create Date: 2026-12-07

``job_logs`` keeps one row per request of ``POST /jobs/{id}/logs`` (its lines as one JSON
array), found per job and attempt by ``ix_job_logs_job_id_attempt_id``. Its key to the job
deletes the rows with their job on both engines (ON DELETE CASCADE): the job's deletion, bulk
deletes and retention need no statement of their own; the key is checked once per request,
not per line.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import BigId, UTCDateTime

revision = "0025"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_logs",
        sa.Column("id", BigId, nullable=False),
        sa.Column("job_id", BigId, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("lines", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("dropped", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_logs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_logs")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_job_logs_job_id_attempt_id", "job_logs", ["job_id", "attempt", "id"])


def downgrade() -> None:
    op.drop_index("ix_job_logs_job_id_attempt_id", table_name="job_logs")
    op.drop_table("job_logs")
