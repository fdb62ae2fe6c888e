"""On PostgreSQL the counters' statement triggers find a statement's ``job_holders`` rows by job
id (migration 0017). PL/pgSQL plans their statements once per connection, and with a few
thousand holder rows the plan had hashed the whole table for every move: 10,000 rows read to
update the holders of a finish of 50 jobs, a quarter of PostgreSQL's time in a bulk run.

The plans of statements inside a trigger are seen through ``auto_explain``, loaded into the
test's own session with its plans sent to the client as notices."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from tests.builders import make_user

HOLDERS = 5_000  # jobs claimed once each: one holder row apiece
MOVED = 50
MOVES = {  # a statement that moves or deletes MOVED of them, firing the counters' trigger
    "finish": "UPDATE jobs SET status = 'completed', lease_expires_at = NULL, finished_at = now() "
    "WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT %s)",
    "delete": "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT %s)",
}


@contextmanager
def _plans_of_nested_statements(app: Flask) -> Iterator[tuple[Any, list[str]]]:
    """A raw connection whose statements' plans, those run by triggers included, are
    collected; everything it does is rolled back."""
    raw = db.engine(app).raw_connection()
    plans: list[str] = []
    driver = raw.driver_connection
    driver.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    cursor = raw.cursor()
    for setting in (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_level = 'notice'",
    ):
        cursor.execute(setting)
    try:
        yield cursor, plans
    finally:
        raw.rollback()
        raw.close()


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("move", ["finish", "delete"])
def test_the_triggers_find_a_statements_holders_by_key(app: Flask, move: str) -> None:
    producer = make_user(app, "holders-producer", "producer")
    with db.engine(app).begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, "
                "created_at, updated_at, status, retry_count, attempts) "
                "SELECT 'email.send', '{}', 10, 3, :owner, now(), now(), now(), 'pending', 0, 0 "
                "FROM generate_series(1, :n)"
            ),
            {"owner": producer.id, "n": HOLDERS},
        )
        conn.execute(  # claimed: the trigger writes a holder row for each
            text(
                "UPDATE jobs SET status = 'running', worker_id = 'w', attempts = 1, "
                "lease_expires_at = now() + interval '1 minute'"
            )
        )
    with db.engine(app).connect() as conn:
        conn.execute(text("ANALYZE"))
        conn.commit()
    with _plans_of_nested_statements(app) as (cursor, plans):
        cursor.execute(MOVES[move], (MOVED,))
        holders = [plan for plan in plans if "job_holders" in plan]
        assert holders, plans  # the triggers' statements were seen
        scans = [plan for plan in holders if "Seq Scan on job_holders" in plan]
        assert not scans, scans[0]
