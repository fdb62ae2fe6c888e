"""keyed jobs only: on PostgreSQL the owners' idempotency keys are unique by a partial index

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07

The unique constraint on ``(created_by, idempotency_key)`` had an entry for every version of
every job, keyed or not: three index entries per job enqueued, claimed and finished, about 2 %
of PostgreSQL's instructions per job in a bulk run. A unique index of the jobs that have a key
refuses the same repeated keys (NULLs never collide) and the lookups by owner and key read it.
SQLite keeps its table constraint (dropping one means rebuilding the table).
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

CONSTRAINT = "uq_jobs_created_by_idempotency_key"
INDEX = "uq_jobs_owner_idempotency_key"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(
        f"CREATE UNIQUE INDEX {INDEX} ON jobs (created_by, idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )
    bind.exec_driver_sql(f"ALTER TABLE jobs DROP CONSTRAINT {CONSTRAINT}")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(
        f"ALTER TABLE jobs ADD CONSTRAINT {CONSTRAINT} UNIQUE (created_by, idempotency_key)"
    )
    bind.exec_driver_sql(f"DROP INDEX {INDEX}")
