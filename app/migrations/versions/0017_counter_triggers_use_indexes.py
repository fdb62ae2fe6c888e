"""counter triggers use indexes: on PostgreSQL the statement triggers never scan a counter table

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

Migration 0011's statement triggers join the statement's transition tables to ``job_holders``
and upsert ``job_counts``, ``finished_per_minute`` and ``worker_activity``. PL/pgSQL plans those
statements once per session and keeps the plans; once ANALYZE has seen the counter tables small,
those plans scan the tables whole. The tables do not stay small (``job_holders`` keeps a row per
job a worker holds or has finished), so each claim and finish then read all of them. Measured
with ``pg_stat_statements`` under the PostgreSQL bench (5,000 jobs, 4 workers), the triggers'
statements took 1.8-3.4 s of the run before and 0.9-1.0 s after.

Each counter function runs with ``enable_seqscan`` off (``ALTER FUNCTION ... SET``, which holds
for the function's statements only): their joins and upserts go through the tables' primary keys
and indexes, at a cost that follows the rows the statement moved, not the tables' size. SQLite's
row triggers look rows up by key already.
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

COUNTER_FUNCTIONS = (  # migration 0011's statement triggers
    "jobs_counts_inserted",
    "jobs_counts_updated",
    "jobs_counts_deleted",
    "job_events_counts_inserted",
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name in COUNTER_FUNCTIONS:
        bind.exec_driver_sql(f"ALTER FUNCTION queuelog_{name}() SET enable_seqscan = off")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name in COUNTER_FUNCTIONS:
        bind.exec_driver_sql(f"ALTER FUNCTION queuelog_{name}() RESET enable_seqscan")
