"""leaner job indexes: every transition writes fewer index entries

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

Each index costs every write that touches its columns a page (SQLite writes each changed page
to its WAL and syncs it). Three go, two change, and what they served is read another way:

* ``ix_jobs_pending`` (run_at of pending jobs): the oldest and the next due job are one probe of
  ``ix_jobs_claim`` per priority instead.
* ``ix_jobs_status_type``: running jobs per type (max_running) and jobs per status of a type come
  from the counters of migration 0009.
* ``ix_jobs_status_finished`` keeps finished jobs only, so an enqueue or a claim never touches it.
* ``ix_job_events_actor_to_status_job_id`` goes: what a worker holds or held and the figures
  per minute are kept by migration 0009's tables, and nothing reads events by actor since.
* ``ix_job_events_to_status_at`` becomes ``ix_job_events_claims``, of claims only: the latest
  claims are all it serves, and an enqueue, finish or retry no longer writes to it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
FINISHED = sa.text("finished_at IS NOT NULL")
CLAIMED = sa.text("to_status = 'running'")


def _partial(name: str, columns: list[str], where: sa.TextClause) -> None:
    op.create_index(name, "jobs", columns, sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    op.drop_index("ix_jobs_pending", table_name="jobs")
    op.drop_index("ix_jobs_status_type", table_name="jobs")
    op.drop_index("ix_jobs_status_finished", table_name="jobs")
    _partial("ix_jobs_status_finished", ["status", "finished_at"], FINISHED)
    op.drop_index("ix_job_events_actor_to_status_job_id", table_name="job_events")
    op.drop_index("ix_job_events_to_status_at", table_name="job_events")
    op.create_index(
        "ix_job_events_claims",
        "job_events",
        ["at", "job_id"],
        sqlite_where=CLAIMED,
        postgresql_where=CLAIMED,
    )


def downgrade() -> None:
    op.drop_index("ix_job_events_claims", table_name="job_events")
    op.create_index("ix_job_events_to_status_at", "job_events", ["to_status", "at"])
    op.create_index(
        "ix_job_events_actor_to_status_job_id", "job_events", ["actor", "to_status", "job_id"]
    )
    op.drop_index("ix_jobs_status_finished", table_name="jobs")
    op.create_index("ix_jobs_status_finished", "jobs", ["status", "finished_at"])
    op.create_index("ix_jobs_status_type", "jobs", ["status", "type"])
    _partial("ix_jobs_pending", ["run_at"], PENDING)
