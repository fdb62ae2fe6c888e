"""second factor: TOTP secrets encrypted at rest, the enrolment's pending secret server-side

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

``totp_sealed`` holds the TOTP secret encrypted under SECRETS_KEY (a Fernet token is longer
than the 64 characters of ``totp_secret``); ``totp_pending`` the secret shown during enrolment,
also encrypted, which was in the session cookie before. ``totp_secret`` stays for secrets stored
in plain text before this revision: they keep working, and each is encrypted and moved to
``totp_sealed`` the next time its owner signs in with a code (the key is not at hand here).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("totp_sealed", sa.String(length=512), nullable=True))
        batch_op.add_column(sa.Column("totp_pending", sa.String(length=512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("totp_pending")
        batch_op.drop_column("totp_sealed")
