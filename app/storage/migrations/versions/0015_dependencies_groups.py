"""dependencies and groups: jobs that wait for parents, groups with callbacks

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

A job enqueued with ``depends_on`` keeps the parents it names (``depends_on``) and those not
finished yet (``waiting_for``, NULL when none); ``job_dependencies`` leads from a parent to its
children, so finishing a parent releases or cancels them in a few set-based statements. The
claim's partial indexes leave waiting jobs out (``waiting_for IS NULL``): the claim never reads
them, however many wait. ``job_groups`` counts the unfinished members of a batch's group, so the
transaction that finishes the last one enqueues its callbacks exactly once.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from app.storage.sqltypes import BigId, JSONDocument, UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
CLAIMABLE = sa.text("status = 'pending' AND waiting_for IS NULL")
WAITING = sa.text("waiting_for IS NOT NULL")
IN_GROUP = sa.text("group_id IS NOT NULL")


def _partial(name: str, columns: list[Any], where: sa.TextClause) -> None:
    op.create_index(name, "jobs", columns, sqlite_where=where, postgresql_where=where)


def _claim_indexes(where: sa.TextClause) -> None:
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_index("ix_jobs_pending_type", table_name="jobs")
    _partial("ix_jobs_claim", [sa.literal_column("priority DESC"), "run_at", "id", "status"], where)
    _partial("ix_jobs_pending_type", ["type", "run_at"], where)


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("depends_on", JSONDocument, nullable=True))
        batch_op.add_column(sa.Column("waiting_for", JSONDocument, nullable=True))
        batch_op.add_column(sa.Column("group_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("callback_of", sa.BigInteger(), nullable=True))
        batch_op.add_column(
            sa.Column(
                "has_dependents", sa.Boolean(), server_default=sa.text("false"), nullable=False
            )
        )
    _claim_indexes(CLAIMABLE)
    _partial("ix_jobs_waiting", ["created_by"], WAITING)
    _partial("ix_jobs_group", ["group_id", "status"], IN_GROUP)
    op.create_table(
        "job_dependencies",
        sa.Column("parent_id", BigId, nullable=False),
        sa.Column("child_id", BigId, nullable=False),
        sa.Column("on_failure", sa.String(length=8), nullable=False),
        sa.CheckConstraint(
            "on_failure IN ('cancel', 'run')", name=op.f("ck_job_dependencies_on_failure")
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_parent_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["child_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_child_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("parent_id", "child_id", name=op.f("pk_job_dependencies")),
    )
    op.create_index("ix_job_dependencies_child_id", "job_dependencies", ["child_id"])
    op.create_table(
        "job_groups",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("unfinished", sa.Integer(), nullable=False),
        sa.Column("unsuccessful", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("on_complete", JSONDocument, nullable=True),
        sa.Column("on_success", JSONDocument, nullable=True),
        sa.Column("on_complete_id", sa.BigInteger(), nullable=True),
        sa.Column("on_success_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "unfinished >= 0 AND unsuccessful >= 0", name=op.f("ck_job_groups_counters")
        ),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_job_groups_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_groups")),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("job_groups")
    op.drop_index("ix_job_dependencies_child_id", table_name="job_dependencies")
    op.drop_table("job_dependencies")
    op.drop_index("ix_jobs_group", table_name="jobs")
    op.drop_index("ix_jobs_waiting", table_name="jobs")
    _claim_indexes(PENDING)
    with op.batch_alter_table("jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("has_dependents")
        batch_op.drop_column("callback_of")
        batch_op.drop_column("group_id")
        batch_op.drop_column("waiting_for")
        batch_op.drop_column("depends_on")
