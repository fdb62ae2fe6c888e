"""The claim never reads waiting jobs: its partial index leaves them out, and the claim reads
that index alone (SQLite's plan), so its cost does not grow with the number of waiting jobs."""

from __future__ import annotations

from flask import Flask

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import claiming
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job, make_user
from tests.queue.sql.test_query_plans import recorded


def test_the_claim_reads_an_index_without_waiting_jobs(app: Flask) -> None:
    producer = make_user(app, "plan-producer", "producer").actor()
    worker = make_user(app, "plan-worker", "worker").actor()
    with app.app_context(), db.transaction() as conn:
        settings = queue_settings()
        parent = make_job(conn, producer, settings)
        for _ in range(50):
            make_job(conn, producer, settings, depends_on=[parent.id])
    with app.app_context():
        with recorded(app) as statements, db.transaction() as conn:
            claimed = claiming.claim(conn, worker, now=utcnow(), settings=settings)
        assert claimed is not None and claimed.id == parent.id
        raw = db.engine(app).raw_connection()
        try:
            (index,) = raw.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'ix_jobs_claim'"
            ).fetchone()
            claim = next(
                s for s in statements if s[0].startswith("UPDATE jobs SET status='running'")
            )
            plan = [row[-1] for row in raw.execute(f"EXPLAIN QUERY PLAN {claim[0]}", claim[1])]
            entries = raw.execute(
                "SELECT count(*) FROM jobs INDEXED BY ix_jobs_claim "
                "WHERE status = 'pending' AND waiting_for IS NULL"
            ).fetchone()[0]
        finally:
            raw.close()
    assert "waiting_for IS NULL" in index
    assert any("ix_jobs_claim" in line for line in plan), plan
    assert not [line for line in plan if line.startswith("SCAN jobs") and "INDEX" not in line]
    assert entries == 0  # the 50 waiting jobs are not in the index (the parent is running)
