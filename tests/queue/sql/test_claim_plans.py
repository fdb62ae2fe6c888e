"""On PostgreSQL a claim's UPDATE reads its head first and finds each job by its key. With
statistics taken before a burst of enqueues (autovacuum's ANALYZE lags one), the planner had
started the UPDATE from the status index and compared every pending job with every job of the
head: a cost of the backlog times the claim's size, 138 ms for a claim of 50 among 2,412."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.rules.settings import QueueSettings
from app.queue.sql import batches as batches_sql
from app.queue.usecases import claiming
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job, make_user
from tests.queue.sql.test_query_plans import recorded

BACKLOG = 20_000
CLAIMED = 50


def _rows_passed_over(node: dict[str, Any]) -> int:
    """Rows the UPDATE's own plan compared and dropped, leaving out its head (a CTE)."""
    if node.get("Subplan Name", "").startswith("CTE"):
        return 0
    dropped = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Join Filter", 0)
    loops = node.get("Actual Loops", 1)
    return dropped * loops + sum(_rows_passed_over(child) for child in node.get("Plans", []))


def _burst(app: Flask) -> tuple[Actor, QueueSettings]:
    """A queue whose statistics were taken when it held one job, then a burst of copies of
    that job; returns a worker and the settings."""
    producer = make_user(app, "burst-producer", "producer").actor()
    worker = make_user(app, "burst-worker", "worker").actor()
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            first = make_job(conn, producer, settings)
        with db.engine(app).connect() as conn:
            conn.execute(text("ANALYZE jobs"))  # the statistics of a queue with one job
            conn.commit()
        with db.transaction() as conn:  # then a burst: copies of that job
            conn.execute(
                text(
                    "INSERT INTO jobs (type, payload, priority, max_retries, created_by, run_at, "
                    "created_at, updated_at, status, retry_count, attempts) "
                    "SELECT type, payload, priority, max_retries, created_by, run_at, "
                    "created_at, updated_at, status, retry_count, attempts "
                    "FROM jobs, generate_series(1, :n) WHERE id = :id"
                ),
                {"n": BACKLOG, "id": first.id},
            )
    return worker, settings


def _measured_plan(app: Flask, statement: tuple[str, Any]) -> dict[str, Any]:
    """The plan of a recorded statement run again with EXPLAIN ANALYZE (rolled back after)."""
    sql, params = statement
    raw = db.engine(app).raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
    finally:
        raw.rollback()
        raw.close()
    top: dict[str, Any] = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return top


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_claim_after_a_burst_finds_its_jobs_by_key(app: Flask) -> None:
    worker, settings = _burst(app)
    with app.app_context(), recorded(app) as statements, db.transaction() as conn:
        claimed = claiming.claim_many(
            conn, worker, now=utcnow(), settings=settings, max_jobs=CLAIMED
        ).jobs
    assert len(claimed) == CLAIMED
    # The same statement again, measured: it claims the next jobs.
    top = _measured_plan(
        app, next(s for s in statements if "UPDATE jobs SET status='running'" in s[0])
    )
    assert top["Actual Rows"] == CLAIMED
    assert _rows_passed_over(top) < 4 * CLAIMED, json.dumps(top, indent=1)


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_finish_after_a_burst_reads_its_jobs_by_key(app: Flask) -> None:
    """A finish (and a heartbeat) first reads its jobs by id: the read must not scan the
    table that the statistics still describe as holding one job."""
    _burst(app)
    with app.app_context(), db.transaction() as conn:
        ids = list(
            conn.execute(
                text("SELECT id FROM jobs ORDER BY id DESC LIMIT :n"), {"n": CLAIMED}
            ).scalars()
        )
        with recorded(app) as statements:
            found = batches_sql.jobs_by_ids(conn, ids, None)
    assert sorted(found) == sorted(ids)
    (read,) = statements
    top = _measured_plan(app, read)
    assert top["Actual Rows"] == CLAIMED
    assert _rows_passed_over(top) < 4 * CLAIMED, json.dumps(top, indent=1)
    assert "Seq Scan" not in json.dumps(top), json.dumps(top, indent=1)
