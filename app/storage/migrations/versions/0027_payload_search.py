"""payload search: on PostgreSQL a GIN index of every job's payload

Revision ID: 0027
Revises: 0023
Create Date: 2026-12-07

``GET /jobs?payload=`` keeps the jobs whose payload contains an object (``payload @> needle``).
A GIN index with the ``jsonb_path_ops`` operator class serves ``@>`` for any key: one entry per
path-and-value of each payload, written by every enqueue (docs/performance.md has its cost per
job). SQLite has no ``@>``: the keys named in PAYLOAD_SEARCH_KEYS get expression indexes,
made by ``flask db upgrade`` to match the setting (``app.storage.migrate``), not by a revision.
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0023"
branch_labels = None
depends_on = None

INDEX = "ix_jobs_payload"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(f"CREATE INDEX {INDEX} ON jobs USING gin (payload jsonb_path_ops)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(f"DROP INDEX {INDEX}")
