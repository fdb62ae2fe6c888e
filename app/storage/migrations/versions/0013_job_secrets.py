"""secret payload fields on jobs; named locks held across transactions (bulk applies)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

``secret_names`` keeps the names of a job's secrets (shown to whoever sees the job),
``secrets_sealed`` their values encrypted under SECRETS_KEY (handed out only to the worker that
claims the job, erased when it finishes for good). ``locks`` holds a named lock with an expiry:
a bulk apply keeps "bulk" from its count check to its last batch. The jobs table is altered in
place (its triggers stay).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("secret_names", sa.String(length=1100), nullable=True))
        batch_op.add_column(sa.Column("secrets_sealed", sa.Text(), nullable=True))
    op.create_table(
        "locks",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_locks")),
    )


def downgrade() -> None:
    op.drop_table("locks")
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("secrets_sealed")
        batch_op.drop_column("secret_names")
