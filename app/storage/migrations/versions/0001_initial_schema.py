"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.storage.sqltypes import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("max_priority", sa.SmallInteger(), server_default=sa.text("10"), nullable=False),
        sa.Column("disabled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("session_nonce", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("role IN ('producer', 'worker', 'admin')", name=op.f("ck_users_role")),
        sa.CheckConstraint("max_priority IN (0, 10, 20, 30)", name=op.f("ck_users_max_priority")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_used_at", UTCDateTime(), nullable=True),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_user_id"), ["user_id"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("type", sa.String(length=200), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="pending", nullable=False),
        sa.Column("retry_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_retries", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("request_fingerprint", sa.String(length=64), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("run_at", UTCDateTime(), nullable=False),
        sa.Column("claimed_at", UTCDateTime(), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("lease_seconds", sa.Integer(), nullable=True),
        sa.Column("worker_id", sa.String(length=64), nullable=True),
        sa.Column("progress", sa.SmallInteger(), nullable=True),
        sa.Column("progress_message", sa.String(length=500), nullable=True),
        sa.Column(
            "result",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "status <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)",
            name=op.f("ck_jobs_running_has_lease"),
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_jobs_status"),
        ),
        sa.CheckConstraint("max_retries BETWEEN 0 AND 25", name=op.f("ck_jobs_max_retries")),
        sa.CheckConstraint("priority IN (0, 10, 20, 30)", name=op.f("ck_jobs_priority")),
        sa.CheckConstraint(
            "progress IS NULL OR progress BETWEEN 0 AND 100", name=op.f("ck_jobs_progress")
        ),
        sa.CheckConstraint("retry_count >= 0 AND attempts >= 0", name=op.f("ck_jobs_counters")),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_jobs_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint(
            "created_by", "idempotency_key", name=op.f("uq_jobs_created_by_idempotency_key")
        ),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_claim",
            [sa.literal_column("priority DESC"), "run_at", "id"],
            unique=False,
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )
        batch_op.create_index(
            "ix_jobs_owner_status", ["created_by", "status", "priority"], unique=False
        )
        batch_op.create_index(
            "ix_jobs_pending",
            ["run_at"],
            unique=False,
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )
        batch_op.create_index("ix_jobs_status_finished", ["status", "finished_at"], unique=False)
        batch_op.create_index(
            "ix_jobs_lease",
            ["lease_expires_at"],
            unique=False,
            sqlite_where=sa.text("status = 'running'"),
            postgresql_where=sa.text("status = 'running'"),
        )
        batch_op.create_index("ix_jobs_owner_id", ["created_by", "id"], unique=False)
        batch_op.create_index("ix_jobs_priority_status", ["priority", "status"], unique=False)
        batch_op.create_index("ix_jobs_status_id", ["status", "id"], unique=False)
        batch_op.create_index("ix_jobs_type_id", ["type", "id"], unique=False)

    op.create_table(
        "job_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("from_status", sa.String(length=16), nullable=True),
        sa.Column("to_status", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_events_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_job_events_actor_to_status_job_id"),
            ["actor", "to_status", "job_id"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_job_events_job_id_id"), ["job_id", "id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_job_events_to_status_at"), ["to_status", "at"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_events_to_status_at"))
        batch_op.drop_index(batch_op.f("ix_job_events_job_id_id"))
        batch_op.drop_index(batch_op.f("ix_job_events_actor_to_status_job_id"))

    op.drop_table("job_events")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_type_id")
        batch_op.drop_index("ix_jobs_status_id")
        batch_op.drop_index("ix_jobs_priority_status")
        batch_op.drop_index("ix_jobs_owner_id")
        batch_op.drop_index(
            "ix_jobs_lease",
            sqlite_where=sa.text("status = 'running'"),
            postgresql_where=sa.text("status = 'running'"),
        )
        batch_op.drop_index("ix_jobs_status_finished")
        batch_op.drop_index(
            "ix_jobs_pending",
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )
        batch_op.drop_index("ix_jobs_owner_status")
        batch_op.drop_index(
            "ix_jobs_claim",
            sqlite_where=sa.text("status = 'pending'"),
            postgresql_where=sa.text("status = 'pending'"),
        )

    op.drop_table("jobs")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_user_id"))

    op.drop_table("api_tokens")
    op.drop_table("users")
