"""On PostgreSQL the counter triggers read the counter tables by key (migration 0017): a claim
and a finish of 50 jobs scan none of them whole, even after ANALYZE has seen them small."""

from __future__ import annotations

import pytest
from flask import Flask
from sqlalchemy import text

from app import db
from app.queue.domain import batches, service
from app.queue.domain.models import Outcome
from app.queue_settings import queue_settings
from app.timeutil import utcnow
from tests.builders import make_job, make_user

COUNTER_TABLES = ("job_counts", "finished_per_minute", "job_holders", "worker_activity")


@pytest.mark.pg
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_claim_and_a_finish_scan_no_counter_table(app: Flask) -> None:
    producer = make_user(app, "trigger-producer", "producer").actor()
    worker = make_user(app, "trigger-worker", "worker").actor()
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            for i in range(120):
                make_job(conn, producer, settings, payload={"i": i})
        with db.transaction() as conn:  # some history: holders, counts and finishes exist
            done = service.claim_many(conn, worker, now=utcnow(), settings=settings, max_jobs=20)
            outcomes = [Outcome(job_id=j.id, attempt=j.attempts, completed=True) for j in done]
            batches.finish(conn, worker, outcomes, now=utcnow(), settings=settings)
        with db.engine(app).connect() as conn:
            conn.execute(text(f"ANALYZE {', '.join(COUNTER_TABLES)}"))
            conn.commit()
        with db.transaction() as conn:
            claimed = service.claim_many(conn, worker, now=utcnow(), settings=settings, max_jobs=50)
            outcomes = [Outcome(job_id=j.id, attempt=j.attempts, completed=True) for j in claimed]
            answers = batches.finish(conn, worker, outcomes, now=utcnow(), settings=settings)
            scans = dict(
                conn.execute(
                    text(
                        "SELECT relname, seq_scan FROM pg_stat_xact_user_tables "
                        "WHERE relname = ANY(:tables)"
                    ),
                    {"tables": list(COUNTER_TABLES)},
                ).all()
            )
    assert len(claimed) == 50 and all(not isinstance(a, Exception) for a in answers)
    assert {table: n for table, n in scans.items() if n} == {}
