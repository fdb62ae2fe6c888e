"""no claims index: the events' index of claims goes, nothing reads it since type polls

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07

``ix_job_events_claims`` (migration 0010) served the explainer's "when was a job of this type
last claimed", which reads ``type_polls`` since migration 0019. Every claim still wrote one entry
to it per job: on PostgreSQL about 1 % of the database's instructions per job in a bulk run.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

CLAIMED = sa.text("to_status = 'running'")


def upgrade() -> None:
    op.drop_index("ix_job_events_claims", table_name="job_events")


def downgrade() -> None:
    op.create_index(
        "ix_job_events_claims",
        "job_events",
        ["at", "job_id"],
        sqlite_where=CLAIMED,
        postgresql_where=CLAIMED,
    )
