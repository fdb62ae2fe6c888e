"""moves that count themselves: PostgreSQL's counters' triggers skip a statement that counted
its own jobs

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07

The hot statements (a batch's enqueue, a claim, a batch of reports, a heartbeat) now write their jobs' events and
figures themselves, as data-modifying CTEs (``app.queue.sql.recorded``), and set the
transaction-local flags ``queuelog.jobs_counted`` and ``queuelog.events_counted`` as they return
their rows. The statement triggers of migrations 0011 and 0017 that would count those rows
again, on the jobs' INSERT and UPDATE and on the events' INSERT, first look at their flag: set, they clear
it and count nothing; unset, they count as before, so every other statement is counted as it
was. The statements are those of 0017; only the first lines of each function are new. SQLite's
row triggers are unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import op

from app.storage.migrations.earlier import migration

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# trigger function -> the flag a statement that counted itself sets (app.queue.sql.recorded)
FLAGS = {
    "jobs_counts_inserted": "queuelog.jobs_counted",
    "jobs_counts_updated": "queuelog.jobs_counted",
    "job_events_counts_inserted": "queuelog.events_counted",
}


def _statements() -> dict[str, list[str]]:
    """The statements of each flagged trigger function as migration 0017 left them."""
    counters, by_key = migration("0011_statement_counters.py"), migration("0017_holders_by_key.py")
    found = {}
    for name, _, _, _, statements in counters.TRIGGERS:
        if name in FLAGS:
            body = statements()
            if name in by_key._BY_KEY:
                rows, lookups = by_key._BY_KEY[name]
                body = [by_key._by_key(s, rows, lookups) for s in body]
            found[name] = body
    return found


def _skip(flag: str) -> str:
    return (
        f"    IF current_setting('{flag}', true) = 'yes' THEN\n"
        f"        PERFORM set_config('{flag}', '', true);\n"
        "        RETURN NULL;\n"
        "    END IF;\n"
    )


def _replace_functions(skipping: bool) -> None:
    """On PostgreSQL, (re)create the flagged trigger functions: with the skip first
    (``skipping``), or as migration 0017 left them."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for name, statements in _statements().items():
        lines = (_skip(FLAGS[name]) if skipping else "") + "".join(f"    {s};\n" for s in statements)
        bind.exec_driver_sql(
            f"CREATE OR REPLACE FUNCTION queuelog_{name}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$\nBEGIN\n{lines}    RETURN NULL;\nEND\n$$"
        )


def upgrade() -> None:
    _replace_functions(skipping=True)


def downgrade() -> None:
    _replace_functions(skipping=False)
