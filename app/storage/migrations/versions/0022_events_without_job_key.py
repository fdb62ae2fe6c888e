"""events without job key: on PostgreSQL no foreign key checks each event against its job

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07

Each of a job's events (three for a job enqueued, claimed and finished) had PostgreSQL run the
foreign key's check: a query per row that finds the job and takes a lock on it, about a tenth
of the database's instructions per job in a bulk run. Events are written only by the statement
or transaction that moves their job, so the key guards nothing the code can break; what it did
on a job's deletion (ON DELETE CASCADE), the jobs' DELETE trigger of migrations 0011 and 0017
now does: it deletes the deleted jobs' events, found by ``ix_job_events_job_id_id``. SQLite
keeps its key (its check is one lookup in the writer's own process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import op

from app.storage.migrations.earlier import migration

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

KEY = "fk_job_events_job_id_jobs"
TRIGGER = "jobs_counts_deleted"
# The deleted jobs' events, each job's found by key (a statement trigger's transition table has
# no statistics: a join would be planned as a scan of every event).
DELETE_EVENTS = "DELETE FROM job_events WHERE job_id = ANY(ARRAY(SELECT id FROM old_rows))"


def _delete_trigger(with_events: bool) -> str:
    """The jobs' DELETE trigger function as migration 0017 left it, deleting the events too
    (``with_events``)."""
    counters, by_key = migration("0011_statement_counters.py"), migration("0017_holders_by_key.py")
    (statements,) = [s for name, *_, s in counters.TRIGGERS if name == TRIGGER]
    rows, lookups = by_key._BY_KEY[TRIGGER]
    body = [by_key._by_key(s, rows, lookups) for s in statements()]
    body += [DELETE_EVENTS] if with_events else []
    lines = "".join(f"    {s};\n" for s in body)
    return (
        f"CREATE OR REPLACE FUNCTION queuelog_{TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$\nBEGIN\n{lines}    RETURN NULL;\nEND\n$$"
    )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(f"ALTER TABLE job_events DROP CONSTRAINT {KEY}")
    bind.exec_driver_sql(_delete_trigger(with_events=True))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    bind.exec_driver_sql(_delete_trigger(with_events=False))
    bind.exec_driver_sql(  # none is expected; the key could not be restored over one
        "DELETE FROM job_events e WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)"
    )
    bind.exec_driver_sql(
        f"ALTER TABLE job_events ADD CONSTRAINT {KEY} FOREIGN KEY (job_id) "
        "REFERENCES jobs (id) ON DELETE CASCADE"
    )
