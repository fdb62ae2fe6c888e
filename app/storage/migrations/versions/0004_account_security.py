"""account security: user names unique regardless of case, token expiry, TOTP

Revision ID: 0004
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None, recreate="never") as batch_op:
        batch_op.add_column(
            sa.Column(
                "name_lower", sa.String(length=64), server_default=sa.text("''"), nullable=False
            )
        )
        batch_op.add_column(sa.Column("totp_secret", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("totp_last_step", sa.BigInteger(), nullable=True))
    op.execute("UPDATE users SET name_lower = lower(name)")
    clashes = (
        op.get_bind()
        .execute(sa.text("SELECT name_lower FROM users GROUP BY name_lower HAVING count(*) > 1"))
        .scalars()
        .all()
    )
    if clashes:
        raise RuntimeError(
            "user names now ignore case, and these exist in several spellings: "
            f"{', '.join(clashes)}. Rename all but one spelling in the users table, then "
            "run the migration again."
        )
    op.create_index("uq_users_name_lower", "users", ["name_lower"], unique=True)
    with op.batch_alter_table("api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(), nullable=True))
    op.create_table(
        "recovery_codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_recovery_codes_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recovery_codes")),
    )
    op.create_index(op.f("ix_recovery_codes_user_id"), "recovery_codes", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_recovery_codes_user_id"), table_name="recovery_codes")
    op.drop_table("recovery_codes")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
    op.drop_index("uq_users_name_lower", table_name="users")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("totp_last_step")
        batch_op.drop_column("totp_secret")
        batch_op.drop_column("name_lower")
