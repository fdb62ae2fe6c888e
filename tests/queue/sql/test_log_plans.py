"""Storing attempt-log lines finds each attempt's kept size by its range of the log index, on
SQLite: a finish that carries lines does not walk every row of ``job_logs``, whose size grows
with every job that logged."""

from __future__ import annotations

from flask import Flask

from app.infra import db
from app.infra.queue_settings import queue_settings
from app.queue.usecases import attempt_logs, claiming, reports
from app.queue.vocabulary.jobs import Outcome
from app.queue.vocabulary.timeutil import utcnow
from tests.builders import make_job, make_user
from tests.queue.sql.test_query_plans import plans, recorded


def test_a_finish_carrying_lines_reads_only_its_attempts_log_rows(app: Flask) -> None:
    producer = make_user(app, "log-plan-producer", "producer").actor()
    worker = make_user(app, "log-plan-worker", "worker").actor()
    with app.app_context():
        settings = queue_settings()
        with db.transaction() as conn:
            for _ in range(40):
                make_job(conn, producer, settings)
            logged = claiming.claim_many(conn, worker, now=utcnow(), settings=settings, max_jobs=37)
            for job in logged.jobs:  # rows of other attempts, for the statement to pass by
                attempt_logs.append(
                    conn, worker, job.id, attempt=job.attempts, lines=["earlier"], now=utcnow()
                )
        with recorded(app) as statements, db.transaction() as conn:
            held = claiming.claim_many(conn, worker, now=utcnow(), settings=settings, max_jobs=3)
            outcomes = [
                Outcome(job.id, job.attempts, True, {"n": 1}, logs=("step 1", "done"))
                for job in held.jobs
            ]
            reports.finish(conn, worker, outcomes, now=utcnow(), settings=settings)
    lines = [line for line in plans(app, statements) if "job_logs" in line.partition("  <-  ")[0]]
    assert lines, "no statement read job_logs"
    assert all(line.startswith("SEARCH job_logs USING") for line in lines), lines
    assert all("job_id=? AND attempt=?" in line for line in lines), lines
