"""child keys and refused callbacks: jobs.child_key, ix_jobs_unique by parent, job_groups.callbacks_refused

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07

A spawned job's keys live in its parent's namespace. Its idempotency key moves to
``child_key``, unique per parent (``uq_jobs_child_key``), so that ``idempotency_key``, unique
per producer, holds the producer's own keys only; a unique key stays in ``unique_key``, and
``ix_jobs_unique`` gains ``parent_id`` so that the producer's probe (``parent_id IS NULL``)
and a parent's (``parent_id = ?``) each read their own entries. A group remembers why it did
not enqueue a callback (``callbacks_refused``). Columns are added in place (no table rebuild),
so the counters' triggers of migration 0009 stay as they are.

Downgrading puts the children's keys back in ``idempotency_key`` where no other job of the
producer holds the same key, and drops the rest (the schema before had one namespace).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import NullableDocument

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

ACTIVE_WITH_KEY = sa.text("unique_key IS NOT NULL AND status IN ('pending', 'running')")
CHILD_KEYED = sa.text("child_key IS NOT NULL")


def _unique_index(columns: list[str]) -> None:
    op.drop_index("ix_jobs_unique", table_name="jobs")
    op.create_index(
        "ix_jobs_unique",
        "jobs",
        columns,
        sqlite_where=ACTIVE_WITH_KEY,
        postgresql_where=ACTIVE_WITH_KEY,
    )


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("child_key", sa.String(length=255), nullable=True))
    with op.batch_alter_table("job_groups", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("callbacks_refused", NullableDocument, nullable=True))
    op.execute(
        "UPDATE jobs SET child_key = idempotency_key, idempotency_key = NULL "
        "WHERE parent_id IS NOT NULL AND idempotency_key IS NOT NULL"
    )
    op.create_index(
        "uq_jobs_child_key",
        "jobs",
        ["parent_id", "child_key"],
        unique=True,
        sqlite_where=CHILD_KEYED,
        postgresql_where=CHILD_KEYED,
    )
    _unique_index(["created_by", "type", "unique_key", "parent_id"])


def downgrade() -> None:
    _unique_index(["created_by", "type", "unique_key"])
    op.drop_index("uq_jobs_child_key", table_name="jobs")
    op.execute(
        "UPDATE jobs SET idempotency_key = child_key WHERE child_key IS NOT NULL AND id = ("
        "SELECT min(c.id) FROM jobs c WHERE c.created_by = jobs.created_by"
        " AND c.child_key = jobs.child_key) AND NOT EXISTS (SELECT 1 FROM jobs p"
        " WHERE p.created_by = jobs.created_by AND p.idempotency_key = jobs.child_key)"
    )
    with op.batch_alter_table("job_groups", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("callbacks_refused")
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("child_key")
